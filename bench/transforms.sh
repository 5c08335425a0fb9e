#!/usr/bin/env bash
# A stream with a two-predicate filter and a computed column against the same stream without
# transforms, in the same run: a full refresh and a CDC round. See docs/benchmarks.md.
#
# Usage: bench/transforms.sh [--rows N] [--changes N] [--repeat N] [--json FILE] [--keep]
#   --rows     rows of the full refresh's table (default 5000000)
#   --changes  rows of the CDC table, every one updated once before the timed round (default
#              1000000)
#   --repeat   runs of each variant; medians are reported (default 3)
#   --json     where to write the results (default bench/results/transforms-<time>.json)
#   --keep     keep the temporary folder
#
# SQLite source (the benchmark table's columns), local Iceberg warehouse, zstd. The transformed
# stream's filter (`qty > 0 AND status <> 'lost'`) holds for every row, so both variants write
# the same rows and the figure is what evaluating the filter and the computed column
# (`CAST(round(amount * 100) AS INTEGER)`) costs. Variants run in rounds (each once per round).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

args=()
while (($#)); do
  case "$1" in
    --rows | --changes | --repeat | --json) (($# >= 2)) || die "$1 needs a value"; args+=("$1" "$2"); shift 2 ;;
    --keep) args+=("$1"); shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1" ;;
  esac
done
ensure_gnu_time
build_targets ferry
exec python3 "$bench_dir/transforms.py" --ferry "$build_dir/src/ferry/cli/ferry" --cpu "$(cpu_model)" \
  "${args[@]}"
