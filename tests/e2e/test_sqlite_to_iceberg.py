"""End to end: a generated SQLite database synced into a local Iceberg warehouse, read back by
readers nobody here wrote (icebird, DuckDB, avsc), compared value by value with the source."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferrytest  # noqa: E402

PIPELINE = """
name: shop
source:
  type: sqlite
  path: ./source.db
  chunk_rows: {chunk_rows}
destination:
  type: iceberg
  warehouse: ./warehouse
  namespace: shop
state: ./state.json
"""

SCHEMA = r"""
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT, credit REAL,
                        avatar BLOB, signed_up DATE, seen_at DATETIME, score DECIMAL(12,3),
                        vip BOOLEAN, untyped);
CREATE TABLE "Order ""Items"" €" ("Line No" INTEGER PRIMARY KEY, "Qty" INTEGER NOT NULL,
                                  "naïve Ünicode 名" TEXT, "SELECT" TEXT);
CREATE TABLE extremes (id INTEGER PRIMARY KEY, i INTEGER, r REAL, t TEXT, b BLOB);
CREATE TABLE empty_table (id INTEGER PRIMARY KEY, v TEXT);
CREATE TABLE kv (k TEXT PRIMARY KEY, v BLOB) WITHOUT ROWID;
"""


def fill(con, n_customers):
    con.executescript(SCHEMA)
    con.execute(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
        "INSERT INTO customers SELECT i, "
        "  CASE i % 4 WHEN 0 THEN 'Zoë ' || i WHEN 1 THEN '山田 ' || i WHEN 2 THEN 'O''Brien ' || i ELSE '' END, "
        "  CASE WHEN i % 7 = 0 THEN NULL ELSE 'c' || i || '@example.com' END, "
        "  CASE WHEN i % 5 = 0 THEN NULL ELSE (i * 7919 % 100000) / 100.0 - 250.0 END, "
        "  CASE WHEN i % 3 = 0 THEN NULL ELSE CAST(char(0, i % 256, 255) AS BLOB) END, "
        "  date('1900-01-01', '+' || (i * 37 % 60000) || ' days'), "
        "  datetime('1960-01-01 00:00:00', '+' || (i * 3613) || ' seconds'), "
        "  CASE WHEN i % 6 = 0 THEN NULL ELSE printf('%d.%03d', i - 500, i % 1000) END, "
        "  CASE WHEN i % 8 = 0 THEN NULL ELSE i % 2 END, "
        "  CASE i % 3 WHEN 0 THEN i WHEN 1 THEN 'text ' || i ELSE NULL END "
        "FROM n", (n_customers,))
    con.executemany('INSERT INTO "Order ""Items"" €" VALUES (?, ?, ?, ?)',
                    [(i, i * 3, None if i % 2 else "ключ 🔑 " + str(i), "from") for i in range(1, 2001)])
    con.executemany("INSERT INTO extremes VALUES (?, ?, ?, ?, ?)", [
        (1, -9223372036854775808, float("inf"), "", b""),
        (2, 9223372036854775807, float("-inf"), "x" * 100000, b"\x00" * 1000),
        (3, 0, -0.0, "tab\tnewline\nquote'\"", bytes(range(256))),
        (4, -1, 5e-324, "\u0000 nul inside", b"\xff\xfe"),
        (5, None, 1.7976931348623157e308, None, None),
    ])
    con.executemany("INSERT INTO kv VALUES (?, ?)", [(f"key {i:04d}", bytes([i % 256])) for i in range(300)])
    con.commit()


class SqliteToIcebergTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        self.write_pipeline(PIPELINE.format(chunk_rows=1000))
        con = self.source()
        fill(con, 5500)
        con.close()

    def assert_all_tables(self):
        for table in ["customers", 'Order "Items" €', "extremes", "kv"]:
            self.assert_table_equals_source("shop", table)

    def test_check_discover_and_sync_give_the_source_rows_to_every_reader(self):
        check = self.ferry("check", "-c", self.pipeline)
        self.assertIn("exactly-once", check.stdout)
        self.assertIn('Order "Items" €', check.stdout)

        disc = json.loads(self.ferry("discover", "-c", self.pipeline, "--json").stdout)
        by_name = {s["name"]: s for s in disc}
        self.assertEqual(sorted(by_name), sorted(["customers", 'Order "Items" €', "extremes",
                                                  "empty_table", "kv"]))
        types = {c["name"]: c["iceberg_type"] for c in by_name["customers"]["columns"]}
        self.assertEqual(types, {"id": "long", "name": "string", "email": "string",
                                 "credit": "double", "avatar": "binary", "signed_up": "date",
                                 "seen_at": "timestamp", "score": "decimal(12,3)",
                                 "vip": "boolean", "untyped": "string"})
        self.assertEqual(by_name["customers"]["primary_key"], ["id"])

        out = self.sync()
        self.assertIn("total", out.stdout)
        self.assert_all_tables()
        seen = self.assert_table_equals_source("shop", "customers")
        # Field ids: the table's identifier field is the key; every data file carries the ids
        # (checked by DuckDB inside assert_table_equals_source).
        self.assertEqual(seen["schema"]["identifier-field-ids"], [1])
        self.assertEqual(int(seen["summary"]["total-records"]), 5500)
        # 5500 rows in chunks of 1000 rowids: 6 chunks, each committed as its own data file.
        self.assertEqual(len(seen["data_files"]), 6)
        self.assertEqual(seen["refs"], ["main"])  # the load branch is gone after publishing

        # The empty table exists and reads as empty.
        empty = self.inspect(self.catalog_tables()[("shop", "empty_table")])
        self.assertEqual(empty["problems"], [])
        self.assertEqual(empty["summary"]["total-records"], "0")

        with open(os.path.join(self.dir, "state.json")) as f:
            state = json.load(f)
        self.assertEqual(state["pipeline"], "shop")
        self.assertTrue(all(s["state"]["published"] for s in state["streams"]))

    def test_second_sync_replaces_contents_after_source_changes(self):
        self.sync()
        con = self.source()
        con.execute("DELETE FROM customers WHERE id % 10 = 3")
        con.execute("UPDATE customers SET name = 'renamed ' || id WHERE id % 10 = 4")
        con.execute("INSERT INTO customers (id, name) VALUES (90000, 'new far key'), (5501, 'next')")
        con.execute('DELETE FROM "Order ""Items"" €"')
        con.commit()
        con.close()
        self.sync()
        self.assert_all_tables()
        seen = self.assert_table_equals_source("shop", 'Order "Items" €')
        self.assertEqual(seen["summary"]["total-records"], "0")
        # A third sync with no changes still leaves exactly the source's rows (never doubled).
        self.sync()
        self.assert_table_equals_source("shop", "customers")

    def test_only_listed_streams_with_their_own_chunk_size(self):
        self.write_pipeline("""
