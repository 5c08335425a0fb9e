"""The measurements of bench/kafka.sh (run that script: it builds ferry in Release first)."""
import json
import os
import statistics
import subprocess
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.join(BENCH, "..", "tests", "lib"))
import kafkamock  # noqa: E402
from partitioned import make_source  # noqa: E402
import pgserver  # noqa: E402
from postgres_bench import (TABLE, bench_server, measure, measure_cpu, parse_args,  # noqa: E402
                            write_result)

PARTITIONS = 16


def events_file(server, path, run):
    """The events of one run as ferry writes them (key TAB value a line), built from the table by
    the server: same columns, same forms, same sizes."""
    sql = (
        "SELECT json_build_object('id', id)::text || E'\\t' || json_build_object("
        "'before', NULL, 'after', json_build_object('id', id, 'qty', qty, 'status', status, "
        "'amount', amount::text, 'created_at', to_char(created_at AT TIME ZONE 'UTC', "
        "'YYYY-MM-DD HH24:MI:SS.US+00:00'), 'note', note, 'flag', flag), 'op', 'u', 'source', "
        "json_build_object('pipeline', 'bench', 'table', 't', 'position', '0/1A2B3C4D', "
        "'ts_ms', 1796300000000 + id, 'ts_us', 1796300000000000 + id, 'snapshot', false), "
        f"'ts_ms', 1796300000000 + {run})::text FROM t ORDER BY id")
    with open(path, "w") as f:
        p = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-h", server.dir, "-p", str(server.port), "-U",
                            pgserver.SUPERUSER, "-d", "bench", "-c", sql], stdout=f,
                           stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"the events query failed: {p.stderr}")
    # json_build_object writes ", " and " : " between fields; ferry writes none.
    with open(path) as f:
        lines = [json.dumps(json.loads(k), separators=(",", ":")) + "\t" +
                 json.dumps(json.loads(v), separators=(",", ":"))
                 for k, v in (line.rstrip("\n").split("\t", 1) for line in f)]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return sum(len(line) for line in lines)


