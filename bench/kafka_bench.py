"""The measurements of bench/kafka.sh (run that script: it builds ferry in Release first)."""
import json
import os
import statistics
import subprocess
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(BENCH, "..", "tests", "lib"))
import kafkamock  # noqa: E402
import pgserver  # noqa: E402
from postgres_bench import TABLE, bench_server, measure, parse_args, write_result  # noqa: E402

PARTITIONS = 16


def events_file(server, path, run):
    """The events of one run as ferry writes them (key TAB value a line), built from the table by
    the server: same columns, same forms, same sizes."""
    sql = (
        "COPY (SELECT json_build_object('id', id)::text || E'\\t' || json_build_object("
        "'before', NULL, 'after', json_build_object('id', id, 'qty', qty, 'status', status, "
        "'amount', amount::text, 'created_at', to_char(created_at AT TIME ZONE 'UTC', "
        "'YYYY-MM-DD HH24:MI:SS.US+00:00'), 'note', note, 'flag', flag), 'op', 'u', 'source', "
        "json_build_object('pipeline', 'bench', 'table', 't', 'position', '0/1A2B3C4D', "
        "'ts_ms', 1796300000000 + id, 'ts_us', 1796300000000000 + id, 'snapshot', false), "
        f"'ts_ms', 1796300000000 + {run})::text FROM t ORDER BY id) TO STDOUT")
    with open(path, "w") as f:
        p = subprocess.run(["psql", "-X", "-q", "-h", server.dir, "-p", str(server.port), "-U",
                            pgserver.SUPERUSER, "-d", "bench", "-c", sql], stdout=f,
                           stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"COPY of the events failed: {p.stderr}")
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
                        f"checkpoint:\n  max_changes: 100000000\n  interval: 1h\n"
                        f"state: {work}/state.json\n")
            print("# backfill (not timed)", file=sys.stderr)
            measure([a.ferry, "sync", "--once", "-c", pipeline], cwd=work, env=env)
            per_txn = max(1, a.changes // a.txns)
            ferry_runs, kcat_runs, event_bytes = [], [], 0
            for r in range(a.repeat):
                print(f"# run {r + 1}: {a.changes:,} updates in {a.txns} transactions",
                      file=sys.stderr)
                script = "".join(
                    f"BEGIN; UPDATE t SET qty = qty + 1 WHERE id > {lo} AND id <= {lo + per_txn}; "
                    "COMMIT;\n" for lo in range(0, a.changes, per_txn))
                server.psql(script, db="bench")
                ferry_runs.append(measure([a.ferry, "sync", "--once", "-c", pipeline], cwd=work,
                                          env=env))
                path = os.path.join(work, "events.txt")
                event_bytes = events_file(server, path, r)
                kcat_runs.append(measure(["kcat", "-P", "-b", mock.bootstrap, "-t", "bench.kcat",
                                          "-K", "\t", "-l", path], cwd=work, env=env))
                print(f"#   ferry {ferry_runs[-1][0]:.2f} s, kcat {kcat_runs[-1][0]:.2f} s",
                      file=sys.stderr)
            fw = statistics.median(w for w, _ in ferry_runs)
            kw = statistics.median(w for w, _ in kcat_runs)
            result = {
                "benchmark": "kafka", "cpu": a.cpu, "changes": a.changes, "txns": a.txns,
                "event_bytes": event_bytes, "partitions": PARTITIONS,
                "ferry": {"seconds": [round(w, 3) for w, _ in ferry_runs],
                          "events_per_s": round(a.changes / fw),
                          "peak_rss_mib": round(max(m for _, m in ferry_runs) / 1024)},
                "kcat": {"seconds": [round(w, 3) for w, _ in kcat_runs],
                         "events_per_s": round(a.changes / kw),
                         "peak_rss_mib": round(max(m for _, m in kcat_runs) / 1024)},
                "ratio": round(kw / fw, 3),
            }
            write_result(a.json, result)
            print(json.dumps(result, indent=2))
    finally:
        mock.stop()


if __name__ == "__main__":
    main()
