"""The measurements of bench/rest_catalog.sh (run that script: it builds ferry in Release first).

PostgreSQL CDC into Iceberg, the same changes applied by `ferry sync --once` of two cdc_only
pipelines, each with its own slot: `sql` into a local warehouse with the embedded SQLite catalog,
`rest` into another local warehouse through `ferry catalog serve` (one server for the whole run,
127.0.0.1, a free port, stopped by PID at the end). Interleaved in each run, in alternating order.
Reported: wall time, ferry's CPU (user + system) and peak RSS, the server's CPU for the REST sync
(/proc/<pid>/stat before and after), and SQL time / REST time. `ferry verify` checks both tables
against the source at the end.

Then the server's load rate: --loads `GET /v1/{prefix}/namespaces/bench/tables/t` from --clients
threads, each with its own http.client connection (kept alive when the server allows it), bounded
by --load-seconds; the same for `GET /v1/config` as the floor."""
import datetime
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.join(BENCH, "..", "tests", "lib"))
import pgserver  # noqa: E402
from postgres_bench import TABLE, bench_server, measure_cpu, parse_args, write_result  # noqa: E402

NAMESPACE = "bench"


def proc_cpu(pid):
    """CPU seconds (user + system) of a process so far, all its threads, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_peak_rss_kb(pid):
    """The process's peak resident set size (VmHWM) in kB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


