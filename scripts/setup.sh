#!/usr/bin/env bash
# Installs what ferry needs to build, run and test on Debian 12: compilers and libraries from
# Debian's packages, the independent readers used by the tests from the npm registry.
# Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

packages=(
  build-essential cmake ninja-build pkg-config git
  libsqlite3-dev sqlite3 libzstd-dev libsnappy-dev zlib1g-dev libcurl4-openssl-dev libssl-dev
  libpq-dev postgresql
  libmariadb-dev mariadb-server redis-server librdkafka-dev kcat
  prometheus-cpp-dev libcivetweb-dev prometheus
  ceph-mon ceph-osd radosgw ceph-common
  nlohmann-json3-dev libyaml-cpp-dev libgtest-dev
  python3 ca-certificates clang-format
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js runs the independent readers; keep an installed one, else take Debian's.
if ! command -v node >/dev/null 2>&1; then missing+=(nodejs); fi
if ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The readers nobody here wrote (icebird, DuckDB, hyparquet, parquet-wasm, avsc), pinned.
if [ ! -d tests/interop/node_modules ] || ! (cd tests/interop && npm ls --silent >/dev/null 2>&1); then
  echo "setup: installing the interop readers (npm)"
  (cd tests/interop && npm ci --no-audit --no-fund --loglevel=error)
fi
