"""The measurements of bench/sparse_keys.sh (run that script: it builds ferry in Release first).

A full refresh of the benchmark table (bench/postgres_bench.py's columns) whose ids are dense
(1..rows) against the same rows whose ids are spread over the whole positive int64 range (id =
i * M mod P for a large prime P: distinct, far apart, unevenly spaced), in the same run, for SQLite
and PostgreSQL. Both tables are written in key order, as a table whose ids grow with time
(snowflakes, sequences) is; docs/limits.md says what keys in no physical order cost. Reported per source and key shape: ferry's wall time and rows/s, the ratio
sparse/dense rows/s, the planning time and chunk count (ferry's own log line), the data files and
their mean size, and the files' bytes against DuckDB's single zstd file of the same rows."""
import datetime
import glob
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
from postgres_bench import bench_server, parse_args, write_result  # noqa: E402

P = 9223372036854775783  # the largest prime below 2^63
M = 6364136223846793005  # coprime with P: i -> i * M mod P is one-to-one on 1..P-1

PG_TABLE = """
CREATE TABLE {name} (id bigint PRIMARY KEY, qty int NOT NULL, status text NOT NULL,
                amount numeric(12,2) NOT NULL, created_at timestamptz NOT NULL,
                note text NOT NULL, flag boolean NOT NULL);
INSERT INTO {name}
SELECT {id} AS id, ((i * 37) % 100 + 1)::int,
       (ARRAY['pending','paid','shipped','delivered','cancelled'])[(h >> 7) % 5 + 1],
       ((h % 10000000) / 100)::numeric + (h % 100) / 100.0,
       timestamptz '2024-01-01 00:00:00+00' + i * interval '7 seconds',
       format('order %s ref %s cust %s', lpad(i::text, 8, '0'), lpad(to_hex(h), 8, '0'),
              lpad((h % 999983)::text, 6, '0')),
       (h >> 3) & 1 = 1
FROM (SELECT i, (i * 2654435761) % 4294967296 AS h FROM generate_series(1, {rows}) i) s
ORDER BY id;
VACUUM (ANALYZE, FREEZE) {name};
"""


def sqlite_rows(rows, sparse):
    for i in range(1, rows + 1):
        h = (i * 2654435761) % 4294967296
        yield ((i * M) % P if sparse else i, (i * 37) % 100 + 1,
               ["pending", "paid", "shipped", "delivered", "cancelled"][(h >> 7) % 5],
               f"{(h % 10000000) // 100}.{h % 100:02d}", f"2024-01-01T00:00:00+00:00",
               f"order {i:08d} ref {h:08x} cust {h % 999983:06d}", (h >> 3) & 1)


def make_sqlite(path, rows):
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    for name, sparse in (("staged", True), ("dense", False), ("sparse", True)):
        con.execute(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY, qty INTEGER NOT NULL, "
                    "status TEXT NOT NULL, amount DECIMAL(12,2) NOT NULL, created_at TIMESTAMPTZ "
                    "NOT NULL, note TEXT NOT NULL, flag BOOLEAN NOT NULL)")
        if name == "sparse":
            # Written in key order, as ids that grow with time (snowflakes) are.
            con.execute("INSERT INTO sparse SELECT * FROM staged ORDER BY id")
            con.execute("DROP TABLE staged")
        else:
            con.executemany(f"INSERT INTO {name} VALUES (?, ?, ?, ?, ?, ?, ?)",
                            sqlite_rows(rows, sparse))
        con.commit()
    con.execute("VACUUM")
    con.close()


def pipeline(work, name, source, table):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "pipeline.yaml"), "w") as f:
        f.write(f"""name: {name}
source:
{source}
  streams: [{table}]
destination: {{type: iceberg, warehouse: ./warehouse, namespace: bench, compression: zstd}}
state: ./state.json
""")
    return d


def measure(argv, cwd, env, log):
    """Runs argv under /usr/bin/time, its stdout and stderr into `log`: (wall s, peak RSS kB)."""
    rss_file = os.path.join(cwd, "rss")
    with open(log, "w") as f:
        t0 = time.monotonic()
        p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss_file, *argv], cwd=cwd, env=env,
                           stdout=f, stderr=subprocess.STDOUT)
        wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{open(log).read()[-3000:]}")
    return wall, int(open(rss_file).read().split()[-1])


