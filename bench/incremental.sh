#!/usr/bin/env bash
# An incremental window of PostgreSQL changes against COPY of the same rows. See docs/benchmarks.md.
#
# Usage: bench/incremental.sh [--rows N] [--changes N] [--repeat N] [--json FILE] [--keep]
#   --rows     rows of the table (default 2000000)
#   --changes  rows each window changes, all stamped with one value (default 200000)
#   --repeat   windows measured; medians are reported (default 3)
#   --json     where to write the results (default bench/results/incremental-<time>.json)
#   --keep     keep the temporary folder
# bench/incremental.py says what is measured.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

run_pg_bench incremental.py "--repeat --rows --changes --json" "--keep" "$@"
