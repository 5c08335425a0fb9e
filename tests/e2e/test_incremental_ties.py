"""Incremental mode when many rows share a cursor value, as they do in users' tables: a `date` or a
second-resolution timestamp stamped on a whole batch, a bulk INSERT ... SELECT, a version number
several rows carry. Rows that arrive after a sync with a cursor EQUAL to the last committed value,
and rows at that value whose other columns change while the cursor stays, must land at the next
sync; rows re-read at the boundary land once (one row per key); a sync with nothing new commits
nothing. Past `tie_rows` rows at the boundary ferry keeps only their digest: then the boundary is
re-written when it changed, still one row per key.

Sources: SQLite and PostgreSQL. Destinations: Iceberg (read back by icebird and DuckDB, delete
files applied), PostgreSQL (psql), MariaDB (the mariadb client) and SQLite (Python's sqlite3), each
compared with the source row by row. The crash tests kill the sync (FERRY_FAULT) at each point
around the commit of a window holding ties, sync again and find 0 duplicates and 0 missing rows."""
import csv
import io
import json
import os
import signal
import sqlite3
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ferrytest  # noqa: E402
import mariadbserver  # noqa: E402
import pgserver  # noqa: E402
from test_postgres_to_iceberg import assert_pg_table_matches  # noqa: E402

PG = None
MARIA = None


def setUpModule():
    global PG, MARIA
    PG = pgserver.start_for_module()
    try:
        MARIA = mariadbserver.start_for_module()
    except BaseException:
        PG.stop()
        raise


def tearDownModule():
    for server in (MARIA, PG):
        if server:
            server.stop()


# The points around the commit of a window, and the one inside its read (hit every 1024 rows).
CRASH_POINTS = ["sink.data_written", "sink.before_commit", "catalog.after_metadata_write",
                "sink.after_commit", "state.temp_written", "state.after_write",
                "source.mid_chunk"]
ICEBERG_ONLY = {"catalog.after_metadata_write"}


def stream_lines(streams):
    """streams: [(table, cursor, extra settings as "key: value" or "")] -> the YAML list."""
    out = []
    for table, cursor, extra in streams:
        out.append(f"    - name: {table}\n      mode: incremental\n      cursor: {cursor}")
        if extra:
            out.append(f"      {extra}")
    return "\n".join(out)


class Ties:
    """What every test here does: sync (with the test's passwords), read the report, crash."""
    env = {}

    def sync(self, **kw):
        env = dict(self.env)
        env.update(kw.pop("env", {}))
        return self.ferry("sync", "-c", self.pipeline, env=env, **kw)

    def rows_written(self, p, stream):
        return self.stream_report(p.stdout, stream)["rows"]

    def assert_quiet(self, p, stream):
        """A sync that found nothing new: it says so and wrote nothing."""
        r = self.stream_report(p.stdout, stream)
        self.assertIn("nothing new", r["action"], r["line"])
        self.assertEqual(r["rows"], 0, f"a sync with nothing new wrote rows: {r['line']}")

    def crash(self, point):
        p = self.sync(env={"FERRY_FAULT": point}, check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL,
                         f"{point} did not kill the sync (exit {p.returncode})\n{p.stderr}")
        self.assertIn(f"fault point {point} reached", p.stderr)

    def fault_points(self):
        out = self.ferry("faults").stdout
        return {line.split()[0] for line in out.splitlines() if line.strip()}

    def assert_same_keyed_rows(self, src, dst, what):
        """Destination rows (tuples, key first) equal the source's: no duplicate key, none missing,
        every value equal."""
        keys = [r[0] for r in dst]
        self.assertEqual(len(keys), len(set(keys)),
                         f"{what}: {len(keys) - len(set(keys))} duplicate keys in the destination")
        self.assert_same_rows(src, dst, what)


# ---------------------------------------------------------------------------------------------
# SQLite -> Iceberg

SQLITE_TO_ICEBERG = """
name: ties
source:
  type: sqlite
  path: ./source.db
  streams:
{streams}
destination: {{type: iceberg, warehouse: ./warehouse, namespace: lake}}
state: ./state.json
"""


