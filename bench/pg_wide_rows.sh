#!/usr/bin/env bash
# Full refresh of wide rows from PostgreSQL: ferry's peak memory as the table grows and as readers
# are added. See docs/benchmarks.md.
#
# Usage: bench/pg_wide_rows.sh [--rows N] [--readers "1 4"]
#   --rows     rows of the smaller table (default 100000); the larger has twice as many
#   --readers  the source.readers values to run (default "1 4")
#
# A throw-away PostgreSQL server holds table w: a bigint key and 20 text columns of 200
# characters (about 4 KB a row). For each table size and readers value, `ferry sync` loads it
# into a fresh local warehouse (chunks of 20,000 key values); the wall time and ferry's peak RSS
# are printed. Peak RSS that stays the same for both sizes is what "flat" means here.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

rows=100000
readers="1 4"
while (($#)); do
  case "$1" in
    --rows) rows="$2"; shift 2 ;;
    --readers) readers="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1" ;;
  esac
done
command -v psql >/dev/null || die "psql is missing (run scripts/setup.sh)"
ensure_gnu_time
build_targets ferry
exec python3 "$bench_dir/pg_wide_rows.py" --ferry "$build_dir/src/ferry/cli/ferry" --rows "$rows" \
  --readers "$readers"
