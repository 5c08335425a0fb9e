"""The measurements of bench/pg_to_pg.sh (run that script: it builds ferry in Release first)."""
import datetime
import json
import os
import statistics
import sys
import threading
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(BENCH, "..", "tests", "lib"))
import pgserver  # noqa: E402
from postgres_bench import TABLE, bench_server, measure, parse_args, write_result  # noqa: E402

# The destination table of native replication: the subscription needs it to exist.
TARGET = """
CREATE TABLE t (id bigint PRIMARY KEY, qty int NOT NULL, status text NOT NULL,
                amount numeric(12,2) NOT NULL, created_at timestamptz NOT NULL,
                note text NOT NULL, flag boolean NOT NULL);
"""

SAME = ("SELECT md5(string_agg(t::text, ',' ORDER BY id)) FROM "
        "(SELECT id, qty, status, amount, created_at, note, flag FROM {t}) t")


class CpuSampler:
    """CPU seconds used by the processes of this machine while it runs, summed by role: the
    server's walsenders, native's apply worker, the destination's backends (ferry's
    connections), ferry itself, other server processes. Sampled from /proc every 0.1 s, so a
    process that ends loses at most its last 0.1 s."""

    def __init__(self, ferry, dest_db):
        self.ferry, self.dest_db = ferry, dest_db
        self.tck = os.sysconf("SC_CLK_TCK")

    def role(self, cmd):
        if cmd.startswith(self.ferry):
            return "ferry"
        if not cmd.startswith("postgres:"):
            return None
        if "walsender" in cmd:
            return "walsender"
        if "logical replication" in cmd:
            return "apply worker"
        if f" {self.dest_db} " in cmd:
            return "destination backend"
        return "other server"

    def snapshot(self):
        out = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            role = self.role(cmd)
            if role:
                out[pid] = (role, (int(fields[11]) + int(fields[12])) / self.tck)
        return out

    def __enter__(self):
        self.seconds, self.last, self.stop = {}, self.snapshot(), threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()
        return self

    def run(self):
        while not self.stop.wait(0.1):
            now = self.snapshot()
            for pid, (role, cpu) in now.items():
                before = self.last.get(pid, (role, 0.0))[1]
                self.seconds[role] = self.seconds.get(role, 0.0) + max(0.0, cpu - before)
            self.last = now

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def cpu_text(seconds):
    roles = [f"{role} {v:.1f} s" for role, v in sorted(seconds.items(), key=lambda kv: -kv[1])
             if v >= 0.05]
    parts = ([", ".join(roles)] if roles else []) + [f"total {sum(seconds.values()):.1f} s"]
    return "; ".join(parts)


def median_cpu(samples):
    roles = sorted({r for s in samples for r in s})
    return {r: round(statistics.median(s.get(r, 0.0) for s in samples), 2) for r in roles}


def wait_until(check, what, timeout=3600):
    t0 = time.monotonic()
    while not check():
        if time.monotonic() - t0 > timeout:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(0.05)


