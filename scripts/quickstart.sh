#!/usr/bin/env bash
# The quick start: builds ferry, creates the sample shop database, syncs it into a local Iceberg
# warehouse and reads every table back with independent readers (icebird, DuckDB), printing their
# row counts next to the source's; then serves the warehouse over the Iceberg REST catalog
# protocol (`ferry catalog serve`) and reads it again through that catalog with iceberg-js.
# Everything lands in ./quickstart. Safe to run again: the second run is a new full refresh that
# replaces the tables' contents.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

echo "== building ferry (release)"
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_TESTS=OFF >/dev/null
cmake --build build/release --target ferry
FERRY="$PWD/build/release/src/ferry/cli/ferry"

mkdir -p quickstart
cp examples/shop/pipeline.yaml quickstart/pipeline.yaml
if [ ! -f quickstart/shop.db ]; then
  echo "== creating the sample database quickstart/shop.db"
  sqlite3 quickstart/shop.db < examples/shop/shop.sql >/dev/null
fi

echo "== ferry check"
"$FERRY" check -c quickstart/pipeline.yaml
echo "== ferry sync"
"$FERRY" sync -c quickstart/pipeline.yaml
echo "== reading the warehouse back with icebird"
python3 scripts/read_back.py quickstart/pipeline.yaml

echo "== ferry catalog serve: the warehouse over the Iceberg REST catalog protocol"
serve_log="$(mktemp)"
"$FERRY" catalog serve -c quickstart/pipeline.yaml --listen 127.0.0.1:0 >"$serve_log" 2>&1 &
serve_pid=$!
trap 'kill "$serve_pid" 2>/dev/null || true; rm -f "$serve_log"' EXIT
url=""
for _ in $(seq 1 100); do
  url="$(grep -o 'on http://[0-9.:]*$' "$serve_log" | head -n1 | cut -c4- || true)"
  [ -n "$url" ] && break
  if ! kill -0 "$serve_pid" 2>/dev/null; then cat "$serve_log"; exit 1; fi
  sleep 0.1
done
[ -n "$url" ] || { echo "ferry catalog serve did not start"; cat "$serve_log"; exit 1; }
head -n1 "$serve_log"
echo "== reading the warehouse back through the REST catalog (iceberg-js, then icebird and DuckDB)"
python3 scripts/read_back.py quickstart/pipeline.yaml --rest "$url"
echo "DuckDB, Spark, Trino and pyiceberg attach to the same URL as an Iceberg REST catalog"
echo "(docs/rest-catalog.md); run: build/release/src/ferry/cli/ferry catalog serve -c quickstart/pipeline.yaml"
