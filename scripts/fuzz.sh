#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan + UBSan) in build-fuzz and runs each for SECONDS on a scratch
# copy of its committed seed corpus. Usage: scripts/fuzz.sh [SECONDS] [harness ...]   (default 30 s, all)
# Exits non-zero on any crash, leak, timeout or OOM; the reproducer stays under build-fuzz/artifacts/.
# FUZZ_FLAGS adds libFuzzer flags (e.g. -jobs=2); FUZZ_BUILD_JOBS sets the build parallelism (default 2);
# FUZZ_SKIP_BUILD=1 skips the build. FUZZ_PARALLEL=N runs N harnesses at a time (default 1; each harness is
# one single-threaded process, so N = the core count finishes N times sooner). FUZZ_SEED sets libFuzzer's
# seed (default 1, so a run of S seconds replays the first S seconds of the same mutation sequence on every
# machine and CI cannot turn red by luck; FUZZ_SEED=random lets libFuzzer pick one, which is what long
# campaigns use).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_EACH=${1:-30}
shift $(( $# > 0 ? 1 : 0 ))
ALL=(samba_stream samba_legacy mlp_checkpoint json lowbit weights state safetensors tokenizer hf_config gguf gguf_model file_kind state_file chat_template)
HARNESSES=("$@")
[ ${#HARNESSES[@]} -eq 0 ] && HARNESSES=("${ALL[@]}")
BUILD=$ROOT/build-fuzz

# Inputs are bounded per harness: the largest committed seed fits, with room to grow.
max_len() {
  case $1 in
    samba_stream) echo 262144 ;;
    samba_legacy) echo 409600 ;;
    mlp_checkpoint) echo 40960 ;;
    json) echo 65536 ;;
    lowbit) echo 20000 ;;
    tokenizer) echo 16384 ;;
    gguf_model) echo 8192 ;;
    state_file) echo 131072 ;;
    *) echo 4096 ;;
  esac
}

# What the build needs beyond cmake: clang and the libFuzzer/sanitizer runtimes (Debian: libclang-rt-14-dev).
missing=()
command -v clang >/dev/null || missing+=(clang)
command -v clang++ >/dev/null || missing+=(clang)
command -v cmake >/dev/null || missing+=(cmake)
if command -v clang >/dev/null && [ ! -e "$(clang -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null)" ] &&
  [ -z "$(find "$(clang -print-resource-dir 2>/dev/null)" -name 'libclang_rt.fuzzer*.a' 2>/dev/null | head -1)" ]; then
  missing+=(libclang-rt-14-dev)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "fuzz.sh: missing apt packages: $(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')" >&2
  echo "fuzz.sh: install them with: apt-get install -y $(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')" >&2
  exit 2
fi
for h in "${HARNESSES[@]}"; do
  [ -f "$ROOT/fuzz/fuzz_$h.cpp" ] || { echo "fuzz.sh: no harness '$h' (one of: ${ALL[*]})" >&2; exit 2; }
done

# FUZZ_SKIP_BUILD=1 runs harnesses an earlier call built (so several campaigns can run side by side).
if [ "${FUZZ_SKIP_BUILD:-0}" != 1 ]; then
  generator=()
  werror=OFF  # under CI a compiler warning in the harnesses or the libraries fails the build
  [ "${CI:-}" = true ] && werror=ON
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S "$ROOT" -B "$BUILD" "${generator[@]}" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSAMEBITS_BUILD_FUZZERS=ON -DSAMEBITS_BUILD_TESTS=OFF \
    -DSAMEBITS_BUILD_BENCH=OFF -DSAMEBITS_BUILD_PYTHON=OFF -DSAMEBITS_BUILD_CLI=OFF \
    -DSAMEBITS_WERROR="$werror" >/dev/null || exit 1
  targets=()
  for h in "${HARNESSES[@]}"; do targets+=("fuzz_$h"); done
  cmake --build "$BUILD" -j"${FUZZ_BUILD_JOBS:-2}" --target "${targets[@]}" || exit 1
fi

SEED=${FUZZ_SEED:-1}
seed_flag=()
[ "$SEED" != random ] && seed_flag=(-seed="$SEED")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# One harness: its log in build-fuzz/fuzz_H.log, its summary line in build-fuzz/result_H (first word ok or
# FAIL), and on a failure the log's last lines in build-fuzz/failure_H.
run_harness() {
  local h=$1
  # The committed corpus is only read: new inputs go to a scratch copy, reproducers to artifacts/.
  local scratch=$BUILD/scratch/$h artifacts=$BUILD/artifacts/$h log=$BUILD/fuzz_$h.log
  rm -rf "$scratch" "$BUILD/result_$h" "$BUILD/failure_$h"
  mkdir -p "$scratch" "$artifacts"
  cp "$ROOT/fuzz/corpus/$h/"* "$scratch/"
  "$BUILD/fuzz/fuzz_$h" "$scratch" "${seed_flag[@]}" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
    -max_len="$(max_len "$h")" -detect_leaks=1 -print_final_stats=1 -artifact_prefix="$artifacts/" \
    ${FUZZ_FLAGS:-} >"$log" 2>&1
  local rc=$? runs kind repro
  runs=$(grep -a -o 'Done [0-9]* runs in [0-9]* second(s)' "$log" | tail -1)
  if [ $rc -ne 0 ]; then
    kind=$(grep -a -o -m1 'ERROR: libFuzzer: [a-z-]*\|ERROR: AddressSanitizer: [a-z-]*\|ERROR: LeakSanitizer: [a-z-]*\|runtime error: .*\|fuzz property violated: .*' "$log" | head -1)
    repro=$(grep -a -o 'Test unit written to .*' "$log" | tail -1 | sed 's/Test unit written to //')
    tail -60 "$log" >"$BUILD/failure_$h"
    echo "FAIL fuzz_$h (exit $rc): ${kind:-see $log}; reproducer: ${repro:-none}" >"$BUILD/result_$h"
  else
    echo "ok   fuzz_$h: ${runs:-no run count}" >"$BUILD/result_$h"
  fi
}

PARALLEL=${FUZZ_PARALLEL:-1}
running=0
for h in "${HARNESSES[@]}"; do
  echo "== fuzz_$h: $SECONDS_EACH s, max_len $(max_len "$h"), seed $SEED"
  run_harness "$h" &
  running=$((running + 1))
  if [ "$running" -ge "$PARALLEL" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

failed=0
for h in "${HARNESSES[@]}"; do
  if [ -f "$BUILD/failure_$h" ]; then
    echo "== fuzz_$h failed; the end of its log:"
    cat "$BUILD/failure_$h"
  fi
done
echo "== summary"
for h in "${HARNESSES[@]}"; do
  line=$(cat "$BUILD/result_$h" 2>/dev/null || echo "FAIL fuzz_$h: no result (the harness did not finish)")
  echo "$line"
  case $line in ok*) ;; *) failed=1 ;; esac
done
exit $failed
