#!/usr/bin/env bash
# Sanitizer gate for CI: the whole C++ suite and the CLI under ASan+UBSan, then the shared-model
# concurrency test under ThreadSanitizer, then a -Werror clang build of everything (a clang-only warning fails
# CI too). Any sanitizer report, warning or test failure fails the script (nothing is suppressed); every
# stage still runs so one CI log shows all of them.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
started=$SECONDS
failed=()
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# The options the asan / tsan test presets give ctest (CMakePresets.json), also for the CLI runs below.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"

stage() { echo "== $1 ($((SECONDS - started)) s)"; }

stage "ASan+UBSan: configure and build build-asan (every tests/cpp executable and the CLI)"
cmake --preset asan >/dev/null
cmake --build --preset asan -j"$JOBS"
stage "ASan+UBSan: the C++ suite"
ctest --preset asan -j"$JOBS" || failed+=("ASan+UBSan C++ suite")

stage "ASan+UBSan: the CLI on the shipped default model"
cli_smoke() {
  local cli=build-asan/samebits model=assets/default-model/samba-kjv.ckpt
  "$cli" --version &&
    "$cli" info "$model" >"$scratch/info.txt" &&
    "$cli" --threads 2 verify "$model" --batch 2 --length 24 &&
    "$cli" generate "$model" --prompt "In the beginning" --max-tokens 24 --seed 1 --temperature 0.8 \
      --top-k 20 >"$scratch/generated.txt" &&
    printf 'In the beginning God created the heaven and the earth.\nAnd the earth was void.\n' \
      >"$scratch/text.txt" &&
    "$cli" eval "$model" "$scratch/text.txt" --context 32 --batch 2
}
cli_smoke || failed+=("ASan+UBSan CLI")

stage "TSan: configure and build build-tsan (test_concurrent_use, test_thread_pool, test_transformer_state)"
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j"$JOBS"
stage "TSan: one shared model and four caller threads; the pool; the KV restride on 1-3 threads"
ctest --preset tsan || failed+=("TSan concurrency tests")

stage "clang -Werror: configure and build build-clang-werror (library, CLI, tests, benches)"
# build.sh's gcc build has -Werror under CI; this is the same tree with clang. -O0 with the release
# defines (NDEBUG): clang's warnings come from its front end, so optimising would only cost time.
if command -v clang++ >/dev/null; then
  cmake -S . -B build-clang-werror -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O0 -DNDEBUG" -DSAMEBITS_WERROR=ON -DSAMEBITS_BUILD_TESTS=ON \
    -DSAMEBITS_BUILD_CLI=ON -DSAMEBITS_BUILD_BENCH=ON >/dev/null &&
    cmake --build build-clang-werror -j"$JOBS" || failed+=("clang -Werror build")
else
  failed+=("clang -Werror build (clang++ missing: bash scripts/install_deps.sh --fuzz)")
fi

if ((${#failed[@]})); then
  printf 'sanitize.sh: FAILED: %s\n' "${failed[@]}"
  exit 1
fi
echo "sanitize.sh: no sanitizer reports, every test passed ($((SECONDS - started)) s)"
