#!/usr/bin/env bash
# Runs every test: builds ferry in Debug with AddressSanitizer and UndefinedBehaviorSanitizer and
# runs unit, end-to-end, interop and crash tests through CTest. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build/debug -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFERRY_SANITIZE=ON >/dev/null
cmake --build build/debug -j "$jobs"
# The interop readers are installed above: a missing one is a failure here, not a skip.
export FERRY_REQUIRE_INTEROP=1
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# A skipped test hides what it should check: here it is a failure (CTest lists it as "Skipped").
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
ctest --test-dir build/debug --output-on-failure -j "$jobs" "$@" | tee "$log"
if grep -q "(Skipped)" "$log"; then
  echo "test.sh: these tests were skipped; every test must run here:" >&2
  grep "(Skipped)" "$log" >&2
  exit 1
fi
