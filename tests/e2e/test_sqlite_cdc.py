"""CDC from SQLite into Iceberg: ferry installs a change table and triggers per stream, backfills
the table (a full refresh from a snapshot whose change position it records), then each sync
applies the last change of every key since the stream's position — upserts and deletes in one
snapshot — and releases the applied changes. Checked by icebird and DuckDB against the source,
also after kills at the protocol's fault points."""
import os
import signal
import sqlite3
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferrytest  # noqa: E402

PIPELINE = """
name: cdc
source:
  type: sqlite
  path: ./source.db
  mode: cdc
  chunk_rows: 1000
destination: {type: iceberg, warehouse: ./warehouse, namespace: lake}
state: ./state.json
"""


def create_source(test):
    """The source database of these tests: a table with an integer key and one with a composite
    text key and odd name."""
    con = test.source()
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL)")
    con.execute('CREATE TABLE "Odd ""Keys""" (a TEXT NOT NULL, b INTEGER NOT NULL, v BLOB, '
                "PRIMARY KEY (a, b))")
    con.executemany("INSERT INTO items VALUES (?, ?, ?)",
                    [(i, f"item {i}", i / 4) for i in range(1, 3001)])
    con.executemany('INSERT INTO "Odd ""Keys""" VALUES (?, ?, ?)',
                    [(f"k{i % 10}", i, bytes([i % 256])) for i in range(200)])
    con.commit()
    con.close()
    test.round = 0


