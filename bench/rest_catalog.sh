#!/usr/bin/env bash
# PostgreSQL CDC into Iceberg through a REST catalog (`ferry catalog serve`) against the same sync
# with the embedded SQL catalog, in the same run; and the server's table-load rate. See
# docs/benchmarks.md.
#
# Usage: bench/rest_catalog.sh [--repeat N] [--rows N] [--changes N] [--txns N] [--loads N]
#                              [--clients N] [--load-seconds S] [--json FILE] [--keep]
#   --rows          rows of the benchmark table (default 1000000)
#   --changes       row updates per run (default 1000000) ...
#   --txns          ... in this many transactions (default 1000)
#   --repeat        runs of the CDC measurement; medians are reported (default 3)
#   --loads         GET requests of the load-rate measurement (default 5000) ...
#   --clients       ... from this many keep-alive HTTP clients (threads; default 4) ...
#   --load-seconds  ... stopping after this many seconds if not done (default 120)
#   --json          where to write the results (default bench/results/rest_catalog-<time>.json)
#   --keep          keep the temporary folder (server, warehouses, logs)
#
# Starts a throw-away PostgreSQL server (the test suite's launcher) with table t of the benchmark
# table's columns, and `ferry catalog serve` (this build, 127.0.0.1, a free port, once for the
# whole run; stopped by PID at the end) over a warehouse of its own. Two pipelines follow t, each
# a cdc_only stream with its own slot: `sql` into a local warehouse with the embedded SQLite
# catalog, `rest` into the served warehouse through rest+http://. Each run makes --changes updates
# in --txns transactions, then times `ferry sync --once` of both pipelines, in alternating order:
# wall time, ferry's CPU and peak RSS, and the server's CPU (/proc/<pid>/stat before and after)
# for the REST one. The ratio is SQL time / REST time (1.0: the REST catalog costs nothing).
# `ferry verify` then compares both tables with the source: no extra or different rows and the
# same counts in both (a cdc_only table lacks the rows never updated: with --changes below --rows,
# both alike).
#
# Then the load rate: --loads `GET /v1/{prefix}/namespaces/bench/tables/t` from --clients Python
# threads (http.client), and the same for `GET /v1/config` as the floor: loads/s, latency median
# and p99, the server's and the clients' CPU.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

run_pg_bench rest_catalog_bench.py \
  "--repeat --rows --changes --txns --loads --clients --load-seconds --json" "--keep" "$@"
