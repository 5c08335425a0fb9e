"""The measurements of bench/s3.sh (run that script: it builds ferry in Release first).

Full refresh of the benchmark table (docs/benchmarks.md) from SQLite into a fresh Iceberg
warehouse, each --repeat times, interleaved:
  local     warehouse in a local folder
  s3        warehouse at s3://bench-<n>/wh on moto_server and on Ceph RGW (the test suite's
            launchers, 127.0.0.1; --stores picks them)
  upload    the local run's files (data, manifests, metadata) uploaded to a fresh bucket of the
            same server by boto3's transfer manager (what `aws s3 cp --recursive` runs), with
            ferry's part size and 10 threads: the store's own upload rate for the same bytes
Reported per store: medians of wall time, ferry's peak RSS, local/s3, and the upload's time over
what the store adds to ferry's sync (s3 - local; >= 1.0: ferry's uploads cost less than the bulk
copy of the same bytes would after a local sync)."""
import argparse
import datetime
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(BENCH, "..", "tests", "lib"))
import rgwserver  # noqa: E402
import s3server  # noqa: E402

GENERATE = """
PRAGMA journal_mode = WAL;
CREATE TABLE t (id INTEGER PRIMARY KEY, qty INTEGER, status TEXT, amount DECIMAL(12,2),
                created_at TIMESTAMPTZ, note TEXT, flag BOOLEAN);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
INSERT INTO t
SELECT i, (i * 37) % 100 + 1,
       CASE (h >> 7) % 5 WHEN 0 THEN 'pending' WHEN 1 THEN 'paid' WHEN 2 THEN 'shipped'
                         WHEN 3 THEN 'delivered' ELSE 'cancelled' END,
       printf('%d.%02d', (h % 10000000) / 100, h % 100),
       strftime('%Y-%m-%dT%H:%M:%S+00:00', 1704067200 + i * 7, 'unixepoch'),
       printf('order %08d ref %08x cust %06d', i, h, h % 999983),
       (h >> 3) & 1
FROM (SELECT i, (i * 2654435761) % 4294967296 AS h FROM n);
"""

PIPELINE = """name: bench
source: {{type: sqlite, path: ./bench.db, mode: full_refresh{chunk_rows}, streams: [t]}}
destination:
  type: iceberg
  warehouse: {warehouse}
  catalog: sqlite:./catalog-{tag}.db
  namespace: bench
{s3}state: ./state-{tag}.json
"""


def measure(argv, cwd, env):
    rss_file = tempfile.mktemp()
    t0 = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss_file, *argv], cwd=cwd, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{p.stderr[-3000:]}")
    rss = int(open(rss_file).read().split()[-1])
    os.unlink(rss_file)
    return wall, rss