def run(ferry, d, env, table, repeat):
    """Fresh full refreshes of one table: (wall seconds, peak RSS kB, planning s, chunks) each."""
    out = []
    for _ in range(repeat):
        shutil.rmtree(os.path.join(d, "warehouse"), ignore_errors=True)
        if os.path.exists(os.path.join(d, "state.json")):
            os.unlink(os.path.join(d, "state.json"))
        log = os.path.join(d, "sync.log")
        wall, rss = measure([ferry, "sync", "-c", "pipeline.yaml"], d, env, log)
        text = open(log).read()
        planned = re.search(r"planned (\d+) chunk\(s\).* in ([0-9.e-]+) s", text)
        out.append((wall, rss, float(planned.group(2)) if planned else None,
                    int(planned.group(1)) if planned else None))
    files = glob.glob(os.path.join(d, "warehouse", "bench", table, "data", "*.parquet"))
    data_bytes = sum(os.path.getsize(f) for f in files)
    duck = subprocess.run(["node", os.path.join(BENCH, "duckdb.mjs"), "rewrite",
                           os.path.join(d, "warehouse", "bench", table, "data", "*.parquet"),
                           os.path.join(d, "duckdb.parquet")], capture_output=True, text=True)
    duck_bytes = json.loads(duck.stdout)["bytes"] if duck.returncode == 0 else None
    return out, len(files), data_bytes, duck_bytes


def summarize(rows, runs):
    med = statistics.median
    (measures, files, data_bytes, duck_bytes) = runs
    wall = med(m[0] for m in measures)
    return {"seconds": [round(m[0], 3) for m in measures], "rows_per_s": round(rows / wall),
            "peak_rss_kb": max(m[1] for m in measures),
            "planning_seconds": med(m[2] for m in measures if m[2] is not None),
            "chunks": measures[0][3], "data_files": files, "data_bytes": data_bytes,
            "mean_file_bytes": round(data_bytes / max(files, 1)),
            "duckdb_bytes": duck_bytes,
            "bytes_vs_duckdb": round(data_bytes / duck_bytes, 3) if duck_bytes else None}


def both_tables(a, source, work, src, env):
    """The dense and the sparse table of one source, measured, and their ratio."""
    r = {}
    for table in ("dense", "sparse"):
        d = pipeline(work, f"{source}_{table}", src, table)
        r[table] = summarize(a.rows, run(a.ferry, d, env, table, a.repeat))
        print(f"# {source} {table}: {r[table]}", file=sys.stderr)
    r["ratio_sparse_to_dense"] = round(r["sparse"]["rows_per_s"] / r["dense"]["rows_per_s"], 3)
    return r


def main():
    a = parse_args("sparse_keys", repeat=3,
                   extra=lambda ap: ap.add_argument("--sources", default="sqlite,postgres"))
    result = {"benchmark": "sparse_keys", "rows": a.rows, "repeat": a.repeat,
              "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
              "machine": {"cpu": a.cpu, "cores": os.cpu_count()}}
    env = dict(os.environ)
    env.pop("FERRY_FAULT", None)
    if "sqlite" in a.sources:
        work = tempfile.mkdtemp(prefix="ferry-bench-sparse.")
        try:
            print(f"# sqlite: generating 2 x {a.rows:,} rows", file=sys.stderr)
            make_sqlite(os.path.join(work, "bench.db"), a.rows)
            src = f"  type: sqlite\n  path: {os.path.join(work, 'bench.db')}"
            result["sqlite"] = both_tables(a, "sqlite", work, src, env)
        finally:
            if not a.keep:
                shutil.rmtree(work, ignore_errors=True)
    if "postgres" in a.sources:
        with bench_server("ferry-bench-sparse-pg.", a.keep) as (server, work, env_pg):
            print(f"# postgres: generating 2 x {a.rows:,} rows", file=sys.stderr)
            server.psql(PG_TABLE.format(name="dense", id="i", rows=a.rows), db="bench")
            server.psql(PG_TABLE.format(name="sparse", id=f"((i::numeric * {M}) % {P})::int8",
                                        rows=a.rows), db="bench")
            src = f"  type: postgres\n  dsn: \"{server.dsn('bench')}\""
            result["postgres"] = both_tables(a, "postgres", work, src, env_pg)
            result["postgres"]["server"] = server.psql("SHOW server_version").strip()
    write_result(a.json, result)
    print(f"{a.rows:,} rows, median of {a.repeat}; {a.cpu}, {os.cpu_count()} cores")
    for source in ("sqlite", "postgres"):
        if source not in result:
            continue
        r = result[source]
        for table in ("dense", "sparse"):
            t = r[table]
            print(f"{source} {table}: {statistics.median(t['seconds']):.2f} s "
                  f"({t['rows_per_s']:,} rows/s), planned {t['chunks']} chunks in "
                  f"{t['planning_seconds']:.3f} s, {t['data_files']} files of "
                  f"{t['mean_file_bytes'] / 1e6:.1f} MB, {t['data_bytes'] / 1e6:.1f} MB = "
                  f"{t['bytes_vs_duckdb']} x DuckDB's file; peak RSS {t['peak_rss_kb'] / 1024:.0f} MiB")
        print(f"{source}: sparse/dense rows/s {r['ratio_sparse_to_dense']}")


if __name__ == "__main__":
    main()
