#!/usr/bin/env bash
# ferry's Parquet writer against DuckDB's COPY ... (FORMAT parquet, COMPRESSION zstd) at one
# thread, same run, same logical table. See docs/benchmarks.md.
#
# Usage: bench/parquet_vs_duckdb.sh [--repeat N] [--json FILE] [--keep] [rows]
#   rows      rows to write (default 5000000)
#   --repeat  runs of each measurement; the median is reported (default 3)
#   --json    where to write the results (default bench/results/parquet_vs_duckdb-<time>.json)
#   --keep    keep the temporary folder with the Parquet files
#
# The table (7 columns): id bigint, qty int, status text (5 values), amount decimal(12,2),
# created_at timestamptz, note text (39 chars), flag boolean; row i = 1..rows, values computed
# from i (bench/parquet_write.cc, bench/duckdb.mjs spell the same formulas).
#   ferry          bench/parquet_write.cc: generates each 65,536-row batch into a reused Batch,
#                  then Writer::Write; generation and writing are timed apart. "write" is the
#                  writer alone; "gen+write" adds generating the values in C++. Run twice per
#                  repetition: default options (dictionary encoding) and with dictionaries off.
#   duckdb/gen     COPY (SELECT ... FROM range(...)) TO ...: includes generating the rows in SQL.
#   duckdb/table   COPY t TO ... from an in-memory table materialized beforehand (not timed):
#                  DuckDB's writer plus an in-memory scan, the counterpart of ferry's "write".
# Both with zstd (level 3 for ferry, DuckDB's default level) and their default row-group sizes.
# Afterwards DuckDB reads both files back and compares their contents.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

