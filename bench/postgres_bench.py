"""The measurements of bench/postgres.sh (run that script: it builds ferry in Release first)."""
import argparse
import contextlib
import datetime
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(BENCH, "..", "tests", "lib"))
import pgserver  # noqa: E402

TABLE = """
CREATE TABLE t (id bigint PRIMARY KEY, qty int NOT NULL, status text NOT NULL,
                amount numeric(12,2) NOT NULL, created_at timestamptz NOT NULL,
                note text NOT NULL, flag boolean NOT NULL);
INSERT INTO t
SELECT i, ((i * 37) % 100 + 1)::int,
       (ARRAY['pending','paid','shipped','delivered','cancelled'])[(h >> 7) % 5 + 1],
       ((h % 10000000) / 100)::numeric + (h % 100) / 100.0,
       timestamptz '2024-01-01 00:00:00+00' + i * interval '7 seconds',
       format('order %s ref %s cust %s', lpad(i::text, 8, '0'), lpad(to_hex(h), 8, '0'),
              lpad((h % 999983)::text, 6, '0')),
       (h >> 3) & 1 = 1
FROM (SELECT i, (i * 2654435761) % 4294967296 AS h FROM generate_series(1, {rows}) i) s;
VACUUM (ANALYZE, FREEZE) t;
"""


def measure_cpu(argv, cwd=None, env=None, stdout=subprocess.DEVNULL, logs=None):
    """Runs argv under /usr/bin/time; returns (wall seconds, peak RSS kB, CPU seconds: user +
    system). CPU time moves far less than wall time with what else the shared cores run. `logs`
    (a list): what the command wrote to stderr is appended to it."""
    rss_file = tempfile.mktemp()
    t0 = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", "-o", rss_file, *argv], cwd=cwd,
                       env=env, stdout=stdout, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{p.stderr[-3000:]}")
    if logs is not None:
        logs.append(p.stderr)
    rss, user, system = open(rss_file).read().split()[-3:]
    os.unlink(rss_file)
    return wall, int(rss), float(user) + float(system)


def measure(argv, cwd=None, env=None, stdout=subprocess.DEVNULL):
    """Runs argv under /usr/bin/time; returns (wall seconds, peak RSS kB)."""
    wall, rss, _ = measure_cpu(argv, cwd, env, stdout)
    return wall, rss


