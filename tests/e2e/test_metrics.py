"""Operating a running sync: Prometheus (Debian's, a real scraper started by the test) scrapes
ferry's /metrics while it follows a PostgreSQL source, and the test reads the series back through
Prometheus's HTTP API; promtool lints the exposition; /healthz and /readyz answer as a load
balancer or an orchestrator needs; the alerts: alarms fire, stop and clear on real conditions (a
slot that keeps WAL, a destination table locked by another session); a followed table that stays
quiet while the server is busy lets the slot move on; a heartbeat statement runs on a quiet
server."""
import os
import re
import signal
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ferrytest  # noqa: E402
import pgserver  # noqa: E402
import promserver  # noqa: E402
from test_operating import StderrLines  # noqa: E402

SERVER = None
PROM = None
FERRY_PORT = None

SCHEMA = """
CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, qty bigint);
INSERT INTO items SELECT i, 'item ' || i, i FROM generate_series(1, 3000) i;
CREATE TABLE other (id bigserial PRIMARY KEY, pad text);
CREATE TABLE heartbeat (id int PRIMARY KEY, beats bigint);
INSERT INTO heartbeat VALUES (1, 0);
"""


def setUpModule():
    global SERVER, PROM, FERRY_PORT
    SERVER = pgserver.start_for_module()
    FERRY_PORT = promserver.free_port()
    try:
        PROM = promserver.start_for_module([f"127.0.0.1:{FERRY_PORT}"])
    except BaseException:
        SERVER.stop()
        raise


def tearDownModule():
    if PROM:
        PROM.stop()
    if SERVER:
        SERVER.stop()


