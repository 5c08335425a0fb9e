"""The measurements of bench/partitioned.sh (run that script: it builds ferry in Release first).

One SQLite table (the benchmark table's columns, created_at over 365 days) loaded by a fresh full
refresh into a local warehouse per layout and repetition; wall time and peak RSS from
/usr/bin/time, data files counted in the warehouse. The ratio is each layout's rows/s over the
unpartitioned load's, from the medians of the same run.

The reference for what partitioning costs any writer on this machine's file system: DuckDB
(one thread) writing the same rows — read from ferry's unpartitioned file into memory first, not
timed — with COPY ... PARTITION_BY into the same layouts (bench/duckdb.mjs partition), in rounds
after ferry's; its ratio is each layout's time over its own unpartitioned COPY's."""
import glob
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
from postgres_bench import measure, parse_args, write_result  # noqa: E402

LAYOUTS = [
    ("unpartitioned", None),
    ("day", ["day(created_at)"]),
    ("bucket16", ["bucket(16, id)"]),
    ("day_x_bucket16", ["day(created_at)", "bucket(16, id)"]),
]


def make_source(path, rows):
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, qty INTEGER NOT NULL, status TEXT NOT NULL, "
                "amount DECIMAL(12,2) NOT NULL, created_at TIMESTAMP NOT NULL, note TEXT NOT NULL, "
                "flag BOOLEAN NOT NULL)")
    # Rows in key order; their days follow the keys loosely (as orders do), 365 days in all.
    con.execute(f"""
        WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {rows})
        INSERT INTO t SELECT i, (i * 37) % 100 + 1,
          CASE (((i * 2654435761) % 4294967296) >> 7) % 5 WHEN 0 THEN 'pending' WHEN 1 THEN 'paid'
            WHEN 2 THEN 'shipped' WHEN 3 THEN 'delivered' ELSE 'cancelled' END,
          printf('%d.%02d', ((i * 2654435761) % 4294967296) % 100000, i % 100),
          datetime('2024-01-01', '+' || (i * 365 / {rows} + (i * 7919) % 3) || ' days',
                   '+' || (i % 86400) || ' seconds'),
          printf('order %08d ref %08x', i, (i * 2654435761) % 4294967296),
          (i >> 3) & 1
        FROM s""")
    con.commit()
    con.close()


def pipeline(work, name, terms):
    part = f"  partition_by: {json.dumps(terms)}\n" if terms else ""
    return (f"name: {name}\nsource: {{type: sqlite, path: {work}/source.db}}\n"
            f"destination:\n  type: iceberg\n  warehouse: {work}/wh-{name}\n{part}"
            f"state: {work}/state-{name}.json\n")


def duckdb_partition(work, source_glob, name, r):
    out = os.path.join(work, f"duckdb-{name}-{r}")
    run = subprocess.run(["node", os.path.join(BENCH, "duckdb.mjs"), "partition", source_glob, out,
                          "none" if name == "unpartitioned" else name],
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"DuckDB's partitioned COPY failed: {run.stderr.strip()}")
    return json.loads(run.stdout)


def main():
    a = parse_args("partitioned", repeat=3)
    work = tempfile.mkdtemp(prefix="ferry_bench_parts_")
    env = dict(os.environ)
    env.pop("FERRY_FAULT", None)
    try:
        print(f"# generating {a.rows} rows", file=sys.stderr)
        make_source(os.path.join(work, "source.db"), a.rows)
        # Rounds: each runs every layout once, so that a machine whose speed drifts weighs on
        # every layout alike. Each run has a warehouse and state of its own, all removed at the
        # end: removing thousands of files right before a run slows the next run's file creation
        # on ext4 (its inode allocator steps over recently freed inodes), which would charge the
        # partitioned layouts for the harness's clean-up.
        runs = {name: [] for name, _ in LAYOUTS}
        files = {}
        for r in range(a.repeat):
            for name, terms in LAYOUTS:
                run = f"{name}-{r}"
                with open(os.path.join(work, f"{run}.yaml"), "w") as f:
                    f.write(pipeline(work, run, terms))
                wall, rss = measure([a.ferry, "sync", "-c", f"{run}.yaml"], cwd=work, env=env)
                runs[name].append((wall, rss))
                files[name] = len(glob.glob(os.path.join(work, f"wh-{run}", "**", "*.parquet"),
                                            recursive=True))
                print(f"# {name} run {r + 1}: {wall:.2f} s, {rss // 1024} MiB, {files[name]} files",
                      file=sys.stderr)
        results = {}
        for name, terms in LAYOUTS:
            wall = statistics.median(w for w, _ in runs[name])
            results[name] = {"partition_by": terms, "seconds": [round(w, 3) for w, _ in runs[name]],
                             "rows_per_s": round(a.rows / wall),
                             "peak_rss_mib": round(max(r for _, r in runs[name]) / 1024),
                             "data_files": files[name]}
        base = results["unpartitioned"]["rows_per_s"]
        for r in results.values():
            r["ratio_to_unpartitioned"] = round(r["rows_per_s"] / base, 3)
        source_glob = os.path.join(work, "wh-unpartitioned-0", "**", "*.parquet")
        duck = {name: [] for name, _ in LAYOUTS}
        for r in range(a.repeat):
            for name, _ in LAYOUTS:
                d = duckdb_partition(work, source_glob, name, r)
                duck[name].append(d)
                print(f"# duckdb {name} run {r + 1}: {d['seconds']:.2f} s, {d['files']} files",
                      file=sys.stderr)
        duck_base = statistics.median(d["seconds"] for d in duck["unpartitioned"])
        for name, _ in LAYOUTS:
            secs = statistics.median(d["seconds"] for d in duck[name])
            results[name]["duckdb"] = {"seconds": [round(d["seconds"], 3) for d in duck[name]],
                                       "files": duck[name][-1]["files"],
                                       "ratio_to_unpartitioned": round(duck_base / secs, 3)}
        out = {"rows": a.rows, "repeat": a.repeat, "cpu": a.cpu, "layouts": results}
        write_result(a.json, out)
        print(json.dumps(out, indent=2))
    finally:
        if a.keep:
            print(f"# kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