def run_store(a, work, name, server):
    """--repeat rounds of local, s3 and upload on one store; returns the medians."""
    import boto3.s3.transfer
    env = dict(os.environ, **server.env())
    env.pop("FERRY_FAULT", None)
    part = a.part_size_mb << 20
    results = {"local": [], "s3": [], "upload": [], "rss_local": [], "rss_s3": []}
    client = server.client()
    config = boto3.s3.transfer.TransferConfig(multipart_threshold=part,
                                              multipart_chunksize=part, max_concurrency=10)
    chunk_rows = f", chunk_rows: {a.chunk_rows}" if a.chunk_rows > 0 else ""
    for rep in range(a.repeat):
        tag = f"{name}-{rep}"
        local_wh = os.path.join(work, f"wh-{tag}")
        with open(os.path.join(work, f"local-{tag}.yaml"), "w") as f:
            f.write(PIPELINE.format(chunk_rows=chunk_rows, warehouse=local_wh,
                                    tag=f"local-{tag}", s3=""))
        wall, rss = measure([a.ferry, "sync", "-c", f"local-{tag}.yaml"], work, env)
        results["local"].append(wall)
        results["rss_local"].append(rss)

        bucket = f"bench-s3-{rep}"
        server.create_bucket(bucket)
        with open(os.path.join(work, f"s3-{tag}.yaml"), "w") as f:
            f.write(PIPELINE.format(chunk_rows=chunk_rows, warehouse=f"s3://{bucket}/wh",
                                    tag=f"s3-{tag}",
                                    s3=f"  s3: {{endpoint: '{server.endpoint}', "
                                    f"upload_concurrency: {a.upload_concurrency}, "
                                    f"part_size: {a.part_size_mb}MiB}}\n"))
        wall, rss = measure([a.ferry, "sync", "-c", f"s3-{tag}.yaml"], work, env)
        results["s3"].append(wall)
        results["rss_s3"].append(rss)

        bucket = f"bench-cp-{rep}"
        server.create_bucket(bucket)
        files = [os.path.join(d, n) for d, _, ns in os.walk(local_wh) for n in ns
                 if not n.endswith(".db")]
        t0 = time.monotonic()
        for path in files:
            client.upload_file(path, bucket, os.path.relpath(path, local_wh), Config=config)
        results["upload"].append(time.monotonic() - t0)
        shutil.rmtree(local_wh)
        print(f"# {name} round {rep + 1}: local {results['local'][-1]:.2f} s, "
              f"s3 {results['s3'][-1]:.2f} s, upload {results['upload'][-1]:.2f} s",
              file=sys.stderr)
    med = {k: statistics.median(v) for k, v in results.items()}
    store_cost = max(med["s3"] - med["local"], 1e-3)
    return {
        "runs": {k: [round(x, 3) for x in results[k]] for k in ("local", "s3", "upload")},
        "seconds": {k: med[k] for k in ("local", "s3", "upload")},
        "peak_rss_mb": {"local": med["rss_local"] / 1024, "s3": med["rss_s3"] / 1024},
        "local_over_s3": med["local"] / med["s3"],
        "upload_over_s3": med["upload"] / med["s3"],
        # What the store adds to ferry's sync against what the bulk copy of the same bytes
        # takes: >= 1.0, ferry's uploads cost less than `aws s3 cp` would after a local sync.
        "upload_over_store_cost": med["upload"] / store_cost,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--cpu", default="")
    ap.add_argument("--rows", type=int, default=5000000)
    ap.add_argument("--chunk-rows", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default="")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--upload-concurrency", type=int, default=4)
    ap.add_argument("--part-size-mb", type=int, default=8)
    ap.add_argument("--stores", default="moto,rgw")
    a = ap.parse_args()
    stores = [x for x in a.stores.split(",") if x]
    for st in stores:
        if st not in ("moto", "rgw"):
            sys.exit(f"unknown store {st} (moto, rgw)")
    if "rgw" in stores and not rgwserver.available():
        sys.exit("Ceph RGW is not installed (ceph-mon, ceph-osd, radosgw); ./scripts/setup.sh "
                 "installs it, or pass --stores moto")

    work = tempfile.mkdtemp(prefix="ferry-bench-s3.")
    try:
        con = sqlite3.connect(os.path.join(work, "bench.db"))
        con.executescript(GENERATE.format(rows=a.rows))
        con.close()
        out = {
            "when": datetime.datetime.now().isoformat(timespec="seconds"),
            "cpu": a.cpu, "rows": a.rows, "repeat": a.repeat,
            "chunk_rows": a.chunk_rows or "default",
            "upload_concurrency": a.upload_concurrency, "part_size_mb": a.part_size_mb,
            "stores": {},
        }
        for st in stores:
            print(f"# starting {st}", file=sys.stderr)
            server = (s3server.S3Server() if st == "moto" else rgwserver.RgwServer()).start()
            try:
                out["stores"][st] = run_store(a, work, st, server)
            finally:
                server.stop()
        print(f"{'store':>6} {'rows':>10} {'local s':>9} {'s3 s':>9} {'upload s':>9} "
              f"{'local/s3':>9} {'upload/(s3-local)':>18} {'RSS s3 MB':>10}")
        for st, r in out["stores"].items():
            sec = r["seconds"]
            print(f"{st:>6} {a.rows:>10} {sec['local']:>9.2f} {sec['s3']:>9.2f} "
                  f"{sec['upload']:>9.2f} {r['local_over_s3']:>9.2f} "
                  f"{r['upload_over_store_cost']:>18.2f} {r['peak_rss_mb']['s3']:>10.0f}")
        path = a.json or os.path.join(BENCH, "results",
                                      f"s3-{datetime.datetime.now():%Y%m%d-%H%M%S}.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(out, f, indent=2)
    finally:
        if a.keep:
            print(f"# kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
