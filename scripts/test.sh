#!/usr/bin/env bash
# Every test: builds the C++ tree and runs ctest, installs the C++ package and builds the example against
# it (find_package), then installs the Python package and runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)"
rm -rf build/install
cmake --install build --prefix build/install >/dev/null
cmake -S examples -B build/examples -G Ninja -DCMAKE_PREFIX_PATH="$PWD/build/install" >/dev/null
cmake --build build/examples -j"$(nproc)"
"$PYTHON" -m pip install -q --no-build-isolation .
SAMEBITS_EXAMPLE_BINARY="$PWD/build/examples/samba_greedy" "$PYTHON" -m pytest -q tests/python
