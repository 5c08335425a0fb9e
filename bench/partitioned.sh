#!/usr/bin/env bash
# Full refresh into partitioned Iceberg tables against the same into an unpartitioned one, in the
# same run. See docs/benchmarks.md.
#
# Usage: bench/partitioned.sh [--rows N] [--repeat N] [--json FILE] [--keep]
#   --rows     rows of the table (default 5000000)
#   --repeat   runs of each layout; medians are reported (default 3)
#   --json     where to write the results (default bench/results/partitioned-<time>.json)
#   --keep     keep the temporary folder
#
# A SQLite table of the benchmark table's columns whose created_at spreads over 365 days, loaded
# by a fresh full refresh (zstd, default chunking) as: unpartitioned; day(created_at) (365
# partitions); bucket(16, id); day(created_at) x bucket(16, id) (5,840 partitions, a file and a
# folder each). The layouts run in rounds (every layout once per round), each run into a
# warehouse of its own. Reported per layout: wall time, rows/s and their ratio to the
# unpartitioned load, peak RSS, data files.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

args=()
while (($#)); do
  case "$1" in
    --rows | --repeat | --json) (($# >= 2)) || die "$1 needs a value"; args+=("$1" "$2"); shift 2 ;;
    --keep) args+=("$1"); shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1" ;;
  esac
done
ensure_gnu_time
build_targets ferry
exec python3 "$bench_dir/partitioned.py" --ferry "$build_dir/src/ferry/cli/ferry" --cpu "$(cpu_model)" \
  "${args[@]}"
