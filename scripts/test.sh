#!/usr/bin/env bash
# Every test: builds the C++ tree and runs ctest, then installs the Python package and runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)"
"$PYTHON" -m pip install -q --no-build-isolation .
"$PYTHON" -m pytest -q tests/python
