#!/usr/bin/env bash
# Full refresh of dense against sparse integer keys, SQLite and PostgreSQL, in the same run. See
# docs/benchmarks.md.
#
# Usage: bench/sparse_keys.sh [--rows N] [--repeat N] [--sources sqlite,postgres] [--json FILE] [--keep]
#   --rows     rows of each table (default 5000000)
#   --repeat   runs of each measurement; medians are reported (default 3)
#   --sources  which sources to run (default both)
#   --json     where to write the results (default bench/results/sparse_keys-<time>.json)
#   --keep     keep the temporary folders
#
# Two tables of the same rows (bench/postgres.sh's columns), one with ids 1..rows, one with ids
# i * M mod P spread over the positive int64 range; each loaded by a fresh full refresh (default
# chunk_rows) into a local warehouse, --repeat times: wall time, peak RSS, ferry's planning time
# and chunk count (from its log), data files and their bytes against DuckDB's one zstd file of the
# same rows (DuckDB rewriting ferry's files).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

run_pg_bench sparse_keys.py "--repeat --rows --sources --json" "--keep" "$@"
