"""Crash tests for full refresh into Iceberg: the sync is killed (SIGKILL, as kill -9) at every
named fault point of the protocol, restarted, and the table is then read by independent readers
(icebird, DuckDB) and compared with the source: no duplicate, no missing row, no stale version.
The restart must not re-read chunks that already landed."""
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferrytest  # noqa: E402

PIPELINE = """
name: crash
source:
  type: sqlite
  path: ./source.db
  chunk_rows: 2000
destination: {type: iceberg, warehouse: ./warehouse, namespace: lake}
state: ./state.json
"""

# (fault point, hit): the hit picks a chunk in the middle of the load where it makes sense.
POINTS = [
    ("source.mid_chunk", 3),
    ("sink.data_written", 3),
    ("sink.before_commit", 3),
    ("catalog.after_metadata_write", 3),
    ("sink.after_commit", 3),
    ("state.temp_written", 4),
    ("state.after_write", 4),
    ("sink.before_publish", 1),
    ("sink.after_publish", 1),
]


def make_source(path, n_a=12000, n_b=3000, salt=""):
    con = sqlite3.connect(path)
    con.executescript("""
      DROP TABLE IF EXISTS a; DROP TABLE IF EXISTS b;
      CREATE TABLE a (id INTEGER PRIMARY KEY, v TEXT, r REAL);
      CREATE TABLE b (id INTEGER PRIMARY KEY, w BLOB);
    """)
    con.executemany("INSERT INTO a VALUES (?, ?, ?)",
                    [(i, f"value {i}{salt}", i / 7) for i in range(1, n_a + 1)])
    con.executemany("INSERT INTO b VALUES (?, ?)", [(i, bytes([i % 256]) * 3) for i in range(1, n_b + 1)])
    con.commit()
    con.close()


class FullRefreshCrashTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        self.write_pipeline(PIPELINE)
        make_source(self.db_path)

    def marker(self, table):
        loc = self.catalog_tables().get(("lake", table))
        if loc is None:
            return None
        with open(loc.removeprefix("file://")) as f:
            props = json.load(f).get("properties", {})
        m = props.get("ferry.marker.crash")
        return json.loads(m) if m else None

    def rows_written(self, sync_stdout, stream):
        for line in sync_stdout.splitlines():
            parts = line.split()
            if parts and parts[0] == stream:
                return int(parts[-5])  # rows, files, size (number and unit), seconds
        self.fail(f"no report line for {stream} in:\n{sync_stdout}")

    def crash(self, point, hit):
        p = self.sync(env={"FERRY_FAULT": f"{point}:{hit}"}, check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL,
                         f"{point}:{hit} did not kill the sync (exit {p.returncode})\n{p.stderr}")
        self.assertIn(f"fault point {point} reached", p.stderr)

    def state_run(self, table):
        path = os.path.join(self.dir, "state.json")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            for s in json.load(f)["streams"]:
                if s["stream"] == table:
                    return s["state"]["run"]
        return None

    def finish_and_verify(self):
        # What had landed of the load in flight: the marker, when it belongs to that load.
        committed = {}
        for t in ("a", "b"):
            m = self.marker(t) or {}
            committed[t] = m if m.get("run") == self.state_run(t) else {}
        out = self.sync()
        for t, n in (("a", 12000), ("b", 3000)):
            self.assert_table_equals_source("lake", t)
            m = committed[t]
            before = m.get("rows", 0) if not m.get("published") else n
            # Chunks that had landed were not read again: this run wrote only the rest.
            self.assertEqual(self.rows_written(out.stdout, t) + before, n,
                             f"table {t}: {before} rows had landed before the restart")
        return out

    def test_every_fault_point_first_load(self):
        for point, hit in POINTS:
            with self.subTest(point=point):
                self.reset()
                self.crash(point, hit)
                self.finish_and_verify()

    def test_every_fault_point_reload_keeps_old_contents_visible_until_publish(self):
        for point, hit in POINTS:
            with self.subTest(point=point):
                self.reset()
                self.sync()
                old = os.path.join(self.dir, "old.db")
                shutil.copy(self.db_path, old)
                make_source(self.db_path, n_a=12000, n_b=3000, salt=" v2")
                self.crash(point, hit)
                published = (self.marker("a") or {}).get("published", False)
                if not published:
                    # Readers still see the complete previous load, not a mix.
                    self.db_path, keep = old, self.db_path
                    self.assert_table_equals_source("lake", "a")
                    self.db_path = keep
                self.finish_and_verify()

    def test_repeated_crashes_at_the_same_point(self):
        for _ in range(3):
            self.crash("sink.after_commit", 2)
        out = self.finish_and_verify()
        self.assertIn("resuming run", out.stderr)

    def test_state_command_shows_what_a_restart_will_do_and_changes_nothing(self):
        self.crash("sink.after_commit", 2)
        state_path = os.path.join(self.dir, "state.json")
        with open(state_path) as f:
            before = f.read()
        p = self.ferry("state", "-c", self.pipeline)
        self.assertIn("the marker was ahead of the state", p.stdout)
        streams = json.loads(self.ferry("state", "-c", self.pipeline, "--json").stdout)
        # The second commit (of either stream: they load in parallel) died before its state write.
        behind = [s for s in streams if s["state_behind_marker"]]
        self.assertEqual(len(behind), 1, streams)
        count = lambda ranges: sum(hi - lo for lo, hi in ranges)  # noqa: E731
        self.assertEqual(count(behind[0]["marker"]["committed"]),
                         count(behind[0]["state"]["committed"]) + 1)
        with open(state_path) as f:
            self.assertEqual(f.read(), before)
        self.finish_and_verify()

    def test_random_kills_during_one_long_load(self):
        make_source(self.db_path, n_a=60000, n_b=3000)
        self.write_pipeline(PIPELINE.replace("chunk_rows: 2000", "chunk_rows: 1500"))
        rng = random.Random(7)
        kills = 0
        for _ in range(6):  # bounded: at most six kills, each within a few seconds
            proc = subprocess.Popen([ferrytest.FERRY, "sync", "-c", self.pipeline], cwd=self.dir,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.2, 1.5))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
            proc.wait(timeout=60)
        self.sync()
        self.assert_table_equals_source("lake", "a")
        self.assert_table_equals_source("lake", "b")
        self.assertGreater(kills, 0, "no sync was killed: lengthen the load")

    def test_graceful_stop_then_resume(self):
        make_source(self.db_path, n_a=60000, n_b=3000)
        proc = subprocess.Popen([ferrytest.FERRY, "sync", "-c", self.pipeline], cwd=self.dir,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.7)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        self.sync()
        self.assert_table_equals_source("lake", "a")

    def reset(self):
        for name in ("warehouse", "state.json"):
            p = os.path.join(self.dir, name)
            shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else (os.path.exists(p) and os.remove(p))
        make_source(self.db_path)


if __name__ == "__main__":
    unittest.main(verbosity=2)
