"""Several sources feeding one destination table: the same table in two databases, merged into
one Iceberg table. Each source's barriers are aligned before the sink commits, and every commit's
marker holds one position per source; so a sync killed anywhere — while one source waits at its
barrier for the other, inside a chunk or a transaction, around the commit and the state write —
resumes every source from its own position. Checked by icebird and DuckDB against the union of
the sources' rows: no duplicate, no missing row, no stale version."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ferrytest  # noqa: E402
import pgserver  # noqa: E402
from test_postgres_to_iceberg import assert_pg_table_matches  # noqa: E402
from test_to_sqlite import Crashing  # noqa: E402

SQLITE_PIPELINE = """
name: merged
sources:
  - name: east
    type: sqlite
    path: ./east.db
    chunk_rows: 1500
  - name: west
    type: sqlite
    path: ./west.db
    chunk_rows: 1100
destination: {{type: iceberg, warehouse: ./{warehouse}, namespace: lake}}
state: ./{warehouse}.state.json
"""

PG_PIPELINE = """
name: {name}
sources:
  - name: east
    type: postgres
    dsn: "{east}"
    mode: cdc
    chunk_rows: 500
    streams: [orders, "East Only"]
  - name: west
    type: postgres
    dsn: "{west}"
    mode: cdc
    chunk_rows: 300
    streams: [orders]
destination: {{type: iceberg, warehouse: ./warehouse, namespace: merged}}
state: ./state.json
checkpoint: {{max_changes: 250{extra}}}
"""

PG_SCHEMA = """
CREATE TABLE orders (id bigint PRIMARY KEY, region text NOT NULL, amount numeric(12,2),
                     at timestamptz, note text);
INSERT INTO orders SELECT {base} + i, '{region}', i * 1.25,
    timestamptz '2024-01-01 00:00:00+00' + i * interval '1 minute', 'n' || i
  FROM generate_series(1, {rows}) i;
