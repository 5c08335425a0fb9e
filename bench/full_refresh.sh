#!/usr/bin/env bash
# Full refresh of one SQLite table into a fresh local Iceberg warehouse, against the database's own
# export of the same table, in the same run. See docs/benchmarks.md.
#
# Usage: bench/full_refresh.sh [--repeat N] [--chunk-rows N] [--json FILE] [--keep] [rows...]
#   rows         table sizes to run (default: 1000000 4000000)
#   --repeat     runs of each measurement; the median is reported (default 3)
#   --chunk-rows the pipeline's chunk_rows (default 500000)
#   --json       where to write the results (default bench/results/full_refresh-<time>.json)
#   --keep       keep the temporary folder (databases, warehouses, logs)
#
# For each size it generates, in a temporary folder, a SQLite database with one table t:
#   id INTEGER PRIMARY KEY, qty INTEGER, status TEXT (5 values), amount DECIMAL(12,2) (text
#   '12345.67'), created_at TIMESTAMPTZ (text '2024-01-01T00:00:07+00:00'), note TEXT (39 chars),
#   flag BOOLEAN (0/1)
# with a recursive CTE (deterministic; the same values as bench/parquet_write.cc), then measures,
# interleaved, each --repeat times:
#   export/<mode>  sqlite3 -cmd '.mode <mode>' db 'SELECT * FROM t' > /dev/null, for list (the
#                  default), csv and tabs; the fastest mode is the export baseline
#   scan           bench/sqlite_scan.cc: every row stepped and every column fetched through the C
#                  API, nothing formatted: the rate any SQLite reader can reach
#   ferry sync     into a fresh warehouse (zstd, chunk_rows as above): wall time, peak RSS
# The database is in the page cache (just written) for every reader alike.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

repeat=3 chunk_rows=500000 json="" keep=0 sizes=()
while (($#)); do
  case "$1" in
    --repeat) repeat="$2"; shift 2 ;;
    --chunk-rows) chunk_rows="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) [[ "$1" =~ ^[0-9]+$ ]] || die "rows must be a number: $1"; sizes+=("$1"); shift ;;
  esac
