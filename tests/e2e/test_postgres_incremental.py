"""Incremental mode, PostgreSQL -> Iceberg: each sync reads the rows whose cursor moved past the last
committed window (COPY of `cursor > last AND cursor <= max` in the sync's REPEATABLE READ snapshot)
and upserts them by primary key. Cursors of type bigint, timestamptz and numeric; the tables are
read back by icebird and DuckDB (delete files applied) and compared value by value with what the
server says; crash tests kill the sync at the protocol's fault points."""
import os
import signal
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ferrytest  # noqa: E402
import pgserver  # noqa: E402
from test_postgres_to_iceberg import assert_pg_table_matches  # noqa: E402

SERVER = None
NS = "pginc"

PIPELINE = """
name: pginc
source:
  type: postgres
  dsn: "{dsn}"
  streams:
{streams}
destination: {{type: iceberg, warehouse: ./warehouse, namespace: pginc}}
state: ./state.json
"""

# The database's own settings differ from what ferry pins (TimeZone UTC, DateStyle ISO): cursor
# values must not depend on them.
SCHEMA = """
CREATE TABLE by_version (id int PRIMARY KEY, name text, amount numeric(12,2),
                         version bigint NOT NULL);
INSERT INTO by_version SELECT i, 'item ' || i, i * 1.25, 1000 + i FROM generate_series(1, 5000) i;
CREATE TABLE by_time (id bigint PRIMARY KEY, name text NOT NULL, updated_at timestamptz NOT NULL);
INSERT INTO by_time SELECT i, 'row ' || i,
    timestamptz '2024-01-01 00:00:00+00' + i * interval '1.000001 second'
  FROM generate_series(1, 3000) i;
CREATE TABLE by_rev (id int PRIMARY KEY, label text, rev numeric(14,4));
INSERT INTO by_rev SELECT i, 'rev ' || i, CASE WHEN i % 250 = 0 THEN NULL ELSE i / 100.0 END
  FROM generate_series(1, 3000) i;
CREATE TABLE odd (id int PRIMARY KEY, doc json, tags jsonb, at timestamptz);
CREATE TABLE nokey (v text, at bigint);
"""


def setUpModule():
    global SERVER
    SERVER = pgserver.start_for_module()


def tearDownModule():
    if SERVER:
        SERVER.stop()


class PostgresIncrementalTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
        self.db = SERVER.create_test_database("inc", self._testMethodName)
        SERVER.psql(f"ALTER DATABASE {self.db} SET timezone = 'America/New_York'; "
                    f"ALTER DATABASE {self.db} SET datestyle = 'SQL, DMY'")
        SERVER.psql(SCHEMA, db=self.db)
        self.clock = 0

    def tearDown(self):
        SERVER.drop_test_database(self.db)
        super().tearDown()

    def configure(self, streams):
        """streams: [(table, cursor)]"""
        text = "\n".join(f"    - name: {t}\n      mode: incremental\n      cursor: {c}"
                         for t, c in streams)
        self.write_pipeline(PIPELINE.format(dsn=SERVER.dsn(self.db), streams=text))

    def sync(self, **kw):
        env = dict(self.env)
        env.update(kw.pop("env", {}))
        return self.ferry("sync", "-c", self.pipeline, env=env, **kw)

    def sql(self, text):
        return SERVER.psql(text, db=self.db)

    def rows_written(self, stdout, stream):
        for line in stdout.splitlines():
            parts = line.split()
            if parts and parts[0] == stream:
                return int(parts[-5])
        self.fail(stdout)

    def assert_matches(self, table, where=None):
        """The Iceberg table holds exactly the server's rows (those matching `where`), through
        icebird and DuckDB, both applying the equality deletes."""
        return assert_pg_table_matches(self, SERVER, self.db, NS, table, where)

    # ---- changes, each at a distinct, later cursor value ----
    def change_by_version(self, updates=300, inserts=200):
        self.sql(f"""
            UPDATE by_version SET name = 'changed ' || id, amount = amount + 1,
                   version = 100000 + {self.clock} + id WHERE id % 7 = 0 AND id <= {updates * 7};
            INSERT INTO by_version SELECT i, 'new ' || i, 0.25, 200000 + {self.clock} + i
              FROM generate_series((SELECT max(id) + 1 FROM by_version),
                                   (SELECT max(id) + {inserts} FROM by_version)) i;""")
        self.clock += 1000000

    def test_bigint_cursor_reads_only_the_rows_that_moved(self):
        self.configure([("by_version", "version")])
        first = self.sync()
        self.assertEqual(self.rows_written(first.stdout, "by_version"), 5000)
        self.assertIn("incremental up to 6000", first.stdout)
        self.assert_matches("by_version")
        self.change_by_version()
        second = self.sync()
        self.assertEqual(self.rows_written(second.stdout, "by_version"), 500)  # only what moved
        seen = self.assert_matches("by_version")
        self.assertGreater(seen["deleted_rows"], 0)  # old versions removed by equality deletes
        third = self.sync()
        self.assertEqual(self.rows_written(third.stdout, "by_version"), 0)
        self.assertIn("nothing new", third.stdout)
        self.assert_matches("by_version")

    def test_timestamptz_cursor_with_rows_updated_at_distinct_times(self):
        self.configure([("by_time", "updated_at")])
        first = self.sync()
        self.assertEqual(self.rows_written(first.stdout, "by_time"), 3000)
        # The cursor is the exact UTC text, whatever the database's TimeZone and DateStyle.
        self.assertIn('"2024-01-01 00:50:00.003+00"', first.stdout)
        self.assert_matches("by_time")
        # Updates at distinct later times (microseconds apart, written in another zone), inserts.
        self.sql("""
            UPDATE by_time SET name = 'updated ' || id,
                   updated_at = timestamptz '2024-06-01 09:00:00+05:30' + id * interval '1 microsecond'
             WHERE id % 10 = 0;
            INSERT INTO by_time SELECT i, 'late ' || i,
                   timestamptz '2024-06-02 00:00:00.5+00' + i * interval '1 second'
              FROM generate_series(3001, 3100) i;""")
        second = self.sync()
        self.assertEqual(self.rows_written(second.stdout, "by_time"), 300 + 100)
        self.assert_matches("by_time")
        # A row moved a microsecond past the previous maximum is new (and only that row).
        self.sql("UPDATE by_time SET name = 'a microsecond later', updated_at = "
                 "(SELECT max(updated_at) FROM by_time) + interval '1 microsecond' WHERE id = 2;")
        third = self.sync()
        self.assertEqual(self.rows_written(third.stdout, "by_time"), 1)
        self.assert_matches("by_time")
        fourth = self.sync()
        self.assertIn("nothing new", fourth.stdout)
        self.assertEqual(self.rows_written(fourth.stdout, "by_time"), 0)

    # "29.9900" sorts after "1000.5000" as text: the window must still open (the source orders).
    def test_numeric_cursor_across_digit_counts_and_null_cursors_are_not_read(self):
        self.configure([("by_rev", "rev")])
        first = self.sync()
        self.assertEqual(self.rows_written(first.stdout, "by_rev"), 3000 - 12)  # 12 NULL cursors
        self.assertIn('"29.9900"', first.stdout)  # the exact text, scale included
        self.assert_matches("by_rev", where="rev IS NOT NULL")
        # 29.9900 -> 100.0011 and more: compared as numbers, not as text.
        self.sql("UPDATE by_rev SET label = 'bumped', rev = 100 + id / 10000.0 WHERE id % 11 = 0;"
                 "INSERT INTO by_rev VALUES (3001, 'new', 1000.5), (3002, 'new, no cursor', NULL);")
        second = self.sync()
        self.assertEqual(self.rows_written(second.stdout, "by_rev"), 3000 // 11 + 1)
        self.assert_matches("by_rev", where="rev IS NOT NULL")
        third = self.sync()
        self.assertIn("nothing new", third.stdout)
        self.assertEqual(self.rows_written(third.stdout, "by_rev"), 0)

    def test_three_streams_in_one_sync(self):
        self.configure([("by_version", "version"), ("by_time", "updated_at"), ("by_rev", "rev")])
        first = self.sync()
        self.assertEqual(self.rows_written(first.stdout, "by_version"), 5000)
        self.assertEqual(self.rows_written(first.stdout, "by_time"), 3000)
        self.change_by_version(updates=10, inserts=5)
        second = self.sync()
        self.assertEqual(self.rows_written(second.stdout, "by_version"), 15)
        self.assertEqual(self.rows_written(second.stdout, "by_time"), 0)
        self.assertEqual(self.rows_written(second.stdout, "by_rev"), 0)
        self.assert_matches("by_version")
        self.assert_matches("by_time")
        self.assert_matches("by_rev", where="rev IS NOT NULL")

    def test_crash_after_commit_repairs_state_without_rereading(self):
        self.configure([("by_version", "version")])
        self.sync()
        self.change_by_version()
        p = self.sync(env={"FERRY_FAULT": "sink.after_commit"}, check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL, p.stderr)
        self.assert_matches("by_version")  # the window landed before the kill
        again = self.sync()
        self.assertIn("state repaired from the marker, nothing re-read", again.stderr)
        self.assertEqual(self.rows_written(again.stdout, "by_version"), 0)
        self.assert_matches("by_version")
        self.change_by_version(updates=20, inserts=10)
        after = self.sync()
        self.assertEqual(self.rows_written(after.stdout, "by_version"), 30)
        self.assert_matches("by_version")

    def test_crash_before_commit_rereads_the_window_once(self):
        self.configure([("by_version", "version")])
        self.sync()
        self.change_by_version()
        p = self.sync(env={"FERRY_FAULT": "sink.before_commit"}, check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL, p.stderr)
        again = self.sync()
        self.assertNotIn("state repaired", again.stderr)
        self.assertEqual(self.rows_written(again.stdout, "by_version"), 500)  # the window, once
        self.assert_matches("by_version")
        third = self.sync()
        self.assertEqual(self.rows_written(third.stdout, "by_version"), 0)
        self.assert_matches("by_version")

    def test_crash_mid_window_and_around_the_state_write(self):
        self.configure([("by_time", "updated_at")])
        self.sync()
        for n, point in enumerate(("source.mid_chunk", "sink.data_written", "state.after_write")):
            with self.subTest(point=point):
                # > 1024 rows: the mid-window fault point is reached.
                self.sql(f"UPDATE by_time SET name = 'round {n} ' || id, updated_at = "
                         f"timestamptz '2025-01-01 00:00:00+00' + interval '{n} day' + "
                         f"id * interval '1 millisecond' WHERE id % 2 = {n % 2}")
                p = self.sync(env={"FERRY_FAULT": point}, check=False)
                self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr}")
                self.sync()
                self.assert_matches("by_time")

    def test_cursor_errors_name_the_column_and_the_candidates(self):
        self.configure([("odd", "doc")])
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("column doc (json) cannot be the cursor: json has no ordering", p.stderr)
        self.assertIn("candidates: id, at", p.stderr)
        self.configure([("odd", "tags")])
        p = self.sync(check=False)
        self.assertIn("column tags (jsonb) cannot be the cursor", p.stderr)
        self.configure([("by_version", "Version")])
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("has no column 'Version' for the cursor; candidates: id, amount, version",
                      p.stderr)
        self.configure([("nokey", "at")])
        p = self.sync(check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("incremental mode upserts by primary key", p.stderr)
        # A NaN maximum would stop the cursor for good: refused, naming the fix.
        self.sql("CREATE TABLE nan_rev (id int PRIMARY KEY, rev numeric);"
                 "INSERT INTO nan_rev VALUES (1, 1), (2, 'NaN');")
        self.configure([("nan_rev", "rev")])
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("largest value of cursor column rev (numeric) is NaN", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
