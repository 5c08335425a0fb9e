"""The measurements of bench/mysql.sh (run that script: it builds ferry in Release first)."""
import datetime
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(BENCH, "..", "tests", "lib"))
import mariadbserver  # noqa: E402
from postgres_bench import measure_cpu, parse_args, write_result  # noqa: E402

# The benchmark table (docs/benchmarks.md) in MariaDB's types; generated without logging it.
TABLE = """
SET SESSION sql_log_bin = 0;
CREATE TABLE t (id bigint PRIMARY KEY, qty int NOT NULL, status varchar(16) NOT NULL,
                amount decimal(12,2) NOT NULL, created_at timestamp NOT NULL,
                note varchar(64) NOT NULL, flag boolean NOT NULL);
INSERT INTO t
SELECT seq, (seq * 37) % 100 + 1,
       ELT((h >> 7) % 5 + 1, 'pending', 'paid', 'shipped', 'delivered', 'cancelled'),
       (h % 10000000) / 100 + (h % 100) / 100,
       TIMESTAMPADD(SECOND, seq * 7, '2024-01-01 00:00:00'),
       CONCAT('order ', LPAD(seq, 8, '0'), ' ref ', LPAD(LOWER(HEX(h)), 8, '0'), ' cust ',
              LPAD(h % 999983, 6, '0')),
       (h >> 3) & 1
FROM (SELECT seq, (seq * 2654435761) % 4294967296 AS h FROM seq_1_to_{rows}) s;
ANALYZE TABLE t;
"""