class SqliteToIcebergTiesTest(Ties, ferrytest.FerryTestCase):
    def configure(self, streams):
        self.write_pipeline(SQLITE_TO_ICEBERG.format(streams=stream_lines(streams)))

    def execute(self, sql, args=None, many=False):
        con = self.source()
        if many:
            con.executemany(sql, args)
        else:
            con.execute(sql, args or ())
        con.commit()
        con.close()

    def test_integer_cursor_rows_tied_with_the_committed_maximum_land(self):
        # The issue's reproduction: versions 10, 20, 20; sync; then (4, 20) and (5, 30).
        self.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, ver INTEGER NOT NULL, name TEXT)")
        self.execute("INSERT INTO t VALUES (?, ?, ?)",
                     [(1, 10, "one"), (2, 20, "two"), (3, 20, "three")], many=True)
        self.configure([("t", "ver", "")])
        first = self.sync()
        self.assertEqual(self.rows_written(first, "t"), 3)
        self.assert_table_equals_source("lake", "t")
        before = self.snapshot_count("lake", "t")
        self.execute("INSERT INTO t VALUES (?, ?, ?)", [(4, 20, "four"), (5, 30, "five")],
                     many=True)
        second = self.sync()
        self.assert_table_equals_source("lake", "t")  # row 4 too
        # Rows 2 and 3, re-read at the boundary unchanged, are not written again.
        self.assertEqual(self.rows_written(second, "t"), 2, second.stdout)
        snapshots = self.snapshot_count("lake", "t")
        self.assertGreater(snapshots, before, "the sync that wrote rows committed no snapshot")
        third = self.sync()
        self.assert_quiet(third, "t")
        self.assertEqual(self.snapshot_count("lake", "t"), snapshots,
                         "a sync with nothing new committed a snapshot")
        self.assert_table_equals_source("lake", "t")
        p = self.ferry("verify", "-c", self.pipeline)
        self.assertIn("1 of 1 tables match", p.stdout)

    def test_text_timestamp_cursor_ties_and_a_boundary_row_updated_in_place(self):
        self.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, "
                     "amount INTEGER, at TEXT NOT NULL)")
        # 400 rows over 50 earlier seconds (8 per second), 300 rows in the last second.
        rows = [(i, "view", i, f"2024-06-01 09:59:{i % 50:02d}") for i in range(1, 401)]
        rows += [(i, "click", i, "2024-06-01 10:00:00") for i in range(401, 701)]
        self.execute("INSERT INTO events VALUES (?, ?, ?, ?)", rows, many=True)
        self.configure([("events", "at", "")])
        first = self.sync()
        self.assertEqual(self.rows_written(first, "events"), 700)
        self.assert_table_equals_source("lake", "events")
        # 150 more in the same second; two rows of that second corrected, their cursor unchanged.
        self.execute("INSERT INTO events VALUES (?, ?, ?, ?)",
                     [(i, "buy", -i, "2024-06-01 10:00:00") for i in range(701, 851)], many=True)
        self.execute("UPDATE events SET kind = 'corrected', amount = amount + 1000 "
                     "WHERE id IN (450, 699)")
        second = self.sync()
        self.assert_table_equals_source("lake", "events")
        self.assertEqual(self.rows_written(second, "events"), 152, second.stdout)
        snapshots = self.snapshot_count("lake", "events")
        third = self.sync()
        self.assert_quiet(third, "events")
        self.assertEqual(self.snapshot_count("lake", "events"), snapshots)
        # After a quiet sync, a boundary row changed in place still lands (and only it).
        self.execute("UPDATE events SET amount = -1, kind = 'refund' WHERE id = 500")
        fourth = self.sync()
        self.assertEqual(self.rows_written(fourth, "events"), 1, fourth.stdout)
        self.assert_table_equals_source("lake", "events")
        # The next second opens; more rows of it arrive after it was committed.
        self.execute("INSERT INTO events VALUES (?, ?, ?, ?)",
                     [(i, "view", i, "2024-06-01 10:00:01") for i in range(851, 881)], many=True)
        fifth = self.sync()
        self.assertEqual(self.rows_written(fifth, "events"), 30, fifth.stdout)
        self.execute("INSERT INTO events VALUES (?, ?, ?, ?)",
                     [(i, "late", i, "2024-06-01 10:00:01") for i in range(881, 891)], many=True)
        sixth = self.sync()
        self.assertEqual(self.rows_written(sixth, "events"), 10, sixth.stdout)
        self.assert_table_equals_source("lake", "events")
        snapshots = self.snapshot_count("lake", "events")
        self.assert_quiet(self.sync(), "events")
        self.assertEqual(self.snapshot_count("lake", "events"), snapshots)

    def test_killed_around_the_commit_of_a_tie_window_lands_once(self):
        known = self.fault_points()
        for point in CRASH_POINTS:
            self.assertIn(point, known, "`ferry faults` does not list it")
        self.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, ver INTEGER NOT NULL, "
                     "payload TEXT)")
        # Versions 1..15, 100 rows each.
        self.execute("INSERT INTO t VALUES (?, ?, ?)",
                     [(i, (i - 1) // 100 + 1, f"p{i}") for i in range(1, 1501)], many=True)
        self.configure([("t", "ver", "")])
        self.sync()
        self.assert_table_equals_source("lake", "t")
        for n, point in enumerate(CRASH_POINTS):
            with self.subTest(point=point):
                con = self.source()
                top, next_id = con.execute("SELECT max(ver), max(id) + 1 FROM t").fetchone()
                con.close()
                # 1100 rows at the committed maximum, 5 of its committed rows changed in place,
                # 1200 rows above it (100 per version): more than 1024 rows at the boundary and
                # above it, however the window splits its reads.
                rows = [(next_id + k, top, f"tie {n} {k}") for k in range(1100)]
                rows += [(next_id + 1100 + k, top + 1 + k // 100, f"above {n} {k}")
                         for k in range(1200)]
                self.execute("INSERT INTO t VALUES (?, ?, ?)", rows, many=True)
                self.execute("UPDATE t SET payload = payload || ' changed' WHERE id IN "
                             "(SELECT id FROM t WHERE ver = ? AND id < ? ORDER BY id LIMIT 5)",
                             (top, next_id))
                self.crash(point)
                self.sync()
                seen = self.assert_table_equals_source("lake", "t")
                ids = [r[0] for r in seen["duckdb_rows"]]
                self.assertEqual(len(ids), len(set(ids)), f"{point}: duplicate keys")
                snapshots = self.snapshot_count("lake", "t")
                self.assert_quiet(self.sync(), "t")
                self.assertEqual(self.snapshot_count("lake", "t"), snapshots,
                                 f"{point}: the sync after the repair committed again")


# ---------------------------------------------------------------------------------------------
# PostgreSQL -> Iceberg

NS = "pgties"
PG_TO_ICEBERG = """
name: {name}
source:
  type: postgres
  dsn: "{dsn}"
  streams:
{streams}
destination: {{type: iceberg, warehouse: ./warehouse, namespace: pgties}}
state: ./state.json
"""


class PostgresToIcebergTiesTest(Ties, ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
        self.db = PG.create_test_database("ties", self._testMethodName)

    def tearDown(self):
        PG.drop_test_database(self.db)
        super().tearDown()

    def configure(self, streams):
        self.write_pipeline(PG_TO_ICEBERG.format(name=self.db, dsn=PG.dsn(self.db),
                                                 streams=stream_lines(streams)))

    def sql(self, text):
        return PG.psql(text, db=self.db)

    def assert_matches(self, table):
        return assert_pg_table_matches(self, PG, self.db, NS, table)

    def assert_quiet_round(self, table):
        snapshots = self.snapshot_count(NS, table)
        self.assert_quiet(self.sync(), table)
        self.assertEqual(self.snapshot_count(NS, table), snapshots,
                         f"{table}: a sync with nothing new committed a snapshot")

    def test_date_cursor_the_issues_104_rows(self):
        self.sql("CREATE TABLE orders (id int PRIMARY KEY, item text NOT NULL, qty int, "
                 "day date NOT NULL);"
                 "INSERT INTO orders VALUES (1, 'first', 1, '2024-03-01'), "
                 "(2, 'second', 2, '2024-03-01');")
        self.configure([("orders", "day", "")])
        self.assertEqual(self.rows_written(self.sync(), "orders"), 2)
        # 100 more orders the same day.
        self.sql("INSERT INTO orders SELECT g, 'order ' || g, g % 7, '2024-03-01' "
                 "FROM generate_series(3, 102) g")
        second = self.sync()
        self.assert_matches("orders")
        self.assertEqual(self.rows_written(second, "orders"), 100, second.stdout)
        # One for the next day, and one more for the first day arriving with it.
        self.sql("INSERT INTO orders VALUES (103, 'next day', 3, '2024-03-02'), "
                 "(104, 'late same day', 4, '2024-03-01')")
        third = self.sync()
        seen = self.assert_matches("orders")
        self.assertEqual(len(seen["duckdb_rows"]), 104)
        self.assertEqual(self.rows_written(third, "orders"), 2, third.stdout)
        # Updated the same day: the cursor stays, the change lands.
        self.sql("UPDATE orders SET qty = 30, item = 'next day, corrected' WHERE id = 103")
        fourth = self.sync()
        self.assert_matches("orders")
        self.assertEqual(self.rows_written(fourth, "orders"), 1, fourth.stdout)
        self.assert_quiet_round("orders")
        self.assert_matches("orders")
        p = self.ferry("verify", "-c", self.pipeline, env=self.env)
        self.assertIn("1 of 1 tables match", p.stdout)

    def test_timestamp_cursor_bulk_insert_past_tie_rows(self):
        # One INSERT ... SELECT stamps 3000 rows with one value: more than tie_rows (2000).
        self.sql("CREATE TABLE readings (id bigint PRIMARY KEY, sensor text NOT NULL, "
                 "value int NOT NULL, at timestamp(0) NOT NULL);"
                 "INSERT INTO readings SELECT g, 'sensor ' || (g % 17), g, "
                 "timestamp '2024-06-01 12:00:00' FROM generate_series(1, 3000) g;")
        self.configure([("readings", "at", "")])
        self.assertEqual(self.rows_written(self.sync(), "readings"), 3000)
        self.assert_matches("readings")
        self.sql("INSERT INTO readings SELECT g, 'late ' || g, g, timestamp '2024-06-01 12:00:00' "
                 "FROM generate_series(3001, 3400) g;"
                 "UPDATE readings SET value = -value WHERE id IN (7, 1500, 2999);")
        second = self.sync()
        self.assert_matches("readings")  # one row per key, the updates included
        # Only a digest of the boundary is kept: it may be written again whole, never less.
        self.assertGreaterEqual(self.rows_written(second, "readings"), 403, second.stdout)
        self.assertLessEqual(self.rows_written(second, "readings"), 3400, second.stdout)
        # The boundary unchanged: its digest says so, nothing is committed.
        self.assert_quiet_round("readings")
        # A later second: the old boundary, unchanged, is not written again.
        self.sql("INSERT INTO readings SELECT g, 'next', g, timestamp '2024-06-01 12:00:01' "
                 "FROM generate_series(3401, 3450) g")
        third = self.sync()
        self.assertEqual(self.rows_written(third, "readings"), 50, third.stdout)
        self.sql("INSERT INTO readings SELECT g, 'next, late', g, "
                 "timestamp '2024-06-01 12:00:01' FROM generate_series(3451, 3460) g")
        fourth = self.sync()
        self.assertEqual(self.rows_written(fourth, "readings"), 10, fourth.stdout)
        seen = self.assert_matches("readings")
        self.assertEqual(len(seen["duckdb_rows"]), 3460)
        self.assert_quiet_round("readings")

    def test_tie_rows_setting_forces_the_digest_with_few_rows(self):
        self.sql("CREATE TABLE batches (id int PRIMARY KEY, label text, n int, "
                 "at timestamp(0) NOT NULL);"
                 "INSERT INTO batches SELECT g, 'b' || g, g, timestamp '2024-07-01 08:00:00' "
                 "FROM generate_series(1, 30) g;")
        self.configure([("batches", "at", "tie_rows: 10")])
        self.assertEqual(self.rows_written(self.sync(), "batches"), 30)
        self.assert_matches("batches")
        self.sql("INSERT INTO batches SELECT g, 'tie ' || g, g, timestamp '2024-07-01 08:00:00' "
                 "FROM generate_series(31, 35) g;"
                 "UPDATE batches SET label = 'changed', n = -1 WHERE id = 12;")
        second = self.sync()
        self.assert_matches("batches")
        self.assertGreaterEqual(self.rows_written(second, "batches"), 6, second.stdout)
        self.assert_quiet_round("batches")
        # Changed in place once more, after a quiet sync.
        self.sql("UPDATE batches SET label = 'changed again' WHERE id = 3")
        third = self.sync()
        self.assert_matches("batches")
        self.assertGreaterEqual(self.rows_written(third, "batches"), 1, third.stdout)
        self.assert_quiet_round("batches")
        # Rows above the boundary: the old boundary, unchanged, stays as it is.
        self.sql("INSERT INTO batches SELECT g, 'above', g, timestamp '2024-07-01 08:00:01' "
                 "FROM generate_series(36, 38) g")
        fourth = self.sync()
        self.assertEqual(self.rows_written(fourth, "batches"), 3, fourth.stdout)
        seen = self.assert_matches("batches")
        self.assertEqual(len(seen["duckdb_rows"]), 38)

    def test_text_cursor_ties(self):
        self.sql("CREATE TABLE docs (id int PRIMARY KEY, body text, release text NOT NULL);"
                 "INSERT INTO docs SELECT g, 'doc ' || g, CASE WHEN g <= 60 THEN 'r0006' "
                 "ELSE 'r0007' END FROM generate_series(1, 200) g;")
        self.configure([("docs", "release", "")])
        self.assertEqual(self.rows_written(self.sync(), "docs"), 200)
        self.sql("INSERT INTO docs SELECT g, 'doc ' || g, 'r0007' FROM generate_series(201, 250) g;"
                 "UPDATE docs SET body = 'edited' WHERE id = 100;")
        second = self.sync()
        self.assert_matches("docs")
        self.assertEqual(self.rows_written(second, "docs"), 51, second.stdout)
        self.sql("INSERT INTO docs SELECT g, 'doc ' || g, 'r0008' FROM generate_series(251, 255) g;"
                 "INSERT INTO docs VALUES (256, 'late', 'r0007'), (257, 'later', 'r0007');")
        third = self.sync()
        seen = self.assert_matches("docs")
        self.assertEqual(len(seen["duckdb_rows"]), 257)
        self.assertEqual(self.rows_written(third, "docs"), 7, third.stdout)
        self.assert_quiet_round("docs")


# ---------------------------------------------------------------------------------------------
# SQL destinations, read back by their own clients

PG_TO_SQL = """
name: {name}
source:
  type: postgres
  dsn: "{dsn}"
  streams:
{streams}
destination:
{destination}
state: ./state.json
"""
TARGET_SCHEMA = "copy"


def pg_rows(db, table, exprs, schema="public"):
    """The rows of `table` as tuples of text made by PostgreSQL itself (NULL -> None)."""
    cols = ", ".join(exprs)
    out = PG.psql(f'SET datestyle = ISO; COPY (SELECT {cols} FROM "{schema}"."{table}") '
                  "TO STDOUT WITH (FORMAT csv, NULL '\\N')", db=db)
    return [tuple(None if v == "\\N" else v for v in r) for r in csv.reader(io.StringIO(out))]


class PostgresToPostgresTiesTest(Ties, ferrytest.FerryTestCase):
    COLS = ["id::text", "item", "qty::text", "day::text"]

    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
        self.db = PG.create_test_database("tiesp", self._testMethodName)
        self.target = PG.create_test_database("tiespdst", self._testMethodName)

    def tearDown(self):
        PG.drop_test_database(self.db)
        PG.drop_test_database(self.target)
        super().tearDown()

    def configure(self, streams):
        dest = (f'  type: postgres\n  dsn: "{PG.dsn(self.target)}"\n'
                f"  schema: {TARGET_SCHEMA}")
        self.write_pipeline(PG_TO_SQL.format(name=self.db, dsn=PG.dsn(self.db),
                                             streams=stream_lines(streams), destination=dest))

    def sql(self, text):
        return PG.psql(text, db=self.db)

    def assert_matches(self, table, cols):
        src = pg_rows(self.db, table, cols)
        dst = pg_rows(self.target, table, cols, schema=TARGET_SCHEMA)
        self.assert_same_keyed_rows(src, dst, f"{table} in PostgreSQL")
        return dst

    def test_date_cursor_ties_land_in_postgres(self):
        self.sql("CREATE TABLE orders (id int PRIMARY KEY, item text NOT NULL, qty int, "
                 "day date NOT NULL);"
                 "INSERT INTO orders SELECT g, 'order ' || g, g, '2024-03-01' "
                 "FROM generate_series(1, 50) g;")
        self.configure([("orders", "day", "")])
        self.assertEqual(self.rows_written(self.sync(), "orders"), 50)
        self.assert_matches("orders", self.COLS)
        self.sql("INSERT INTO orders SELECT g, 'order ' || g, g, '2024-03-01' "
                 "FROM generate_series(51, 90) g;"
                 "UPDATE orders SET qty = NULL, item = 'cancelled' WHERE id = 17;")
        second = self.sync()
        self.assert_matches("orders", self.COLS)
        self.assertEqual(self.rows_written(second, "orders"), 41, second.stdout)
        self.assert_quiet(self.sync(), "orders")
        self.sql("INSERT INTO orders VALUES (91, 'next day', 1, '2024-03-02'), "
                 "(92, 'late same day', 2, '2024-03-01');")
        self.sync()
        dst = self.assert_matches("orders", self.COLS)
        self.assertEqual(len(dst), 92)
        self.assert_quiet(self.sync(), "orders")
        self.assert_matches("orders", self.COLS)
        p = self.ferry("verify", "-c", self.pipeline, env=self.env)
        self.assertIn("1 of 1 tables match", p.stdout)

    def test_killed_around_the_commit_of_a_tie_window_lands_once(self):
        points = [p for p in CRASH_POINTS if p not in ICEBERG_ONLY]
        known = self.fault_points()
        for point in points:
            self.assertIn(point, known, "`ferry faults` does not list it")
        cols = ["id::text", "payload", "stamp::text"]
        self.sql("CREATE TABLE t (id int PRIMARY KEY, payload text NOT NULL, "
                 "stamp timestamp(0) NOT NULL);"
                 "INSERT INTO t SELECT g, 'p' || g, timestamp '2024-01-01 00:00:00' + "
                 "((g - 1) / 100) * interval '1 minute' FROM generate_series(1, 1500) g;")
        self.configure([("t", "stamp", "")])
        self.sync()
        self.assert_matches("t", cols)
        for n, point in enumerate(points):
            with self.subTest(point=point):
                # 1100 rows at the committed maximum, 5 of its committed rows changed in place,
                # 1200 rows in the 12 minutes after it (100 each): more than 1024 rows at the
                # boundary and above it, however the window splits its reads.
                self.sql(f"""
                    CREATE TEMP TABLE top AS SELECT max(stamp) AS s, max(id) AS id FROM t;
                    UPDATE t SET payload = payload || ' changed' WHERE id IN
                      (SELECT id FROM t WHERE stamp = (SELECT s FROM top) ORDER BY id LIMIT 5);
                    INSERT INTO t SELECT (SELECT id FROM top) + k, 'tie {n} ' || k,
                                         (SELECT s FROM top)
                      FROM generate_series(1, 1100) k;
                    INSERT INTO t SELECT (SELECT id FROM top) + 1100 + k, 'above {n} ' || k,
                           (SELECT s FROM top) + (1 + (k - 1) / 100) * interval '1 minute'
                      FROM generate_series(1, 1200) k;""")
                self.crash(point)
                self.sync()
                self.assert_matches("t", cols)
                self.assert_quiet(self.sync(), "t")


MARIA_COLS = [("id::text", "CAST(id AS CHAR)"), ("sensor", "sensor"),
              ("value::text", "CAST(value AS CHAR)"),
              ("to_char(at, 'YYYY-MM-DD HH24:MI:SS')", "DATE_FORMAT(at, '%Y-%m-%d %H:%i:%s')")]


class PostgresToMariaDbTiesTest(Ties, ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD,
                    "MARIADB_PASSWORD": mariadbserver.ROOT_PASSWORD}
        self.db = PG.create_test_database("tiesm", self._testMethodName)
        short = self._testMethodName.removeprefix("test_")[:40]
        self.target = MARIA.create_database("tdst_" + short)
        self.state_db = "tst_" + short
        MARIA.drop_database(self.state_db)

    def tearDown(self):
        PG.drop_test_database(self.db)
        MARIA.drop_database(self.target)
        MARIA.drop_database(self.state_db)
        super().tearDown()

    def configure(self, streams):
        dest = (f'  type: mysql\n  url: "{MARIA.url(self.target)}"\n'
                f"  state_database: {self.state_db}")
        self.write_pipeline(PG_TO_SQL.format(name=self.db, dsn=PG.dsn(self.db),
                                             streams=stream_lines(streams), destination=dest))

    def sql(self, text):
        return PG.psql(text, db=self.db)

    def assert_matches(self, table):
        src = pg_rows(self.db, table, [pg for pg, _ in MARIA_COLS])
        exprs = ", ".join(m for _, m in MARIA_COLS)
        out = MARIA.sql(f"SELECT JSON_ARRAY({exprs}) FROM `{table}`", db=self.target)
        dst = [tuple(json.loads(line)) for line in out.split("\n") if line]
        self.assert_same_keyed_rows(src, dst, f"{table} in MariaDB")
        return dst

    def test_timestamp_cursor_ties_land_in_mariadb(self):
        self.sql("CREATE TABLE readings (id int PRIMARY KEY, sensor text NOT NULL, "
                 "value int NOT NULL, at timestamp(0) NOT NULL);"
                 "INSERT INTO readings SELECT g, 's' || (g % 9), g, "
                 "timestamp '2024-06-01 12:00:00' FROM generate_series(1, 1200) g;")
        self.configure([("readings", "at", "")])
        self.assertEqual(self.rows_written(self.sync(), "readings"), 1200)
        self.assert_matches("readings")
        self.sql("INSERT INTO readings SELECT g, 'late', g, timestamp '2024-06-01 12:00:00' "
                 "FROM generate_series(1201, 1500) g;"
                 "UPDATE readings SET value = -value, sensor = 'fixed' WHERE id IN (5, 1100);")
        second = self.sync()
        self.assert_matches("readings")
        self.assertEqual(self.rows_written(second, "readings"), 302, second.stdout)
        self.assert_quiet(self.sync(), "readings")
        self.sql("INSERT INTO readings VALUES (1501, 'next', 1, '2024-06-01 12:00:01'), "
                 "(1502, 'late same second', 2, '2024-06-01 12:00:00');")
        third = self.sync()
        dst = self.assert_matches("readings")
        self.assertEqual(len(dst), 1502)
        self.assertEqual(self.rows_written(third, "readings"), 2, third.stdout)
        self.assert_quiet(self.sync(), "readings")


SQLITE_TO_SQLITE = """
name: lite
source:
  type: sqlite
  path: ./source.db
  streams:
{streams}
destination: {{type: sqlite, path: ./replica.db}}
state: ./state.json
"""


class SqliteToSqliteTiesTest(Ties, ferrytest.FerryTestCase):
    QUERY = "SELECT id, name, batch FROM items"

    def execute(self, sql, args=None, many=False):
        con = self.source()
        if many:
            con.executemany(sql, args)
        else:
            con.execute(sql, args or ())
        con.commit()
        con.close()

    def assert_matches(self):
        con = self.source()
        src = con.execute(self.QUERY).fetchall()
        con.close()
        con = sqlite3.connect(os.path.join(self.dir, "replica.db"))
        try:
            dst = con.execute(self.QUERY).fetchall()
        finally:
            con.close()
        self.assert_same_keyed_rows(src, dst, "items in SQLite")
        return dst

    def test_integer_cursor_ties_land_in_sqlite(self):
        self.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, "
                     "batch INTEGER NOT NULL)")
        self.execute("INSERT INTO items VALUES (?, ?, ?)",
                     [(i, f"item {i}", 1 + i // 100) for i in range(1, 300)], many=True)
        self.write_pipeline(SQLITE_TO_SQLITE.format(streams=stream_lines([("items", "batch", "")])))
        self.assertEqual(self.rows_written(self.sync(), "items"), 299)
        self.assert_matches()
        # Batch 3 is the committed maximum: 120 more rows of it, one of its rows renamed.
        self.execute("INSERT INTO items VALUES (?, ?, ?)",
                     [(i, f"late {i}", 3) for i in range(300, 420)], many=True)
        self.execute("UPDATE items SET name = 'renamed' WHERE id = 250")
        second = self.sync()
        self.assert_matches()
        self.assertEqual(self.rows_written(second, "items"), 121, second.stdout)
        self.assert_quiet(self.sync(), "items")
        self.execute("INSERT INTO items VALUES (?, ?, ?)",
                     [(420, "batch 4", 4), (421, "batch 3, later still", 3)], many=True)
        third = self.sync()
        dst = self.assert_matches()
        self.assertEqual(len(dst), 421)
        self.assertEqual(self.rows_written(third, "items"), 2, third.stdout)
        self.assert_quiet(self.sync(), "items")


if __name__ == "__main__":
    unittest.main(verbosity=2)