done
((${#sizes[@]})) || sizes=(1000000 4000000)
[[ -n "$json" ]] || { mkdir -p "$bench_dir/results"; json="$bench_dir/results/full_refresh-$(date +%Y%m%d-%H%M%S).json"; }

command -v sqlite3 >/dev/null || die "sqlite3 is missing (apt-get install sqlite3)"
ensure_gnu_time
build_targets ferry sqlite_scan
ferry="$build_dir/src/ferry/cli/ferry"
scan="$build_dir/bench/sqlite_scan"
have_duckdb=0
[[ -d "$repo_dir/tests/interop/node_modules/@duckdb/node-api" ]] && command -v node >/dev/null && have_duckdb=1

work="$(mktemp -d "${TMPDIR:-/tmp}/ferry-bench.XXXXXX")"
if ((keep)); then note "keeping $work"; else trap 'rm -rf "$work"' EXIT; fi
records="$work/records.jsonl"
: >"$records"
record() { echo "$1" >>"$records"; }

for rows in "${sizes[@]}"; do
  dir="$work/r$rows"
  mkdir -p "$dir"
  db="$dir/bench.db"
  note "generating $rows rows"
  t0=$(date +%s%N)
  sqlite3 "$db" >/dev/null <<SQL
PRAGMA journal_mode = WAL;
CREATE TABLE t (id INTEGER PRIMARY KEY, qty INTEGER, status TEXT, amount DECIMAL(12,2),
                created_at TIMESTAMPTZ, note TEXT, flag BOOLEAN);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $rows)
INSERT INTO t
SELECT i, (i * 37) % 100 + 1,
       CASE (h >> 7) % 5 WHEN 0 THEN 'pending' WHEN 1 THEN 'paid' WHEN 2 THEN 'shipped'
                         WHEN 3 THEN 'delivered' ELSE 'cancelled' END,
       printf('%d.%02d', (h % 10000000) / 100, h % 100),
       strftime('%Y-%m-%dT%H:%M:%S+00:00', 1704067200 + i * 7, 'unixepoch'),
       printf('order %08d ref %08x cust %06d', i, h, h % 999983),
       (h >> 3) & 1
FROM (SELECT i, (i * 2654435761) % 4294967296 AS h FROM n);
SQL
  t1=$(date +%s%N)
  db_bytes=$(stat -c %s "$db")
  record "{\"rows\": $rows, \"what\": \"generate\", \"seconds\": $(awk -v a="$t0" -v b="$t1" 'BEGIN{print (b-a)/1e9}'), \"db_bytes\": $db_bytes}"
  cat >"$dir/pipeline.yaml" <<YAML
name: bench
source:
  type: sqlite
  path: ./bench.db
  mode: full_refresh
  chunk_rows: $chunk_rows
  streams: [t]
destination:
  type: iceberg
  warehouse: ./warehouse
  namespace: bench
  compression: zstd
state: ./state.json
YAML
  for ((rep = 1; rep <= repeat; rep++)); do
    for mode in list csv tabs; do
      read -r s rss < <(measure /dev/null "$dir/export.log" sqlite3 -batch -cmd ".mode $mode" "$db" "SELECT * FROM t")
      record "{\"rows\": $rows, \"what\": \"export/$mode\", \"rep\": $rep, \"seconds\": $s, \"rss_kb\": $rss}"
    done
    read -r s rss < <(measure "$dir/scan.json" "$dir/scan.log" "$scan" "$db" t)
    grep -q "\"rows\": $rows," "$dir/scan.json" || die "sqlite_scan read $(cat "$dir/scan.json")"
    record "{\"rows\": $rows, \"what\": \"scan\", \"rep\": $rep, \"seconds\": $s, \"rss_kb\": $rss}"
    rm -rf "$dir/warehouse" "$dir/state.json"
    read -r s rss < <(measure /dev/null "$dir/sync.log" "$ferry" sync -c "$dir/pipeline.yaml")
    data_bytes=$(find "$dir/warehouse" -path '*/data/*' -name '*.parquet' -printf '%s\n' | awk '{t += $1} END {print t + 0}')
    data_files=$(find "$dir/warehouse" -path '*/data/*' -name '*.parquet' | wc -l)
    warehouse_bytes=$(du -sb "$dir/warehouse" | cut -f1)
    record "{\"rows\": $rows, \"what\": \"ferry\", \"rep\": $rep, \"seconds\": $s, \"rss_kb\": $rss, \"data_bytes\": $data_bytes, \"data_files\": $data_files, \"warehouse_bytes\": $warehouse_bytes}"
    note "rows=$rows run $rep/$repeat: ferry sync ${s}s, peak RSS ${rss} kB"
  done
  if ((have_duckdb)); then
    # The last sync's data files, read by DuckDB: every row once.
    check="$(node "$bench_dir/duckdb.mjs" count "$dir/warehouse/bench/t/data/*.parquet")"
    record "{\"rows\": $rows, \"what\": \"check\", \"duckdb\": $check}"
  fi
  rm -f "$db" "$db-wal" "$db-shm"
done

python3 - "$records" "$json" "$repeat" "$chunk_rows" "$(cpu_model)" "$(nproc)" "$(sqlite3 --version | cut -d' ' -f1)" <<'PY'
import json, statistics, sys, datetime
records_path, out_path, repeat, chunk_rows, cpu, ncpu, sqlite_version = sys.argv[1:]
recs = [json.loads(l) for l in open(records_path)]
sizes = sorted({r["rows"] for r in recs})
med = lambda xs: statistics.median(xs) if xs else None
results = []
for n in sizes:
    rs = [r for r in recs if r["rows"] == n]
    def runs(what): return [r for r in rs if r["what"] == what]
    gen = runs("generate")[0]
    exports = {w.split("/")[1]: med([r["seconds"] for r in runs(w)]) for w in ("export/list", "export/csv", "export/tabs")}
    best_mode = min(exports, key=exports.get)
    scan_s = med([r["seconds"] for r in runs("scan")])
    f = runs("ferry")
    ferry_s = med([r["seconds"] for r in f])
    check = runs("check")
    results.append({
        "rows": n, "db_bytes": gen["db_bytes"], "generate_seconds": round(gen["seconds"], 3),
        "export_seconds_median": {k: round(v, 4) for k, v in exports.items()},
        "export_best_mode": best_mode,
        "export_rows_per_s": round(n / exports[best_mode]),
        "scan_seconds_median": round(scan_s, 4), "scan_rows_per_s": round(n / scan_s),
        "ferry_seconds_median": round(ferry_s, 4), "ferry_rows_per_s": round(n / ferry_s),
        "ferry_seconds_runs": [r["seconds"] for r in f],
        "ratio_ferry_to_export": round(exports[best_mode] / ferry_s, 3),
        "ratio_ferry_to_scan": round(scan_s / ferry_s, 3),
        "ferry_peak_rss_kb_median": int(med([r["rss_kb"] for r in f])),
        "ferry_peak_rss_kb_max": max(r["rss_kb"] for r in f),
        "ferry_data_bytes": f[-1]["data_bytes"], "ferry_data_files": f[-1]["data_files"],
        "ferry_warehouse_bytes": f[-1]["warehouse_bytes"],
        "duckdb_check": check[0]["duckdb"] if check else None,
    })
doc = {"benchmark": "full_refresh", "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
       "machine": {"cpu": cpu, "cores": int(ncpu)}, "sqlite": sqlite_version,
       "repeat": int(repeat), "chunk_rows": int(chunk_rows), "compression": "zstd", "results": results}
with open(out_path, "w") as fh:
    json.dump(doc, fh, indent=2); fh.write("\n")
mb = lambda b: f"{b / 1e6:.1f} MB"
print(f"full refresh, SQLite -> Iceberg (zstd, chunk_rows {chunk_rows}); median of {repeat} runs; {cpu}, {ncpu} cores")
hdr = ["rows", "db size", "export s (list/csv/tabs)", "export rows/s", "C-API scan rows/s", "ferry s", "ferry rows/s", "ferry/export", "ferry/scan", "data files", "peak RSS"]
rows = []
for r in results:
    e = r["export_seconds_median"]
    rows.append([f'{r["rows"]:,}', mb(r["db_bytes"]), f'{e["list"]:.2f}/{e["csv"]:.2f}/{e["tabs"]:.2f}',
                 f'{r["export_rows_per_s"]:,} ({r["export_best_mode"]})', f'{r["scan_rows_per_s"]:,}',
                 f'{r["ferry_seconds_median"]:.2f}', f'{r["ferry_rows_per_s"]:,}', f'{r["ratio_ferry_to_export"]:.2f}',
                 f'{r["ratio_ferry_to_scan"]:.2f}', f'{r["ferry_data_files"]} = {mb(r["ferry_data_bytes"])}',
                 f'{r["ferry_peak_rss_kb_median"] / 1024:.1f} MiB'])
w = [max(len(h), *(len(x[i]) for x in rows)) for i, h in enumerate(hdr)]
print("  ".join(h.ljust(w[i]) for i, h in enumerate(hdr)))
for x in rows: print("  ".join(c.ljust(w[i]) for i, c in enumerate(x)))
for r in results:
    c = r["duckdb_check"]
    if c is not None:
        ok = int(c["n"]) == r["rows"] and int(c["ids"]) == r["rows"]
        print(f'check {r["rows"]:,} rows: DuckDB reads {int(c["n"]):,} rows, {int(c["ids"]):,} distinct ids in the data files: {"ok" if ok else "MISMATCH"}')
print("ferry/export = export time / ferry time (1.0 = as fast as the database's own export of the table).")
print(f"results: {out_path}")
PY