name: shop
source:
  type: sqlite
  path: ./source.db
  streams:
    - extremes
    - name: customers
      chunk_rows: 2500
destination: {type: iceberg, warehouse: ./warehouse, namespace: shop}
""")
        self.sync()
        self.assertEqual(sorted(t for _, t in self.catalog_tables()), ["customers", "extremes"])
        seen = self.assert_table_equals_source("shop", "customers")
        self.assertEqual(len(seen["data_files"]), 3)


class BadInputTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        con = self.source()
        con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, at DATETIME)")
        con.execute("INSERT INTO t VALUES (1, '2024-01-01 00:00:00'), (2, 1700000000)")
        con.commit()
        con.close()

    def expect_error(self, pipeline_text, needle, code=2, command="check"):
        self.write_pipeline(pipeline_text)
        p = self.ferry(command, "-c", self.pipeline, check=False)
        self.assertEqual(p.returncode, code, p.stderr)
        self.assertIn(needle, p.stderr)
        return p

    def test_config_mistakes_name_the_key_and_the_fix(self):
        self.expect_error("name: s\nsource: {type: sqlite, path: ./source.db, chunk_row: 5}\n"
                          "destination: {type: iceberg, warehouse: ./w}\n",
                          "unknown key 'chunk_row'")
        self.expect_error("name: s\nsource: {type: sqlite, path: ./nope.db}\n"
                          "destination: {type: iceberg, warehouse: ./w}\n",
                          "does not exist; check source.path")
        self.expect_error("name: s\nsource:\n  type: sqlite\n  path: ./source.db\n  streams: [orders]\n"
                          "destination: {type: iceberg, warehouse: ./w}\n",
                          "stream 'orders' (line 5) is not a table of the source; its tables are: t")
        self.expect_error("name: s\nsource: {type: mongodb}\ndestination: {type: iceberg, warehouse: ./w}\n",
                          "source type 'mongodb' is not known")
        self.expect_error("name: s\nsource: {type: sqlite, path: ./source.db, mode: incremental}\n"
                          "destination: {type: iceberg, warehouse: ./w}\n",
                          "source.mode incremental needs each stream's cursor column")
        self.expect_error("name: s\nsource:\n  type: sqlite\n  path: ./source.db\n  streams:\n"
                          "    - {name: t, mode: incremental}\n"
                          "destination: {type: iceberg, warehouse: ./w}\n",
                          "mode incremental needs `cursor: <column>`; candidates: id, at")
        p = self.ferry("sync", check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("needs the pipeline file", p.stderr)

    def test_a_warehouse_ferry_cannot_write_is_refused_by_check_and_sync(self):
        # Object stores other than S3 are not written: check, sync and maintain refuse the scheme,
        # name the value and the fix, and create nothing (no folder named "gs:", no catalog, no
        # state). An s3:// warehouse needs a catalog that is not on the store.
        for uri in ["gs://bucket/wh", "abfss://c@a.dfs.core.windows.net/wh"]:
            scheme = uri.split(":")[0]
            text = ("name: s\nsource: {type: sqlite, path: ./source.db}\n"
                    f"destination: {{type: iceberg, warehouse: '{uri}'}}\nstate: ./state.json\n")
            for command in ["check", "sync", "maintain"]:
                p = self.expect_error(text, f"destination.warehouse (line 3): '{uri}' is on {scheme}://",
                                      command=command)
                self.assertIn("which ferry cannot write", p.stderr)
                self.assertIn("Set the warehouse to a local folder", p.stderr)
                self.assertIn("or to s3://bucket/prefix", p.stderr)
            self.assertEqual(sorted(os.listdir(self.dir)), ["pipeline.yaml", "source.db"])
        text = ("name: s\nsource: {type: sqlite, path: ./source.db}\n"
                "destination: {type: iceberg, warehouse: 's3://lake/warehouse'}\nstate: ./state.json\n")
        for command in ["check", "sync", "maintain"]:
            self.expect_error(text, "destination.catalog is required for an s3:// warehouse",
                              command=command)
        self.assertEqual(sorted(os.listdir(self.dir)), ["pipeline.yaml", "source.db"])
        # A file:// URI is a local folder like a path.
        folder = os.path.join(self.dir, "as uri")
        self.write_pipeline("name: s\nsource: {type: sqlite, path: ./source.db}\n"
                            f"destination: {{type: iceberg, warehouse: 'file://{folder}'}}\n")
        p = self.ferry("check", "-c", self.pipeline)
        self.assertIn(f"Iceberg warehouse {folder}, namespace s", p.stdout)
        self.assertTrue(os.path.exists(os.path.join(folder, "catalog.db")))

    def test_a_value_that_does_not_fit_stops_the_sync_and_names_it(self):
        p = self.expect_error("name: s\nsource: {type: sqlite, path: ./source.db}\n"
                              "destination: {type: iceberg, warehouse: ./w}\n",
                              "table t, column at, rowid 2", code=2, command="sync")
        self.assertIn("does not guess the unit", p.stderr)
        # Nothing half-loaded is visible: main has no snapshot.
        tables = self.catalog_tables("w")
        seen = self.inspect(tables[("s", "t")])
        self.assertEqual(seen["current_snapshot_id"], "-1")

    def test_corrupted_state_file_is_reported_and_kept(self):
        self.write_pipeline("name: s\nsource:\n  type: sqlite\n  path: ./source.db\n  streams: [t]\n"
                            "destination: {type: iceberg, warehouse: ./w}\nstate: ./state.json\n")
        with open(os.path.join(self.dir, "state.json"), "w") as f:
            f.write('{"version": 1, "pipeline": "s", "streams": [')
        p = self.ferry("sync", "-c", self.pipeline, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("is not valid JSON", p.stderr)
        with open(os.path.join(self.dir, "state.json")) as f:
            self.assertEqual(f.read(), '{"version": 1, "pipeline": "s", "streams": [')


if __name__ == "__main__":
    unittest.main(verbosity=2)
