"""`ferry verify`: after a sync the source and the Iceberg tables match (exit 0) across every
type; a source changed without a sync is reported key by key (exit 1); a destination changed
behind the pipeline's back is detected too, and for CDC streams told apart from replication lag."""
import json
import os
import sqlite3
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, HERE)
import ferrytest  # noqa: E402
from test_sqlite_to_iceberg import fill  # noqa: E402  (tables of every type, awkward names)

FULL_REFRESH = """
name: shop
source:
  type: sqlite
  path: ./source.db
  chunk_rows: 700
destination: {type: iceberg, warehouse: ./warehouse, namespace: shop}
state: ./state.json
"""

CDC = """
name: cdc
source:
  type: sqlite
  path: ./source.db
  mode: cdc
  chunk_rows: 500
  streams: [items, notes]
destination: {type: iceberg, warehouse: ./warehouse, namespace: lake}
state: ./state.json
"""

INCREMENTAL = """
name: inc
source:
  type: sqlite
  path: ./source.db
  streams: [{name: items, mode: incremental, cursor: day}]
destination: {type: iceberg, warehouse: ./warehouse, namespace: lake}
state: ./state.json
"""

# A second pipeline writing into the same table from another database: it upserts rows the first
# pipeline's source does not have, as a stray writer would.
INTRUDER = """
name: intruder
source:
  type: sqlite
  path: ./other.db
  streams: [{name: items, mode: incremental, cursor: id}]
destination: {type: iceberg, warehouse: ./warehouse, namespace: lake}
state: ./intruder.state.json
"""


