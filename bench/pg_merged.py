"""The measurements of bench/pg_merged.sh (run that script: it builds ferry in Release first)."""
import argparse
import os
import shutil
import statistics
import sys

from postgres_bench import TABLE, bench_server, measure


def pipeline(d, name, server, dbs, mode, checkpoint):
    """A pipeline reading table t of each database in `dbs` (one source, or several merged)."""
    os.makedirs(d, exist_ok=True)

    def source(db, indent):
        return (f"""type: postgres
dsn: "{server.dsn(db)}"
streams:
  - name: t
    mode: {mode}
    chunk_rows: 500000
""").replace("\n", "\n" + indent).rstrip() + "\n"

    if len(dbs) == 1:
        body = "source:\n  " + source(dbs[0], "  ")
    else:
        body = "sources:\n" + "".join(f"  - name: {db}\n    " + source(db, "    ") for db in dbs)
    with open(os.path.join(d, "pipeline.yaml"), "w") as f:
        f.write(f"""name: {name}
{body}destination: {{type: iceberg, warehouse: ./warehouse, namespace: bench, compression: zstd}}
state: ./state.json
checkpoint: {{{checkpoint}}}
""")
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--rows", type=int, default=2000000)
    ap.add_argument("--changes", type=int, default=400000)
    ap.add_argument("--txns", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    half = a.rows // 2
    with bench_server("ferry-bench-merged.") as (server, work, env):
        # `bench` holds every row; `east` and `west` half each (disjoint keys).
        print(f"# generating {a.rows:,} rows, and two halves", file=sys.stderr)
        server.psql(TABLE.format(rows=a.rows), db="bench")
        part = TABLE.replace("generate_series(1, {rows})", "generate_series({lo}, {rows})")
        assert part != TABLE
        for db, lo, hi in (("east", 1, half), ("west", half + 1, a.rows)):
            server.psql(f"CREATE DATABASE {db}")
            server.psql(part.format(lo=lo, rows=hi), db=db)
        runs = {
            "one source": (["bench"], ""),
            "two sources, exactly_once": (["east", "west"], "mode: exactly_once"),
            "two sources, at_least_once": (["east", "west"], "mode: at_least_once"),
        }
        full = {k: [] for k in runs}
        full_rss = {k: [] for k in runs}
        for rep in range(a.repeat):
            for label, (dbs, cp) in runs.items():
                d = os.path.join(work, "full")
                shutil.rmtree(d, ignore_errors=True)
                pipeline(d, "full", server, dbs, "full_refresh", cp)
                s, rss = measure([a.ferry, "sync", "-c", "pipeline.yaml"], cwd=d, env=env)
                full[label].append(s)
                full_rss[label].append(rss)
                print(f"# full refresh run {rep + 1}, {label}: {s:.2f} s, peak RSS "
                      f"{rss / 1024:.0f} MiB", file=sys.stderr)

        # CDC: the same number of changes in one database, or half in each of two.
        cdc_runs = {"one source": (["bench"], ""),
                    "two sources, exactly_once": (["east", "west"], "mode: exactly_once"),
                    "two sources, at_least_once": (["east", "west"], "mode: at_least_once")}
        cdc = {k: [] for k in cdc_runs}
        cdc_rss = {k: [] for k in cdc_runs}
        dirs = {}
        for n, (label, (dbs, cp)) in enumerate(cdc_runs.items()):
            dirs[label] = pipeline(os.path.join(work, f"cdc{n}"), f"cdc{n}", server, dbs,
                                   "cdc_only", cp)
            measure([a.ferry, "sync", "--once", "-c", "pipeline.yaml"], cwd=dirs[label], env=env)
        for rep in range(a.repeat):
            updated = set()
            for label, (dbs, _) in cdc_runs.items():
                # The two-source pipelines read the same databases: both apply the same updates
                # (each has its own slots), made once before the first of them.
                for db in dbs:
                    if db in updated:
                        continue
                    updated.add(db)
                    per_db = a.changes // len(dbs)
                    txns = a.txns // len(dbs)
                    per_txn = per_db // txns
                    lo = 0 if db in ("bench", "east") else half
                    script = "".join(
                        f"UPDATE t SET qty = qty + 1 WHERE id > {lo + k * per_txn} AND "
                        f"id <= {lo + (k + 1) * per_txn};\n" for k in range(txns))
                    server.psql(script, db=db)
                s, rss = measure([a.ferry, "sync", "--once", "-c", "pipeline.yaml"],
                                 cwd=dirs[label], env=env)
                cdc[label].append(s)
                cdc_rss[label].append(rss)
                print(f"# cdc run {rep + 1}, {label}: {s:.2f} s, peak RSS {rss / 1024:.0f} MiB",
                      file=sys.stderr)
        med = statistics.median
        base = med(full["one source"])
        print(f"PostgreSQL, {a.rows:,} rows in one database or {half:,} in each of two; "
              f"median of {a.repeat}; {os.cpu_count()} cores")
        for label in runs:
            print(f"full refresh, {label}: {med(full[label]):.2f} s "
                  f"({a.rows / med(full[label]):,.0f} rows/s), {base / med(full[label]):.2f} of "
                  f"one source; peak RSS {max(full_rss[label]) / 1024:.0f} MiB")
        base = med(cdc["one source"])
        for label in cdc_runs:
            print(f"cdc, {a.changes:,} changes, {label}: {med(cdc[label]):.2f} s "
                  f"({a.changes / med(cdc[label]):,.0f}/s), {base / med(cdc[label]):.2f} of one "
                  f"source; peak RSS {max(cdc_rss[label]) / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
