"""Into a SQLite database: a SQLite source (CDC through change tables) and a PostgreSQL source
(logical replication), the destination read back with Python's own sqlite3 module and compared
with the source row by row. The crash tests kill the sync at each fault point of the protocol and
sync again: no duplicate, no missing row, no stale version."""
import os
import signal
import sqlite3
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ferrytest  # noqa: E402
import pgserver  # noqa: E402
import test_postgres_cdc  # noqa: E402
import test_sqlite_cdc  # noqa: E402

FROM_SQLITE = """
name: lite
source:
  type: sqlite
  path: ./source.db
  mode: {mode}
  chunk_rows: 1000
destination: {{type: sqlite, path: ./replica.db}}
state: ./state.json
"""

FROM_SQLITE_INCREMENTAL = """
name: lite
source:
  type: sqlite
  path: ./source.db
  streams:
    - {name: items, mode: incremental, cursor: id}
destination: {type: sqlite, path: ./replica.db}
state: ./state.json
"""

FROM_POSTGRES = """
name: {name}
source:
  type: postgres
  dsn: "{dsn}"
  streams:
    - {{name: items, mode: cdc, chunk_rows: 1000}}
    - {{name: "Odd Name", mode: cdc}}
destination: {{type: sqlite, path: ./replica.db}}
state: ./state.json
"""

FAULT_POINTS = ["sink.data_written", "sink.before_commit", "sink.after_commit",
                "state.temp_written", "state.after_write"]


class Crashing:
    def crash(self, point, hit=1):
        p = self.sync(env={**getattr(self, "env", {}), "FERRY_FAULT": f"{point}:{hit}"},
                      check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL,
                         f"{point}:{hit} did not kill the sync (exit {p.returncode})\n{p.stderr}")
        self.assertIn(f"fault point {point} reached", p.stderr)

    def replica(self, sql, args=()):
        con = sqlite3.connect(os.path.join(self.dir, "replica.db"))
        try:
            return con.execute(sql, args).fetchall()
        finally:
            con.close()

    def assert_same(self, src, dst, what):
        self.assertEqual(len(dst), len(set(dst)), f"{what}: duplicate rows in the destination")
        missing = sorted(set(src) - set(dst))[:3]
        extra = sorted(set(dst) - set(src))[:3]
        self.assertEqual(sorted(src), sorted(dst), f"{what}: {len(src)} source rows, {len(dst)} "
                         f"destination rows; missing e.g. {missing}; extra e.g. {extra}")