def main():
    a = parse_args("mysql", repeat=3)
    work = tempfile.mkdtemp(prefix="ferry-bench-mysql.")
    server = mariadbserver.MariaDbServer(binlog=True, extra=["--innodb-buffer-pool-size=1G"])
    try:
        server.start()
        run(a, server, work)
    finally:
        server.stop()
        if a.keep:
            print(f"# kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def thread_cpu(log):
    """The CPU seconds of the change log's reader and of its sinks, from a sync's debug log line
    "threads of the change log reads: source (change log) 1.02 CPU s in 1.10 s, sink ... "."""
    line = [x for x in log.splitlines() if "threads of the change log reads:" in x]
    if not line:
        sys.exit("ferry -v logged no thread times:\n" + log[-2000:])
    roles = {"source": 0.0, "sink": 0.0}
    for m in re.finditer(r"(source|sink)[^,]*? ([0-9.]+) CPU s in [0-9.]+ s", line[-1]):
        roles[m.group(1)] += float(m.group(2))
    return roles


def run(a, server, work):
    env = dict(os.environ, MARIADB_PASSWORD=server.password)
    env.pop("FERRY_FAULT", None)
    server.create_database("bench")
    print(f"# generating {a.rows:,} rows", file=sys.stderr)
    t0 = time.monotonic()
    server.sql("SET time_zone = '+00:00';" + TABLE.format(rows=a.rows), db="bench")
    generate_s = time.monotonic() - t0
    table_bytes = int(server.rows("SELECT DATA_LENGTH FROM information_schema.TABLES WHERE "
                                  "TABLE_SCHEMA = 'bench' AND TABLE_NAME = 't'")[0][0])
    tcp = ["--no-defaults", "-h", "127.0.0.1", "-P", str(server.port), "-uroot",
           f"-p{server.password}"]
    client = [server.client_bin, *tcp, "--quick", "--batch", "bench"]
    binlog_reader = shutil.which("mariadb-binlog")

    def pipeline(name, mode, memory_limit="0"):
        d = os.path.join(work, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "pipeline.yaml"), "w") as f:
            f.write(f"""name: {name}
memory_limit: {memory_limit}
source:
  type: mysql
  url: "{server.url('bench')}"
  streams:
    - name: t
      mode: {mode}
      chunk_rows: 500000
destination: {{type: iceberg, warehouse: ./warehouse, namespace: bench, compression: zstd}}
state: ./state.json
""")
        return d

    recs = {k: [] for k in ("select", "select_cpu", "full", "full_rss", "full_cpu", "recv",
                            "recv_cpu", "cdc", "cdc_rss", "cdc_cpu", "big_recv", "big_recv_cpu",
                            "big", "big_rss", "big_cpu", "spill_recv", "spill_recv_cpu",
                            "spill", "spill_rss", "spill_cpu", "recv_decoded", "recv_decoded_cpu",
                            "big_recv_decoded", "big_recv_decoded_cpu", "spill_recv_decoded",
                            "spill_recv_decoded_cpu", "duckdb_parquet", "cdc_source_cpu",
                            "cdc_sink_cpu")}
    full = pipeline("full", "full_refresh")
    for rep in range(a.repeat):
        s, _, cpu = measure_cpu(client + ["-e", "SELECT * FROM t"])
        recs["select"].append(s)
        recs["select_cpu"].append(cpu)
        shutil.rmtree(os.path.join(full, "warehouse"), ignore_errors=True)
        if os.path.exists(os.path.join(full, "state.json")):
            os.unlink(os.path.join(full, "state.json"))
        s, rss, cpu = measure_cpu([a.ferry, "sync", "-c", "pipeline.yaml"], cwd=full, env=env)
        recs["full"].append(s)
        recs["full_rss"].append(rss)
        recs["full_cpu"].append(cpu)
        print(f"# full refresh run {rep + 1}: mariadb --quick {recs['select'][-1]:.2f} s, "
              f"ferry {s:.2f} s, peak RSS {rss / 1024:.0f} MiB", file=sys.stderr)
    data_files = glob.glob(os.path.join(full, "warehouse", "bench", "t", "data", "*.parquet"))
    data_bytes = sum(os.path.getsize(f) for f in data_files)
    check = subprocess.run(["node", os.path.join(BENCH, "duckdb.mjs"), "count",
                            os.path.join(full, "warehouse", "bench", "t", "data", "*.parquet")],
                           capture_output=True, text=True)

    cdc = pipeline("cdc", "cdc_only")
    measure_cpu([a.ferry, "sync", "--once", "-c", "pipeline.yaml"], cwd=cdc, env=env)
    # The same, its held changes spilled to disk past 64 MiB.
    spilled = pipeline("spilled", "cdc_only", memory_limit="64MiB")
    measure_cpu([a.ferry, "sync", "--once", "-c", "pipeline.yaml"], cwd=spilled, env=env)

    def changes(txns, label, keys, where=cdc):
        """--changes updates in `txns` transactions (a fresh binary log file first, so that the
        range is one file), then mariadb-binlog and ferry reading them."""
        per_txn = a.changes // txns
        server.sql("FLUSH BINARY LOGS")
        start_file, start_pos = server.rows("SHOW MASTER STATUS")[0][:2]
        script = "SET time_zone = '+00:00';" + "".join(
            f"UPDATE t SET qty = qty + 1, note = CONCAT(LEFT(note, 40), ' ', qty) WHERE id > "
            f"{k * per_txn} AND id <= {(k + 1) * per_txn};\n" for k in range(txns))
        print(f"# {label}: {txns * per_txn:,} updates in {txns} transaction(s)", file=sys.stderr)
        server.sql(script if txns > 1 else f"START TRANSACTION;{script}COMMIT;", db="bench")
        end_file, end_pos = server.rows("SHOW MASTER STATUS")[0][:2]
        if end_file != start_file:
            sys.exit(f"the changes span {start_file}..{end_file}: raise max_binlog_size")
        reader = [binlog_reader, *tcp, "--read-from-remote-server", f"--start-position={start_pos}",
                  f"--stop-position={end_pos}", start_file]
        s, _, cpu = measure_cpu(reader)
        # What it read, outside the measurement: its output must hold every row event.
        out = subprocess.run(reader, capture_output=True, check=True).stdout
        recs[keys[0] + "_out"] = len(out)
        if out.count(b"Update_rows") < txns:
            sys.exit(f"mariadb-binlog printed {out.count(b'Update_rows')} row events for {txns} "
                     "transactions: it did not read the range")
        recs[keys[0]].append(s)
        recs[keys[0] + "_cpu"].append(cpu)
        # The same tool decoding every row image (-v: each row as commented pseudo-SQL): what
        # reading the changes as values, not as bytes, costs MariaDB's own code.
        s, _, cpu = measure_cpu([*reader, "-v"])
        recs[keys[0] + "_decoded"].append(s)
        recs[keys[0] + "_decoded_cpu"].append(cpu)
        logs = []
        # -v: the sync logs the CPU time of each of its threads (the log reader's, the sink's).
        s, rss, cpu = measure_cpu([a.ferry, "sync", "--once", "-v", "-c", "pipeline.yaml"],
                                  cwd=where, env=env, logs=logs)
        if keys[1] == "cdc":
            roles = thread_cpu(logs[0])
            recs["cdc_source_cpu"].append(roles["source"])
            recs["cdc_sink_cpu"].append(roles["sink"])
        recs[keys[1]].append(s)
        recs[keys[1] + "_rss"].append(rss)
        recs[keys[1] + "_cpu"].append(cpu)
        print(f"# {label}: mariadb-binlog {recs[keys[0]][-1]:.2f} s, ferry {s:.2f} s, "
              f"peak RSS {rss / 1024:.0f} MiB", file=sys.stderr)
        return txns * per_txn

    for rep in range(a.repeat):
        n_changes = changes(a.txns, f"cdc run {rep + 1}", ("recv", "cdc"))
        # What writing that many rows of the table as Parquet costs a writer nobody here wrote:
        # DuckDB, one thread, from an in-memory table, zstd (its own clock around the COPY).
        out = subprocess.run(["node", os.path.join(BENCH, "duckdb.mjs"), "write", str(n_changes),
                              os.path.join(work, "duckdb-changes.parquet"), "table"],
                             capture_output=True, text=True, check=True)
        recs["duckdb_parquet"].append(json.loads(out.stdout)["seconds"])
    for rep in range(a.repeat):
        changes(1, f"one transaction, run {rep + 1}", ("big_recv", "big"))
        # The spilling pipeline reads the same range as the in-memory one did: both start where
        # the last change of the previous run left them.
    # One transaction again, into the pipeline that spills past 64 MiB (it first catches up with
    # the changes the in-memory one applied, not measured).
    measure_cpu([a.ferry, "sync", "--once", "-c", "pipeline.yaml"], cwd=spilled, env=env)
    for rep in range(a.repeat):
        changes(1, f"one transaction, spilling, run {rep + 1}", ("spill_recv", "spill"), spilled)

    med = statistics.median
    version = server.rows("SELECT VERSION()")[0][0]
    result = {
        "benchmark": "mysql",
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": {"cpu": a.cpu, "cores": os.cpu_count()}, "server": version, "rows": a.rows,
        "table_bytes": table_bytes, "generate_seconds": round(generate_s, 2), "repeat": a.repeat,
        "full_refresh": {
            "mariadb_quick_seconds": recs["select"], "mariadb_quick_cpu_seconds": recs["select_cpu"],
            "ferry_seconds": recs["full"], "ferry_peak_rss_kb": recs["full_rss"],
            "ferry_cpu_seconds": recs["full_cpu"],
            "mariadb_rows_per_s": round(a.rows / med(recs["select"])),
            "ferry_rows_per_s": round(a.rows / med(recs["full"])),
            "ratio_ferry_to_mariadb": round(med(recs["select"]) / med(recs["full"]), 3),
            "data_files": len(data_files), "data_bytes": data_bytes,
            "duckdb_check": check.stdout.strip() if check.returncode == 0 else None},
        "cdc": {
            "changes": n_changes, "transactions": a.txns,
            "mariadb_binlog_seconds": recs["recv"], "mariadb_binlog_cpu_seconds": recs["recv_cpu"],
            "ferry_seconds": recs["cdc"], "ferry_peak_rss_kb": recs["cdc_rss"],
            "ferry_cpu_seconds": recs["cdc_cpu"],
            "mariadb_binlog_output_bytes": recs.get("recv_out"),
            "ratio_ferry_to_mariadb_binlog": round(med(recs["recv"]) / med(recs["cdc"]), 3),
            "mariadb_binlog_decoded_seconds": recs["recv_decoded"],
            "mariadb_binlog_decoded_cpu_seconds": recs["recv_decoded_cpu"],
            "ratio_ferry_to_mariadb_binlog_decoded":
                round(med(recs["recv_decoded"]) / med(recs["cdc"]), 3),
            "duckdb_parquet_write_seconds": recs["duckdb_parquet"],
            "ferry_source_thread_cpu_seconds": recs["cdc_source_cpu"],
            "ferry_sink_threads_cpu_seconds": recs["cdc_sink_cpu"],
            "target_budget_seconds": round(med(recs["recv"]) / 0.8, 3)},
        "one_transaction": {
            "changes": a.changes,
            "mariadb_binlog_seconds": recs["big_recv"],
            "mariadb_binlog_cpu_seconds": recs["big_recv_cpu"],
            "ferry_seconds": recs["big"], "ferry_peak_rss_kb": recs["big_rss"],
            "ferry_cpu_seconds": recs["big_cpu"],
            "ratio_ferry_to_mariadb_binlog": round(med(recs["big_recv"]) / med(recs["big"]), 3),
            "mariadb_binlog_decoded_seconds": recs["big_recv_decoded"],
            "ratio_ferry_to_mariadb_binlog_decoded":
                round(med(recs["big_recv_decoded"]) / med(recs["big"]), 3)},
        "one_transaction_spilling": {
            "changes": a.changes, "memory_limit": "64MiB",
            "mariadb_binlog_seconds": recs["spill_recv"],
            "ferry_seconds": recs["spill"], "ferry_peak_rss_kb": recs["spill_rss"],
            "ferry_cpu_seconds": recs["spill_cpu"],
            "ratio_spilling_to_in_memory": round(med(recs["big"]) / med(recs["spill"]), 3),
            "ratio_one_transaction_to_many": round(med(recs["cdc"]) / med(recs["big"]), 3)},
    }
    write_result(a.json, result)
    fr, c, b = result["full_refresh"], result["cdc"], result["one_transaction"]
    print(f"MariaDB {version}, {a.rows:,} rows ({table_bytes / 1e6:.0f} MB of pages); median of "
          f"{a.repeat}; {a.cpu}, {os.cpu_count()} cores")
    print(f"full refresh: mariadb --quick {med(recs['select']):.2f} s "
          f"({fr['mariadb_rows_per_s']:,} rows/s), ferry {med(recs['full']):.2f} s "
          f"({fr['ferry_rows_per_s']:,} rows/s): ferry/mariadb {fr['ratio_ferry_to_mariadb']:.2f}; "
          f"peak RSS {max(recs['full_rss']) / 1024:.0f} MiB; {len(data_files)} files, "
          f"{data_bytes / 1e6:.1f} MB; DuckDB check {fr['duckdb_check']}")
    print(f"cdc: {n_changes:,} changes in {a.txns} transactions: mariadb-binlog "
          f"{med(recs['recv']):.2f} s, ferry {med(recs['cdc']):.2f} s: ferry/mariadb-binlog "
          f"{c['ratio_ferry_to_mariadb_binlog']:.2f}; peak RSS {max(recs['cdc_rss']) / 1024:.0f} MiB; "
          f"mariadb-binlog -v (rows decoded) {med(recs['recv_decoded']):.2f} s: ferry/that "
          f"{c['ratio_ferry_to_mariadb_binlog_decoded']:.2f}")
    print(f"  ferry's threads (CPU s, median): the log's reader (reads, decodes and folds the "
          f"changes) {med(recs['cdc_source_cpu']):.2f}, the sink (Parquet, commits) "
          f"{med(recs['cdc_sink_cpu']):.2f}")
    print(f"  DuckDB writing {n_changes:,} rows of the table as Parquet (one thread, zstd): "
          f"{med(recs['duckdb_parquet']):.2f} s; the 0.8 target leaves ferry "
          f"{c['target_budget_seconds']:.2f} s on {os.cpu_count()} cores for reading, decoding, "
          f"folding and writing them")
    print(f"one transaction of {a.changes:,} changes: mariadb-binlog {med(recs['big_recv']):.2f} s, "
          f"ferry {med(recs['big']):.2f} s: ferry/mariadb-binlog "
          f"{b['ratio_ferry_to_mariadb_binlog']:.2f}; peak RSS {max(recs['big_rss']) / 1024:.0f} MiB")
    sp = result["one_transaction_spilling"]
    print(f"one transaction, spilling past 64 MiB: ferry {med(recs['spill']):.2f} s, peak RSS "
          f"{max(recs['spill_rss']) / 1024:.0f} MiB: in memory / spilling "
          f"{sp['ratio_spilling_to_in_memory']:.2f}; many transactions / one "
          f"{sp['ratio_one_transaction_to_many']:.2f}")
    print(f"CPU seconds (user + system, median): full refresh ferry {med(recs['full_cpu']):.2f}, "
          f"mariadb client {med(recs['select_cpu']):.2f}; cdc ferry {med(recs['cdc_cpu']):.2f}, "
          f"mariadb-binlog {med(recs['recv_cpu']):.2f}; one transaction ferry "
          f"{med(recs['big_cpu']):.2f}, mariadb-binlog {med(recs['big_recv_cpu']):.2f}")
    print(f"results: {a.json}")


if __name__ == "__main__":
    main()
