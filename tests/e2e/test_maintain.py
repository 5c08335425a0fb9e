"""ferry maintain: compaction folds the equality deletes of CDC syncs into rewritten data files and
expiry removes old snapshots and the files only they referenced. Readers we did not write judge
it: icebird and DuckDB must read exactly the same rows before and after (and the source's rows),
avsc every manifest and manifest list (via iceberg_inspect.mjs); the files of expired snapshots
must be gone from disk; and a CDC sync after maintenance must still land (its marker unchanged)."""
import glob
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferrytest  # noqa: E402

PIPELINE = """
name: cdc
source:
  type: sqlite
  path: ./source.db
  mode: cdc
  chunk_rows: 700
destination: {type: iceberg, warehouse: ./warehouse, namespace: lake}
state: ./state.json
"""


class MaintainTest(ferrytest.FerryTestCase):
    def sync(self, **kw):
        return self.ferry("sync", "-c", self.pipeline, "--once", **kw)

    def setUp(self):
        super().setUp()
        self.write_pipeline(PIPELINE)
        con = self.source()
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL, "
                    "tag BLOB)")
        con.executemany("INSERT INTO items VALUES (?, ?, ?, ?)",
                        [(i, f"item {i}", i / 4, bytes([i % 200])) for i in range(1, 2501)])
        con.commit()
        con.close()
        self.round = 0

    def change(self):
        """Updates, deletes and inserts: each CDC sync adds a data file and an equality delete."""
        self.round += 1
        r = self.round
        con = self.source()
        con.execute("UPDATE items SET name = 'upd ' || ? || ' ' || id WHERE id % 13 = ?", (r, r % 13))
        con.execute("DELETE FROM items WHERE id % 29 = ?", (r % 29,))
        base = 100000 * r
        con.executemany("INSERT INTO items VALUES (?, ?, ?, ?)",
                        [(base + i, f"new {base + i}", None, None) for i in range(120)])
        con.execute("UPDATE items SET price = -1.5 WHERE id = ?", (base + 3,))
        con.commit()
        con.close()

    def table_dir(self):
        loc = self.catalog_tables()[("lake", "items")]
        with open(loc.removeprefix("file://"), encoding="utf-8") as f:
            meta = json.load(f)
        return meta["location"].removeprefix("file://"), meta

    def state_json(self):
        return json.loads(self.ferry("state", "-c", self.pipeline, "--json").stdout)

    def maintain(self, *args):
        return self.ferry("maintain", "-c", self.pipeline, *args)

    def test_compaction_and_expiry_change_nothing_a_reader_sees(self):
        self.sync()
        for _ in range(4):
            self.change()
            out = self.sync()
            self.assertIn("cdc: changes", out.stdout)
        before = self.assert_table_equals_source("lake", "items")
        data_before = [f for f in before["data_files"] if f["content"] == 0]
        deletes_before = [f for f in before["data_files"] if f["content"] != 0]
        self.assertGreaterEqual(len(data_before), 5)
        self.assertGreaterEqual(len(deletes_before), 4)
        self.assertGreater(before["snapshot_count"], 5)
        state_before = self.state_json()
        location, meta_before = self.table_dir()
        old_lists = [s["manifest-list"].removeprefix("file://") for s in meta_before["snapshots"]]
        old_files = [f["path"].removeprefix("file://") for f in before["data_files"]]

        out = self.maintain("--expire-older-than", "0s", "--retain-last", "1")
        if os.environ.get("FERRY_SHOW_OUTPUT"):
            print(out.stdout)
        self.assertIn("table lake.items", out.stdout)
        self.assertIn("compact:", out.stdout)
        self.assertIn("expire:", out.stdout)

        after = self.assert_table_equals_source("lake", "items")
        self.assertEqual(after["problems"], [])  # avsc read every manifest, DuckDB every file
        self.assert_same_rows(before["icebird_rows"], after["icebird_rows"], "icebird after maintain")
        self.assert_same_rows(before["duckdb_rows"], after["duckdb_rows"], "DuckDB after maintain")
        data_after = [f for f in after["data_files"] if f["content"] == 0]
        deletes_after = [f for f in after["data_files"] if f["content"] != 0]
        self.assertLess(len(data_after), len(data_before))
        self.assertEqual(deletes_after, [])  # every delete file was folded in
        self.assertEqual(after["summary"]["operation"], "replace")
        self.assertEqual(after["snapshot_count"], 1)
        # The markers (what recovery reads) are untouched.
        markers = {k: v for k, v in after["properties"].items() if k.startswith("ferry.marker.")}
        self.assertEqual(markers, {k: v for k, v in before["properties"].items()
                                   if k.startswith("ferry.marker.")})
        self.assertEqual(self.state_json(), state_before)

        # The expired snapshots' files are gone; what the remaining snapshot needs is there.
        _, meta_after = self.table_dir()
        kept_list = meta_after["snapshots"][0]["manifest-list"].removeprefix("file://")
        for lst in old_lists:
            self.assertFalse(os.path.exists(lst), f"expired manifest list {lst} is still on disk")
        live = {f["path"].removeprefix("file://") for f in after["data_files"]}
        for f in old_files:
            if f not in live:
                self.assertFalse(os.path.exists(f), f"file {f} of expired snapshots is on disk")
        for f in live:
            self.assertTrue(os.path.exists(f), f"live file {f} was deleted")
        on_disk = set(glob.glob(os.path.join(location, "data", "*")))
        self.assertEqual(on_disk, live)
        lists_on_disk = set(glob.glob(os.path.join(location, "metadata", "snap-*.avro")))
        self.assertEqual(lists_on_disk, {kept_list})

        # A CDC sync after maintenance lands on the compacted table.
        self.change()
        out = self.sync()
        self.assertIn("cdc: changes", out.stdout)
        self.assert_table_equals_source("lake", "items")

        # Maintaining again (default retention keeps these young snapshots) folds the new delete.
        out = self.maintain()
        self.assertIn("nothing to expire", out.stdout)
        again = self.assert_table_equals_source("lake", "items")
        self.assertEqual([f for f in again["data_files"] if f["content"] != 0], [])
        self.assertEqual(again["snapshot_count"], 3)
        self.change()
        self.sync()
        self.assert_table_equals_source("lake", "items")

    def test_options_and_errors(self):
        self.sync()
        self.change()
        self.sync()
        snapshots = self.inspect(self.catalog_tables()[("lake", "items")])["snapshot_count"]
        out = self.maintain("--no-compact", "--table", "items")
        self.assertNotIn("compact:", out.stdout)
        self.assertIn("nothing to expire", out.stdout)
        out = self.maintain("--no-expire")
        self.assertIn("compact:", out.stdout)
        self.assertNotIn("expire:", out.stdout)
        seen = self.assert_table_equals_source("lake", "items")
        self.assertEqual(seen["snapshot_count"], snapshots + 1)

        p = self.ferry("maintain", "-c", self.pipeline, "--table", "nope", check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("table lake.nope is not in the catalog", p.stderr)
        p = self.ferry("maintain", "-c", self.pipeline, "--expire-older-than", "5 days",
                       check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--expire-older-than takes a whole number with a unit", p.stderr)
        p = self.ferry("sync", "-c", self.pipeline, "--retain-last", "3", check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("go with maintain", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
