#!/usr/bin/env bash
# Several sources merged into one table: what barrier alignment costs. See docs/benchmarks.md.
#
# Usage: bench/pg_merged.sh [--rows N] [--changes N] [--txns N] [--repeat N]
#   --rows     rows in all (default 2000000): one database holds them all, two hold half each
#   --changes  updates for the CDC runs (default 400000), in --txns transactions (default 400)
#   --repeat   runs of each (default 2); the medians are printed
#
# A throw-away PostgreSQL server holds table t (the one bench/postgres.sh uses) three times: all
# rows in database bench, and split by key into databases east and west. `ferry sync` loads
# bench alone (one source), then east and west merged into one table (exactly_once: aligned
# chunk by chunk; at_least_once: not aligned), into a fresh local warehouse each time. Then the
# same number of updates go to bench, or half to each of east and west, and `ferry sync --once`
# (cdc_only; aligned, and not) applies them. Each pipeline has its own slot, so every update is
# decoded by the slots of its database only (the others skip its WAL). Each merged run is printed as a fraction of the one-source run's
# speed (1.00: alignment costs nothing), with ferry's peak RSS.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

args=()
while (($#)); do
  case "$1" in
    --rows|--changes|--txns|--repeat) args+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1" ;;
  esac
done
command -v psql >/dev/null || die "psql is missing (run scripts/setup.sh)"
ensure_gnu_time
build_targets ferry
exec python3 "$bench_dir/pg_merged.py" --ferry "$build_dir/src/ferry/cli/ferry" "${args[@]}"