class SqliteToSqliteTest(Crashing, ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        test_sqlite_cdc.create_source(self)
    change = test_sqlite_cdc.SqliteCdcTest.change

    def configure(self, mode):
        self.write_pipeline(FROM_SQLITE.format(mode=mode))

    def sync(self, **kw):
        return self.ferry("sync", "-c", self.pipeline, "--once", **kw)

    def assert_matches(self):
        for table in ["items", 'Odd "Keys"']:
            q = f'SELECT * FROM "{table.replace(chr(34), chr(34) * 2)}"'
            con = self.source()
            src = con.execute(q).fetchall()
            con.close()
            self.assert_same(src, self.replica(q), table)

    def test_full_refresh_replaces_the_table_and_the_checkpoint_row_says_so(self):
        self.configure("full_refresh")
        self.sync()
        self.assert_matches()
        self.change()
        p = self.sync()
        self.assertIn("new load", p.stdout)
        self.assert_matches()
        rows = self.replica("SELECT split, marker FROM ferry_state WHERE pipeline = 'lite'")
        self.assertEqual(sorted(r[0] for r in rows), ['Odd "Keys"', "items"])
        self.assertTrue(all('"published":true' in r[1] for r in rows), rows)
        # Only ferry's tables and the streams' tables: no load table left behind.
        names = {r[0] for r in self.replica("SELECT name FROM sqlite_master WHERE type='table'")}
        self.assertEqual({n for n in names if n.startswith("ferry_load_")}, set())

    def test_cdc_crash_at_every_fault_point_then_exactly_once(self):
        self.configure("cdc")
        self.sync()
        self.assert_matches()
        for point in FAULT_POINTS:
            with self.subTest(point=point):
                self.change()
                self.crash(point)
                self.change()
                self.sync()
                self.assert_matches()

    def test_crash_during_the_load_resumes_it(self):
        self.configure("full_refresh")
        for point, hit in [("sink.after_commit", 2), ("sink.before_publish", 1),
                           ("sink.after_publish", 1)]:
            with self.subTest(point=point):
                self.change()
                self.crash(point, hit)
                self.sync()
                self.assert_matches()

    def test_incremental_windows_crash_at_every_fault_point(self):
        self.write_pipeline(FROM_SQLITE_INCREMENTAL)
        self.sync()
        for i, point in enumerate(FAULT_POINTS):
            with self.subTest(point=point):
                con = self.source()
                lo = 200000 + 1000 * i
                con.executemany("INSERT INTO items VALUES (?, ?, ?)",
                                [(lo + k, f"inc {k}", k / 8) for k in range(300)])
                con.commit()
                con.close()
                self.crash(point)
                con = self.source()
                con.executemany("INSERT INTO items VALUES (?, ?, ?)",
                                [(lo + 500 + k, "late", None) for k in range(50)])
                con.commit()
                con.close()
                self.sync()
                q = "SELECT * FROM items"
                con = self.source()
                src = con.execute(q).fetchall()
                con.close()
                self.assert_same(src, self.replica(q), "items")

    def test_verify_reads_the_replica(self):
        self.configure("cdc")
        self.sync()
        self.change()
        self.sync()
        p = self.ferry("verify", "-c", self.pipeline)
        self.assertIn("2 of 2 tables match", p.stdout)


PG = None


def setUpModule():
    global PG
    PG = pgserver.start_for_module()


def tearDownModule():
    if PG:
        PG.stop()


# PostgreSQL's values in the forms the SQLite destination stores (docs/type-mapping.md).
PG_ITEMS = """
COPY (SELECT id, name, amount::text, qty, ratio,
             to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || '+00:00',
             to_char(day, 'YYYY-MM-DD'), flag::int, doc::text, ref::text, big
      FROM items) TO STDOUT WITH (FORMAT csv, NULL '\\N')
"""


class PostgresToSqliteTest(Crashing, ferrytest.FerryTestCase):
    change = test_postgres_cdc.PostgresCdcTest.change

    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
        self.db = PG.create_test_database("p2l", self._testMethodName)
        PG.psql(test_postgres_cdc.SCHEMA, db=self.db)
        self.write_pipeline(FROM_POSTGRES.format(name=self.db, dsn=PG.dsn(self.db)))

    def tearDown(self):
        PG.drop_test_database(self.db)
        super().tearDown()

    def sql(self, text):
        return PG.psql(text, db=self.db)

    def sync(self, **kw):
        env = dict(self.env)
        env.update(kw.pop("env", {}))
        return self.ferry("sync", "--once", "-c", self.pipeline, env=env, **kw)

    def assert_matches(self):
        import csv
        import io

        def norm(row):
            return tuple(None if v == "\\N" else v for v in row)

        src = [norm(r) for r in csv.reader(io.StringIO(self.sql(PG_ITEMS)))]
        dst = [tuple(None if v is None else (str(int(v)) if isinstance(v, int) else
                                             repr(v) if isinstance(v, float) else v)
                     for v in r)
               for r in self.replica("SELECT * FROM items")]
        # Floats: PostgreSQL prints the shortest exact form, as Python's repr does.
        # NaN is stored as the text 'NaN' (SQLite would turn a NaN REAL into NULL).
        src = [tuple(repr(float(v)) if i == 4 and v not in (None, "NaN") else v
                     for i, v in enumerate(r))
               for r in src]
        self.assert_same(src, dst, "items")
        src = [tuple(r) for r in csv.reader(io.StringIO(self.sql(
            'COPY (SELECT "Key"::text, "välue", "select"::text FROM "Odd Name") TO STDOUT '
            "WITH (FORMAT csv)")))]
        dst = [tuple(None if v is None else str(v) for v in r)
               for r in self.replica('SELECT * FROM "Odd Name"')]
        self.assert_same([tuple(v if v != "" else None for v in r) for r in src], dst, "Odd Name")

    def test_backfill_changes_and_crashes(self):
        self.sync()
        self.assert_matches()
        for i, point in enumerate(FAULT_POINTS + ["source.before_acknowledge"]):
            with self.subTest(point=point):
                self.change(10 + i)
                self.crash(point)
                self.change(100 + i)
                self.sync()
                self.assert_matches()


if __name__ == "__main__":
    unittest.main()
