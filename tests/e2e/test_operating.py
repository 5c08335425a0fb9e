"""Running ferry as an operator does: two syncs of one pipeline at once (an overlapping cron run),
a source that is not there on the first connection, a stop request while ferry waits to retry a
lost server, `ferry --version`. Real processes and a real PostgreSQL server; nothing mocked."""
import fcntl
import json
import os
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import termios
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferrytest  # noqa: E402
import pgserver  # noqa: E402

SQLITE_PIPELINE = """
name: nightly
source:
  type: sqlite
  path: ./source.db
  mode: cdc
destination: {type: iceberg, warehouse: ./warehouse, namespace: lake}
state: ./state.json
"""

SERVER = None


def setUpModule():
    global SERVER
    SERVER = pgserver.start_for_module(lambda s: s.psql("CREATE DATABASE shop"))


def tearDownModule():
    if SERVER:
        SERVER.stop()


class StderrLines:
    """A process's stderr read on a thread, so a test can wait for a line while it runs."""

    def __init__(self, proc):
        self.lines = []
        self.cond = threading.Condition()
        self.t = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self.t.start()

    def _read(self, proc):
        for line in proc.stderr:
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()

    def wait_for(self, text, timeout):
        deadline = time.time() + timeout
        with self.cond:
            while not any(text in line for line in self.lines):
                left = deadline - time.time()
                if left <= 0:
                    return False
                self.cond.wait(left)
            return True

    def text(self):
        self.t.join(timeout=30)
        return "".join(self.lines)

    def close(self, proc):
        self.t.join(timeout=30)
        proc.stderr.close()


