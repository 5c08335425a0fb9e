"""Soft deletes (`deletes: soft`): a row the source deletes stays in the destination with its last
values and `_ferry_deleted` true, through the stream's other transforms (columns left out, renames,
a filter judged on the deleted row's last values, computed columns, a route). What the destination
must hold is kept by the source database itself: a trigger of the test's copies every row the
source deletes (or moves to another key) into a `gone` table, and a view in the source is
`SELECT ..., false FROM the table WHERE filter UNION ALL SELECT ..., true FROM gone WHERE filter`.
Read back through DuckDB and icebird (and PostgreSQL for a PostgreSQL destination); the crash suite
kills the sync at every fault point of a pipeline using columns, a filter, a route and soft
deletes."""
import os
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ferrytest  # noqa: E402
import pgserver  # noqa: E402
import test_transforms  # noqa: E402
from test_postgres_to_iceberg import assert_pg_table_matches  # noqa: E402
from test_transforms import rows_as_text  # noqa: E402

FILTER = "status <> 'cancelled' AND amount > 0"
META = "      metadata_columns: [_ferry_op, _ferry_source_ts, _ferry_position]\n"

SQLITE_PIPELINE = """
name: soft
source:
  type: sqlite
  path: ./source.db
  mode: cdc
  deletes: soft
  streams:
    - name: orders
      chunk_rows: 400
      exclude_columns: [secret]
      rename_columns: {{customer: customer_name}}
      filter: "{filter}"
      add_columns:
        amount_cents: "CAST(round(amount * 100) AS INTEGER)"
route:
  - {{match: "ord.*", table: "kept_{{table}}"}}
destination: {{type: iceberg, warehouse: ./warehouse, namespace: lake}}
state: ./state.json
"""

# The test's own record of what the source deleted: the deleted row as it was, until its key comes
# back. An update that moves a row to another key deletes the old key.
SQLITE_SCHEMA = f"""
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, status TEXT, amount REAL,
                     secret INTEGER, created DATE, code TEXT UNIQUE);
CREATE TABLE gone AS SELECT * FROM orders WHERE 0;
CREATE TRIGGER track_delete AFTER DELETE ON orders BEGIN
  DELETE FROM gone WHERE id = OLD.id;
  INSERT INTO gone SELECT OLD.id, OLD.customer, OLD.status, OLD.amount, OLD.secret, OLD.created,
                          OLD.code;
END;
CREATE TRIGGER track_move AFTER UPDATE ON orders WHEN OLD.id IS NOT NEW.id BEGIN
  DELETE FROM gone WHERE id = OLD.id;
  INSERT INTO gone SELECT OLD.id, OLD.customer, OLD.status, OLD.amount, OLD.secret, OLD.created,
                          OLD.code;
END;
CREATE TRIGGER track_back AFTER INSERT ON orders BEGIN DELETE FROM gone WHERE id = NEW.id; END;
CREATE TRIGGER track_back_moved AFTER UPDATE ON orders BEGIN
  DELETE FROM gone WHERE id = NEW.id;
END;
CREATE VIEW expected AS
  SELECT id, customer AS customer_name, status, amount, created, code,
         CAST(round(amount * 100) AS INTEGER) AS amount_cents, 0 AS _ferry_deleted
  FROM orders WHERE {FILTER}
  UNION ALL
  SELECT id, customer, status, amount, created, code, CAST(round(amount * 100) AS INTEGER), 1
  FROM gone WHERE {FILTER};
"""


def orders_rows(base, n):
    statuses = ["paid", "cancelled", "open", None, "Paid"]
    out = []
    for i in range(base, base + n):
        amount = None if i % 13 == 0 else round((i % 89 - 15) * 1.25, 2)
        # `secret` holds text an INTEGER column cannot take: a sync that reads it stops.
        out.append((i, f"cüstomer {i % 40} 'q'", statuses[i % len(statuses)], amount,
                    "pin " + str(i), f"{2019 + i % 7}-{1 + i % 12:02d}-{1 + i % 28:02d}",
                    f"c{i}"))
    return out


class SqliteSoftDeletesTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        con = self.source()
        con.execute("PRAGMA journal_mode=WAL")
        con.executescript(SQLITE_SCHEMA)
        con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?)", orders_rows(1, 2500))
        con.commit()
        con.close()
        self.write_pipeline(SQLITE_PIPELINE.format(filter=FILTER))
        self.displaced = []  # ids of rows a REPLACE deleted

    def sync(self, **kw):
        return self.ferry("sync", "--once", "-c", self.pipeline, **kw)

    def assert_matches(self):
        seen = self.assert_table_equals_source("lake", "kept_orders", source_table="expected")
        names = [f["name"] for f in seen["schema"]["fields"]]
        self.assertEqual(names, ["id", "customer_name", "status", "amount", "created", "code",
                                 "amount_cents", "_ferry_deleted"])
        return seen

    def change(self, r):
        con = self.source()
        # Plain deletes (some of rows the filter holds for, some of rows it rejects).
        con.execute("DELETE FROM orders WHERE id % 17 = ?", (r,))
        # Changed, then deleted in the same round: the deleted row's last values are the changed.
        con.execute("UPDATE orders SET customer = 'last words', amount = 77 WHERE id % 19 = ?",
                    (r,))
        con.execute("DELETE FROM orders WHERE id % 19 = ? AND id % 2 = 0", (r,))
        # Moved to another key: the old key is deleted.
        con.execute("UPDATE orders SET id = id + 100000 WHERE id % 23 = ?", (r,))
        # A REPLACE that takes another row's unique code: that row is deleted without a DELETE
        # trigger firing (SQLite's recursive_triggers is off); the test records it by hand.
        victim = con.execute("SELECT id FROM orders WHERE id BETWEEN 1000 AND 2000 AND "
                             "status = 'paid' AND amount > 0 ORDER BY id LIMIT 1 OFFSET ?",
                             (r,)).fetchone()[0]
        con.execute("INSERT INTO gone SELECT * FROM orders WHERE id = ?", (victim,))
        con.execute("INSERT OR REPLACE INTO orders VALUES (?, 'replacer', 'paid', 3.5, 'x', "
                    "'2024-05-05', ?)", (700000 + r, f"c{victim}"))
        self.displaced.append(victim)
        # Deleted earlier, back now: the kept row becomes a live one again.
        con.executemany("INSERT OR IGNORE INTO orders VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [row for row in orders_rows(1, 2500) if row[0] % 17 == (r - 1) % 17
                         and row[0] % 3 == 0])
        con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?)",
                        orders_rows(10000 * (r + 1), 150))
        # Inserted and deleted between two syncs: a deleted row all the same.
        con.execute("DELETE FROM orders WHERE id >= ? AND id < ?",
                    (10000 * (r + 1), 10000 * (r + 1) + 20))
        con.commit()
        con.close()

    def test_deleted_rows_stay_with_their_last_values(self):
        check = self.ferry("check", "-c", self.pipeline)
        self.assertIn("deletes: soft (_ferry_deleted)", check.stdout)
        self.sync()
        seen = self.assert_matches()
        self.assertTrue(all(r[-1] == "false" for r in seen["duckdb_rows"]))
        for r in range(1, 4):
            self.change(r)
            self.sync()
            seen = self.assert_matches()
            kept = {row[0]: row for row in seen["duckdb_rows"] if row[-1] == "true"}
            # The row a REPLACE displaced, with its last values.
            self.assertIn(str(self.displaced[-1]), kept)
            self.assertEqual(kept[str(self.displaced[-1])][5], f"c{self.displaced[-1]}")
        self.assertGreater(len(kept), 200)
        self.assertIn("last words", [row[1] for row in kept.values()])
        # verify compares the live rows and says how many were kept for deletes.
        v = self.ferry("verify", "-c", self.pipeline)
        self.assertIn("1 of 1 tables match", v.stdout)
        self.assertIn(f"{len(kept)} row(s) with _ferry_deleted true", v.stdout)

    def test_soft_deletes_survive_kills_at_every_fault_point(self):
        self.sync()
        for n, point in enumerate(("sink.data_written", "sink.before_commit", "sink.after_commit",
                                   "state.after_write")):
            with self.subTest(point=point):
                self.change(n + 1)
                p = self.sync(env={"FERRY_FAULT": point}, check=False)
                self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr}")
                self.sync()
                self.assert_matches()

    def test_metadata_columns_say_what_each_change_was_and_where(self):
        self.write_pipeline(SQLITE_PIPELINE.format(filter=FILTER).replace(
            "      chunk_rows: 400\n", "      chunk_rows: 400\n" + META))
        self.sync()
        rows = self.rows_by_id()
        self.assertTrue(all(r[-4:-1] == ["read", None, None] for r in rows.values()))
        con = self.source()
        live = [r[0] for r in con.execute(f"SELECT id FROM orders WHERE {FILTER} ORDER BY id")]
        a, b, c = live[:3]
        con.execute("UPDATE orders SET customer = 'changed' WHERE id = ?", (a,))
        con.execute("DELETE FROM orders WHERE id = ?", (b,))
        con.execute("INSERT INTO orders VALUES (900001, 'new', 'paid', 2, 's', '2024-01-01', 'n1')")
        con.commit()
        con.execute("UPDATE orders SET customer = 'later' WHERE id = ?", (c,))
        con.commit()
        con.close()
        self.sync()
        rows = self.rows_by_id()
        ops = {k: r[-4] for k, r in rows.items() if r[-4] != "read"}
        self.assertEqual(ops, {str(a): "update", str(b): "delete", "900001": "insert",
                               str(c): "update"})
        # SQLite's change tables carry no commit times; positions are change-table sequences.
        self.assertTrue(all(rows[k][-3] is None for k in ops))
        seq = {k: int(rows[k][-2].lstrip("#")) for k in ops}
        self.assertLess(seq["900001"], seq[str(c)])
        self.assertLess(seq[str(a)], seq[str(c)])
        v = self.ferry("verify", "-c", self.pipeline)
        self.assertIn("1 of 1 tables match", v.stdout)
        self.assertIn("column _ferry_op is not compared", v.stdout)

    def rows_by_id(self):
        seen = self.inspect(self.catalog_tables()[("lake", "kept_orders")])
        names = [f["name"] for f in seen["schema"]["fields"]]
        self.assertEqual(names[-4:], ["_ferry_op", "_ferry_source_ts", "_ferry_position",
                                      "_ferry_deleted"])
        return {r[0]: r for r in seen["duckdb_rows"]}

    def test_a_sqlite_destination_keeps_deleted_rows_too(self):
        self.write_pipeline(SQLITE_PIPELINE.format(filter=FILTER).replace(
            "destination: {type: iceberg, warehouse: ./warehouse, namespace: lake}",
            "destination: {type: sqlite, path: ./replica.db}"))
        cols = ("id, customer_name, status, amount, created, code, amount_cents, "
                "_ferry_deleted")
        for r in range(3):
            if r:
                self.change(r)
            self.sync()
            con = self.source()
            want = sorted(con.execute(f"SELECT {cols} FROM expected").fetchall())
            con.close()
            replica = self.source(os.path.join(self.dir, "replica.db"))
            got = sorted(replica.execute(f'SELECT {cols} FROM "kept_orders"').fetchall())
            replica.close()
            # The replica's dates are ISO text and its booleans 0/1, as the source's view has them.
            self.assertEqual(len(got), len(want), f"round {r}")
            self.assertEqual(got, want, f"round {r}")
        self.assertGreater(sum(1 for row in got if row[-1] == 1), 100)

    def test_modes_that_see_no_deletes_refuse_soft_deletes(self):
        self.write_pipeline(SQLITE_PIPELINE.format(filter=FILTER).replace(
            "      chunk_rows: 400\n", "      chunk_rows: 400\n      mode: incremental\n"
            "      cursor: id\n      deletes: soft\n"))
        p = self.ferry("check", "-c", self.pipeline, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("deletes: soft with mode incremental, which sees no deletes", p.stderr)
        self.assertIn("use mode cdc", p.stderr)
        # A table with a column of that name.
        con = self.source()
        con.execute("ALTER TABLE orders ADD COLUMN _ferry_deleted INTEGER")
        con.commit()
        con.close()
        self.write_pipeline(SQLITE_PIPELINE.format(filter=FILTER))
        p = self.ferry("check", "-c", self.pipeline, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("_ferry_deleted", p.stderr)


SERVER = None

PG_PIPELINE = """
name: {name}
source:
  type: postgres
  dsn: "{dsn}"
  streams:
    - name: sales.items
      mode: cdc
      chunk_rows: 700
      deletes: soft
      exclude_columns: [secret]
      rename_columns: {{name: title}}
      filter: "{filter}"
      add_columns: {{amount_cents: "CAST(round(amount * 100) AS INTEGER)"}}
route:
  - {{match: "sales\\\\.item.*", table: "soft_{{table}}"}}
destination: {destination}
state: ./state.json
"""
ICEBERG = "{type: iceberg, warehouse: ./warehouse, namespace: pgsoft}"

PG_SCHEMA = f"""
CREATE SCHEMA sales;
CREATE TABLE sales.items (id bigint PRIMARY KEY, name text, status text, amount numeric(12,2),
                          secret text, at timestamptz, notes text);
ALTER TABLE sales.items REPLICA IDENTITY FULL;
INSERT INTO sales.items SELECT i, 'näme ' || i, (ARRAY['paid','cancelled','open',NULL])[1 + i % 4],
    CASE WHEN i % 13 = 0 THEN NULL ELSE (i % 50 - 10) * 1.25 END, 'pin ' || i,
    timestamptz '2024-01-01 00:00:00+00' + i * interval '1 hour',
    CASE WHEN i % 97 = 0 THEN repeat('long text ' || i, 2000) END
  FROM generate_series(1, 3000) i;
CREATE TABLE sales.gone (LIKE sales.items);
CREATE FUNCTION sales.track() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    DELETE FROM sales.gone WHERE id = OLD.id;
    INSERT INTO sales.gone SELECT OLD.*;
  ELSE
    IF TG_OP = 'UPDATE' AND OLD.id <> NEW.id THEN
      DELETE FROM sales.gone WHERE id = OLD.id;
      INSERT INTO sales.gone SELECT OLD.*;
    END IF;
    DELETE FROM sales.gone WHERE id = NEW.id;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER track AFTER INSERT OR UPDATE OR DELETE ON sales.items
  FOR EACH ROW EXECUTE FUNCTION sales.track();
CREATE VIEW expected AS
  SELECT id, name AS title, status, amount, at, notes,
         CAST(round(amount * 100) AS integer) AS amount_cents, false AS _ferry_deleted
  FROM sales.items WHERE {FILTER}
  UNION ALL
  SELECT id, name, status, amount, at, notes, CAST(round(amount * 100) AS integer), true
  FROM sales.gone WHERE {FILTER};
"""


def pg_change(db, n):
    SERVER.psql(f"""
        UPDATE sales.items SET status = CASE status WHEN 'paid' THEN 'cancelled' ELSE 'paid' END
          WHERE id % 6 = {n};
        UPDATE sales.items SET secret = 'x' || id WHERE id % 4 = {n % 4};
        DELETE FROM sales.items WHERE id % 23 = {n};
        BEGIN;
        UPDATE sales.items SET name = 'last words', amount = 42 WHERE id % 29 = {n};
        DELETE FROM sales.items WHERE id % 29 = {n} AND id % 2 = 0;
        COMMIT;
        UPDATE sales.items SET id = id + 100000 WHERE id % 31 = {n};
        DELETE FROM sales.items WHERE id % 97 = 0 AND id % 3 = {n % 3};
        INSERT INTO sales.items SELECT i, 'k ' || i, 'paid', i % 9, 's', now(), NULL
          FROM generate_series({20000 + 1000 * n}, {20000 + 1000 * n + 300}) i;
        DELETE FROM sales.items WHERE id BETWEEN {20000 + 1000 * n} AND {20000 + 1000 * n + 20};
        INSERT INTO sales.items SELECT id, name || ' back', 'paid', 1, 's', at, NULL
          FROM sales.gone WHERE id % 23 = {(n + 22) % 23} AND id < 20000 LIMIT 10;
    """, db=db)


def setUpModule():
    global SERVER
    SERVER = pgserver.start_for_module()
    test_transforms.SERVER = SERVER  # its rows_as_text reads this server


def tearDownModule():
    if SERVER:
        SERVER.stop()


class PostgresSoftDeletesTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
        self.db = SERVER.create_test_database("soft", self._testMethodName)
        SERVER.psql(PG_SCHEMA, db=self.db)

    def tearDown(self):
        SERVER.drop_test_database(self.db)
        super().tearDown()

    def configure(self, destination=ICEBERG):
        self.write_pipeline(PG_PIPELINE.format(name=self.db, dsn=SERVER.dsn(self.db),
                                               filter=FILTER, destination=destination))

    def sync(self, env=None, **kw):
        e = dict(self.env)
        e.update(env or {})
        return self.ferry("sync", "--once", "-c", self.pipeline, env=e, **kw)

    def assert_matches(self):
        seen = assert_pg_table_matches(self, SERVER, self.db, "pgsoft", "soft_items",
                                       source_table="expected")
        names = [f["name"] for f in seen["schema"]["fields"]]
        self.assertEqual(names, ["id", "title", "status", "amount", "at", "notes", "amount_cents",
                                 "_ferry_deleted"])
        return seen

    def test_a_table_without_full_replica_identity_is_refused_with_the_fix(self):
        SERVER.psql("ALTER TABLE sales.items REPLICA IDENTITY DEFAULT", db=self.db)
        self.configure()
        for command in ("check", "sync"):
            p = self.ferry(command, "-c", self.pipeline, env=self.env, check=False)
            self.assertNotEqual(p.returncode, 0, p.stdout)
            self.assertIn("REPLICA IDENTITY FULL", p.stderr)
            self.assertIn('ALTER TABLE "sales"."items" REPLICA IDENTITY FULL', p.stderr)
            self.assertIn("deletes: hard", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "warehouse", "catalog.db")) and
                         self.catalog_tables())
        # A partitioned table: its partitions' identity is what the log follows.
        SERVER.psql("""
            CREATE TABLE sales.parts (LIKE sales.items) PARTITION BY RANGE (id);
            ALTER TABLE sales.parts ADD PRIMARY KEY (id);
            CREATE TABLE sales.parts_low PARTITION OF sales.parts FOR VALUES FROM (0) TO (100);
            CREATE TABLE sales.parts_high PARTITION OF sales.parts FOR VALUES FROM (100) TO (200);
            ALTER TABLE sales.parts REPLICA IDENTITY FULL;
            ALTER TABLE sales.parts_low REPLICA IDENTITY FULL;
        """, db=self.db)
        with open(self.pipeline, encoding="utf-8") as f:
            text = f.read()
        self.write_pipeline(text.replace("- name: sales.items", "- name: sales.parts"))
        p = self.ferry("check", "-c", self.pipeline, env=self.env, check=False)
        self.assertNotEqual(p.returncode, 0, p.stdout)
        self.assertIn('ALTER TABLE "sales"."parts_high" REPLICA IDENTITY FULL', p.stderr)
        self.assertNotIn('"parts_low"', p.stderr)

    def test_soft_deletes_with_columns_a_filter_and_a_route_survive_kills(self):
        self.configure()
        self.sync()
        self.assert_matches()
        for n, point in enumerate(("source.mid_transaction", "sink.data_written",
                                   "sink.before_commit", "sink.after_commit", "state.after_write",
                                   "source.before_acknowledge")):
            with self.subTest(point=point):
                pg_change(self.db, n)
                p = self.sync(env={"FERRY_FAULT": point}, check=False)
                self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr}")
                self.sync()
                seen = self.assert_matches()
        kept = [r for r in seen["duckdb_rows"] if r[-1] == "true"]
        self.assertGreater(len(kept), 100)
        self.assertIn("last words", [r[1] for r in kept])
        # A long (TOASTed) value is kept with its deleted row.
        self.assertTrue(any(r[5] and r[5].startswith("long text") for r in kept))
        v = self.ferry("verify", "-c", self.pipeline, env=self.env)
        self.assertIn("1 of 1 tables match", v.stdout)

    def test_metadata_columns_say_what_each_change_was_when_and_where(self):
        self.configure()
        with open(self.pipeline, encoding="utf-8") as f:
            text = f.read()
        self.write_pipeline(text.replace("      deletes: soft\n", "      deletes: soft\n" + META))
        self.sync()
        rows = self.rows_by_id()
        self.assertTrue(all(r[-4:-1] == ["read", None, None] for r in rows.values()))

        def lsn():
            x, y = SERVER.psql("SELECT pg_current_wal_insert_lsn()", db=self.db).strip().split("/")
            return (int(x, 16) << 32) | int(y, 16)

        # Ids 16, 18 and 20 pass the filter.
        before, t0 = lsn(), time.time()
        SERVER.psql("""
            BEGIN;
            UPDATE sales.items SET amount = amount + 1 WHERE id = 16;
            DELETE FROM sales.items WHERE id = 20;
            INSERT INTO sales.items VALUES (90000, 'new', 'paid', 5, 's', now(), NULL);
            COMMIT;
            UPDATE sales.items SET name = 'later' WHERE id = 18;
        """, db=self.db)
        after, t1 = lsn(), time.time()
        self.sync()
        rows = self.rows_by_id()
        changed = {k: r for k, r in rows.items() if r[-4] != "read"}
        self.assertEqual({k: r[-4] for k, r in changed.items()},
                         {"16": "update", "20": "delete", "90000": "insert", "18": "update"})
        for k, r in changed.items():
            self.assertTrue(t0 - 1 <= int(r[-3]) / 1e6 <= t1 + 1, r)
            x, y = r[-2].split("/")
            self.assertTrue(before <= ((int(x, 16) << 32) | int(y, 16)) <= after, r)
        # One transaction, one commit: its rows share time and position; the later one is after.
        self.assertEqual(len({tuple(changed[k][-3:-1]) for k in ("16", "20", "90000")}), 1)
        self.assertGreater(int(changed["18"][-3]), int(changed["16"][-3]) - 1)
        self.assertNotEqual(changed["18"][-2], changed["16"][-2])
        v = self.ferry("verify", "-c", self.pipeline, env=self.env)
        self.assertIn("1 of 1 tables match", v.stdout)

    def rows_by_id(self):
        seen = self.inspect(self.catalog_tables()[("pgsoft", "soft_items")])
        names = [f["name"] for f in seen["schema"]["fields"]]
        self.assertEqual(names[-4:], ["_ferry_op", "_ferry_source_ts", "_ferry_position",
                                      "_ferry_deleted"])
        return {r[0]: r for r in seen["duckdb_rows"]}

    def test_a_postgres_destination_keeps_deleted_rows_too(self):
        target = SERVER.create_test_database("softdst", self._testMethodName)
        try:
            self.configure(f"{{type: postgres, dsn: \"{SERVER.dsn(target)}\", schema: copy}}")
            cols = ["id", "title", "status", "amount", "at", "notes", "amount_cents",
                    "_ferry_deleted"]
            for n in range(3):
                if n:
                    pg_change(self.db, n)
                self.sync()
                src = rows_as_text(self.db, "public", "expected", cols)
                dst = rows_as_text(target, "copy", "soft_items", cols)
                self.assertEqual(src, dst, f"round {n}: {len(src)} rows expected, {len(dst)}")
            self.assertGreater(sum(1 for r in dst if r[-1] == "true"), 100)
        finally:
            SERVER.drop_test_database(target)



if __name__ == "__main__":
    unittest.main()
