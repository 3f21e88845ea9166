#!/usr/bin/env bash
# Builds imhash and runs its whole test suite through ctest (installing dependencies first), with
# warnings as errors (-DIMHASH_WERROR=ON).
# Usage: scripts/test.sh [--sanitize | --fuzz] [extra ctest arguments]
#   (none)      optimised build in build/ (IMHASH_BUILD_TYPE, default RelWithDebInfo; CI: Release),
#               unit + integration + fuzz-corpus replay tests
#   --sanitize  the same suite built with clang++, AddressSanitizer + UndefinedBehaviorSanitizer, in
#               build-asan/ (what users build without unity batches: the tree where a missing
#               #include still fails; the test support batched; not the benchmark's programs,
#               which no test runs: the optimised tree builds them)
#   --fuzz      the libFuzzer targets built with clang, in build-fuzz/, all at once, each given
#               IMHASH_FUZZ_SECONDS (default 20) of a core
# IMHASH_NEMESIS=1: also the nemesis run (issue 33, docs/reliability.md; not in CI yet).
# IMHASH_TEST_JOBS: tests run at once (default: twice the cores; the cores with --sanitize; every
# target with --fuzz).
set -euo pipefail
# --help: the comment above.
[[ "${1:-}" == --help || "${1:-}" == -h ]] && { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | grep -v '^shellcheck'; exit 0; }
cd "$(dirname "$0")/.."
scripts/setup.sh

mode="${1:-}"
case "$mode" in
  --sanitize)
    shift
    dir=build-asan
    # clang++: it builds this tree in half of g++'s time, runs its suite in 0.7 of it, and its
    # UBSan checks more (a null pointer plus an offset); docs/development.md has the figures.
    cmake -S . -B "$dir" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=Debug -DIMHASH_SANITIZE=ON -DIMHASH_WERROR=ON \
      -DIMHASH_UNITY=OFF -DIMHASH_BENCH=OFF >/dev/null
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    ;;
  --fuzz)
    shift
    dir=build-fuzz
    CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DIMHASH_FUZZ_ONLY=ON -DIMHASH_FUZZ=ON -DIMHASH_FUZZ_SECONDS="${IMHASH_FUZZ_SECONDS:-20}" \
      -DIMHASH_WERROR=ON >/dev/null
    ;;
  *)
    dir=build
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="${IMHASH_BUILD_TYPE:-RelWithDebInfo}" \
      -DIMHASH_WERROR=ON >/dev/null
    ;;
esac

started=$SECONDS
cmake --build "$dir" -j2
built=$SECONDS
cd "$dir"
# How many tests at once: the optimised suite mostly waits for its servers (1.2 of 2 cores busy
# with two at a time), so twice the cores; the sanitizer suite keeps every core busy with one test
# per core, and more only slow each test down (docs/development.md has the figures); the fuzz
# targets all run at once, each for as long as gives it IMHASH_FUZZ_SECONDS of a core
# (tests/fuzz/CMakeLists.txt).
cores=$(nproc)
jobs=$((2 * cores))
[[ "$dir" == build-asan ]] && jobs=$cores
[[ "$dir" == build-fuzz ]] && jobs=$(ctest -N | grep -c "Test *#")  # every target ctest knows
status=0
ctest -j"${IMHASH_TEST_JOBS:-$jobs}" --output-on-failure "$@" || status=$?
echo "test.sh: $dir built in $((built - started)) s, the suite ran in $((SECONDS - built)) s"
exit "$status"