repeat=3 json="" keep=0 rows=5000000
while (($#)); do
  case "$1" in
    --repeat) repeat="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) [[ "$1" =~ ^[0-9]+$ ]] || die "rows must be a number: $1"; rows="$1"; shift ;;
  esac
done
[[ -n "$json" ]] || { mkdir -p "$bench_dir/results"; json="$bench_dir/results/parquet_vs_duckdb-$(date +%Y%m%d-%H%M%S).json"; }

command -v node >/dev/null || die "node is missing (run scripts/setup.sh)"
[[ -d "$repo_dir/tests/interop/node_modules/@duckdb/node-api" ]] ||
  die "tests/interop/node_modules/@duckdb/node-api is missing (run scripts/setup.sh)"
ensure_gnu_time
build_targets parquet_write
writer="$build_dir/bench/parquet_write"

work="$(mktemp -d "${TMPDIR:-/tmp}/ferry-bench.XXXXXX")"
if ((keep)); then note "keeping $work"; else trap 'rm -rf "$work"' EXIT; fi
records="$work/records.jsonl"
: >"$records"

for ((rep = 1; rep <= repeat; rep++)); do
  read -r s rss < <(measure "$work/ferry.json" "$work/ferry.log" "$writer" "$rows" "$work/ferry.parquet" zstd 65536 dict)
  echo "{\"what\": \"ferry\", \"rep\": $rep, \"seconds\": $s, \"rss_kb\": $rss, \"bytes\": $(stat -c %s "$work/ferry.parquet"), \"out\": $(cat "$work/ferry.json")}" >>"$records"
  note "run $rep/$repeat: ferry $(cat "$work/ferry.json")"
  read -r s rss < <(measure "$work/ferry-plain.json" "$work/ferry.log" "$writer" "$rows" "$work/ferry-plain.parquet" zstd 65536 plain)
  echo "{\"what\": \"ferry/plain\", \"rep\": $rep, \"seconds\": $s, \"rss_kb\": $rss, \"bytes\": $(stat -c %s "$work/ferry-plain.parquet"), \"out\": $(cat "$work/ferry-plain.json")}" >>"$records"
  note "run $rep/$repeat: ferry/plain $(cat "$work/ferry-plain.json")"
  for mode in generate table; do
    read -r s rss < <(measure "$work/duckdb.json" "$work/duckdb.log" node "$bench_dir/duckdb.mjs" write "$rows" "$work/duckdb-$mode.parquet" "$mode")
    echo "{\"what\": \"duckdb/$mode\", \"rep\": $rep, \"seconds\": $s, \"rss_kb\": $rss, \"bytes\": $(stat -c %s "$work/duckdb-$mode.parquet"), \"out\": $(cat "$work/duckdb.json")}" >>"$records"
    note "run $rep/$repeat: duckdb/$mode $(cat "$work/duckdb.json")"
  done
done
node "$bench_dir/duckdb.mjs" check "$work/ferry.parquet" "$work/duckdb-generate.parquet" >"$work/check.json" || true

python3 - "$records" "$work/check.json" "$json" "$rows" "$repeat" "$(cpu_model)" "$(nproc)" <<'PY'
import json, statistics, sys, datetime
records_path, check_path, out_path, rows, repeat, cpu, ncpu = sys.argv[1:]
rows = int(rows)
recs = [json.loads(l) for l in open(records_path)]
try:
    check = json.load(open(check_path))
except Exception:
    check = {"same_contents": False, "error": open(check_path).read()}
med = statistics.median
f = [r for r in recs if r["what"] == "ferry"]
fpl = [r for r in recs if r["what"] == "ferry/plain"]
dg = [r for r in recs if r["what"] == "duckdb/generate"]
dt = [r for r in recs if r["what"] == "duckdb/table"]
fw = med([r["out"]["write_s"] for r in f])
fg = med([r["out"]["generate_s"] for r in f])
ft = med([r["out"]["total_s"] for r in f])
fp = med([r["seconds"] for r in f])
dgs = med([r["out"]["seconds"] for r in dg])
dts = med([r["out"]["seconds"] for r in dt])
res = {
    "rows": rows,
    "ferry": {"write_s": round(fw, 4), "generate_s": round(fg, 4), "gen_plus_write_s": round(ft, 4),
              "process_wall_s": round(fp, 4), "write_rows_per_s": round(rows / fw),
              "gen_plus_write_rows_per_s": round(rows / ft), "file_bytes": f[-1]["bytes"],
              "row_groups": f[-1]["out"]["row_groups"],
              "peak_rss_kb_median": int(med([r["out"]["peak_rss_kb"] for r in f])),
              "max_writer_buffers_bytes": f[-1]["out"]["max_writer_buffers_bytes"],
              "write_s_runs": [r["out"]["write_s"] for r in f]},
    "ferry_plain": {"write_s": round(med([r["out"]["write_s"] for r in fpl]), 4),
                    "write_rows_per_s": round(rows / med([r["out"]["write_s"] for r in fpl])),
                    "file_bytes": fpl[-1]["bytes"],
                    "peak_rss_kb_median": int(med([r["out"]["peak_rss_kb"] for r in fpl])),
                    "write_s_runs": [r["out"]["write_s"] for r in fpl]},
    "duckdb_generate": {"copy_s": round(dgs, 4), "rows_per_s": round(rows / dgs), "file_bytes": dg[-1]["bytes"],
                        "row_groups": dg[-1]["out"]["row_groups"], "node_peak_rss_kb": int(med([r["rss_kb"] for r in dg])),
                        "copy_s_runs": [r["out"]["seconds"] for r in dg]},
    "duckdb_table": {"copy_s": round(dts, 4), "rows_per_s": round(rows / dts), "file_bytes": dt[-1]["bytes"],
                     "row_groups": dt[-1]["out"]["row_groups"], "copy_s_runs": [r["out"]["seconds"] for r in dt]},
    "ratio_ferry_write_to_duckdb_table": round(dts / fw, 3),
    "ratio_ferry_gen_plus_write_to_duckdb_generate": round(dgs / ft, 3),
    "ratio_file_size_ferry_to_duckdb": round(f[-1]["bytes"] / dg[-1]["bytes"], 3),
    "same_contents": check.get("same_contents"), "check": check,
}
doc = {"benchmark": "parquet_vs_duckdb", "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
       "machine": {"cpu": cpu, "cores": int(ncpu)}, "duckdb": dg[-1]["out"].get("duckdb"), "threads": 1,
       "compression": "zstd", "repeat": int(repeat), "results": res}
with open(out_path, "w") as fh:
    json.dump(doc, fh, indent=2); fh.write("\n")
mb = lambda b: f"{b / 1e6:.1f} MB"
print(f"Parquet, {rows:,} rows x 7 columns, zstd, 1 thread; median of {repeat} runs; DuckDB {doc['duckdb']}; {cpu}, {ncpu} cores")
table = [
    ["ferry write (Writer::Write+Close; batches generated apart)", f"{fw:.2f}", f"{rows / fw:,.0f}", mb(f[-1]["bytes"]), str(res["ferry"]["row_groups"]), f'{res["ferry"]["peak_rss_kb_median"] / 1024:.1f} MiB (process)'],
    ["ferry gen+write (C++ generation {:.2f} s + write)".format(fg), f"{ft:.2f}", f"{rows / ft:,.0f}", "", "", ""],
    ["ferry write, dictionary off (PLAIN only)", f'{res["ferry_plain"]["write_s"]:.2f}', f'{res["ferry_plain"]["write_rows_per_s"]:,}', mb(fpl[-1]["bytes"]), "", f'{res["ferry_plain"]["peak_rss_kb_median"] / 1024:.1f} MiB (process)'],
    ["DuckDB COPY from in-memory table", f"{dts:.2f}", f"{rows / dts:,.0f}", mb(dt[-1]["bytes"]), str(res["duckdb_table"]["row_groups"]), ""],
    ["DuckDB COPY (SELECT ... FROM range()) incl. SQL generation", f"{dgs:.2f}", f"{rows / dgs:,.0f}", mb(dg[-1]["bytes"]), str(res["duckdb_generate"]["row_groups"]), f'{res["duckdb_generate"]["node_peak_rss_kb"] / 1024:.1f} MiB (node+DuckDB)'],
]
hdr = ["what", "seconds", "rows/s", "file", "row groups", "peak RSS"]
w = [max(len(h), *(len(x[i]) for x in table)) for i, h in enumerate(hdr)]
print("  ".join(h.ljust(w[i]) for i, h in enumerate(hdr)))
for x in table: print("  ".join(c.ljust(w[i]) for i, c in enumerate(x)))
print(f"ferry write / DuckDB COPY from table (writers alone): {res['ratio_ferry_write_to_duckdb_table']:.2f}x DuckDB's rows/s")
print(f"ferry gen+write / DuckDB COPY incl. generation:       {res['ratio_ferry_gen_plus_write_to_duckdb_generate']:.2f}x DuckDB's rows/s")
print(f"file size ferry / DuckDB: {res['ratio_file_size_ferry_to_duckdb']:.2f}")
print(f"same contents (DuckDB reads both files: count, column sums, row hashes): {res['same_contents']}")
print(f"results: {out_path}")
PY