class OperatingTest(ferrytest.FerryTestCase):
    def make_sqlite_source(self):
        con = self.source()
        con.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
        con.executemany("INSERT INTO items VALUES (?, ?)", [(i, f"item {i}") for i in range(500)])
        con.commit()
        con.close()

    def follow(self, pipeline):
        """A sync that follows its source until stopped, with its stderr read as it comes."""
        proc = subprocess.Popen([ferrytest.FERRY, "sync", "-c", pipeline, "--interval", "1"],
                                cwd=self.dir, env=dict(os.environ, **getattr(self, "env", {})),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        return proc, StderrLines(proc)

    def wait_for_cdc_state(self, timeout=120):
        """Until the state file records a change position or a published backfill."""
        path = os.path.join(self.dir, "state.json")
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with open(path) as f:
                    streams = json.load(f).get("streams", [])
                if any(e.get("state", {}).get("mode") == "cdc" or e.get("state", {}).get("published")
                       for e in streams):
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.2)
        self.fail(f"the sync recorded no change position or published load in {timeout} s")

    def test_a_second_sync_of_a_running_pipeline_is_refused_and_a_killed_one_blocks_nothing(self):
        self.write_pipeline(SQLITE_PIPELINE)
        self.make_sqlite_source()
        first, err = self.follow(self.pipeline)
        try:
            self.wait_for_cdc_state()
            second = self.ferry("sync", "-c", self.pipeline, "--once", check=False)
            self.assertNotEqual(second.returncode, 0, second.stderr)
            self.assertIn(f"another sync of pipeline 'nightly' is running (pid {first.pid} on ",
                          second.stderr)
            self.assertIn("stop it (SIGTERM)", second.stderr)
            # The refused sync changed nothing: the first one still runs and still applies.
            self.assertIsNone(first.poll())
            con = self.source()
            con.execute("INSERT INTO items VALUES (9001, 'after the refusal')")
            con.commit()
            con.close()
            deadline = time.time() + 60
            while time.time() < deadline and self.source().execute(
                    'SELECT count(*) FROM "_ferry_cdc_items"').fetchone()[0] > 0:
                time.sleep(0.3)
        finally:
            first.send_signal(signal.SIGTERM)
            first.wait(timeout=60)
        self.assertEqual(first.returncode, 0, err.text())
        err.close(first)
        # Once it ended, the next sync runs.
        self.ferry("sync", "-c", self.pipeline, "--once")
        self.assert_table_equals_source("lake", "items")

        # A sync killed outright (SIGKILL: no clean-up at all) leaves no lock behind.
        killed, killed_err = self.follow(self.pipeline)
        time.sleep(1.5)
        killed.kill()
        killed.wait(timeout=30)
        killed_err.close(killed)
        again = self.ferry("sync", "-c", self.pipeline, "--once", check=False)
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertNotIn("another sync", again.stderr)

    def test_a_source_never_reached_fails_within_a_few_attempts_with_its_hint(self):
        # Nothing listens on this port; checkpoint.tolerable_failures keeps its default (10),
        # which would mean minutes of waiting if the first connection were retried like a lost
        # one.
        self.write_pipeline(f"""
name: unreachable
source:
  type: postgres
  dsn: "host=127.0.0.1 port={pgserver.free_port()} dbname=shop user=ferry"
  streams: [{{name: orders}}]
destination: {{type: iceberg, warehouse: ./warehouse}}
state: ./state.json
""")
        p = self.ferry("sync", "-c", self.pipeline, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertLessEqual(p.stderr.count("retrying in"), 2, p.stderr)
        self.assertIn("giving up after 3 attempts: this run never reached", p.stderr)
        last = p.stderr.strip().splitlines()[-1]
        self.assertIn("ferry: error: cannot connect to PostgreSQL", p.stderr)
        self.assertIn("check host and port in source.dsn", p.stderr.split("giving up")[-1], last)

    def test_a_stop_while_waiting_to_retry_a_lost_server_ends_at_once_with_exit_0(self):
        SERVER.psql("DROP TABLE IF EXISTS orders; CREATE TABLE orders (id bigint PRIMARY KEY, "
                    "v text); INSERT INTO orders SELECT i, 'v' || i FROM generate_series(1, 100) i",
                    db="shop")
        self.write_pipeline(f"""
name: follow
source:
  type: postgres
  dsn: "{SERVER.dsn('shop')}"
  streams: [{{name: orders, mode: cdc}}]
destination: {{type: iceberg, warehouse: ./warehouse, namespace: shop}}
state: ./state.json
""")
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
        proc, err = self.follow(self.pipeline)
        stopped = False
        try:
            self.wait_for_cdc_state()
            # The server goes away while ferry follows it: a lost connection, retried.
            pg_ctl = os.path.join(SERVER.bindir, "pg_ctl")
            SERVER._run([pg_ctl, "-D", SERVER.data, "-m", "immediate", "-w", "stop"])
            stopped = True
            self.assertTrue(err.wait_for("retrying in", 120), err.lines)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
            waited = time.monotonic() - t0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if stopped:
                log = os.path.join(SERVER.dir, "server.log")
                SERVER._run([os.path.join(SERVER.bindir, "pg_ctl"), "-D", SERVER.data, "-l", log,
                             "-w", "-t", "30", "start"])
                with open(os.path.join(SERVER.data, "postmaster.pid")) as f:
                    SERVER.pid = int(f.readline().strip())
        text = err.text()
        err.close(proc)
        self.assertEqual(proc.returncode, 0, text)
        self.assertIn("stopped on request", text)
        self.assertNotIn("ferry: error:", text)
        # It did not sit out the rest of its backoff (up to 30 s) before ending.
        self.assertLess(waited, 10, text)
        # The next sync goes on from what was committed.
        SERVER.psql("INSERT INTO orders VALUES (101, 'after the restart')", db="shop")
        self.ferry("sync", "-c", self.pipeline, "--once", env=self.env)

    def test_a_warehouse_folder_the_user_may_not_write_is_named_as_a_permission_problem(self):
        self.write_pipeline(SQLITE_PIPELINE.replace("./warehouse", "./locked"))
        self.make_sqlite_source()
        locked = os.path.join(self.dir, "locked")
        os.mkdir(locked)
        if os.geteuid() == 0:
            # root may write anywhere: run ferry as the PostgreSQL server's user, who may read the
            # test folder but not write into the warehouse folder root owns.
            os.chmod(self.dir, 0o755)
            os.chmod(os.path.join(self.dir, "source.db"), 0o644)
            os.chmod(locked, 0o755)
            user = "postgres"
            # A copy of the binary that user can run wherever the build folder is.
            binary = os.path.join(self.dir, "ferry")
            shutil.copy2(ferrytest.FERRY, binary)
            os.chmod(binary, 0o755)
            argv = ["runuser", "-u", user, "--", binary]
        else:
            os.chmod(locked, 0o555)
            user = None
            argv = [ferrytest.FERRY]
        try:
            p = subprocess.run(argv + ["check", "-c", self.pipeline], cwd=self.dir,
                               capture_output=True, text=True, timeout=120)
        finally:
            os.chmod(locked, 0o755)
        self.assertNotEqual(p.returncode, 0, p.stdout)
        self.assertIn(f"may not create files in the folder '{locked}'", p.stderr)
        self.assertIn("make the folder writable for that user", p.stderr)
        if user:
            self.assertIn(f"user {user} (uid ", p.stderr)
        self.assertNotIn("unable to open database file", p.stderr)

    def test_json_logs_are_one_object_per_line_and_text_logs_carry_the_date(self):
        self.write_pipeline(SQLITE_PIPELINE.replace("mode: cdc", "mode: full_refresh"))
        self.make_sqlite_source()
        when = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"
        p = self.ferry("--log-format", "json", "sync", "-c", self.pipeline)
        lines = p.stderr.splitlines()
        self.assertTrue(lines)
        for line in lines:
            entry = json.loads(line)  # every line is one JSON object
            self.assertRegex(entry["time"], when)
            self.assertIn(entry["level"], ("debug", "info", "warn", "error"))
            self.assertEqual(entry["pipeline"], "nightly")
            self.assertIsInstance(entry["message"], str)
        self.assertTrue(any("committed" in json.loads(l)["message"] for l in lines), p.stderr)
        # The command's own last words are JSON too.
        bad = self.ferry("--log-format=json", "sync", "-c", self.pipeline, env={
            "FERRY_FAULT": "no.such.point"}, check=False)
        self.assertNotEqual(bad.returncode, 0)
        for line in bad.stderr.splitlines():
            self.assertEqual(json.loads(line)["level"], "error", bad.stderr)
        # Text lines start with the UTC date and time.
        p = self.ferry("sync", "-c", self.pipeline)
        for line in p.stderr.splitlines():
            self.assertRegex(line.split(" ", 1)[0], when, line)

    def big_load(self):
        self.write_pipeline(SQLITE_PIPELINE.replace("mode: cdc", "mode: full_refresh\n  chunk_rows: 20000"))
        con = self.source()
        con.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, note TEXT)")
        con.executemany("INSERT INTO items VALUES (?, ?, ?)",
                        ((i, f"item {i}", "n" * (i % 50)) for i in range(1, 600001)))
        con.commit()
        con.close()

    def test_a_long_load_shows_a_live_line_on_a_terminal_and_progress_lines_when_piped(self):
        self.big_load()
        # On a terminal: a status line redrawn in place (carriage return, erase line), which log
        # lines scroll above.
        master, slave = os.openpty()
        # A terminal 200 columns wide: the line is cut to the terminal's width.
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        proc = subprocess.Popen([ferrytest.FERRY, "sync", "-c", self.pipeline], cwd=self.dir,
                                stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal closed: the process ended
                break
            if not chunk:
                break
            seen += chunk
        os.close(master)
        self.assertEqual(proc.wait(timeout=600), 0, seen.decode(errors="replace"))
        text = seen.decode(errors="replace")
        self.assertIn("\r\x1b[K", text)
        # What stands on the line after each redraw (log lines end before it).
        live = [part.split("\n")[-1] for part in text.split("\r\x1b[K")]
        live = [line for line in live if "rows/s" in line]
        self.assertTrue(live, text[-3000:])
        self.assertRegex(live[-1], r"items: \d+ of about \d+ rows \(\d+%\)")
        self.assertIn("chunks committed", live[-1])
        # The line is gone at the end: the last thing on the terminal is a log line or nothing.
        self.assertFalse(text.rstrip("\r\n").endswith(live[-1].rstrip("\r\n")), text[-500:])
        self.assert_table_equals_source("lake", "items")

        # Piped: no terminal codes, a progress line at the asked pace instead.
        os.unlink(os.path.join(self.dir, "state.json"))
        p = self.ferry("sync", "-c", self.pipeline, "--progress", "1")
        self.assertNotIn("\x1b", p.stderr)
        self.assertNotIn("\r", p.stderr)
        progress = [l for l in p.stderr.splitlines() if " progress: items: " in l]
        self.assertTrue(progress, p.stderr)
        self.assertRegex(progress[0], r"items: \d+ of about \d+ rows \(\d+%\).*rows/s, \d+ of "
                                      r"\d+ chunks committed")
        quiet = self.ferry("sync", "-c", self.pipeline, "--progress", "0")
        self.assertNotIn("progress:", quiet.stderr)

    def test_version_flag_answers_like_the_version_command(self):
        by_command = self.ferry("version").stdout
        self.assertRegex(by_command, r"^ferry \d+\.\d+\.\d+\n$")
        self.assertEqual(self.ferry("--version").stdout, by_command)


if __name__ == "__main__":
    unittest.main()
