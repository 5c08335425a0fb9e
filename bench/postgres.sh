#!/usr/bin/env bash
# PostgreSQL -> Iceberg against PostgreSQL's own tools, in the same run. See docs/benchmarks.md.
#
# Usage: bench/postgres.sh [--repeat N] [--rows N] [--changes N] [--txns N] [--json FILE] [--keep]
#   --rows     rows of the benchmark table (default 5000000)
#   --changes  row changes for the CDC measurement (default 1000000) ...
#   --txns     ... in this many transactions (default 1000)
#   --repeat   runs of each measurement; medians are reported (default 3)
#   --json     where to write the results (default bench/results/postgres-<time>.json)
#   --keep     keep the temporary folder (server, warehouses, logs)
#
# Starts a throw-away PostgreSQL server (the test suite's launcher: 127.0.0.1, a free port,
# wal_level logical), creates table t with the columns of the benchmark table (docs/benchmarks.md)
# and measures, each --repeat times:
#   full refresh  psql COPY t TO STDOUT (FORMAT binary) > /dev/null   vs   ferry sync (full refresh
#                 into a fresh local warehouse, zstd): wall time, ferry's peak RSS
#   cdc           --changes updates in --txns transactions, then pg_recvlogical reading them from a
#                 pgoutput slot of its own to /dev/null (--endpos)   vs   ferry sync --once applying
#                 them from its slot to the Iceberg table: wall time, ferry's peak RSS
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

run_pg_bench postgres_bench.py "--repeat --rows --changes --txns --json" "--keep" "$@"
