"""Transforms between a source and its destination: columns chosen or left out (and then never
read), renamed columns, computed columns, a row filter with one meaning in every mode, and the
destination table's name. Each check compares the destination, read by icebird and DuckDB (or by
PostgreSQL itself), with the source database's own query of the same expressions: a view in the
source that selects, renames, computes and filters as the pipeline says."""
import csv
import io
import os
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ferrytest  # noqa: E402
import pgserver  # noqa: E402
from test_postgres_to_iceberg import assert_pg_table_matches  # noqa: E402

FILTER = "status <> 'cancelled' AND amount > 0"

SQLITE_PIPELINE = """
name: shaped
source:
  type: sqlite
  path: ./source.db
  streams:
    - name: orders
      mode: {mode}
      chunk_rows: 500
      {columns}
      rename_columns: {{customer: customer_name}}
      filter: "{filter}"
      add_columns:
        amount_cents: "CAST(round(amount * 100) AS INTEGER)"
        year: {{expr: "CAST(strftime('%Y', created) AS INTEGER)", type: int}}
      table: orders_clean
destination: {{type: iceberg, warehouse: ./warehouse, namespace: lake}}
state: ./state.json
"""

# What the destination must hold: the source's own evaluation of the pipeline's expressions.
SQLITE_EXPECTED = f"""
CREATE VIEW expected AS
  SELECT id, customer AS customer_name, status, amount, created,
         CAST(round(amount * 100) AS INTEGER) AS amount_cents,
         CAST(strftime('%Y', created) AS INTEGER) AS year
  FROM orders WHERE {FILTER}
"""


def orders_rows(base, n):
    statuses = ["paid", "cancelled", "open", None, "Paid", "refunded"]
    out = []
    for i in range(base, base + n):
        status = statuses[i % len(statuses)]
        amount = None if i % 13 == 0 else (0 if i % 11 == 0 else round((i % 97 - 20) * 1.37, 2))
        created = f"{2020 + i % 6}-{1 + i % 12:02d}-{1 + i % 28:02d}"
        out.append((i, f"cüstomer {i % 50} \"q\" 'x'", status, amount, "pin-" + str(i), created))
    return out


class SqliteTransformsTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        con = self.source()
        con.execute("PRAGMA journal_mode=WAL")
        # `secret` is declared INTEGER but holds text no integer column can take: reading it
        # fails, so a sync that succeeds never read it.
        con.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, status TEXT, "
                    "amount REAL, secret INTEGER, created DATE)")
        con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)", orders_rows(1, 3000))
        con.execute(SQLITE_EXPECTED)
        con.commit()
        con.close()

    def configure(self, mode="full_refresh", columns="exclude_columns: [secret]", flt=FILTER):
        self.write_pipeline(SQLITE_PIPELINE.format(mode=mode, columns=columns, filter=flt))

    def sync(self, **kw):
        return self.ferry("sync", "--once", "-c", self.pipeline, **kw)

    def assert_matches(self):
        seen = self.assert_table_equals_source("lake", "orders_clean", source_table="expected")
        names = [f["name"] for f in seen["schema"]["fields"]]
        self.assertEqual(names, ["id", "customer_name", "status", "amount", "created",
                                 "amount_cents", "year"])
        types = {f["name"]: f["type"] for f in seen["schema"]["fields"]}
        self.assertEqual(types["amount_cents"], "long")
        self.assertEqual(types["year"], "int")
        return seen

    def test_full_refresh_reads_only_chosen_columns_and_writes_what_the_source_query_gives(self):
        # Without the exclusion the load reads `secret` and stops on its first value.
        self.configure(columns="")
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("secret", p.stderr)
        self.configure()
        d = self.ferry("discover", "-c", self.pipeline)
        self.assertIn("destination table: orders_clean", d.stdout)
        self.assertIn("transforms: 5 of 6 columns (left out: secret), renamed: customer -> "
                      "customer_name, filter: " + FILTER + ", computed: amount_cents long, "
                      "computed: year int", d.stdout)
        out = self.sync()
        seen = self.assert_matches()
        expected = self.source().execute("SELECT count(*) FROM expected").fetchone()[0]
        self.assertGreater(expected, 500)
        self.assertLess(expected, 3000)  # the filter dropped rows
        self.assertEqual(len(seen["duckdb_rows"]), expected)
        self.assertEqual(set(self.catalog_tables()), {("lake", "orders_clean")})
        self.assertIn("orders_clean", out.stdout)
        # The same with the columns listed instead of left out.
        self.configure(columns="columns: [id, customer, status, amount, created]")
        self.sync()
        self.assert_matches()
        # verify applies the stream's transforms to the source before comparing.
        v = self.ferry("verify", "-c", self.pipeline)
        self.assertIn("match", v.stdout)
        con = self.source()
        con.execute("UPDATE orders SET amount = amount + 1 WHERE id = 24")  # one that passes
        con.commit()
        con.close()
        v = self.ferry("verify", "-c", self.pipeline, check=False)
        self.assertNotEqual(v.returncode, 0, v.stdout)
        self.assertIn("id=24", v.stdout)

    def test_cdc_rows_move_in_and_out_of_the_filter(self):
        self.configure(mode="cdc")
        self.sync()
        self.assert_matches()
        for r in range(1, 4):
            con = self.source()
            # Out of the filter, back into it, changed within it, deleted, inserted.
            con.execute("UPDATE orders SET status = 'cancelled' WHERE id % 7 = ?", (r,))
            con.execute("UPDATE orders SET status = 'paid' WHERE id % 11 = ?", (r,))
            con.execute("UPDATE orders SET amount = -amount WHERE id % 13 = ?", (r,))
            con.execute("UPDATE orders SET amount = 5, customer = 'again' WHERE id % 17 = ? "
                        "AND amount IS NULL", (r % 13,))
            con.execute("DELETE FROM orders WHERE id % 19 = ?", (r,))
            con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)",
                            orders_rows(10000 * r, 300))
            con.commit()
            con.close()
            self.sync()
            self.assert_matches()

    def test_cdc_with_a_filter_survives_kills(self):
        self.configure(mode="cdc")
        self.sync()
        for n, point in enumerate(("sink.data_written", "sink.before_commit", "sink.after_commit",
                                   "state.after_write")):
            with self.subTest(point=point):
                con = self.source()
                con.execute("UPDATE orders SET status = CASE status WHEN 'paid' THEN 'cancelled' "
                            "ELSE 'paid' END WHERE id % 5 = ?", (n,))
                con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)",
                                orders_rows(20000 + 1000 * n, 200))
                con.commit()
                con.close()
                p = self.sync(env={"FERRY_FAULT": point}, check=False)
                self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr}")
                self.sync()
                self.assert_matches()

    def test_incremental_with_a_coarse_cursor_and_a_text_key(self):
        # A date cursor (hundreds of rows tie on each day) and a composite text key: rows that
        # arrive at the last committed day, and rows there that stop matching without their
        # cursor moving, are both seen through the window's ties.
        con = self.source()
        con.execute("CREATE TABLE events (region TEXT NOT NULL, code TEXT NOT NULL, day DATE, "
                    "status TEXT, note TEXT, secret INTEGER, PRIMARY KEY (region, code)) "
                    "WITHOUT ROWID")
        rows = [(f"r{i % 3} ü", f"c'{i}", f"2024-05-0{1 + i // 200}", "ok" if i % 5 else "void",
                 f"n{i}", "x") for i in range(600)]
        con.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)", rows)
        con.execute("CREATE VIEW expected_events AS SELECT region, code, day, status, note "
                    "FROM events WHERE status <> 'void'")
        con.commit()
        con.close()
        self.write_pipeline("""
name: ties
source:
  type: sqlite
  path: ./source.db
  streams:
    - name: events
      mode: incremental
      cursor: day
      tie_rows: 50
      exclude_columns: [secret]
      filter: "status <> 'void'"
destination: {type: iceberg, warehouse: ./warehouse, namespace: lake}
state: ./state.json
""")
        self.sync()
        self.assert_table_equals_source("lake", "events", source_table="expected_events")
        con = self.source()
        con.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)",
                        [(f"late{i}", "k", "2024-05-03", "ok", "late", "x") for i in range(30)])
        con.execute("UPDATE events SET status = 'void' WHERE day = '2024-05-03' "
                    "AND note IN ('n401', 'n402', 'n403')")
        con.commit()
        con.close()
        self.sync()
        seen = self.assert_table_equals_source("lake", "events", source_table="expected_events")
        con = self.source()
        expected = con.execute("SELECT count(*) FROM expected_events").fetchone()[0]
        con.close()
        self.assertEqual(len(seen["duckdb_rows"]), expected)
        self.assertNotIn(["r0 ü", "c'402"], [r[:2] for r in seen["duckdb_rows"]])

    def test_check_names_each_mistake_and_its_fix(self):
        cases = [
            ("exclude_columns: [id, secret]", FILTER, "leaves out key column id"),
            ("exclude_columns: [secret, Amount]", FILTER, "does not have"),
            ("exclude_columns: [secret]", "statu <> 'x'", "no such column: statu"),
            ("exclude_columns: [secret]", "status = ", "filter"),
            ("exclude_columns: [secret, status]", FILTER,
             "column status is left out by exclude_columns"),
        ]
        for columns, flt, message in cases:
            with self.subTest(message=message):
                self.configure(columns=columns, flt=flt)
                p = self.ferry("check", "-c", self.pipeline, check=False)
                self.assertNotEqual(p.returncode, 0, p.stdout)
                self.assertIn(message, p.stderr)
                self.assertIn("orders", p.stderr)
        # Nothing was created by the failed checks and syncs.
        self.assertFalse(os.path.exists(os.path.join(self.dir, "warehouse", "catalog.db")) and
                         self.catalog_tables())


