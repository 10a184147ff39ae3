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


class _TargetsAndThreads:
    """Iterating sets every SIMD target of this machine in turn and, under each, 1, 2 and 3 threads, and yields
    (target, threads); `scalar_one_thread()` sets the scalar target on one thread (the usual reference run)."""

    def __init__(self, targets, set_threads):
        self._core = samebits._native()
        self._targets = targets
        self._set_threads = set_threads

    def scalar_one_thread(self):
        self._core.set_simd_target("scalar")
        self._set_threads(1)

    def __iter__(self):
        for target in self._targets:
            self._core.set_simd_target(target)
            for threads in (1, 2, 3):
                self._set_threads(threads)
                yield target, threads


@pytest.fixture
def targets_and_threads(thread_count, simd_targets):
    return _TargetsAndThreads(simd_targets, thread_count)
