"""Incremental mode, SQLite -> Iceberg: each sync reads the rows whose cursor moved past the last
committed window and upserts them by primary key (data files plus equality deletes in one
snapshot). Checked by icebird and DuckDB (with the delete files applied) against the source;
crash tests kill the sync at the protocol's fault points."""
import os
import signal
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferrytest  # noqa: E402

PIPELINE = """
name: inc
source:
  type: sqlite
  path: ./source.db
  streams:
    - name: items
      mode: incremental
      cursor: updated_at
destination: {type: iceberg, warehouse: ./warehouse, namespace: lake}
state: ./state.json
"""


class IncrementalTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        self.write_pipeline(PIPELINE)
        con = self.source()
        con.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price REAL, "
                    "updated_at INTEGER NOT NULL)")
        con.executemany("INSERT INTO items VALUES (?, ?, ?, ?)",
                        [(i, f"item {i}", i * 1.5, 1000 + i) for i in range(1, 5001)])
        con.commit()
        con.close()
        self.clock = 100000

    def change_source(self, updates=300, inserts=200):
        con = self.source()
        for i in range(1, updates + 1):
            self.clock += 1
            con.execute("UPDATE items SET name = ?, updated_at = ? WHERE id = ?",
                        (f"changed {self.clock}", self.clock, i * 7))
        start = con.execute("SELECT max(id) FROM items").fetchone()[0]
        for i in range(start + 1, start + inserts + 1):
            self.clock += 1
            con.execute("INSERT INTO items VALUES (?, ?, ?, ?)", (i, f"new {i}", 0.25, self.clock))
        con.commit()
        con.close()

    def rows_written(self, stdout):
        for line in stdout.splitlines():
            parts = line.split()
            if parts and parts[0] == "items":
                return int(parts[-5])
        self.fail(stdout)

    def test_upserts_replace_changed_rows_and_add_new_ones(self):
        first = self.sync()
        self.assertEqual(self.rows_written(first.stdout), 5000)
        self.assert_table_equals_source("lake", "items")
        self.change_source()
        second = self.sync()
        self.assertEqual(self.rows_written(second.stdout), 500)  # only what moved
        seen = self.assert_table_equals_source("lake", "items")
        self.assertEqual(seen["summary"]["operation"], "overwrite")
        self.assertGreater(seen["deleted_rows"], 0)  # old versions removed by equality deletes
        third = self.sync()
        self.assertEqual(self.rows_written(third.stdout), 0)
        self.assertIn("nothing new", third.stdout)
        self.assert_table_equals_source("lake", "items")

    def test_crash_after_commit_repairs_state_without_rereading(self):
        self.sync()
        self.change_source()
        p = self.sync(env={"FERRY_FAULT": "sink.after_commit"}, check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL, p.stderr)
        again = self.sync()
        self.assertIn("state repaired from the marker, nothing re-read", again.stderr)
        self.assertEqual(self.rows_written(again.stdout), 0)
        self.assert_table_equals_source("lake", "items")

    def test_crash_before_or_inside_the_commit_rereads_the_window_once(self):
        for point in ("sink.data_written", "sink.before_commit", "catalog.after_metadata_write",
                      "state.temp_written", "state.after_write", "source.mid_chunk"):
            with self.subTest(point=point):
                self.change_source(updates=600, inserts=700)  # > 1024 rows: mid-window points hit
                p = self.sync(env={"FERRY_FAULT": point}, check=False)
                self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr}")
                self.sync()
                self.assert_table_equals_source("lake", "items")

    def test_a_column_added_in_the_source_is_added_to_the_table(self):
        self.sync()
        con = self.source()
        con.execute("ALTER TABLE items ADD COLUMN note TEXT")
        con.execute("UPDATE items SET note = 'noted ' || id, updated_at = updated_at + 1000000 "
                    "WHERE id % 10 = 0")
        con.commit()
        con.close()
        out = self.sync()
        self.assertEqual(self.rows_written(out.stdout), 500)
        seen = self.assert_table_equals_source("lake", "items")
        self.assertEqual([f["name"] for f in seen["schema"]["fields"]],
                         ["id", "name", "price", "updated_at", "note"])
        self.assertFalse(seen["schema"]["fields"][4]["required"])

    def test_a_timestamptz_cursor_compares_instants_not_text(self):
        # Text with mixed offsets: '10:00:00+02:00' is 08:00Z, so a later '09:00:00Z' sorts below
        # it as text. Compared as instants, it is read; so is a tie spelled another way.
        con = self.source()
        con.execute("CREATE TABLE ev (id INTEGER PRIMARY KEY, at TIMESTAMPTZ NOT NULL, v TEXT)")
        con.executemany("INSERT INTO ev VALUES (?, ?, ?)",
                        [(1, "2024-01-01T07:00:00Z", "a"), (2, "2024-01-01T10:00:00+02:00", "b")])
        con.commit()
        con.close()
        self.write_pipeline(PIPELINE.replace("name: items", "name: ev").replace(
            "cursor: updated_at", "cursor: at"))
        self.sync()
        self.assert_table_equals_source("lake", "ev")
        con = self.source()
        con.executemany("INSERT INTO ev VALUES (?, ?, ?)",
                        [(3, "2024-01-01T09:00:00Z", "after, as text before"),
                         (4, "2024-01-01 08:00:00.000+00:00", "the same instant"),
                         (5, "2024-01-01T13:30:00+05:30", "08:00Z again")])
        con.commit()
        con.close()
        out = self.sync()
        self.assertEqual(self.stream_report(out.stdout, "ev")["rows"], 3, out.stdout)
        self.assert_table_equals_source("lake", "ev")
        # A value that is no time stops the sync, naming it, instead of never being read.
        con = self.source()
        con.execute("INSERT INTO ev VALUES (6, 'yesterday', 'bad')")
        con.commit()
        con.close()
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("cursor value 'yesterday' is not a timestamp", p.stderr)

    def test_a_table_without_key_is_refused_before_reading(self):
        con = self.source()
        con.execute("CREATE TABLE nokey (v TEXT, at INTEGER)")
        con.commit()
        con.close()
        self.write_pipeline(PIPELINE.replace("name: items", "name: nokey").replace(
            "cursor: updated_at", "cursor: at"))
        p = self.sync(check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("incremental mode upserts by primary key", p.stderr)
        self.write_pipeline(PIPELINE.replace("cursor: updated_at", "cursor: nope"))
        p = self.sync(check=False)
        self.assertIn("has no column 'nope' for the cursor", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
