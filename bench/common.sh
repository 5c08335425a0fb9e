# Shared by the benchmark scripts; sourced, not run. Locates the repository relative to this file.
bench_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_dir="$(cd "$bench_dir/.." && pwd)"
# The Release build the benchmarks use; override with FERRY_BENCH_BUILD.
build_dir="${FERRY_BENCH_BUILD:-$repo_dir/build-bench}"

die() { echo "error: $*" >&2; exit 1; }
note() { echo "# $*" >&2; }

# build_targets <target>...: configures the Release build if needed and builds the targets.
build_targets() {
  command -v cmake >/dev/null || die "cmake is missing (run scripts/setup.sh)"
  if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
    note "configuring $build_dir (Release)"
    cmake -S "$repo_dir" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DFERRY_BUILD_TESTS=OFF >&2
  fi
  local type
  type="$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build_dir/CMakeCache.txt")"
  [[ "$type" == Release ]] || die "$build_dir is a $type build; benchmarks need Release (set FERRY_BENCH_BUILD)"
  note "building $* in $build_dir"
  cmake --build "$build_dir" --target "$@" >&2
}

# /usr/bin/time reports each run's peak RSS; installed when missing (Debian package `time`).
ensure_gnu_time() {
  [[ -x /usr/bin/time ]] && return 0
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    note "installing the 'time' package for peak RSS measurements"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >&2 || true
  fi
  [[ -x /usr/bin/time ]] || die "/usr/bin/time is missing: apt-get install time"
}

# measure <stdout file> <stderr file> <cmd>...: runs cmd, prints "<wall seconds> <peak RSS kB>"
# (wall time from the shell's clock around /usr/bin/time, RSS from it). Dies when cmd fails.
measure() {
  local out="$1" log="$2"; shift 2
  local rss_file t0 t1 rss
  rss_file="$(mktemp)"
  t0=$(date +%s%N)
  if ! /usr/bin/time -f '%M' -o "$rss_file" "$@" >"$out" 2>"$log"; then
    cat "$log" >&2; rm -f "$rss_file"; die "failed: $*"
  fi
  t1=$(date +%s%N)
  rss="$(tail -n 1 "$rss_file")"; rm -f "$rss_file"
  awk -v a="$t0" -v b="$t1" -v r="$rss" 'BEGIN { printf "%.4f %d\n", (b - a) / 1e9, r }'
}

cpu_model() { sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1; }

# run_server_bench <client> <script.py> "<options taking a value>" "<flag options>" "$@": the
# front end of the benchmarks against a database server. Checks that the server's client is
# installed and the arguments against the two lists (-h prints the calling script's header),
# builds ferry in Release and runs the Python measurements with --ferry and --cpu, passing the
# arguments on.
run_server_bench() {
  local client="$1" script="$2" valued=" $3 " flags=" $4 "
  shift 4
  local args=()
  while (($#)); do
    if [[ "$valued" == *" $1 "* ]]; then
      (($# >= 2)) || die "$1 needs a value"
      args+=("$1" "$2"); shift 2
    elif [[ "$flags" == *" $1 "* ]]; then
      args+=("$1"); shift
    elif [[ "$1" == -h || "$1" == --help ]]; then
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0
    else
      die "unknown argument $1"
    fi
  done
  command -v "$client" >/dev/null || die "$client is missing (run scripts/setup.sh)"
  ensure_gnu_time
  build_targets ferry
  exec python3 "$bench_dir/$script" --ferry "$build_dir/src/ferry/cli/ferry" --cpu "$(cpu_model)" \
    "${args[@]}"
}

# run_pg_bench <script.py> ...: run_server_bench for the PostgreSQL benchmarks.
run_pg_bench() { run_server_bench psql "$@"; }
