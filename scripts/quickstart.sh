#!/usr/bin/env bash
# The quick start: builds ferry, creates the sample shop database, syncs it into a local Iceberg
# warehouse and reads every table back with an independent reader (icebird), printing its row
# counts next to the source's. Everything lands in ./quickstart. Safe to run again: the second
# run is a new full refresh that replaces the tables' contents.
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