MERGED_PIPELINE = """
name: routed
sources:
  - name: east
    type: sqlite
    path: ./east.db
    mode: cdc
    metadata_columns: [_ferry_source_table, _ferry_synced_at]
    streams: [{name: orders_east, table: orders}]
  - name: west
    type: sqlite
    path: ./west.db
    mode: cdc
    metadata_columns: [_ferry_source_table, _ferry_synced_at]
    streams: [{name: orders_west, rename_columns: {item_name: item}}]
route:
  - {match: "orders_w.*", table: orders, source: west}
destination: {type: iceberg, warehouse: ./warehouse, namespace: lake}
state: ./state.json
"""


class MergedByNameTest(ferrytest.FerryTestCase):
    """Tables of other names in two sources routed into one table (a stream's `table:`, a
    `route:` rule), their equal keys kept apart by `_ferry_source_table`, which joins the key."""

    def setUp(self):
        super().setUp()
        self.t0 = time.time()
        for region, col in (("east", "item"), ("west", "item_name")):
            con = self.source(os.path.join(self.dir, f"{region}.db"))
            con.execute("PRAGMA journal_mode=WAL")
            con.execute(f"CREATE TABLE orders_{region} (id INTEGER PRIMARY KEY, {col} TEXT, "
                        "qty INTEGER)")
            con.executemany(f"INSERT INTO orders_{region} VALUES (?, ?, ?)",
                            [(i, f"{region} {i}", i % 7) for i in range(1, 801)])
            con.commit()
            con.close()
        self.write_pipeline(MERGED_PIPELINE)

    def sync(self, **kw):
        return self.ferry("sync", "--once", "-c", self.pipeline, **kw)

    def assert_union(self):
        seen = self.inspect(self.catalog_tables()[("lake", "orders")])
        self.assertEqual(seen["problems"], [])
        fields = seen["schema"]["fields"]
        self.assertEqual([f["name"] for f in fields],
                         ["id", "item", "qty", "_ferry_source_table", "_ferry_synced_at"])
        expected = []
        for region in ("east", "west"):
            con = self.source(os.path.join(self.dir, f"{region}.db"))
            for row in con.execute(f"SELECT * FROM orders_{region}"):
                values = list(row) + [f"{region}:orders_{region}"]
                expected.append([ferrytest.canon(f["type"], v, "duckdb")
                                 for f, v in zip(fields, values)])
            con.close()
        # Every row says when it was read: within this test's time.
        now = time.time()
        for r in seen["duckdb_rows"]:
            self.assertTrue(self.t0 - 1 <= int(r[4]) / 1e6 <= now + 1, r)
        self.assert_same_rows(expected, [r[:4] for r in seen["duckdb_rows"]], "orders via DuckDB")
        v = self.ferry("verify", "-c", self.pipeline)
        self.assertIn("1 of 1 tables match", v.stdout)
        return seen

    def test_check_says_when_merged_keys_may_collide(self):
        self.write_pipeline(MERGED_PIPELINE.replace(
            "    metadata_columns: [_ferry_source_table, _ferry_synced_at]\n", ""))
        check = self.ferry("check", "-c", self.pipeline)
        self.assertIn("with east:orders_east, by key (id): the sources' keys must not collide",
                      check.stdout)
        self.assertIn("metadata_columns: [_ferry_source_table]", check.stdout)
        # What the warning is about: the load keeps both rows of each id, and a change to one
        # source's row replaces both.
        self.sync()
        seen = self.inspect(self.catalog_tables()[("lake", "orders")])
        self.assertEqual(len(seen["duckdb_rows"]), 1600)
        east = self.source(os.path.join(self.dir, "east.db"))
        east.execute("UPDATE orders_east SET qty = 99 WHERE id = 1")
        east.commit()
        east.close()
        self.sync()
        seen = self.inspect(self.catalog_tables()[("lake", "orders")])
        self.assertEqual([r for r in seen["duckdb_rows"] if r[0] == "1"], [["1", "east 1", "99"]])

    def test_equal_keys_of_two_tables_stay_apart_through_changes_and_kills(self):
        check = self.ferry("check", "-c", self.pipeline)
        self.assertIn("by key (_ferry_source_table, id): each source's rows kept apart",
                      check.stdout)
        self.assertIn("transforms: renamed: item_name -> item, metadata: _ferry_source_table",
                      check.stdout)
        self.sync()
        seen = self.assert_union()
        self.assertEqual(len(seen["duckdb_rows"]), 1600)
        for n, point in enumerate((None, "sink.before_commit", "sink.after_commit")):
            with self.subTest(point=point):
                east = self.source(os.path.join(self.dir, "east.db"))
                east.execute("DELETE FROM orders_east WHERE id % 10 = ?", (n,))
                east.execute("UPDATE orders_east SET qty = qty + 100 WHERE id % 9 = ?", (n,))
                east.commit()
                east.close()
                west = self.source(os.path.join(self.dir, "west.db"))
                west.execute("UPDATE orders_west SET item_name = 'changed' WHERE id % 10 = ?",
                             (n,))
                west.execute("INSERT INTO orders_west VALUES (?, 'new', 1)", (5000 + n,))
                west.commit()
                west.close()
                if point:
                    p = self.sync(env={"FERRY_FAULT": point}, check=False)
                    self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr}")
                self.sync()
                self.assert_union()