class CatalogServer:
    """`ferry catalog serve --warehouse W --listen 127.0.0.1:0`, its log (-v: one line per request)
    in a file; stopped by PID (SIGTERM, then SIGKILL after 30 s)."""

    def __init__(self, ferry, warehouse, log_path, env):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [ferry, "-v", "catalog", "serve", "--warehouse", warehouse, "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)
        self.pid = self.proc.pid
        self.url = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = re.search(r"on (http://(127\.0\.0\.1):(\d+))\s*$", line)
            if m:
                self.url, self.host, self.port = m.group(1), m.group(2), int(m.group(3))
                break
        if self.url is None:
            self.stop()
            with open(log_path) as f:
                sys.exit(f"ferry catalog serve did not start:\n{f.read()[-3000:]}")

    def requests_since(self, offset):
        """The requests the log names after byte `offset`: ({"GET /v1/config": [ms, ...], ...},
        the new offset). Path segments after `tables/` and `namespaces/` are kept."""
        self.log.flush()
        out = {}
        with open(self.log_path, "rb") as f:
            f.seek(offset)
            text = f.read()
            offset += len(text)
        for m in re.finditer(rb"catalog server: (\S+) (\S+) (\d+) (\d+)ms", text):
            key = f"{m.group(1).decode()} {m.group(2).decode()} {m.group(3).decode()}"
            out.setdefault(key, []).append(int(m.group(4)))
        return out, offset

    def log_size(self):
        self.log.flush()
        return os.path.getsize(self.log_path)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.log.close()


def load_rate(host, port, path, total, clients, seconds):
    """`total` GET requests of `path` from `clients` threads, each with its own HTTPConnection
    (http.client reconnects by itself when the server closes a connection), until all are made or
    `seconds` have passed. Returns the figures: requests answered 200, loads/s, latency median and
    p99 (ms), connections opened, answer bytes, errors."""
    lock = threading.Lock()
    state = {"issued": 0, "errors": 0, "connections": 0, "bytes": 0, "error": None}
    latencies = [[] for _ in range(clients)]
    deadline = time.monotonic() + seconds

    def worker(lat):
        conn = http.client.HTTPConnection(host, port, timeout=30)
        try:
            while True:
                with lock:
                    if state["issued"] >= total or time.monotonic() > deadline:
                        return
                    state["issued"] += 1
                opened = conn.sock is None
                t0 = time.perf_counter()
                try:
                    conn.request("GET", path, headers={"Accept": "application/json"})
                    r = conn.getresponse()
                    body = r.read()
                except (OSError, http.client.HTTPException) as e:
                    conn.close()
                    with lock:
                        state["errors"] += 1
                        state["error"] = repr(e)
                    continue
                t1 = time.perf_counter()
                with lock:
                    state["connections"] += opened
                    if r.status == 200:
                        state["bytes"] = len(body)
                    else:
                        state["errors"] += 1
                        state["error"] = f"HTTP {r.status}: {body[:300]!r}"
                if r.status == 200:
                    lat.append(t1 - t0)
        finally:
            conn.close()

    threads = [threading.Thread(target=worker, args=(latencies[i],)) for i in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    lat = sorted(x for per in latencies for x in per)
    n = len(lat)
    return {
        "requests": n, "errors": state["errors"], "first_error": state["error"],
        "seconds": round(elapsed, 3), "per_s": round(n / elapsed, 1) if elapsed > 0 else 0,
        "latency_median_ms": round(statistics.median(lat) * 1000, 2) if n else None,
        "latency_p99_ms": round(lat[min(n - 1, int(n * 0.99))] * 1000, 2) if n else None,
        "connections": state["connections"], "answer_bytes": state["bytes"],
        "stopped_by_time": state["issued"] < total,
    }


def measured_load(server, path, a):
    """load_rate with the server's and this process's (the clients') CPU seconds around it."""
    load_rate(server.host, server.port, path, a.clients * 5, a.clients, 30)  # warm-up
    s0, c0 = proc_cpu(server.pid), time.process_time()
    r = load_rate(server.host, server.port, path, a.loads, a.clients, a.load_seconds)
    r["server_cpu_seconds"] = round(proc_cpu(server.pid) - s0, 2)
    r["client_cpu_seconds"] = round(time.process_time() - c0, 2)
    return r


def get_json(server, path):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        body = r.read()
        if r.status != 200:
            sys.exit(f"GET {path}: HTTP {r.status}: {body[:500]!r}")
        return json.loads(body)
    finally:
        conn.close()


def verify(ferry, d, env):
    """`ferry verify --json` of the pipeline in folder d: (exit code, its figures for table t)."""
    p = subprocess.run([ferry, "verify", "-c", "pipeline.yaml", "--json"], cwd=d, env=env,
                       capture_output=True, text=True)
    try:
        entry = json.loads(p.stdout)[0]
    except (ValueError, IndexError):
        sys.exit(f"ferry verify in {d} printed no table (exit {p.returncode}):\n"
                 f"{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    keep = ("matches", "source_rows", "destination_rows", "missing", "extra", "different",
            "notes", "error")
    return p.returncode, {k: entry.get(k) for k in keep}


def summary(ms):
    """Request counts and total milliseconds per kind, with the table names replaced."""
    out = {}
    for key, values in ms.items():
        method, path, status = key.split(" ")
        path = re.sub(r"/namespaces/[^/]+/tables/[^/]+", "/namespaces/NS/tables/T", path)
        path = re.sub(r"/namespaces/[^/]+$", "/namespaces/NS", path)
        k = f"{method} {path} {status}"
        o = out.setdefault(k, {"requests": 0, "total_ms": 0})
        o["requests"] += len(values)
        o["total_ms"] += sum(values)
    return out


def main():
    def extra(ap):
        ap.add_argument("--loads", type=int, default=5000)
        ap.add_argument("--clients", type=int, default=4)
        ap.add_argument("--load-seconds", type=float, default=120)

    a = parse_args("rest_catalog", repeat=3, rows=1000000, changes=1000000, extra=extra)
    # SIGTERM ends the run through the `finally`s: the catalog server and PostgreSQL are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))
    with bench_server("ferry-bench-rest.", a.keep) as (server, work, env):
        print(f"# generating {a.rows:,} rows", file=sys.stderr)
        server.psql(TABLE.format(rows=a.rows), db="bench")
        served = os.path.join(work, "rest", "warehouse")
        os.makedirs(served)
        catalog = CatalogServer(a.ferry, served, os.path.join(work, "catalog-serve.log"), env)
        try:
            print(f"# ferry catalog serve (pid {catalog.pid}) on {catalog.url}", file=sys.stderr)

            def pipeline(name, destination):
                d = os.path.join(work, name)
                os.makedirs(d, exist_ok=True)
                with open(os.path.join(d, "pipeline.yaml"), "w") as f:
                    f.write(f"""name: {name}
source:
  type: postgres
  dsn: "{server.dsn('bench')}"
  streams:
    - name: t
      mode: cdc_only
destination:
{destination}
state: ./state.json
""")
                return d

            sql = pipeline("sql", f"  type: iceberg\n  warehouse: ./warehouse\n"
                                  f"  namespace: {NAMESPACE}\n  compression: zstd")
            rest = pipeline("rest", f"  type: iceberg\n  catalog: rest+{catalog.url}\n"
                                    f"  warehouse: {served}\n  namespace: {NAMESPACE}\n"
                                    f"  compression: zstd")
            # The first syncs create each pipeline's slot (and its empty table): not timed.
            for d in (sql, rest):
                measure_cpu([a.ferry, "sync", "--once", "-c", "pipeline.yaml"], cwd=d, env=env)

            per_txn = max(1, a.changes // a.txns)
            changes = a.txns * per_txn
            recs = {k: [] for k in ("sql", "sql_cpu", "sql_rss", "rest", "rest_cpu", "rest_rss",
                                    "server_cpu", "order")}
            requests = []
            for rep in range(a.repeat):
                print(f"# run {rep + 1}: {changes:,} updates in {a.txns} transactions",
                      file=sys.stderr)
                server.psql("".join(
                    f"UPDATE t SET qty = qty + 1, note = note || '' WHERE id > {k * per_txn} AND "
                    f"id <= {(k + 1) * per_txn};\n" for k in range(a.txns)), db="bench")
                order = ("sql", "rest") if rep % 2 == 0 else ("rest", "sql")
                recs["order"].append("/".join(order))
                for which in order:
                    if which == "sql":
                        s, rss, cpu = measure_cpu(
                            [a.ferry, "sync", "--once", "-c", "pipeline.yaml"], cwd=sql, env=env)
                    else:
                        offset = catalog.log_size()
                        before = proc_cpu(catalog.pid)
                        s, rss, cpu = measure_cpu(
                            [a.ferry, "sync", "--once", "-c", "pipeline.yaml"], cwd=rest, env=env)
                        recs["server_cpu"].append(round(proc_cpu(catalog.pid) - before, 3))
                        requests.append(summary(catalog.requests_since(offset)[0]))
                    recs[which].append(round(s, 3))
                    recs[f"{which}_cpu"].append(round(cpu, 2))
                    recs[f"{which}_rss"].append(rss)
                print(f"# run {rep + 1} ({order[0]} first): "
                      f"SQL catalog {recs['sql'][-1]:.2f} s ({recs['sql_cpu'][-1]:.2f} CPU s), "
                      f"REST {recs['rest'][-1]:.2f} s ({recs['rest_cpu'][-1]:.2f} CPU s, server "
                      f"{recs['server_cpu'][-1]:.2f} CPU s, "
                      f"{sum(v['requests'] for v in requests[-1].values())} requests)",
                      file=sys.stderr)

            # Both tables hold the source's rows, as the source has them now.
            checks = {}
            for name, d in (("sql", sql), ("rest", rest)):
                rc, entry = verify(a.ferry, d, env)
                checks[name] = {"exit": rc, "verify": entry}
            same = all(checks[n]["verify"].get(k) == checks["sql"]["verify"].get(k)
                       for n in ("rest",) for k in ("source_rows", "destination_rows", "missing",
                                                    "extra", "different"))
            consistent = all(c["verify"]["error"] is None and c["verify"]["extra"] == 0 and
                             c["verify"]["different"] == 0 for c in checks.values())

            # The server's load rate, the table as the runs left it.
            config = get_json(catalog, "/v1/config")
            prefix = config.get("overrides", {}).get("prefix", "")
            table_path = (f"/v1/{prefix}/namespaces/{NAMESPACE}/tables/t" if prefix
                          else f"/v1/namespaces/{NAMESPACE}/tables/t")
            snapshots = len(get_json(catalog, table_path)["metadata"].get("snapshots", []))
            print(f"# load rate: {a.loads:,} GET {table_path} from {a.clients} clients",
                  file=sys.stderr)
            loads = measured_load(catalog, table_path, a)
            print(f"# load rate: {a.loads:,} GET /v1/config from {a.clients} clients",
                  file=sys.stderr)
            floor = measured_load(catalog, "/v1/config", a)
            server_rss = proc_peak_rss_kb(catalog.pid)
        finally:
            catalog.stop()

        med = statistics.median
        ratio = med(recs["sql"]) / med(recs["rest"])
        result = {
            "benchmark": "rest_catalog",
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "machine": {"cpu": a.cpu, "cores": os.cpu_count()},
            "server": server.psql("SHOW server_version").strip(), "rows": a.rows,
            "repeat": a.repeat,
            "cdc": {
                "changes": changes, "transactions": a.txns, "order": recs["order"],
                "sql_seconds": recs["sql"], "sql_cpu_seconds": recs["sql_cpu"],
                "sql_peak_rss_kb": recs["sql_rss"],
                "rest_seconds": recs["rest"], "rest_cpu_seconds": recs["rest_cpu"],
                "rest_peak_rss_kb": recs["rest_rss"],
                "server_cpu_seconds": recs["server_cpu"],
                "server_requests_per_run": requests,
                "sql_changes_per_s": round(changes / med(recs["sql"])),
                "rest_changes_per_s": round(changes / med(recs["rest"])),
                "ratio_sql_to_rest": round(ratio, 3),
                "ratio_per_run": [round(s / r, 3) for s, r in zip(recs["sql"], recs["rest"])],
                "verify": checks, "same_rows": same and consistent,
            },
            "loads": {"path": table_path, "clients": a.clients, "snapshots": snapshots,
                      "table": loads, "config": floor},
            "server_peak_rss_kb": server_rss,
        }
        write_result(a.json, result)
        c = result["cdc"]
        print(f"PostgreSQL {result['server']}, {a.rows:,} rows; {changes:,} changes in {a.txns} "
              f"transactions; median of {a.repeat}; {a.cpu}, {os.cpu_count()} cores")
        print(f"cdc: SQL catalog {med(recs['sql']):.2f} s ({c['sql_changes_per_s']:,}/s, "
              f"{med(recs['sql_cpu']):.2f} CPU s, peak RSS {max(recs['sql_rss']) / 1024:.0f} MiB), "
              f"REST catalog {med(recs['rest']):.2f} s ({c['rest_changes_per_s']:,}/s, "
              f"{med(recs['rest_cpu']):.2f} CPU s, peak RSS {max(recs['rest_rss']) / 1024:.0f} MiB; "
              f"server {med(recs['server_cpu']):.2f} CPU s): SQL/REST {ratio:.2f} (target >= 0.9)")
        for name in ("sql", "rest"):
            v = checks[name]["verify"]
            print(f"verify {name}: exit {checks[name]['exit']}, source {v.get('source_rows')} rows, "
                  f"destination {v.get('destination_rows')}, missing {v.get('missing')}, extra "
                  f"{v.get('extra')}, different {v.get('different')}")
        print(f"both tables hold the same rows: {'yes' if c['same_rows'] else 'NO'}")
        for label, r in (("table loads", loads), ("GET /v1/config", floor)):
            print(f"{label}: {r['requests']:,} in {r['seconds']:.2f} s from {a.clients} clients = "
                  f"{r['per_s']:,.0f}/s, median {r['latency_median_ms']} ms, p99 "
                  f"{r['latency_p99_ms']} ms; {r['connections']:,} connections, "
                  f"{r['answer_bytes']:,} bytes each; server {r['server_cpu_seconds']:.2f} CPU s, "
                  f"clients {r['client_cpu_seconds']:.2f} CPU s; errors {r['errors']}")
        print(f"table loaded: {snapshots} snapshots; server peak RSS {server_rss / 1024:.0f} MiB")
        print(f"results: {a.json}")
        if not c["same_rows"]:
            sys.exit("the two destinations differ (see verify above)")


if __name__ == "__main__":
    main()
