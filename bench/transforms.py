"""The measurements of bench/transforms.sh (run that script: it builds ferry in Release first).

Full refresh: one SQLite table loaded by a fresh full refresh per variant and repetition. CDC: per
variant and repetition a copy of a smaller table is backfilled (not timed), every row is updated
once, and the sync that applies those changes is timed. Wall time and peak RSS from /usr/bin/time;
the ratio is the transformed variant's rows/s over the plain one's, from the medians of the same
run."""
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
from partitioned import make_source  # noqa: E402
from postgres_bench import measure, parse_args, write_result  # noqa: E402

TRANSFORMS = """    filter: "qty > 0 AND status <> 'lost'"
    add_columns:
      amount_cents: "CAST(round(amount * 100) AS INTEGER)"
"""
VARIANTS = [("plain", ""), ("transformed", TRANSFORMS)]


def pipeline(work, name, db, mode, transforms):
    return (f"name: {name}\nsource:\n  type: sqlite\n  path: {db}\n  streams:\n"
            f"  - name: t\n    mode: {mode}\n{transforms}"
            f"destination:\n  type: iceberg\n  warehouse: {work}/wh-{name}\n"
            f"state: {work}/state-{name}.json\n")


def run(argv, work, env):
    p = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{p.stderr[-3000:]}")


def summary(runs, rows):
    wall = statistics.median(w for w, _ in runs)
    return {"seconds": [round(w, 3) for w, _ in runs], "rows_per_s": round(rows / wall),
            "peak_rss_mib": round(max(r for _, r in runs) / 1024)}


def main():
    a = parse_args("transforms", repeat=3)
    work = tempfile.mkdtemp(prefix="ferry_bench_tf_")
    env = dict(os.environ)
    env.pop("FERRY_FAULT", None)
    try:
        print(f"# generating {a.rows} rows and {a.changes} rows", file=sys.stderr)
        make_source(os.path.join(work, "source.db"), a.rows)
        make_source(os.path.join(work, "cdc.db"), a.changes)
        full = {name: [] for name, _ in VARIANTS}
        cdc = {name: [] for name, _ in VARIANTS}
        for r in range(a.repeat):
            for name, transforms in VARIANTS:
                run_name = f"full-{name}-{r}"
                with open(os.path.join(work, f"{run_name}.yaml"), "w") as f:
                    f.write(pipeline(work, run_name, f"{work}/source.db", "full_refresh",
                                     transforms))
                wall, rss = measure([a.ferry, "sync", "-c", f"{run_name}.yaml"], cwd=work, env=env)
                full[name].append((wall, rss))
                print(f"# full refresh, {name}, run {r + 1}: {wall:.2f} s, {rss // 1024} MiB",
                      file=sys.stderr)
                shutil.rmtree(os.path.join(work, f"wh-{run_name}"), ignore_errors=True)
            for name, transforms in VARIANTS:
                run_name = f"cdc-{name}-{r}"
                db = os.path.join(work, f"{run_name}.db")
                shutil.copyfile(os.path.join(work, "cdc.db"), db)
                with open(os.path.join(work, f"{run_name}.yaml"), "w") as f:
                    f.write(pipeline(work, run_name, db, "cdc", transforms))
                run([a.ferry, "sync", "--once", "-c", f"{run_name}.yaml"], work, env)  # backfill
                con = sqlite3.connect(db)
                con.execute("UPDATE t SET qty = qty + 1, note = note || '+'")
                con.commit()
                con.close()
                wall, rss = measure([a.ferry, "sync", "--once", "-c", f"{run_name}.yaml"],
                                    cwd=work, env=env)
                cdc[name].append((wall, rss))
                print(f"# cdc, {name}, run {r + 1}: {wall:.2f} s, {rss // 1024} MiB",
                      file=sys.stderr)
                os.unlink(db)
                shutil.rmtree(os.path.join(work, f"wh-{run_name}"), ignore_errors=True)
        out = {"rows": a.rows, "changes": a.changes, "repeat": a.repeat, "cpu": a.cpu,
               "full_refresh": {n: summary(full[n], a.rows) for n, _ in VARIANTS},
               "cdc": {n: summary(cdc[n], a.changes) for n, _ in VARIANTS}}
        for part in ("full_refresh", "cdc"):
            out[part]["ratio"] = round(out[part]["transformed"]["rows_per_s"] /
                                       out[part]["plain"]["rows_per_s"], 3)
        write_result(a.json, out)
        print(json.dumps(out, indent=2))
    finally:
        if a.keep:
            print(f"# kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