SHARDS_PIPELINE = """
name: shards
source:
  type: sqlite
  path: ./source.db
  mode: {mode}
  metadata_columns: [_ferry_source_table]
  streams:
    - {{name: orders_1, chunk_rows: 300}}
    - {{name: orders_2, chunk_rows: 300}}
    - {{name: orders_3, chunk_rows: 300}}
    - {{name: other, chunk_rows: 300}}
route:
  - {{match: "orders_[0-9]+", table: orders}}
destination: {{type: iceberg, warehouse: ./warehouse, namespace: lake}}
state: ./state.json
"""


class ShardsOfOneSourceTest(ferrytest.FerryTestCase):
    """Several tables of ONE source routed into one table (shards): read by one reader, one after
    the other (loads, SQLite change tables), their checkpoints aligned as one source's; each
    shard's rows kept apart by `_ferry_source_table`, each shard's progress its own part of the
    table's marker. Kills at the fault points, in the middle of the loads too."""

    def setUp(self):
        super().setUp()
        con = self.source()
        con.execute("PRAGMA journal_mode=WAL")
        for n in (1, 2, 3):
            con.execute(f"CREATE TABLE orders_{n} (id INTEGER PRIMARY KEY, item TEXT, qty INTEGER)")
            # The same ids in every shard.
            con.executemany(f"INSERT INTO orders_{n} VALUES (?, ?, ?)",
                            [(i, f"shard {n} item {i}", i % 9) for i in range(1, 1001 + 100 * n)])
        con.execute("CREATE TABLE other (id INTEGER PRIMARY KEY, v TEXT)")
        con.executemany("INSERT INTO other VALUES (?, ?)", [(i, f"v{i}") for i in range(1, 700)])
        con.execute("CREATE VIEW expected AS " + " UNION ALL ".join(
            f"SELECT id, item, qty, 'orders_{n}' AS _ferry_source_table FROM orders_{n}"
            for n in (1, 2, 3)))
        con.execute("CREATE VIEW expected_other AS SELECT id, v, 'other' AS _ferry_source_table "
                    "FROM other")
        con.commit()
        con.close()

    def sync(self, **kw):
        return self.ferry("sync", "--once", "-c", self.pipeline, **kw)

    def assert_matches(self):
        seen = self.assert_table_equals_source("lake", "orders", source_table="expected")
        self.assert_table_equals_source("lake", "other", source_table="expected_other")
        v = self.ferry("verify", "-c", self.pipeline)
        self.assertIn("2 of 2 tables match", v.stdout)
        return seen

    def change(self, n):
        con = self.source()
        for shard in (1, 2, 3):
            con.execute(f"UPDATE orders_{shard} SET qty = qty + 10 WHERE id % 7 = ?", (n % 7,))
            con.execute(f"DELETE FROM orders_{shard} WHERE id % 13 = ?", ((n + shard) % 13,))
            con.execute(f"INSERT INTO orders_{shard} VALUES (?, 'new', ?)", (5000 + n, shard))
        con.execute("UPDATE other SET v = v || '!' WHERE id % 5 = ?", (n % 5,))
        con.commit()
        con.close()

    def test_check_shows_the_shards_meeting_in_one_table(self):
        self.write_pipeline(SHARDS_PIPELINE.format(mode="cdc"))
        check = self.ferry("check", "-c", self.pipeline)
        self.assertIn("by key (_ferry_source_table, id): each source's rows kept apart",
                      check.stdout)
        self.assertEqual(check.stdout.count("-> lake.orders "), 3, check.stdout)
        # Without the column the shards' equal ids would meet: check says so.
        self.write_pipeline(SHARDS_PIPELINE.format(mode="cdc").replace(
            "  metadata_columns: [_ferry_source_table]\n", ""))
        check = self.ferry("check", "-c", self.pipeline)
        self.assertIn("keys must not collide", check.stdout)

    def test_a_full_refresh_of_shards_killed_mid_load_resumes_exactly(self):
        self.write_pipeline(SHARDS_PIPELINE.format(mode="full_refresh"))
        for n, point in enumerate(("sink.after_commit:3", "sink.before_commit:7",
                                   "state.after_write:9")):
            with self.subTest(point=point):
                p = self.sync(env={"FERRY_FAULT": point}, check=False)
                self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr}")
                self.sync()
                self.assert_matches()
                self.change(n)

    def test_cdc_of_shards_survives_kills_in_the_backfill_and_the_changes(self):
        self.write_pipeline(SHARDS_PIPELINE.format(mode="cdc"))
        p = self.sync(env={"FERRY_FAULT": "sink.after_commit:4"}, check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL, p.stderr)
        self.change(1)
        self.sync()  # the backfill, resumed
        self.sync()  # the changes made meanwhile
        self.assert_matches()
        for n, point in enumerate(("sink.data_written", "sink.before_commit", "sink.after_commit",
                                   "state.after_write")):
            with self.subTest(point=point):
                self.change(n + 2)
                p = self.sync(env={"FERRY_FAULT": point}, check=False)
                self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr}")
                self.sync()
                self.assert_matches()
        state = self.ferry("state", "-c", self.pipeline)
        self.assertIn("orders_2", state.stdout)