"""

SERVER = None


def setUpModule():
    global SERVER
    SERVER = pgserver.start_for_module()


def tearDownModule():
    if SERVER:
        SERVER.stop()


def create_sqlite(path, region, base, rows, extra_table=False):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, region TEXT NOT NULL, amount REAL, "
                "note TEXT)")
    con.executemany("INSERT INTO items VALUES (?, ?, ?, ?)",
                    [(base + i, region, i / 4, f"note {i}" if i % 3 else None)
                     for i in range(1, rows + 1)])
    if extra_table:
        con.execute('CREATE TABLE "East Only" (k TEXT PRIMARY KEY, v INTEGER)')
        con.executemany('INSERT INTO "East Only" VALUES (?, ?)', [(f"k{i}", i) for i in range(900)])
    con.commit()
    con.close()


class TwoSqliteSources:
    """Two SQLite databases with a table of the same shape, disjoint keys."""

    def setUp(self):
        super().setUp()
        self.east = os.path.join(self.dir, "east.db")
        self.west = os.path.join(self.dir, "west.db")
        create_sqlite(self.east, "east", 0, 4000, extra_table=True)
        create_sqlite(self.west, "west", 1000000, 2500)

    def change_sources(self, round_):
        for path, base in ((self.east, 0), (self.west, 1000000)):
            con = self.source(path)
            con.execute("DELETE FROM items WHERE id % 13 = ?", (round_,))
            con.execute("UPDATE items SET amount = amount + ? WHERE id % 7 = 0", (round_,))
            con.executemany("INSERT INTO items VALUES (?, ?, ?, ?)",
                            [(base + 500000 + round_ * 1000 + i, "new", i, None)
                             for i in range(300)])
            con.commit()
            con.close()


class MergedSqliteTest(TwoSqliteSources, ferrytest.FerryTestCase):
    """Two SQLite databases loaded (full refresh) into one table, chunks of different sizes."""

    def configure(self, warehouse="warehouse"):
        self.warehouse = warehouse
        self.write_pipeline(SQLITE_PIPELINE.format(warehouse=warehouse))

    def verify(self):
        self.assert_table_equals_source("lake", "items", warehouse=self.warehouse,
                                        source_paths=[self.east, self.west])
        self.assert_table_equals_source("lake", "East Only", warehouse=self.warehouse,
                                        source_paths=[self.east])

    def test_merged_load_is_exact_and_state_names_each_source(self):
        self.configure()
        p = self.sync()
        self.verify()
        out = self.ferry("state", "-c", self.pipeline).stdout
        for name in ("east:items", "west:items", "east:East Only"):
            self.assertIn(name, out)
        # The table's marker holds one entry per source.
        seen = self.inspect(self.catalog_tables()[("lake", "items")])
        marker = json.loads(seen["properties"]["ferry.marker.merged"])
        self.assertEqual(sorted(marker["sources"]), ["east", "west"])
        self.assertTrue(all(m["published"] for m in marker["sources"].values()), marker)
        self.assertIn("exactly-once", self.ferry("check", "-c", self.pipeline).stdout, p.stdout)
        # verify compares the table with the union of both sources...
        v = self.ferry("verify", "-c", self.pipeline)
        self.assertIn("source 6500 rows, destination 6500 rows", v.stdout)
        # ... and sees a row one source lost.
        con = self.source(self.west)
        con.execute("DELETE FROM items WHERE id = 1000007")
        con.commit()
        con.close()
        v = self.ferry("verify", "-c", self.pipeline, check=False)
        self.assertNotEqual(v.returncode, 0, v.stdout)
        self.assertIn("extra in destination: id=1000007", v.stdout)

    def test_killed_at_every_point_a_merged_load_resumes_exactly(self):
        points = ["graph.aligning:3", "source.mid_chunk:2", "sink.data_written:3",
                  "sink.after_commit:3", "state.after_write:5", "sink.before_publish",
                  "sink.after_publish"]
        for n, point in enumerate(points):
            with self.subTest(point=point):
                self.configure(f"wh{n}")
                # A first load, and a reload after the sources changed, each killed there.
                for round_ in (1, 2):
                    if round_ == 2:
                        self.change_sources(n * 2 + round_)
                    p = self.sync(env={"FERRY_FAULT": point}, check=False)
                    self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr}")
                    self.sync()
                    self.verify()

    def test_incremental_windows_of_two_sources_one_of_them_quiet(self):
        # Each source has its own window; a commit carries the windows of the sources that had
        # one, and keeps the others' entries in the marker as they were.
        self.write_pipeline(INCREMENTAL_PIPELINE)
        self.warehouse = "warehouse"
        self.sync()
        self.verify_items()
        for n, point in enumerate(["sink.after_commit", "state.after_write", "sink.before_commit"]):
            with self.subTest(point=point):
                con = self.source(self.east)  # only east has new rows
                con.executemany("INSERT INTO items VALUES (?, ?, ?, ?)",
                                [(700000 + n * 1000 + i, "late", i, None) for i in range(200)])
                con.commit()
                con.close()
                p = self.sync(env={"FERRY_FAULT": point}, check=False)
                self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr}")
                self.sync()
                self.verify_items()
        seen = self.inspect(self.catalog_tables()[("lake", "items")])
        marker = json.loads(seen["properties"]["ferry.marker.merged"])
        self.assertEqual(marker["sources"]["west"]["mode"], "incremental", marker)
        self.assertEqual(marker["sources"]["east"]["mode"], "incremental", marker)

    def verify_items(self):
        self.assert_table_equals_source("lake", "items", source_paths=[self.east, self.west])

    def test_sources_whose_tables_differ_are_refused_with_the_difference(self):
        con = self.source(self.west)
        con.execute("ALTER TABLE items ADD COLUMN extra INTEGER")
        con.commit()
        con.close()
        self.configure()
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("merges east:items and west:items, whose columns differ: 4 columns "
                      "against 5", p.stderr)
        c = self.ferry("check", "-c", self.pipeline, check=False)
        self.assertNotEqual(c.returncode, 0)
        self.assertIn("whose columns differ", c.stderr)
        self.assertEqual(self.catalog_tables() if os.path.exists(
            os.path.join(self.dir, "warehouse", "catalog.db")) else {}, {})


INCREMENTAL_PIPELINE = """
name: merged
sources:
  - name: east
    type: sqlite
    path: ./east.db
    streams: [{name: items, mode: incremental, cursor: id}]
  - name: west
    type: sqlite
    path: ./west.db
    streams: [{name: items, mode: incremental, cursor: id}]
