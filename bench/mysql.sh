#!/usr/bin/env bash
# MariaDB -> Iceberg against MariaDB's own tools, in the same run. See docs/benchmarks.md.
#
# Usage: bench/mysql.sh [--repeat N] [--rows N] [--changes N] [--txns N] [--json FILE] [--keep]
#   --rows     rows of the benchmark table (default 5000000)
#   --changes  row changes for the CDC measurements (default 1000000) ...
#   --txns     ... in this many transactions (default 1000); the last measurement makes them all
#              in one transaction
#   --repeat   runs of each measurement; medians are reported (default 3)
#   --json     where to write the results (default bench/results/mysql-<time>.json)
#   --keep     keep the temporary folder (server, warehouses, logs)
#
# Starts a throw-away MariaDB server (the test suite's launcher: 127.0.0.1, a free port, the binary
# log on in ROW format with full images, a 1 GiB buffer pool), creates table t with the columns of
# the benchmark table (docs/benchmarks.md) and measures, each --repeat times:
#   full refresh  mariadb --quick -e "SELECT * FROM t" > /dev/null   vs   ferry sync (full refresh
#                 into a fresh local warehouse, zstd): wall time, CPU seconds, ferry's peak RSS
#   cdc           --changes updates in --txns transactions, then mariadb-binlog
#                 --read-from-remote-server reading the same range of the log to /dev/null   vs
#                 ferry sync --once applying them to the Iceberg table (a cdc_only stream);
#                 also mariadb-binlog -v, the same tool decoding every row image, and DuckDB
#                 writing as many rows of the table as Parquet (one thread): what the Parquet
#                 encoding alone costs a writer nobody here wrote
#   one txn       --changes updates in ONE transaction, the same two readers: what one large
#                 transaction costs in time and in ferry's peak RSS
#   spilling      the same one transaction into a pipeline with memory_limit: 64MiB, whose held
#                 changes go to disk: its time and peak RSS against the in-memory one
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

command -v mariadb-binlog >/dev/null || die "mariadb-binlog is missing (run scripts/setup.sh)"
run_server_bench mariadb mysql_bench.py "--repeat --rows --changes --txns --json" "--keep" "$@"
