"""The measurements of bench/incremental.sh (run that script: it builds ferry in Release first).

An incremental window of PostgreSQL changes into Iceberg against the database's own export of the
same rows, in the same run. Table t (bench/postgres_bench.py's columns plus `updated_at
timestamp(0)`, indexed) holds --rows rows; each round stamps --changes rows with one new
second-resolution value (ties: the window's end holds them all) and measures
  copy   psql COPY (SELECT * FROM t WHERE updated_at > <last>) TO STDOUT (FORMAT binary)
  ferry  ferry sync --once (incremental on updated_at) reading the window: the rows at the last
         value (skipped by fingerprint), those above it, the rows at the new end (fingerprinted)
and then a quiet round (nothing changed), which must commit nothing."""
import json
import os
import statistics
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
from postgres_bench import bench_server, measure, parse_args, write_result  # noqa: E402
sys.path.insert(0, os.path.join(BENCH, "..", "tests", "lib"))
import pgserver  # noqa: E402

TABLE = """
CREATE TABLE t (id bigint PRIMARY KEY, qty int NOT NULL, status text NOT NULL,
                amount numeric(12,2) NOT NULL, note text NOT NULL, flag boolean NOT NULL,
                updated_at timestamp(0) NOT NULL);
INSERT INTO t
SELECT i, ((i * 37) % 100 + 1)::int,
       (ARRAY['pending','paid','shipped','delivered','cancelled'])[(h >> 7) % 5 + 1],
       ((h % 10000000) / 100)::numeric + (h % 100) / 100.0,
       format('order %s ref %s', lpad(i::text, 8, '0'), lpad(to_hex(h), 8, '0')),
       (h >> 3) & 1 = 1, timestamp '2024-01-01 00:00:00'
FROM (SELECT i, (i * 2654435761) % 4294967296 AS h FROM generate_series(1, {rows}) i) s;
CREATE INDEX t_updated_at ON t (updated_at);
VACUUM (ANALYZE, FREEZE) t;
"""


def main():
    a = parse_args("incremental", repeat=3, rows=2000000, changes=200000)
    with bench_server("ferry-bench-inc.", a.keep) as (server, work, env):
        print(f"# generating {a.rows:,} rows", file=sys.stderr)
        server.psql(TABLE.format(rows=a.rows), db="bench")
        d = os.path.join(work, "inc")
        os.makedirs(d)
        with open(os.path.join(d, "pipeline.yaml"), "w") as f:
            f.write(f"""name: inc
source:
  type: postgres
  dsn: "{server.dsn('bench')}"
  streams: [{{name: t, mode: incremental, cursor: updated_at}}]
destination: {{type: iceberg, warehouse: ./warehouse, namespace: bench, compression: zstd}}
state: ./state.json
""")
        psql = ["psql", "-X", "-q", "-h", server.dir, "-p", str(server.port), "-U",
                pgserver.SUPERUSER, "-d", "bench"]
        measure([a.ferry, "sync", "--once", "-c", "pipeline.yaml"], cwd=d, env=env)  # first load
        recs = {"copy": [], "ferry": [], "ferry_rss": [], "quiet": []}
        last = "2024-01-01 00:00:00"
        for rep in range(a.repeat):
            stamp = f"2024-01-02 00:00:{rep:02d}"
            lo = rep * a.changes
            server.psql(f"UPDATE t SET qty = qty + 1, updated_at = '{stamp}' "
                        f"WHERE id > {lo} AND id <= {lo + a.changes}", db="bench")
            s, _ = measure(psql + ["-c", f"COPY (SELECT * FROM t WHERE updated_at > '{last}') "
                                         "TO STDOUT (FORMAT binary)"])
            recs["copy"].append(s)
            s, rss = measure([a.ferry, "sync", "--once", "-c", "pipeline.yaml"], cwd=d, env=env)
            recs["ferry"].append(s)
            recs["ferry_rss"].append(rss)
            q, _ = measure([a.ferry, "sync", "--once", "-c", "pipeline.yaml"], cwd=d, env=env)
            recs["quiet"].append(q)
            print(f"# round {rep + 1}: COPY {recs['copy'][-1]:.2f} s, ferry {s:.2f} s, quiet "
                  f"{q:.2f} s, peak RSS {rss / 1024:.0f} MiB", file=sys.stderr)
            last = stamp
        snapshots = len(json.load(open(max(
            (os.path.join(dp, f) for dp, _, fs in os.walk(os.path.join(d, "warehouse"))
             for f in fs if f.endswith(".metadata.json")), key=os.path.getmtime)))["snapshots"])
        med = statistics.median
        result = {"benchmark": "incremental", "rows": a.rows, "changes": a.changes,
                  "repeat": a.repeat, "machine": {"cpu": a.cpu, "cores": os.cpu_count()},
                  "copy_seconds": recs["copy"], "ferry_seconds": recs["ferry"],
                  "quiet_seconds": recs["quiet"], "ferry_peak_rss_kb": recs["ferry_rss"],
                  "ratio_ferry_to_copy": round(med(recs["copy"]) / med(recs["ferry"]), 3),
                  "snapshots": snapshots}
        write_result(a.json, result)
        print(f"{a.rows:,} rows, windows of {a.changes:,} rows tied at one value, median of "
              f"{a.repeat}; {a.cpu}, {os.cpu_count()} cores")
        print(f"COPY of the window {med(recs['copy']):.2f} s, ferry {med(recs['ferry']):.2f} s: "
              f"ferry/COPY {result['ratio_ferry_to_copy']:.2f}; quiet round "
              f"{med(recs['quiet']):.2f} s; peak RSS {max(recs['ferry_rss']) / 1024:.0f} MiB; "
              f"{snapshots} snapshots for {a.repeat + 1} windows")


if __name__ == "__main__":
    main()