destination: {type: iceberg, warehouse: ./warehouse, namespace: lake}
state: ./state.json
"""

SQLITE_CDC_TO_SQLITE = """
name: merged
sources:
  - {name: east, type: sqlite, path: ./east.db, mode: cdc, chunk_rows: 1500}
  - {name: west, type: sqlite, path: ./west.db, mode: cdc, chunk_rows: 1100}
destination: {type: sqlite, path: ./replica.db}
state: ./state.json
"""


class MergedSqliteCdcToSqliteTest(TwoSqliteSources, Crashing, ferrytest.FerryTestCase):
    """Two SQLite databases, CDC through their own change tables, into a SQLite destination read
    back with Python's sqlite3: changes of both are applied once each, through crashes."""

    def sync(self, **kw):
        return self.ferry("sync", "-c", self.pipeline, "--once", **kw)

    def assert_matches(self):
        for table, paths in (("items", [self.east, self.west]), ("East Only", [self.east])):
            q = f'SELECT * FROM "{table}"'
            src = []
            for path in paths:
                con = self.source(path)
                src += con.execute(q).fetchall()
                con.close()
            self.assert_same(src, self.replica(q), table)

    def test_changes_of_both_sources_survive_every_fault_point(self):
        self.write_pipeline(SQLITE_CDC_TO_SQLITE)
        self.crash("graph.aligning", 2)  # inside the backfill
        self.sync()
        self.assert_matches()
        for n, point in enumerate(["graph.aligning", "sink.data_written", "sink.before_commit",
                                   "sink.after_commit", "state.after_write"]):
            with self.subTest(point=point):
                self.change_sources(2 * n + 1)
                self.crash(point)
                self.change_sources(2 * n + 2)
                self.sync()
                self.assert_matches()