def main():
    a = parse_args("pg_to_pg", repeat=4)
    with bench_server("ferry-bench-p2p.", a.keep) as (server, work, env):
        print(f"# generating {a.rows:,} rows", file=sys.stderr)
        server.psql(TABLE.format(rows=a.rows), db="bench")
        # `done` gets a row after each round of changes: once the subscriber has it, every
        # change before it is applied (a subscriber applies transactions in commit order).
        server.psql("CREATE TABLE done (round int PRIMARY KEY)", db="bench")
        server.psql("CREATE PUBLICATION native FOR TABLE t, done", db="bench")
        per_txn = a.changes // a.txns
        changes = per_txn * a.txns
        recs = {k: [] for k in ["native_copy", "ferry_copy", "ferry_copy_rss", "native_apply",
                                "ferry_apply", "ferry_apply_rss", "native_apply_cpu",
                                "ferry_apply_cpu", "apply_order"]}
        for rep in range(a.repeat):
            nat, fer = f"native_{rep}", f"ferry_{rep}"
            for db in (nat, fer):
                server.psql(f"DROP DATABASE IF EXISTS {db}")
                server.psql(f"CREATE DATABASE {db}")
            server.psql(TARGET + "CREATE TABLE done (round int PRIMARY KEY);", db=nat)
            # Native initial copy.
            # On one server the slot is made apart: CREATE SUBSCRIPTION would wait for itself.
            t0 = time.monotonic()
            server.psql(f"SELECT pg_create_logical_replication_slot('sub_{rep}', 'pgoutput')",
                        db="bench")
            conninfo = server.dsn("bench", password_ref=pgserver.SUPERUSER_PASSWORD)
            server.psql(f"CREATE SUBSCRIPTION sub_{rep} CONNECTION '{conninfo}' PUBLICATION "
                        f"native WITH (copy_data = true, create_slot = false, "
                        f"slot_name = 'sub_{rep}')", db=nat)
            wait_until(lambda: server.psql("SELECT count(*) FROM pg_subscription_rel "
                                           "WHERE srsubstate <> 'r'", db=nat).strip() == "0",
                       "the native initial copy")
            recs["native_copy"].append(time.monotonic() - t0)
            # ferry's initial copy.
            d = os.path.join(work, fer)
            os.makedirs(d)
            with open(os.path.join(d, "pipeline.yaml"), "w") as f:
                f.write(f"""name: {fer}
source:
  type: postgres
  dsn: "{server.dsn('bench')}"
  streams:
    - {{name: t, mode: cdc, chunk_rows: 500000}}
destination: {{type: postgres, dsn: "{server.dsn(fer)}", schema: public}}
state: ./state.json
""")
            s, rss = measure([a.ferry, "sync", "--once", "-c", "pipeline.yaml"], cwd=d, env=env)
            recs["ferry_copy"].append(s)
            recs["ferry_copy_rss"].append(rss)
            print(f"# run {rep + 1}: initial copy native {recs['native_copy'][-1]:.2f} s, ferry "
                  f"{s:.2f} s (peak RSS {rss / 1024:.0f} MiB)", file=sys.stderr)
            # Changes while both are stopped.
            server.psql(f"ALTER SUBSCRIPTION sub_{rep} DISABLE", db=nat)
            wait_until(lambda: server.psql(
                f"SELECT count(*) FROM pg_stat_subscription WHERE subname = 'sub_{rep}' "
                "AND pid IS NOT NULL", db=nat).strip() == "0", "the subscription to stop")
            script = "".join(
                f"UPDATE t SET qty = qty + 1, note = note || '' WHERE id > {k * per_txn} AND "
                f"id <= {(k + 1) * per_txn};\n" for k in range(a.txns))
            server.psql(script + f"INSERT INTO done VALUES ({rep});", db="bench")

            def native_apply():
                with CpuSampler(a.ferry, fer) as cpu:
                    server.psql(f"ALTER SUBSCRIPTION sub_{rep} ENABLE", db=nat)
                    # The clock starts when the apply worker runs: the launcher's delay in
                    # starting it (up to wal_retrieve_retry_interval) is not the apply's.
                    wait_until(lambda: server.psql(
                        f"SELECT count(*) FROM pg_stat_subscription WHERE subname = 'sub_{rep}' "
                        "AND pid IS NOT NULL", db=nat).strip() == "1", "the apply worker to start")
                    t0 = time.monotonic()
                    wait_until(lambda: server.psql(f"SELECT count(*) FROM done WHERE round = {rep}",
                                                   db=nat).strip() == "1", "native apply")
                    recs["native_apply"].append(time.monotonic() - t0)
                recs["native_apply_cpu"].append(cpu.seconds)
                # Stopped again, so that its walsender does not decode ferry's apply meanwhile.
                server.psql(f"ALTER SUBSCRIPTION sub_{rep} DISABLE", db=nat)
                wait_until(lambda: server.psql(
                    f"SELECT count(*) FROM pg_stat_subscription WHERE subname = 'sub_{rep}' "
                    "AND pid IS NOT NULL", db=nat).strip() == "0", "the subscription to stop")

            def ferry_apply():
                with CpuSampler(a.ferry, fer) as cpu:
                    s, rss = measure([a.ferry, "sync", "--once", "-c", "pipeline.yaml"], cwd=d,
                                     env=env)
                recs["ferry_apply"].append(s)
                recs["ferry_apply_rss"].append(rss)
                recs["ferry_apply_cpu"].append(cpu.seconds)

            # Whoever applies second also decodes the WAL of the first one's apply (one server,
            # one WAL): the order alternates from run to run.
            order = [native_apply, ferry_apply] if rep % 2 == 0 else [ferry_apply, native_apply]
            for apply in order:
                apply()
            recs["apply_order"].append("native first" if rep % 2 == 0 else "ferry first")
            print(f"# run {rep + 1} ({recs['apply_order'][-1]}): {changes:,} changes: native apply "
                  f"{recs['native_apply'][-1]:.2f} s (CPU {cpu_text(recs['native_apply_cpu'][-1])}), "
                  f"ferry {recs['ferry_apply'][-1]:.2f} s (CPU "
                  f"{cpu_text(recs['ferry_apply_cpu'][-1])}; peak RSS "
                  f"{recs['ferry_apply_rss'][-1] / 1024:.0f} MiB)", file=sys.stderr)
            want = server.psql(SAME.format(t="t"), db="bench").strip()
            for db in (nat, fer):
                got = server.psql(SAME.format(t="t"), db=db).strip()
                if got != want:
                    sys.exit(f"{db} does not equal the source")
            server.psql(f"ALTER SUBSCRIPTION sub_{rep} SET (slot_name = NONE)", db=nat)
            server.psql(f"DROP SUBSCRIPTION sub_{rep}", db=nat)
            wait_until(lambda: server.psql(
                f"SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sub_{rep}' "
                "AND active", db="bench").strip() == "0", "the subscription's slot to be released")
            server.psql(f"SELECT pg_drop_replication_slot('sub_{rep}')", db="bench")
            for db in (nat, fer):
                server.drop_test_database(db)
        med = statistics.median
        result = {
            "benchmark": "pg_to_pg", "date": datetime.datetime.now().astimezone().isoformat(
                timespec="seconds"),
            "machine": {"cpu": a.cpu, "cores": os.cpu_count()},
            "server": server.psql("SHOW server_version").strip(), "rows": a.rows,
            "changes": changes, "transactions": a.txns, "repeat": a.repeat, **recs,
            "copy_ratio_native_to_ferry": round(med(recs["native_copy"]) / med(recs["ferry_copy"]), 3),
            "apply_ratio_native_to_ferry": round(med(recs["native_apply"]) / med(recs["ferry_apply"]), 3),
            "native_apply_cpu_median": median_cpu(recs["native_apply_cpu"]),
            "ferry_apply_cpu_median": median_cpu(recs["ferry_apply_cpu"]),
        }
        write_result(a.json, result)
        print(f"PostgreSQL {result['server']}, {a.rows:,} rows; median of {a.repeat}; {a.cpu}, "
              f"{os.cpu_count()} cores; both destinations equal the source")
        print(f"initial copy: native {med(recs['native_copy']):.2f} s, ferry "
              f"{med(recs['ferry_copy']):.2f} s: ferry is {result['copy_ratio_native_to_ferry']:.2f}x "
              f"native; peak RSS {max(recs['ferry_copy_rss']) / 1024:.0f} MiB")
        print(f"apply of {changes:,} changes in {a.txns} transactions: native "
              f"{med(recs['native_apply']):.2f} s ({changes / med(recs['native_apply']):,.0f}/s), "
              f"ferry {med(recs['ferry_apply']):.2f} s ({changes / med(recs['ferry_apply']):,.0f}/s): "
              f"ferry is {result['apply_ratio_native_to_ferry']:.2f}x native; peak RSS "
              f"{max(recs['ferry_apply_rss']) / 1024:.0f} MiB")
        print(f"CPU seconds during the apply (medians): native {cpu_text(median_cpu(recs['native_apply_cpu']))}")
        print(f"                                        ferry  {cpu_text(median_cpu(recs['ferry_apply_cpu']))}")
        print(f"results: {a.json}")


if __name__ == "__main__":
    main()
