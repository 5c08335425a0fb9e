#!/usr/bin/env bash
# PostgreSQL changes into Kafka: ferry against kcat producing the same JSON events from a file, in
# the same run, both into one mock Kafka cluster (librdkafka's, the tests' ferry_kafka_mock: no
# Kafka broker is installable here). See docs/benchmarks.md.
#
# Usage: bench/kafka.sh [--repeat N] [--changes N] [--txns N] [--json FILE] [--keep]
#   --changes  rows of the table, each updated once per run (default 1000000) ...
#   --txns     ... in this many transactions (default 1000)
#   --repeat   runs; medians are reported (default 3)
#
# Each run updates every row (ferry stopped), then times `ferry sync --once` applying the changes
# as events in producer transactions; and times `kcat -P` sending a file of the same number of
# events (the envelope ferry writes, key and value per line), without transactions. The ratio is
# ferry's events/s over kcat's.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

command -v kcat >/dev/null || die "kcat is missing (run scripts/setup.sh)"
build_targets ferry_kafka_mock
export FERRY_KAFKA_MOCK="$build_dir/bench/ferry_kafka_mock"
run_pg_bench kafka_bench.py "--repeat --changes --txns --json" "--keep" "$@"
