"""The measurements of bench/pg_wide_rows.sh (run that script: it builds ferry in Release first)."""
import argparse
import os
import shutil

from postgres_bench import bench_server, measure

COLUMNS = 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--rows", type=int, default=100000)
    ap.add_argument("--readers", default="1 4")
    a = ap.parse_args()
    with bench_server("ferry-bench-wide.") as (server, work, env):
        cols = ", ".join(f"c{i} text" for i in range(COLUMNS))
        server.psql(f"CREATE TABLE w (id bigint PRIMARY KEY, {cols})", db="bench")
        loaded = 0
        for rows in (a.rows, 2 * a.rows):
            values = ", ".join(f"md5(i::text || '{i}') || repeat('x', 168)" for i in range(COLUMNS))
            server.psql(f"INSERT INTO w SELECT i, {values} FROM generate_series({loaded + 1}, "
                        f"{rows}) i; VACUUM ANALYZE w", db="bench")
            loaded = rows
            size = server.psql("SELECT pg_size_pretty(pg_total_relation_size('w'))",
                               db="bench").strip()
            for readers in a.readers.split():
                d = os.path.join(work, f"r{rows}-{readers}")
                os.makedirs(d)
                with open(os.path.join(d, "pipeline.yaml"), "w") as f:
                    f.write(f"""name: wide
source:
  type: postgres
  dsn: "{server.dsn('bench')}"
  readers: {readers}
  streams:
    - name: w
      mode: full_refresh
      chunk_rows: 20000
destination: {{type: iceberg, warehouse: ./warehouse, namespace: bench}}
state: ./state.json
""")
                wall, rss = measure([a.ferry, "sync", "-c", "pipeline.yaml"], cwd=d, env=env)
                print(f"{rows:,} rows ({size}), readers {readers}: {wall:.2f} s, "
                      f"peak RSS {rss / 1024:.0f} MiB", flush=True)
                shutil.rmtree(d)


if __name__ == "__main__":
    main()
