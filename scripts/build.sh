#!/usr/bin/env bash
# Configures and builds the C++ library, CLI, tests and benchmarks into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
# Under CI (CI=true) any compiler warning fails the build; elsewhere warnings stay warnings, so a newer
# compiler's new diagnostics never stop a user's build.
werror=OFF
[ "${CI:-}" = true ] && werror=ON
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSAMEBITS_WERROR="$werror" "$@" >/dev/null
cmake --build build -j"$(nproc)"