class MergedPostgresCdcTest(ferrytest.FerryTestCase):
    """CDC from two PostgreSQL databases (one replication slot each) into one table."""

    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
        self.east = SERVER.create_test_database("mge", self._testMethodName)
        self.west = SERVER.create_test_database("mgw", self._testMethodName)
        SERVER.psql(PG_SCHEMA.format(base=0, region="east", rows=2000), db=self.east)
        SERVER.psql('CREATE TABLE "East Only" (k text PRIMARY KEY, v int);'
                    'INSERT INTO "East Only" SELECT \'k\' || i, i FROM generate_series(1, 700) i',
                    db=self.east)
        SERVER.psql(PG_SCHEMA.format(base=10000000, region="west", rows=1500), db=self.west)
        self.round = 0

    def tearDown(self):
        SERVER.drop_test_database(self.east)
        SERVER.drop_test_database(self.west)
        super().tearDown()

    def configure(self, extra=""):
        self.name = "m_" + self._testMethodName.removeprefix("test_")[:40]
        self.write_pipeline(PG_PIPELINE.format(name=self.name, east=SERVER.dsn(self.east),
                                               west=SERVER.dsn(self.west), extra=extra))

    def sync(self, **kw):
        env = dict(self.env)
        env.update(kw.pop("env", {}))
        return self.ferry("sync", "--once", "-c", self.pipeline, env=env, **kw)

    def change(self):
        """Several transactions in both databases: inserts, updates, deletes, a key changed, one
        key changed many times, and a large transaction."""
        self.round += 1
        r = self.round
        for db, base in ((self.east, 0), (self.west, 10000000)):
            SERVER.psql(f"""
UPDATE orders SET note = 'r{r} ' || id WHERE id % 11 = {r % 11};
DELETE FROM orders WHERE id % 17 = {r % 17};
INSERT INTO orders SELECT {base} + 2000000 + {r} * 10000 + i, 'new', i, now(), NULL
  FROM generate_series(1, 1200) i;
UPDATE orders SET id = id + 300000 WHERE id % 97 = {r % 97} AND id < {base} + 100000;
BEGIN;
UPDATE orders SET amount = amount + 1 WHERE id = {base} + 5;
UPDATE orders SET amount = amount + 1 WHERE id = {base} + 5;
COMMIT;
""", db=db)
        SERVER.psql(f"UPDATE \"East Only\" SET v = v + {r} WHERE v % 5 = 0", db=self.east)

    def verify(self):
        assert_pg_table_matches(self, SERVER, [self.east, self.west], "merged", "orders")
        assert_pg_table_matches(self, SERVER, self.east, "merged", "East Only")

    def crash(self, point):
        p = self.sync(env={"FERRY_FAULT": point}, check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr}")

    def test_backfill_and_changes_of_two_databases_survive_every_fault_point(self):
        self.configure()
        self.crash("graph.aligning:2")  # inside the backfill's chunks
        self.sync()
        self.verify()
        for point in ["graph.aligning", "source.mid_transaction", "sink.before_commit",
                      "sink.after_commit", "state.after_write", "source.before_acknowledge",
                      "graph.aligning:4"]:
            with self.subTest(point=point):
                self.change()
                self.crash(point)
                self.change()  # the sources go on changing before the restart
                self.sync()
                self.verify()
        # Each source's slot was acknowledged up to what the state holds for it.
        state = json.load(open(os.path.join(self.dir, "state.json")))
        positions = {e["namespace"]: e["state"]["position"] for e in state["streams"]
                     if e["stream"] == "orders"}
        self.assertEqual(sorted(positions), ["east/public", "west/public"])
        for db, ns in ((self.east, "east/public"), (self.west, "west/public")):
            slot = SERVER.psql("SELECT confirmed_flush_lsn - '0/0'::pg_lsn FROM "
                               f"pg_replication_slots WHERE database = '{db}'", db=db).strip()
            self.assertEqual(int(slot), positions[ns], db)

    def test_following_two_databases_while_one_is_quiet(self):
        # `ferry sync` without --once: east changes, west is quiet. East's checkpoints wait for
        # west's barrier, which west takes when asked (at its next keepalive); every change of
        # east lands, and SIGTERM ends the sync cleanly.
        self.configure(extra=", interval: 5s")
        self.sync()
        env = dict(os.environ)
        env.update(self.env)
        proc = subprocess.Popen([ferrytest.FERRY, "sync", "-c", self.pipeline], cwd=self.dir,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            for i in range(3):
                SERVER.psql(f"UPDATE orders SET note = 'follow {i}' WHERE id <= 600", db=self.east)
                deadline = time.monotonic() + 60
                while True:
                    seen = self.inspect(self.catalog_tables()[("merged", "orders")])
                    cols = [f["name"] for f in seen["schema"]["fields"]]
                    k, n = cols.index("id"), cols.index("note")
                    notes = {r[n] for r in seen["duckdb_rows"] if int(r[k]) <= 600}
                    if notes == {f"follow {i}"}:
                        break
                    self.assertLess(time.monotonic(), deadline,
                                    f"round {i} did not land in 60 s: {sorted(notes)[:5]}")
                    time.sleep(0.5)
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 0, err)
        self.change()
        self.sync()
        self.verify()

    def test_at_least_once_changes_still_converge(self):
        # Without alignment a restart may apply some changes twice; upserts and deletes by key
        # leave the table exact all the same.
        self.configure(extra=", mode: at_least_once")
        self.sync()
        for point in ["sink.after_commit", "state.after_write"]:
            self.change()
            self.crash(point)
            self.sync()
            self.verify()


if __name__ == "__main__":
    unittest.main()