SERVER = None
PG_PIPELINE = """
name: {name}
source:
  type: postgres
  dsn: "{dsn}"
  table_name: "{{schema}}_{{table}}"
  streams:
    - name: sales.items
      mode: {mode}
      chunk_rows: 700
      {columns}
      rename_columns: {{name: title}}
      filter: "{filter}"
      add_columns: {{amount_cents: "CAST(round(amount * 100) AS INTEGER)"}}
destination: {{type: iceberg, warehouse: ./warehouse, namespace: pgshaped}}
state: ./state.json
"""

PG_FILTER = "status <> 'cancelled' AND amount > 0"
PG_SCHEMA = f"""
CREATE SCHEMA sales;
CREATE TABLE sales.items (id bigint PRIMARY KEY, name text, status text, amount numeric(12,2),
                          secret text, at timestamptz);
INSERT INTO sales.items SELECT i, 'näme ' || i, (ARRAY['paid','cancelled','open',NULL])[1 + i % 4],
    CASE WHEN i % 13 = 0 THEN NULL ELSE (i % 50 - 10) * 1.25 END, 'pin ' || i,
    timestamptz '2024-01-01 00:00:00+00' + i * interval '1 hour'
  FROM generate_series(1, 4000) i;
CREATE VIEW expected AS
  SELECT id, name AS title, status, amount, at, CAST(round(amount * 100) AS integer) AS amount_cents
  FROM sales.items WHERE {PG_FILTER};
"""