def main():
    a = parse_args("kafka", repeat=3)
    mock = kafkamock.KafkaMock()
    try:
        with bench_server("ferry-bench-kafka.", a.keep) as (server, work, env):
            print(f"# generating {a.changes:,} rows", file=sys.stderr)
            server.psql(TABLE.format(rows=a.changes), db="bench")
            for topic in ("bench.t", "bench.kcat"):
                mock.topic(topic, PARTITIONS)
            pipeline = os.path.join(work, "pipeline.yaml")
            with open(pipeline, "w") as f:
                f.write(f"name: bench\nsource:\n  type: postgres\n  dsn: \"{server.dsn('bench')}\"\n"
                        f"  streams:\n  - name: t\n    mode: cdc\n"
                        f"destination:\n  type: kafka\n  brokers: \"{mock.bootstrap}\"\n"
                        f"state: {work}/state.json\n")
            print("# backfill (not timed)", file=sys.stderr)
            measure([a.ferry, "sync", "--once", "-c", pipeline], cwd=work, env=env)
            # The source's own limit: the server decoding the same changes for pg_recvlogical.
            server.psql("SELECT pg_create_logical_replication_slot('recv', 'pgoutput')", db="bench")
            publication = server.psql("SELECT pubname FROM pg_publication", db="bench").split()[0]
            per_txn = max(1, a.changes // a.txns)
            ferry_runs, kcat_runs, recv_runs, ferry_cpu, event_bytes = [], [], [], [], 0
            # The destination alone: a SQLite table of the same rows (reading it costs little)
            # loaded by a full refresh into Kafka.
            make_source(os.path.join(work, "lite.db"), a.changes)
            mock.topic("lite.t", PARTITIONS)
            lite = os.path.join(work, "lite.yaml")
            with open(lite, "w") as f:
                f.write(f"name: lite\nsource:\n  type: sqlite\n  path: {work}/lite.db\n"
                        f"  mode: full_refresh\n"
                        f"destination:\n  type: kafka\n  brokers: \"{mock.bootstrap}\"\n"
                        f"state: {work}/lite-state.json\n")
            load_runs, load_cpu = [], []
            for r in range(a.repeat):
                print(f"# run {r + 1}: {a.changes:,} updates in {a.txns} transactions",
                      file=sys.stderr)
                script = "".join(
                    f"BEGIN; UPDATE t SET qty = qty + 1 WHERE id > {lo} AND id <= {lo + per_txn}; "
                    "COMMIT;\n" for lo in range(0, a.changes, per_txn))
                server.psql(script, db="bench")
                end = server.psql("SELECT pg_current_wal_insert_lsn()", db="bench").strip()
                recv_runs.append(measure(
                    ["pg_recvlogical", "-h", server.dir, "-p", str(server.port), "-U",
                     pgserver.SUPERUSER, "-d", "bench", "--slot", "recv", "--start", "--no-loop",
                     "--endpos", end, "-o", "proto_version=1", "-o",
                     f"publication_names={publication}", "-f", "/dev/null"], env=env))
                wall, rss, cpu = measure_cpu([a.ferry, "sync", "--once", "-c", pipeline],
                                             cwd=work, env=env)
                ferry_runs.append((wall, rss))
                ferry_cpu.append(cpu)
                path = os.path.join(work, "events.txt")
                event_bytes = events_file(server, path, r)
                kcat_runs.append(measure(["kcat", "-P", "-b", mock.bootstrap, "-t", "bench.kcat",
                                          "-K", "\t", "-l", path], cwd=work, env=env))
                wall, rss, cpu = measure_cpu([a.ferry, "sync", "--once", "-c", lite], cwd=work,
                                             env=env)
                load_runs.append((wall, rss))
                load_cpu.append(cpu)
                print(f"#   SQLite full refresh into Kafka {wall:.2f} s ({cpu:.2f} CPU s)",
                      file=sys.stderr)
                print(f"#   pg_recvlogical {recv_runs[-1][0]:.2f} s, ferry {ferry_runs[-1][0]:.2f} s "
                      f"({ferry_cpu[-1]:.2f} CPU s), kcat {kcat_runs[-1][0]:.2f} s", file=sys.stderr)
            fw = statistics.median(w for w, _ in ferry_runs)
            kw = statistics.median(w for w, _ in kcat_runs)
            rw = statistics.median(w for w, _ in recv_runs)
            lw = statistics.median(w for w, _ in load_runs)
            result = {
                "benchmark": "kafka", "cpu": a.cpu, "changes": a.changes, "txns": a.txns,
                "event_bytes": event_bytes, "partitions": PARTITIONS,
                "ferry": {"seconds": [round(w, 3) for w, _ in ferry_runs],
                          "events_per_s": round(a.changes / fw),
                          "peak_rss_mib": round(max(m for _, m in ferry_runs) / 1024)},
                "kcat": {"seconds": [round(w, 3) for w, _ in kcat_runs],
                         "events_per_s": round(a.changes / kw),
                         "peak_rss_mib": round(max(m for _, m in kcat_runs) / 1024)},
                "ferry_cpu_seconds": [round(c, 2) for c in ferry_cpu],
                "pg_recvlogical": {"seconds": [round(w, 3) for w, _ in recv_runs],
                                   "changes_per_s": round(a.changes / rw)},
                "sqlite_full_refresh": {"seconds": [round(w, 3) for w, _ in load_runs],
                                        "cpu_seconds": [round(c, 2) for c in load_cpu],
                                        "rows_per_s": round(a.changes / lw),
                                        "peak_rss_mib": round(max(m for _, m in load_runs) / 1024),
                                        "ratio_to_kcat": round(kw / lw, 3)},
                "ratio": round(kw / fw, 3),
                "ratio_to_pg_recvlogical": round(rw / fw, 3),
            }
            write_result(a.json, result)
            print(json.dumps(result, indent=2))
    finally:
        mock.stop()


if __name__ == "__main__":
    main()