class SqliteCdcTest(ferrytest.FerryTestCase):
    def sync(self, **kw):
        # A CDC pipeline follows the source until stopped; --once applies what is there and exits.
        return self.ferry("sync", "-c", self.pipeline, "--once", **kw)

    def setUp(self):
        super().setUp()
        self.write_pipeline(PIPELINE)
        create_source(self)

    def change(self, n=150):
        """Updates, deletes, inserts, key changes, and several changes to one key."""
        self.round += 1
        r = self.round
        con = self.source()
        con.execute("UPDATE items SET name = 'upd ' || ? || ' ' || id WHERE id % 17 = ?", (r, r % 17))
        con.execute("DELETE FROM items WHERE id % 23 = ?", (r % 23,))
        base = 100000 * r
        con.executemany("INSERT INTO items VALUES (?, ?, ?)",
                        [(base + i, f"new {base + i}", None) for i in range(n)])
        con.execute("UPDATE items SET id = id + 50000 WHERE id % 97 = ?", (r % 97,))  # key change
        for k in range(5):  # one key changed many times; the last version wins
            con.execute("UPDATE items SET price = ? WHERE id = ?", (k * 1.5, base))
        con.execute("INSERT INTO items VALUES (?, 'short-lived', 1)", (base + 99999,))
        con.execute("DELETE FROM items WHERE id = ?", (base + 99999,))
        con.execute('UPDATE "Odd ""Keys""" SET v = ? WHERE b % 7 = ?', (bytes([r]), r % 7))
        con.execute('DELETE FROM "Odd ""Keys""" WHERE b % 11 = ?', (r % 11,))
        con.commit()
        con.close()

    def verify(self):
        self.assert_table_equals_source("lake", "items")
        self.assert_table_equals_source("lake", 'Odd "Keys"')

    def pending_changes(self):
        con = sqlite3.connect(self.db_path)
        n = con.execute('SELECT count(*) FROM "_ferry_cdc_items"').fetchone()[0]
        con.close()
        return n

    def test_backfill_then_changes(self):
        self.sync()
        self.verify()
        disc = self.ferry("discover", "-c", self.pipeline, "--json").stdout
        self.assertNotIn("_ferry_cdc_", disc)  # change tables are not streams
        for _ in range(3):
            self.change()
            self.assertGreater(self.pending_changes(), 0)
            out = self.sync()
            self.assertIn("cdc: changes", out.stdout)
            self.verify()
            self.assertEqual(self.pending_changes(), 0)  # applied changes are released
        out = self.sync()
        self.assertIn("cdc: no new changes", out.stdout)
        self.verify()

    def test_kills_while_applying_changes(self):
        self.sync()
        for point in ("source.mid_chunk", "sink.data_written", "sink.before_commit",
                      "catalog.after_metadata_write", "sink.after_commit", "state.temp_written",
                      "state.after_write"):
            with self.subTest(point=point):
                self.change(n=1500)
                p = self.sync(env={"FERRY_FAULT": point}, check=False)
                self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr}")
                self.change(n=20)  # the source keeps changing before the restart
                again = self.sync()
                if point in ("sink.after_commit", "state.temp_written"):
                    self.assertIn("state repaired from the marker", again.stderr)
                self.verify()

    def test_follow_mode_applies_changes_until_stopped(self):
        self.sync()
        proc = subprocess.Popen([ferrytest.FERRY, "sync", "-c", self.pipeline, "--interval", "1"],
                                cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            self.change()
            con = self.source()
            deadline = time.time() + 90  # bounded wait for the next rounds to apply the changes
            while time.time() < deadline:
                if con.execute('SELECT count(*) FROM "_ferry_cdc_items"').fetchone()[0] == 0:
                    break
                time.sleep(0.5)
            con.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn("cdc: changes", out)
        self.verify()

    def test_a_table_without_key_is_refused_before_anything_is_installed(self):
        con = self.source()
        con.execute("CREATE TABLE nokey (v TEXT)")
        con.commit()
        con.close()
        self.write_pipeline(PIPELINE.replace("  mode: cdc\n", "  mode: cdc\n  streams: [nokey]\n"))
        p = self.sync(check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("table nokey has no primary key; cdc applies changes by key", p.stderr)
        con = self.source()
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_schema WHERE name LIKE '_ferry%'")]
        con.close()
        self.assertEqual(names, [])

    def test_keys_declared_as_most_schemas_declare_them(self):
        # `k TEXT PRIMARY KEY` and `PRIMARY KEY (a, b)` without NOT NULL: SQLite lets such keys
        # hold NULL. They are keys all the same; a NULL key is refused by row, with the fix.
        con = self.source()
        con.execute("CREATE TABLE tk (k TEXT PRIMARY KEY, v TEXT)")
        con.execute("CREATE TABLE ck (a TEXT, b INTEGER, v TEXT, PRIMARY KEY (a, b))")
        con.executemany("INSERT INTO tk VALUES (?, ?)", [(f"key {i} ✓", f"v{i}") for i in range(500)])
        con.executemany("INSERT INTO ck VALUES (?, ?, ?)",
                        [(f"a{i % 7}", i, f"v{i}") for i in range(500)])
        con.commit()
        con.close()
        self.write_pipeline(PIPELINE.replace("  mode: cdc\n", "  mode: cdc\n  streams: [tk, ck]\n"))
        check = self.ferry("check", "-c", self.pipeline)
        self.assertIn("key k", check.stdout)
        self.assertIn("key a,b", check.stdout)

        def tables():
            self.assert_table_equals_source("lake", "tk")
            self.assert_table_equals_source("lake", "ck")

        self.sync()
        tables()
        for point in ("sink.before_commit", "sink.after_commit", "state.after_write"):
            with self.subTest(point=point):
                con = self.source()
                con.execute("UPDATE tk SET v = v || '+' WHERE rowid % 3 = 0")
                con.execute("DELETE FROM tk WHERE rowid % 11 = 0")
                con.execute("UPDATE tk SET k = k || ' moved' WHERE rowid % 13 = 0")  # key change
                con.execute("INSERT INTO tk VALUES (?, 'new')", (f"new {point}",))
                con.execute("UPDATE ck SET b = b + 1000 WHERE b % 17 = 0")
                con.execute("DELETE FROM ck WHERE a = 'a3'")
                con.commit()
                con.close()
                p = self.sync(env={"FERRY_FAULT": point}, check=False)
                self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr}")
                self.sync()
                tables()

        con = self.source()
        con.execute("INSERT INTO tk VALUES (NULL, 'no key')")
        con.commit()
        con.close()
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("key column k is NULL", p.stderr)
        self.assertIn('UPDATE "tk" SET "k" = ... WHERE "k" IS NULL', p.stderr)
        # Mended as the message says: the row lands, nothing else changes.
        con = self.source()
        con.execute("UPDATE tk SET k = 'given a key' WHERE k IS NULL")
        con.commit()
        con.close()
        self.sync()
        tables()

    def test_replace_displacing_rows_through_unique_columns(self):
        # INSERT OR REPLACE on a UNIQUE column deletes the row that held the value without firing
        # the DELETE trigger (the writer's recursive_triggers is off, as by default).
        con = self.source()
        con.execute("CREATE TABLE ua (id INTEGER PRIMARY KEY, email TEXT UNIQUE, v TEXT)")
        con.execute("CREATE TABLE wr (k TEXT PRIMARY KEY, code INTEGER, v TEXT, UNIQUE (code, v)) "
                    "WITHOUT ROWID")
        con.executemany("INSERT INTO ua VALUES (?, ?, ?)",
                        [(i, f"user{i}@example.com", f"v{i}") for i in range(1, 301)])
        con.executemany("INSERT INTO wr VALUES (?, ?, ?)",
                        [(f"k{i}", i % 50, f"s{i // 50}") for i in range(300)])
        con.commit()
        con.close()
        self.write_pipeline(PIPELINE.replace("  mode: cdc\n", "  mode: cdc\n  streams: [ua, wr]\n"))

        def tables():
            self.assert_table_equals_source("lake", "ua")
            self.assert_table_equals_source("lake", "wr")

        self.sync()
        tables()
        for r, point in enumerate(("sink.before_commit", "sink.after_commit", "state.after_write",
                                   None)):
            with self.subTest(point=point):
                con = self.source()
                base = 1000 * (r + 1)
                # Rows 1+r, 11+r, ... lose their email to new rows: those rows are deleted.
                con.executemany("INSERT OR REPLACE INTO ua VALUES (?, ?, 'took it')",
                                [(base + i, f"user{i}@example.com") for i in range(1 + r, 301, 10)])
                # IGNORE keeps the old row: nothing may be deleted for it.
                con.execute("INSERT OR IGNORE INTO ua VALUES (?, 'user5@example.com', 'no')",
                            (base + 999,))
                # An update taking another row's email deletes that row.
                con.execute("UPDATE OR REPLACE ua SET email = 'user4@example.com' WHERE id = ?",
                            (base + 1 + r,))
                con.execute("REPLACE INTO wr VALUES (?, ?, ?)", (f"new{r}", r, "s0"))
                con.execute("INSERT INTO ua VALUES (?, ?, 'insert')", (base + 998, f"plain{r}"))
                con.commit()
                con.close()
                if point:
                    p = self.sync(env={"FERRY_FAULT": point}, check=False)
                    self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr}")
                self.sync()
                tables()
        check = self.ferry("verify", "-c", self.pipeline)
        self.assertIn("2 of 2 tables match", check.stdout)

    def test_kill_during_backfill_while_the_source_changes(self):
        p = self.sync(env={"FERRY_FAULT": "sink.after_commit:2"}, check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL, p.stderr)
        self.change()
        self.sync()  # finishes the backfill (the rest of the chunks read from the source as it is now)
        self.sync()  # applies the changes since the backfill's snapshot; replays are harmless
        self.verify()


if __name__ == "__main__":
    unittest.main(verbosity=2)