def rows_as_text(db, schema, table, columns):
    """Every row as a tuple of PostgreSQL's text forms, sorted."""
    cols = ", ".join(f'"{c}"::text' for c in columns)
    out = SERVER.psql(f'COPY (SELECT {cols} FROM "{schema}"."{table}") TO STDOUT (FORMAT csv)',
                      db=db)
    return sorted(tuple(r) for r in csv.reader(io.StringIO(out)))


def columns_of(db, table):
    out = SERVER.psql(f"SELECT attname FROM pg_attribute WHERE attrelid = '{table}'::regclass "
                      "AND attnum > 0 AND NOT attisdropped ORDER BY attnum", db=db)
    return [line for line in out.split("\n") if line]


def setUpModule():
    global SERVER
    SERVER = pgserver.start_for_module()


def tearDownModule():
    if SERVER:
        SERVER.stop()


class PostgresTransformsTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
        self.db = SERVER.create_test_database("tf", self._testMethodName)
        SERVER.psql(PG_SCHEMA, db=self.db)

    def tearDown(self):
        SERVER.drop_test_database(self.db)
        super().tearDown()

    def configure(self, mode, columns="exclude_columns: [secret]", dsn=None):
        self.write_pipeline(PG_PIPELINE.format(name=self.db, dsn=dsn or SERVER.dsn(self.db),
                                               mode=mode, columns=columns, filter=PG_FILTER))

    def sync(self, env=None, **kw):
        e = dict(self.env)
        e.update(env or {})
        return self.ferry("sync", "--once", "-c", self.pipeline, env=e, **kw)

    def assert_matches(self):
        seen = assert_pg_table_matches(self, SERVER, self.db, "pgshaped", "sales_items",
                                       source_table="expected")
        names = [f["name"] for f in seen["schema"]["fields"]]
        self.assertEqual(names, ["id", "title", "status", "amount", "at", "amount_cents"])
        return seen

    def test_columns_left_out_are_never_selected(self):
        # A user who may not read `secret`: the load reads the other columns only.
        SERVER.psql("DROP ROLE IF EXISTS tf_reader; CREATE ROLE tf_reader LOGIN PASSWORD 'r';"
                    f"GRANT USAGE ON SCHEMA sales TO tf_reader;"
                    "GRANT SELECT (id, name, status, amount, at) ON sales.items TO tf_reader;",
                    db=self.db)
        dsn = SERVER.dsn(self.db, user="tf_reader", password_ref="r")
        self.configure("full_refresh", columns="", dsn=dsn)
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("may not read column secret", p.stderr)
        self.assertIn("GRANT SELECT (\"secret\")", p.stderr)
        self.assertIn("exclude_columns", p.stderr)
        self.configure("full_refresh", dsn=dsn)
        self.sync()
        self.assert_matches()
        self.assertEqual(set(self.catalog_tables()), {("pgshaped", "sales_items")})
        # verify reads what the sync reads: the granted columns.
        v = self.ferry("verify", "-c", self.pipeline, env=self.env)
        self.assertIn("1 of 1 tables match", v.stdout)

    def test_cdc_moves_rows_in_and_out_of_the_filter(self):
        self.configure("cdc")
        self.sync()
        self.assert_matches()
        for r in range(3):
            SERVER.psql(f"""
                UPDATE sales.items SET status = 'cancelled' WHERE id % 7 = {r};
                UPDATE sales.items SET status = 'paid', secret = 'changed' WHERE id % 11 = {r};
                UPDATE sales.items SET amount = -amount WHERE id % 13 = {r + 1};
                UPDATE sales.items SET secret = 'only the secret' WHERE id % 5 = {r};
                DELETE FROM sales.items WHERE id % 19 = {r};
                INSERT INTO sales.items SELECT i, 'new ' || i, 'paid', i % 7, 's', now()
                  FROM generate_series({10000 * (r + 1)}, {10000 * (r + 1) + 200}) i;
            """, db=self.db)
            self.sync()
            self.assert_matches()
        # A column the stream leaves out changes type, with changes logged before and after: its
        # values are skipped in both (copied, the new type would stop the sync: Iceberg cannot
        # turn a string column into an int one).
        SERVER.psql("UPDATE sales.items SET secret = 'before', name = name || '.' WHERE id % 5 = 0;"
                    "ALTER TABLE sales.items ALTER COLUMN secret TYPE int USING length(secret);"
                    "UPDATE sales.items SET secret = 7, name = name || '!' WHERE id % 3 = 0",
                    db=self.db)
        self.sync()
        self.assert_matches()

    def test_cdc_with_transforms_survives_kills(self):
        self.configure("cdc")
        self.sync()
        for n, point in enumerate(("source.mid_transaction", "sink.data_written",
                                   "sink.before_commit", "sink.after_commit", "state.after_write",
                                   "source.before_acknowledge")):
            with self.subTest(point=point):
                SERVER.psql(f"""
                    UPDATE sales.items SET status = CASE status WHEN 'paid' THEN 'cancelled'
                      ELSE 'paid' END WHERE id % 6 = {n};
                    UPDATE sales.items SET secret = 'x' || id WHERE id % 4 = {n % 4};
                    DELETE FROM sales.items WHERE id % 23 = {n};
                    INSERT INTO sales.items SELECT i, 'k ' || i, 'paid', i % 9, 's', now()
                      FROM generate_series({20000 + 1000 * n}, {20000 + 1000 * n + 300}) i;
                """, db=self.db)
                p = self.sync(env={"FERRY_FAULT": point}, check=False)
                self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr}")
                self.sync()
                self.assert_matches()

    def test_a_postgres_destination_gets_the_same_rows(self):
        target = SERVER.create_test_database("tfdst", self._testMethodName)
        try:
            self.configure("cdc")
            with open(self.pipeline, encoding="utf-8") as f:
                text = f.read()
            text = text.replace(
                "destination: {type: iceberg, warehouse: ./warehouse, namespace: pgshaped}",
                f"destination: {{type: postgres, dsn: \"{SERVER.dsn(target)}\", schema: copy}}")
            self.write_pipeline(text)
            cols = ["id", "title", "status", "amount", "at", "amount_cents"]
            for r in range(3):
                if r:
                    SERVER.psql(f"""
                        UPDATE sales.items SET status = 'cancelled' WHERE id % 7 = {r};
                        UPDATE sales.items SET status = 'paid' WHERE id % 11 = {r};
                        UPDATE sales.items SET amount = -amount WHERE id % 13 = {r};
                        DELETE FROM sales.items WHERE id % 19 = {r};
                    """, db=self.db)
                self.sync()
                src = rows_as_text(self.db, "public", "expected", cols)
                dst = rows_as_text(target, "copy", "sales_items", cols)
                self.assertGreater(len(src), 1000)
                self.assertEqual(src, dst, f"round {r}: {len(src)} rows expected, {len(dst)}")
            self.assertEqual(columns_of(target, "copy.sales_items"), cols)
        finally:
            SERVER.drop_test_database(target)

    def test_shards_of_one_database_merge_into_one_table_through_kills(self):
        # Three schemas with the same table, routed into one; the same ids in each. The change
        # log is one (logical replication): the shards' checkpoints fall together.
        SERVER.psql("".join(f"""
            CREATE SCHEMA shard_{n};
            CREATE TABLE shard_{n}.orders (id bigint PRIMARY KEY, item text, qty int);
            INSERT INTO shard_{n}.orders SELECT i, 'shard {n} ' || i, i % 9
              FROM generate_series(1, {1500 + 300 * n}) i;
        """ for n in (1, 2, 3)) + "CREATE VIEW expected_shards AS " + " UNION ALL ".join(
            f"SELECT id, item, qty, 'shard_{n}.orders' AS _ferry_source_table FROM shard_{n}.orders"
            for n in (1, 2, 3)), db=self.db)
        self.write_pipeline(f"""
name: {self.db}
source:
  type: postgres
  dsn: "{SERVER.dsn(self.db)}"
  metadata_columns: [_ferry_source_table]
  streams:
    - {{name: shard_1.orders, mode: cdc, chunk_rows: 500}}
    - {{name: shard_2.orders, mode: cdc, chunk_rows: 500}}
    - {{name: shard_3.orders, mode: cdc, chunk_rows: 500}}
route:
  - {{match: "shard_[0-9]+\\\\.orders", table: orders}}
destination: {{type: iceberg, warehouse: ./warehouse, namespace: pgshaped}}
state: ./state.json
""")
        p = self.sync(env={"FERRY_FAULT": "sink.after_commit:3"}, check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL, p.stderr)
        self.sync()
        assert_pg_table_matches(self, SERVER, self.db, "pgshaped", "orders",
                                source_table="expected_shards")
        for n, point in enumerate(("source.mid_transaction", "sink.data_written",
                                   "sink.before_commit", "sink.after_commit", "state.after_write")):
            with self.subTest(point=point):
                SERVER.psql("".join(f"""
                    UPDATE shard_{k}.orders SET qty = qty + 1 WHERE id % 5 = {n};
                    DELETE FROM shard_{k}.orders WHERE id % 17 = {n + k};
                    INSERT INTO shard_{k}.orders SELECT i, 'new', {k}
                      FROM generate_series({9000 + 100 * n}, {9000 + 100 * n + 40}) i;
                """ for k in (1, 2, 3)), db=self.db)
                p = self.sync(env={"FERRY_FAULT": point}, check=False)
                self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr}")
                self.sync()
                assert_pg_table_matches(self, SERVER, self.db, "pgshaped", "orders",
                                        source_table="expected_shards")
        v = self.ferry("verify", "-c", self.pipeline, env=self.env)
        self.assertIn("1 of 1 tables match", v.stdout)

    def test_incremental_deletes_rows_that_stop_matching(self):
        self.configure("incremental\n      cursor: at")
        self.sync()
        self.assert_matches()
        SERVER.psql("""
            UPDATE sales.items SET status = 'cancelled', at = at + interval '1 year'
              WHERE id % 9 = 0;
            UPDATE sales.items SET amount = 3, at = at + interval '1 year' WHERE amount IS NULL;
            INSERT INTO sales.items VALUES (50000, 'late', 'paid', 1, 's', '2030-01-01');
        """, db=self.db)
        self.sync()
        self.assert_matches()


if __name__ == "__main__":
    unittest.main()
