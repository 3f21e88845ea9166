# Helpers for the shell-driven tests (deploy/package_test.sh):
# the ctest exit codes (0 pass, 1 fail, 77 skipped), a log line with the test's name, and the
# bounded wait for a daemon's "listening on" lines. Sourced; TEST_NAME and WORK are the caller's.
# shellcheck shell=bash

skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
log() { echo "[${TEST_NAME:-test} $(date +%T)] $*"; }

# wait_lines FILE PATTERN COUNT: waits (at most 10 s) until FILE holds COUNT lines matching the
# grep pattern PATTERN; fails the test otherwise.
wait_lines() {
  local file=$1 pattern=$2 count=$3
  for _ in $(seq 1 200); do
    [[ $(grep -c -- "$pattern" "$file" 2>/dev/null) -ge $count ]] && return 0
    sleep 0.05
  done
  fail "$(basename "$file") did not show '$pattern' $count time(s)"
}
