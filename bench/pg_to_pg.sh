#!/usr/bin/env bash
# PostgreSQL -> PostgreSQL: ferry against PostgreSQL's native logical replication, in the same run.
# See docs/benchmarks.md.
#
# Usage: bench/pg_to_pg.sh [--repeat N] [--rows N] [--changes N] [--txns N] [--json FILE] [--keep]
#   --rows     rows of the benchmark table (default 5000000)
#   --changes  row changes for the apply measurement (default 1000000) ...
#   --txns     ... in this many transactions (default 1000)
#   --repeat   runs of each measurement; medians are reported (default 4: the order of the two
#              applies alternates)
#
# One throw-away server (127.0.0.1, a free port, wal_level logical) holds the source database and,
# per run, two empty destination databases. Each run measures:
#   initial copy  native: CREATE SUBSCRIPTION ... WITH (copy_data = true) until the table is
#                 'ready' in pg_subscription_rel   vs   ferry: `ferry sync --once` of a cdc stream
#                 (slot, backfill, publish) into the other database
#   change apply  --changes updates in --txns transactions made while both are stopped (the
#                 subscription disabled), then a row in table `done`; native: from the apply
#                 worker's start until `done` has the row   vs   ferry: `ferry sync --once`;
#                 the CPU seconds of every process during each (walsenders, apply worker,
#                 destination backends, ferry)
# and checks that both destinations equal the source at the end.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

run_pg_bench pg_to_pg_bench.py "--repeat --rows --changes --txns --json" "--keep" "$@"
