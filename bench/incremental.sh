#!/usr/bin/env bash
# An incremental window of PostgreSQL changes against COPY of the same rows. See docs/benchmarks.md.
# docs/benchmarks.md.
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

args=()
while (($#)); do
  case "$1" in
    --repeat|--rows|--changes|--json) args+=("$1" "$2"); shift 2 ;;
    --keep) args+=("$1"); shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1" ;;
  esac
done
command -v psql >/dev/null || die "psql is missing (run scripts/setup.sh)"
ensure_gnu_time
build_targets ferry
exec python3 "$bench_dir/incremental.py" --ferry "$build_dir/src/ferry/cli/ferry" \
  --cpu "$(cpu_model)" "${args[@]}"