@contextlib.contextmanager
def bench_server(prefix, keep=False):
    """A throw-away PostgreSQL server (the test suite's launcher) with an empty database `bench`:
    yields (server, a work folder, the environment ferry runs with). At the end the server stops
    and the folder is removed, unless `keep`."""
    work = tempfile.mkdtemp(prefix=prefix)
    server = pgserver.PgServer()
    server.start()
    env = dict(os.environ, PGPASSWORD=pgserver.SUPERUSER_PASSWORD)
    env.pop("FERRY_FAULT", None)
    try:
        server.psql("CREATE DATABASE bench")
        yield server, work, env
    finally:
        server.stop()
        if keep:
            print(f"# kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def parse_args(name, repeat, rows=5000000, changes=1000000, extra=None):
    """The arguments the benchmarks share (see their shell scripts), with `extra(parser)` adding a
    benchmark's own; --json defaults to bench/results/<name>-<date>.json."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--cpu", default="")
    ap.add_argument("--rows", type=int, default=rows)
    ap.add_argument("--changes", type=int, default=changes)
    ap.add_argument("--txns", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=repeat)
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    if extra:
        extra(ap)
    a = ap.parse_args()
    if not a.json:
        os.makedirs(os.path.join(BENCH, "results"), exist_ok=True)
        a.json = os.path.join(BENCH, "results",
                              f"{name}-{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}.json")
    return a


def write_result(path, result):
    """The benchmark's figures as indented JSON (bench/results/ by default)."""
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")


def main():
    a = parse_args("postgres", repeat=3)
    with bench_server("ferry-bench-pg.", a.keep) as (server, work, env):
        print(f"# generating {a.rows:,} rows", file=sys.stderr)
        t0 = time.monotonic()
        server.psql(TABLE.format(rows=a.rows), db="bench")
        generate_s = time.monotonic() - t0
        table_bytes = int(server.psql("SELECT pg_table_size('t')", db="bench").strip())
        psql = ["psql", "-X", "-q", "-h", server.dir, "-p", str(server.port), "-U",
                pgserver.SUPERUSER, "-d", "bench"]

        def pipeline(name, mode):
            d = os.path.join(work, name)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "pipeline.yaml"), "w") as f:
                f.write(f"""name: {name}
source:
  type: postgres
  dsn: "{server.dsn('bench')}"
  streams:
    - name: t
      mode: {mode}
      chunk_rows: 500000
destination: {{type: iceberg, warehouse: ./warehouse, namespace: bench, compression: zstd}}
state: ./state.json
""")
            return d

        recs = {"export": [], "full": [], "full_rss": [], "full_cpu": [], "recv": [], "recv_cpu": [],
                "cdc": [], "cdc_rss": [], "cdc_cpu": []}
        full = pipeline("full", "full_refresh")
        for rep in range(a.repeat):
            s, _ = measure(psql + ["-c", "COPY t TO STDOUT (FORMAT binary)"])
            recs["export"].append(s)
            shutil.rmtree(os.path.join(full, "warehouse"), ignore_errors=True)
            if os.path.exists(os.path.join(full, "state.json")):
                os.unlink(os.path.join(full, "state.json"))
            s, rss, cpu = measure_cpu([a.ferry, "sync", "-c", "pipeline.yaml"], cwd=full, env=env)
            recs["full"].append(s)
            recs["full_rss"].append(rss)
            recs["full_cpu"].append(cpu)
            print(f"# full refresh run {rep + 1}: COPY {recs['export'][-1]:.2f} s, ferry {s:.2f} s, "
                  f"peak RSS {rss / 1024:.0f} MiB", file=sys.stderr)
        data_files = glob.glob(os.path.join(full, "warehouse", "bench", "t", "data", "*.parquet"))
        data_bytes = sum(os.path.getsize(f) for f in data_files)

        cdc = pipeline("cdc", "cdc_only")
        measure([a.ferry, "sync", "--once", "-c", "pipeline.yaml"], cwd=cdc, env=env)  # slot
        server.psql("SELECT pg_create_logical_replication_slot('recv', 'pgoutput')", db="bench")
        per_txn = a.changes // a.txns
        for rep in range(a.repeat):
            script = "".join(
                f"UPDATE t SET qty = qty + 1, note = note || '' WHERE id > {k * per_txn} AND "
                f"id <= {(k + 1) * per_txn};\n" for k in range(a.txns))
            print(f"# cdc run {rep + 1}: {a.txns * per_txn:,} updates in {a.txns} transactions",
                  file=sys.stderr)
            server.psql(script, db="bench")
            end = server.psql("SELECT pg_current_wal_insert_lsn()", db="bench").strip()
            s, _, cpu = measure_cpu(["pg_recvlogical", "-h", server.dir, "-p", str(server.port), "-U",
                            pgserver.SUPERUSER, "-d", "bench", "--slot", "recv", "--start",
                            "--no-loop", "--endpos", end, "-o", "proto_version=1",
                            "-o", "publication_names=ferry_cdc", "-f", "/dev/null"])
            recs["recv"].append(s)
            recs["recv_cpu"].append(cpu)
            s, rss, cpu = measure_cpu([a.ferry, "sync", "--once", "-c", "pipeline.yaml"], cwd=cdc,
                                      env=env)
            recs["cdc"].append(s)
            recs["cdc_rss"].append(rss)
            recs["cdc_cpu"].append(cpu)
            print(f"# cdc run {rep + 1}: pg_recvlogical {recs['recv'][-1]:.2f} s, ferry {s:.2f} s, "
                  f"peak RSS {rss / 1024:.0f} MiB", file=sys.stderr)
        # The destination holds every row once, with the last update applied.
        check = subprocess.run(
            ["node", os.path.join(BENCH, "duckdb.mjs"), "count",
             os.path.join(full, "warehouse", "bench", "t", "data", "*.parquet")],
            capture_output=True, text=True)
        med = statistics.median
        changes = a.txns * per_txn
        result = {
            "benchmark": "postgres", "date": datetime.datetime.now().astimezone().isoformat(
                timespec="seconds"),
            "machine": {"cpu": a.cpu, "cores": os.cpu_count()},
            "server": server.psql("SHOW server_version").strip(), "rows": a.rows,
            "table_bytes": table_bytes, "generate_seconds": round(generate_s, 2),
            "repeat": a.repeat,
            "full_refresh": {
                "copy_binary_seconds": recs["export"], "ferry_seconds": recs["full"],
                "ferry_peak_rss_kb": recs["full_rss"], "ferry_cpu_seconds": recs["full_cpu"],
                "copy_rows_per_s": round(a.rows / med(recs["export"])),
                "ferry_rows_per_s": round(a.rows / med(recs["full"])),
                "ratio_ferry_to_copy": round(med(recs["export"]) / med(recs["full"]), 3),
                "data_files": len(data_files), "data_bytes": data_bytes,
                "duckdb_check": check.stdout.strip() if check.returncode == 0 else None},
            "cdc": {
                "changes": changes, "transactions": a.txns,
                "pg_recvlogical_seconds": recs["recv"], "ferry_seconds": recs["cdc"],
                "ferry_peak_rss_kb": recs["cdc_rss"], "ferry_cpu_seconds": recs["cdc_cpu"],
                "pg_recvlogical_cpu_seconds": recs["recv_cpu"],
                "pg_recvlogical_changes_per_s": round(changes / med(recs["recv"])),
                "ferry_changes_per_s": round(changes / med(recs["cdc"])),
                "ratio_ferry_to_pg_recvlogical": round(med(recs["recv"]) / med(recs["cdc"]), 3)},
        }
        write_result(a.json, result)
        fr, c = result["full_refresh"], result["cdc"]
        print(f"PostgreSQL {result['server']}, {a.rows:,} rows ({table_bytes / 1e6:.0f} MB heap); "
              f"median of {a.repeat}; {a.cpu}, {os.cpu_count()} cores")
        print(f"full refresh: COPY binary {med(recs['export']):.2f} s ({fr['copy_rows_per_s']:,} rows/s), "
              f"ferry {med(recs['full']):.2f} s ({fr['ferry_rows_per_s']:,} rows/s): ferry/COPY "
              f"{fr['ratio_ferry_to_copy']:.2f}; peak RSS {max(recs['full_rss']) / 1024:.0f} MiB; "
              f"{len(data_files)} files, {data_bytes / 1e6:.1f} MB; DuckDB check {fr['duckdb_check']}")
        print(f"cdc: {changes:,} changes in {a.txns} transactions: pg_recvlogical "
              f"{med(recs['recv']):.2f} s ({c['pg_recvlogical_changes_per_s']:,}/s), ferry "
              f"{med(recs['cdc']):.2f} s ({c['ferry_changes_per_s']:,}/s): ferry/pg_recvlogical "
              f"{c['ratio_ferry_to_pg_recvlogical']:.2f}; peak RSS {max(recs['cdc_rss']) / 1024:.0f} MiB")
        print(f"ferry CPU seconds (user + system, median): full refresh {med(recs['full_cpu']):.2f}, "
              f"cdc {med(recs['cdc_cpu']):.2f} (pg_recvlogical {med(recs['recv_cpu']):.2f})")
        print(f"results: {a.json}")


if __name__ == "__main__":
    main()