class VerifyTest(ferrytest.FerryTestCase):
    def verify(self, *args, pipeline=None):
        p = self.ferry("verify", "-c", pipeline or self.pipeline, "--json", *args, check=False)
        self.assertIn(p.returncode, (0, 1), f"verify failed to run:\n{p.stdout}\n{p.stderr}")
        tables = {t["stream"]: t for t in json.loads(p.stdout)}
        for t in tables.values():
            self.assertIsNone(t["error"], t)
        # Exit 0 exactly when every table matches.
        self.assertEqual(p.returncode == 0, all(t["matches"] for t in tables.values()), tables)
        return p.returncode, tables

    def differences(self, table):
        return {(e["kind"], e["key"]): e["columns"] for e in table["examples"]}

    def test_full_refresh_matches_then_names_exactly_the_changed_keys(self):
        self.write_pipeline(FULL_REFRESH)
        con = self.source()
        fill(con, 3000)
        con.execute("CREATE TABLE bag (word TEXT, n INTEGER)")  # no key: a multiset
        con.executemany("INSERT INTO bag VALUES (?, ?)", [("a", 1), ("a", 1), ("b", None), ("", 0)])
        con.commit()
        con.close()
        self.sync()
        code, tables = self.verify()
        self.assertEqual(code, 0, tables)
        self.assertEqual(set(tables), {"customers", 'Order "Items" €', "extremes", "empty_table",
                                       "kv", "bag"})
        self.assertEqual(tables["customers"]["source_rows"], 3000)
        self.assertEqual(tables["customers"]["destination_rows"], 3000)
        self.assertEqual(tables["customers"]["key"], ["id"])
        self.assertEqual(tables["bag"]["key"], [])

        # The text form: one summary line per table, exit 0.
        text = self.ferry("verify", "-c", self.pipeline)
        self.assertIn("shop.customers: source 3000 rows, destination 3000 rows, 0 missing, 0 extra, "
                      "0 different: match", text.stdout)
        self.assertIn("6 of 6 tables match", text.stdout)

        # Change the source without syncing: an update, a delete, an insert (and NULL vs '').
        con = self.source()
        con.execute("UPDATE customers SET name = 'renamed', credit = 1.5 WHERE id = 42")
        con.execute("UPDATE customers SET email = '' WHERE id = 14")  # was NULL (14 % 7 == 0)
        con.execute("DELETE FROM customers WHERE id = 77")
        con.execute("INSERT INTO customers (id, name) VALUES (9001, 'new')")
        con.execute("DELETE FROM bag WHERE word = 'a' AND rowid = (SELECT max(rowid) FROM bag "
                    "WHERE word = 'a')")
        con.execute("DELETE FROM kv WHERE k = 'key 0007'")
        con.commit()
        con.close()
        code, tables = self.verify()
        self.assertEqual(code, 1)
        c = tables["customers"]
        self.assertFalse(c["matches"])
        self.assertEqual((c["source_rows"], c["destination_rows"]), (3000, 3000))
        self.assertEqual((c["missing"], c["extra"], c["different"]), (1, 1, 2))
        diffs = self.differences(c)
        self.assertEqual(set(diffs), {("missing in destination", "id=9001"),
                                      ("extra in destination", "id=77"),
                                      ("different values", "id=42"),
                                      ("different values", "id=14")})
        self.assertEqual([col.split(":")[0] for col in diffs[("different values", "id=42")]],
                         ["name", "credit"])
        self.assertEqual(diffs[("different values", "id=14")],
                         ["email: source '', destination NULL"])
        b = tables["bag"]
        self.assertEqual((b["source_rows"], b["destination_rows"], b["extra"]), (3, 4, 1))
        self.assertEqual(set(self.differences(b)), {("extra in destination", "(word='a', n=1)")})
        self.assertEqual(set(self.differences(tables["kv"])),
                         {("extra in destination", "k='key 0007'")})
        for name in ("extremes", "empty_table", 'Order "Items" €'):
            self.assertTrue(tables[name]["matches"], tables[name])

        # --table narrows the check: the unchanged table alone passes.
        code, only = self.verify("--table", "extremes")
        self.assertEqual((code, list(only)), (0, ["extremes"]))
        bad = self.ferry("verify", "-c", self.pipeline, "--table", "nope", check=False)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--table nope is not a stream", bad.stderr)

        self.sync()
        code, tables = self.verify()
        self.assertEqual(code, 0, tables)

        # A column added to the source and not synced yet is a difference, named as such.
        con = self.source()
        con.execute("ALTER TABLE kv ADD COLUMN note TEXT")
        con.commit()
        con.close()
        code, tables = self.verify("--table", "kv")
        self.assertEqual(code, 1)
        self.assertEqual(tables["kv"]["source_only_columns"], ["note"])
        self.assertEqual((tables["kv"]["missing"], tables["kv"]["different"]), (0, 0))
        text = self.ferry("verify", "-c", self.pipeline, "--table", "kv", check=False)
        self.assertIn("column note is in the source but not in the destination", text.stdout)
        self.sync()
        code, tables = self.verify()
        self.assertEqual(code, 0, tables)

    def test_incremental_tells_rows_to_come_from_rows_no_sync_will_read(self):
        self.write_pipeline(INCREMENTAL)
        con = self.source()
        con.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, day TEXT)")
        con.executemany("INSERT INTO items VALUES (?, ?, ?)",
                        [(i, f"item {i}", f"2024-06-{1 + i % 3:02d}") for i in range(1, 301)])
        con.commit()
        con.close()
        self.ferry("sync", "-c", self.pipeline, "--once")
        code, tables = self.verify()
        self.assertEqual(code, 0, tables)

        con = self.source()
        # Read by the next sync: a row at the last committed day, one past it, one changed there.
        con.execute("INSERT INTO items VALUES (1000, 'same day', '2024-06-03')")
        con.execute("INSERT INTO items VALUES (1001, 'next day', '2024-06-04')")
        con.execute("UPDATE items SET name = 'renamed' WHERE id = 2")  # day 2024-06-03
        # Never read by an incremental sync: the cursor went NULL, stayed behind, moved back.
        con.execute("UPDATE items SET day = NULL WHERE id = 4")
        con.execute("UPDATE items SET name = 'quietly' WHERE id = 3")  # day 2024-06-01
        con.execute("UPDATE items SET day = '2023-01-01' WHERE id = 5")
        con.execute("DELETE FROM items WHERE id = 6")
        con.commit()
        con.close()
        code, tables = self.verify()
        self.assertEqual(code, 1)
        items = tables["items"]
        why = {e["key"]: e["why"] for e in items["examples"]}
        self.assertEqual(why, {"id=1000": "the next sync reads it", "id=1001": "the next sync reads it",
                               "id=2": "the next sync reads it",
                               "id=4": "no incremental sync reads it",
                               "id=3": "no incremental sync reads it",
                               "id=5": "no incremental sync reads it", "id=6": ""}, items)
        self.assertEqual((items["missing"], items["different"], items["extra"], items["pending"]),
                         (2, 4, 1, 3))
        notes = " ".join(items["notes"])
        self.assertIn("3 of the 6 missing or different rows are read by the next sync", notes)
        self.assertIn("3 missing or different row(s) will never be read", notes)
        self.assertIn("1 row(s) of the table are not in the source", notes)

        # After the sync only what no incremental sync can read is left, and verify says so.
        self.ferry("sync", "-c", self.pipeline, "--once")
        code, tables = self.verify()
        self.assertEqual(code, 1)
        items = tables["items"]
        self.assertEqual({e["key"] for e in items["examples"]}, {"id=3", "id=4", "id=5", "id=6"})
        self.assertEqual(items["pending"], 0)
        self.assertFalse(any("read by the next sync" in n for n in items["notes"]), items["notes"])
        self.assertTrue(any("divergence, not lag" in n for n in items["notes"]), items["notes"])

    def test_cdc_lag_is_told_apart_from_a_changed_destination(self):
        self.write_pipeline(CDC)
        con = self.source()
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                    "price DECIMAL(10,2), at DATETIME)")
        con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        con.executemany("INSERT INTO items VALUES (?, ?, ?, ?)",
                        [(i, f"item {i}", f"{i}.{i % 100:02d}", f"2024-01-01 00:00:{i % 60:02d}")
                         for i in range(1, 1501)])
        con.executemany("INSERT INTO notes VALUES (?, ?)", [(i, f"note {i}") for i in range(1, 50)])
        con.commit()
        con.close()
        self.ferry("sync", "-c", self.pipeline, "--once")
        code, tables = self.verify()
        self.assertEqual(code, 0, tables)

        # Changes not yet synced: reported as the stream's lag.
        con = self.source()
        con.execute("UPDATE items SET price = 0.5 WHERE id = 10")
        con.execute("DELETE FROM items WHERE id = 20")
        con.execute("INSERT INTO items VALUES (2000, 'late', NULL, NULL)")
        con.commit()
        con.close()
        code, tables = self.verify()
        self.assertEqual(code, 1)
        items = tables["items"]
        self.assertEqual(set(self.differences(items)), {("different values", "id=10"),
                                                        ("extra in destination", "id=20"),
                                                        ("missing in destination", "id=2000")})
        self.assertEqual(self.differences(items)[("different values", "id=10")],
                         ["price: source 0.50, destination 10.10"])
        self.assertTrue(any("replication lag" in n for n in items["notes"]), items["notes"])
        self.assertTrue(tables["notes"]["matches"])
        self.ferry("sync", "-c", self.pipeline, "--once")
        code, tables = self.verify()
        self.assertEqual(code, 0, tables)

        # Another pipeline writes into the table: no change is waiting, yet rows differ.
        other = sqlite3.connect(os.path.join(self.dir, "other.db"))
        other.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                      "price DECIMAL(10,2), at DATETIME)")
        other.execute("INSERT INTO items VALUES (7, 'tampered', 7.07, '2024-01-01 00:00:07')")
        other.execute("INSERT INTO items VALUES (999999, 'stray', NULL, NULL)")
        other.commit()
        other.close()
        intruder = os.path.join(self.dir, "intruder.yaml")
        with open(intruder, "w", encoding="utf-8") as f:
            f.write(INTRUDER)
        self.ferry("sync", "-c", intruder)
        code, tables = self.verify()
        self.assertEqual(code, 1)
        items = tables["items"]
        self.assertEqual(set(self.differences(items)), {("different values", "id=7"),
                                                        ("extra in destination", "id=999999")})
        self.assertEqual(self.differences(items)[("different values", "id=7")],
                         ["name: source 'item 7', destination 'tampered'"])
        self.assertTrue(any("not replication lag" in n for n in items["notes"]), items["notes"])

        # The other stream is untouched.
        text = self.ferry("verify", "-c", self.pipeline, "--table", "notes")
        self.assertIn("lake.notes: source 49 rows, destination 49 rows, 0 missing, 0 extra, "
                      "0 different: match", text.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