def get(path):
    """(status, body) of a GET on ferry's endpoint."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{FERRY_PORT}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return None, str(e)


def value(result):
    """The one value of an instant vector (the test's pipeline has one series per query)."""
    return result[0][1] if len(result) == 1 else None


class MetricsTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
        self.db = SERVER.create_test_database("metrics", self._testMethodName)
        SERVER.psql(SCHEMA, db=self.db)
        self.name = "m_" + self._testMethodName.removeprefix("test_")[:40]
        self.procs = []

    def tearDown(self):
        for p, lines in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            lines.close(p)
            p.stdout.close()
        SERVER.drop_test_database(self.db)
        super().tearDown()

    def configure(self, source_extra="", top="", destination=None):
        dest = destination or "{type: iceberg, warehouse: ./warehouse, namespace: lake}"
        self.write_pipeline(f"""
name: {self.name}
source:
  type: postgres
  dsn: "{SERVER.dsn(self.db)}"
{source_extra}  streams:
    - name: items
      mode: cdc
destination: {dest}
state: ./state.json
{top}""")

    def follow(self, *extra):
        env = dict(os.environ, **self.env)
        env.pop("FERRY_FAULT", None)
        p = subprocess.Popen([ferrytest.FERRY, "sync", "-c", self.pipeline, "--interval", "1",
                              "--metrics", f"127.0.0.1:{FERRY_PORT}", *extra],
                             cwd=self.dir, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        lines = StderrLines(p)
        self.procs.append((p, lines))
        return p, lines

    def stop(self, p, lines):
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=120)
        self.assertEqual(p.returncode, 0, lines.text())

    def series(self, name, **labels):
        sel = ",".join([f'pipeline="{self.name}"'] + [f'{k}="{v}"' for k, v in labels.items()])
        return f"{name}{{{sel}}}"

    def slot_lsn(self, column="confirmed_flush_lsn"):
        return int(SERVER.psql(f"SELECT ({column} - '0/0'::pg_lsn)::bigint FROM "
                               "pg_replication_slots WHERE database = "
                               f"'{self.db}'", db=self.db).strip() or 0)

    def wal_now(self):
        return int(SERVER.psql("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint",
                               db=self.db).strip())

    def test_prometheus_scrapes_a_following_sync(self):
        self.configure()
        p, lines = self.follow()
        committed = self.series("ferry_rows_committed_total", stream="items")
        # The backfill: every row once.
        PROM.wait_for(committed, lambda r: value(r) == 3000)
        planned = value(PROM.query(self.series("ferry_load_chunks_planned", stream="items")))
        done = value(PROM.query(self.series("ferry_load_chunks_committed", stream="items")))
        self.assertGreaterEqual(planned, 1)
        self.assertEqual(done, planned)
        # 500 changes in one transaction: 500 more rows committed, read as many.
        SERVER.psql("UPDATE items SET qty = qty + 1 WHERE id <= 500", db=self.db)
        PROM.wait_for(committed, lambda r: value(r) == 3500)
        read = value(PROM.query(self.series("ferry_rows_read_total", stream="items")))
        self.assertEqual(read, 3500)
        self.assertGreater(value(PROM.query(self.series("ferry_read_bytes_total",
                                                        stream="items"))), 3500 * 8)
        completed = PROM.query(self.series("ferry_checkpoints_total", outcome="completed"))
        self.assertGreaterEqual(value(completed), 2)
        self.assertEqual(value(PROM.query(self.series("ferry_checkpoints_total",
                                                      outcome="failed"))), 0)
        self.assertGreaterEqual(value(PROM.query(self.series("ferry_commit_duration_seconds_count"))),
                                2)
        self.assertGreater(value(PROM.query(self.series("ferry_committed_bytes_total"))), 0)
        # The slot as Prometheus saw it: lag in seconds and bytes, the WAL it keeps.
        lag = PROM.wait_for(self.series("ferry_replication_lag_seconds"), lambda r: len(r) == 1)
        self.assertTrue(0 <= value(lag) < 120, lag)
        PROM.wait_for(self.series("ferry_log_lag_bytes"), lambda r: len(r) == 1)
        PROM.wait_for(self.series("ferry_log_retained_bytes"), lambda r: len(r) == 1)
        self.assertGreater(value(PROM.query("process_resident_memory_bytes")), 10e6)
        # The exposition as promtool reads it, and without the source's password.
        status, text = get("/metrics")
        self.assertEqual(status, 200)
        self.assertNotIn(pgserver.SUPERUSER_PASSWORD, text)
        lint = subprocess.run([promserver.promtool(), "check", "metrics"], input=text,
                              capture_output=True, text=True)
        self.assertEqual(lint.returncode, 0, lint.stdout + lint.stderr)
        # Every ferry series the example alert rules use is one ferry serves.
        with open(os.path.join(ferrytest.ROOT, "examples", "prometheus", "ferry-rules.yml")) as f:
            used = set(re.findall(r"ferry_[a-z_]+", f.read()))
        served = set(re.findall(r"^# TYPE (ferry_[a-z_]+)", text, re.M))
        self.assertEqual(used - served, set())
        self.assertEqual(get("/healthz"), (200, "ok\n"))
        self.assertEqual(get("/readyz"), (200, "ready\n"))
        self.assertEqual(get("/nothing")[0], 404)
        self.stop(p, lines)
        self.assertIn(f"serving /metrics, /healthz and /readyz on 127.0.0.1:{FERRY_PORT}",
                      lines.text())

    def test_readyz_says_why_not_while_the_source_cannot_be_reached(self):
        self.write_pipeline(f"""
name: {self.name}
source:
  type: postgres
  dsn: "host=127.0.0.1 port={promserver.free_port()} dbname=x user=u password=${{PGPASSWORD}}"
  mode: cdc
destination: {{type: iceberg, warehouse: ./warehouse, namespace: lake}}
state: ./state.json
""")
        p, lines = self.follow()
        deadline = time.time() + 30
        seen = None
        while time.time() < deadline and p.poll() is None:
            seen = get("/readyz")
            if seen[0] == 503 and "cannot be reached" in seen[1]:
                break
            time.sleep(0.2)
        self.assertEqual(seen[0], 503, seen)
        self.assertIn("not ready: the source or the destination cannot be reached", seen[1])
        self.assertEqual(get("/healthz")[0], 200)
        self.stop(p, lines)

    def test_a_quiet_followed_table_lets_the_slot_move_on_while_the_server_is_busy(self):
        self.configure()
        p, lines = self.follow()
        PROM.wait_for(self.series("ferry_rows_committed_total", stream="items"),
                      lambda r: value(r) == 3000)
        before = self.slot_lsn()
        # 32 MB of WAL, none of it of a followed table.
        for _ in range(4):
            SERVER.psql("INSERT INTO other (pad) SELECT repeat('x', 1000) FROM "
                        "generate_series(1, 8000)", db=self.db)
        written = self.wal_now()
        self.assertGreater(written - before, 30e6)
        deadline = time.time() + 30
        while self.slot_lsn() < written and time.time() < deadline:
            time.sleep(0.3)
        self.assertGreaterEqual(self.slot_lsn(), written, "the slot did not move past the WAL "
                                "written for tables ferry does not follow")
        PROM.wait_for(self.series("ferry_log_lag_bytes"), lambda r: value(r) is not None and
                      value(r) < 1e6)
        self.stop(p, lines)

    def test_a_heartbeat_statement_runs_on_a_quiet_server(self):
        self.configure(source_extra="  heartbeat_statement: \"UPDATE heartbeat SET beats = "
                       "beats + 1\"\n", top="alerts: {heartbeat_interval: 300ms}\n")
        p, lines = self.follow()
        PROM.wait_for(self.series("ferry_rows_committed_total", stream="items"),
                      lambda r: value(r) == 3000)
        first = int(SERVER.psql("SELECT beats FROM heartbeat", db=self.db))
        lsn = self.slot_lsn()
        time.sleep(3)
        beats = int(SERVER.psql("SELECT beats FROM heartbeat", db=self.db))
        self.assertGreaterEqual(beats - first, 4)
        # The slot moved on with the heartbeat's WAL, though no followed table changed.
        deadline = time.time() + 20
        while self.slot_lsn() <= lsn and time.time() < deadline:
            time.sleep(0.3)
        self.assertGreater(self.slot_lsn(), lsn)
        self.stop(p, lines)

    def test_the_retained_wal_alarm_stops_the_sync_naming_the_fix(self):
        self.configure(top="alerts: {max_retained_wal: 1KB, on_retained_wal: stop, "
                       "check_interval: 200ms}\n")
        p, lines = self.follow()
        deadline = time.time() + 60
        while p.poll() is None and time.time() < deadline:
            SERVER.psql("INSERT INTO other (pad) SELECT repeat('y', 100) FROM "
                        "generate_series(1, 200)", db=self.db)
            time.sleep(0.3)
        p.wait(timeout=60)
        err = lines.text()
        self.assertNotEqual(p.returncode, 0, err)
        self.assertIn("alert retained_wal: the source: replication slot", err)
        self.assertIn("above alerts.max_retained_wal (1024 bytes)", err)
        self.assertIn("and alerts.on_retained_wal is stop: the sync stopped", err)
        self.assertIn("pg_drop_replication_slot('", err)

    def test_stall_and_lag_alarms_fire_while_the_destination_is_locked_and_clear(self):
        SERVER.psql(f"CREATE DATABASE {self.db}_copy")
        self.addCleanup(SERVER.psql, f"DROP DATABASE IF EXISTS {self.db}_copy WITH (FORCE)")
        self.configure(
            destination=f'{{type: postgres, dsn: "{SERVER.dsn(self.db + "_copy")}", '
                        'schema: copied}',
            top="alerts: {stall_after: 2s, max_lag: 3s, check_interval: 200ms}\n")
        p, lines = self.follow()
        PROM.wait_for(self.series("ferry_rows_committed_total", stream="items"),
                      lambda r: value(r) == 3000)
        with SERVER.session(self.db + "_copy") as lock:
            lock.run("BEGIN; LOCK TABLE copied.items IN ACCESS EXCLUSIVE MODE;", "locked")
            # Changes keep coming; none can land while the table is locked.
            deadline = time.time() + 60
            while not lines.wait_for("alert stall:", 0.5):
                SERVER.psql("UPDATE items SET qty = qty + 1 WHERE id % 10 = 0", db=self.db)
                self.assertLess(time.time(), deadline, lines.text())
            PROM.wait_for(self.series("ferry_alert_active", alert="stall"),
                          lambda r: value(r) == 1)
            time.sleep(2)
            lock.finish("COMMIT;")
        # The held changes land, late: the lag alarm fires, the stall clears; then both clear.
        self.assertTrue(lines.wait_for("alert lag:", 60), lines.text())
        self.assertTrue(lines.wait_for("alert stall cleared", 60), lines.text())
        self.assertTrue(lines.wait_for("alert lag cleared", 60), lines.text())
        PROM.wait_for(self.series("ferry_alert_active", alert="stall"), lambda r: value(r) == 0)
        self.stop(p, lines)
        err = lines.text()
        self.assertIn("has not moved for", err)
        self.assertIn("changes reach the destination", err)
        want = SERVER.psql("SELECT sum(qty) FROM items", db=self.db).strip()
        got = SERVER.psql("SELECT sum(qty) FROM copied.items", db=self.db + "_copy").strip()
        self.assertEqual(got, want)


class ExamplesTest(unittest.TestCase):
    def test_the_example_scrape_config_and_alert_rules_are_valid(self):
        folder = os.path.join(ferrytest.ROOT, "examples", "prometheus")
        for what, path in [("config", "prometheus.yml"), ("rules", "ferry-rules.yml")]:
            p = subprocess.run([promserver.promtool(), "check", what, os.path.join(folder, path)],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main()
