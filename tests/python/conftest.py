"""Shared pytest fixtures: thread-count and SIMD-target control that always restores the defaults."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import samebits  # noqa: E402


@pytest.fixture
def thread_count():
    saved = samebits.get_num_threads()
    yield samebits.set_num_threads
    samebits.set_num_threads(saved)


@pytest.fixture
def simd_targets():
    core = samebits._native()
    yield list(core.simd_targets())
    core.reset_simd_target()
