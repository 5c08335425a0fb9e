"""Partitioned Iceberg tables: SQLite full refresh and CDC into tables partitioned by day, bucket,
identity and truncate; rows whose update moves them to another partition; partition evolution;
compaction per partition; kills at the protocol's fault points. icebird and DuckDB read every
table back and the inspector checks each data file's partition tuple against its rows and the
manifest list's partition summaries."""
import collections
import datetime
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferrytest  # noqa: E402

PIPELINE = """
name: parts
source:
  type: sqlite
  path: ./source.db
  mode: {mode}
  chunk_rows: 1000
{streams}destination:
  type: iceberg
  warehouse: ./warehouse
  namespace: lake
{destination}state: ./state.json
"""

BASE = datetime.datetime(2024, 1, 1)


def stamp(hours):
    return (BASE + datetime.timedelta(hours=hours)).strftime("%Y-%m-%d %H:%M:%S")


class PartitionedTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        self.rng = random.Random(7)
        con = self.source()
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, created_at TIMESTAMP NOT NULL, "
                    '"Region Name" TEXT, sku TEXT, qty INTEGER)')
        con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?)", [self.row(i) for i in range(1, 4001)])
        con.commit()
        con.close()

    def row(self, i):
        # Skewed days (most rows in the first week), NULL regions, unicode and spaces in values.
        hours = int(self.rng.expovariate(1 / 150)) % (24 * 60)
        region = self.rng.choice(["eu", "us", None, "ap süd", "eu/west 1"])
        return (i, stamp(hours), region, f"sku-{self.rng.randrange(300):03d}", i % 9)

    def configure(self, mode="full_refresh", partition_by=None, stream_partition_by=None,
                  extra=""):
        destination = extra
        if partition_by is not None:
            destination += f"  partition_by: {json.dumps(partition_by)}\n"
        streams = ""
        if stream_partition_by is not None:
            streams = ("  streams:\n    - name: orders\n"
                       f"      partition_by: {json.dumps(stream_partition_by)}\n")
        self.write_pipeline(PIPELINE.format(mode=mode, streams=streams, destination=destination))

    def read_pipeline(self):
        with open(self.pipeline, encoding="utf-8") as f:
            return f.read()

    def metadata(self):
        loc = self.catalog_tables().get(("lake", "orders"))
        with open(loc.removeprefix("file://"), encoding="utf-8") as f:
            return json.load(f)

    def check(self):
        seen = self.assert_table_equals_source("lake", "orders")
        return seen

    def data_files(self, seen):
        return [f for f in seen["data_files"] if f["content"] == 0]

    def test_a_full_refresh_splits_files_by_partition_and_readers_agree(self):
        self.configure(partition_by=["day(created_at)", "bucket(4, id)", "Region Name",
                                     "truncate(5, sku)"])
        check = self.ferry("check", "-c", self.pipeline).stdout
        self.assertIn("partitioned: day(created_at), bucket[4](id), identity(Region Name), "
                      "truncate[5](sku)", check)
        found = json.loads(self.ferry("discover", "-c", self.pipeline, "--json").stdout)
        self.assertEqual([(t["name"], t["partitioned"]) for t in found],
                         [("orders", "day(created_at), bucket[4](id), identity(Region Name), "
                                     "truncate[5](sku)")])
        self.sync()
        seen = self.check()
        meta = self.metadata()
        spec = next(s for s in meta["partition-specs"] if s["spec-id"] == meta["default-spec-id"])
        self.assertEqual([(f["name"], f["transform"]) for f in spec["fields"]],
                         [("created_at_day", "day"), ("id_bucket", "bucket[4]"),
                          ("Region Name", "identity"), ("sku_trunc", "truncate[5]")])
        files = self.data_files(seen)
        tuples = collections.Counter(json.dumps(f["partition"], sort_keys=True) for f in files)
        # One file per partition in each of the load's 4 chunks (1000 rows each, committed on
        # their own), and many partitions.
        self.assertLessEqual(max(tuples.values()), 4)
        self.assertGreater(len(files), 100)
        days = {f["partition"]["created_at_day"] for f in files}
        self.assertGreater(len(days), 30)
        self.assertTrue(any(f["partition"]["Region Name"] is None for f in files))
        self.assertTrue(all("/created_at_day=" in f["path"] for f in files))

    def test_a_transform_that_does_not_fit_is_refused_naming_it(self):
        self.configure(partition_by=["day(sku)"])
        p = self.ferry("check", "-c", self.pipeline, check=False)  # check says it first
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("partition_by term 'day(sku)'", p.stderr)
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("partition_by term 'day(sku)'", p.stderr)
        self.assertIn("does not apply to a column of type string", p.stderr)
        out = self.ferry("discover", "-c", self.pipeline).stdout  # lists the table, says why
        self.assertIn("cannot be synced: table orders: partition_by term 'day(sku)'", out)
        self.configure(stream_partition_by=["bucket(0, id)"])
        p = self.sync(check=False)
        self.assertIn("positive integer", p.stderr)
        # A destination without partitions says so.
        self.write_pipeline(PIPELINE.format(mode="full_refresh", streams="", destination="")
                            .replace("type: iceberg\n  warehouse: ./warehouse\n  namespace: lake\n",
                                     "type: sqlite\n  path: ./copy.db\n  partition_by: [id]\n"))
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("partition_by applies to Iceberg destinations", p.stderr)
        out = self.ferry("discover", "-c", self.pipeline).stdout
        self.assertIn("partition_by applies to Iceberg destinations", out)

    def test_cdc_moves_rows_between_partitions_exactly_once(self):
        self.configure(mode="cdc", stream_partition_by=["day(created_at)", "Region Name"])
        self.ferry("sync", "-c", self.pipeline, "--once")
        self.check()
        for r in range(3):
            self.change(r)
            self.ferry("sync", "-c", self.pipeline, "--once")
            seen = self.check()
        meta = self.metadata()
        # Deletes are global: written with the unpartitioned spec.
        unpartitioned = [s["spec-id"] for s in meta["partition-specs"] if not s["fields"]]
        deletes = [f for f in seen["data_files"] if f["content"] == 2]
        self.assertTrue(deletes)
        self.assertTrue(all(f["spec_id"] in unpartitioned for f in deletes))

    def change(self, r):
        con = self.source()
        # Moves: a new day and a new region for some rows; plain updates; deletes; inserts.
        con.execute("UPDATE orders SET created_at = datetime(created_at, '+3 days') "
                    "WHERE id % 13 = ?", (r,))
        con.execute("""UPDATE orders SET "Region Name" = 'moved' WHERE id % 17 = ?""", (r,))
        con.execute("UPDATE orders SET qty = qty + 100 WHERE id % 5 = ?", (r,))
        con.execute("DELETE FROM orders WHERE id % 29 = ?", (r,))
        base = 10000 * (r + 1)
        con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?)",
                        [self.row(base + i) for i in range(300)])
        # A row moved twice in one round ends where its last version says.
        con.execute("UPDATE orders SET created_at = '2030-05-05 05:05:05' WHERE id = ?", (base,))
        con.execute("UPDATE orders SET created_at = '1969-12-31 23:00:00' WHERE id = ?", (base,))
        con.commit()
        con.close()

    def test_kills_while_moving_rows_between_partitions(self):
        self.configure(mode="cdc", partition_by=["month(created_at)", "bucket(3, id)"])
        self.ferry("sync", "-c", self.pipeline, "--once")
        for r, point in enumerate(("sink.data_written", "sink.before_commit",
                                   "catalog.after_metadata_write", "sink.after_commit",
                                   "state.after_write")):
            with self.subTest(point=point):
                self.change(r)
                p = self.ferry("sync", "-c", self.pipeline, "--once",
                               env={"FERRY_FAULT": point}, check=False)
                self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr}")
                self.change(r + 10)  # the source keeps changing before the restart
                self.ferry("sync", "-c", self.pipeline, "--once")
                self.check()

    def test_changing_partition_by_adds_a_spec_and_old_files_keep_theirs(self):
        self.configure(mode="incremental", stream_partition_by=["month(created_at)"])
        self.write_pipeline(self.read_pipeline().replace(
            "      partition_by", "      cursor: id\n      partition_by"))
        self.sync()
        first = self.metadata()
        self.assertEqual(len(first["partition-specs"]), 2)  # unpartitioned, month
        text = self.read_pipeline().replace('["month(created_at)"]',
                                                  '["day(created_at)", "Region Name"]')
        self.write_pipeline(text)
        con = self.source()
        con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?)",
                        [self.row(50000 + i) for i in range(500)])
        con.commit()
        con.close()
        out = self.sync()
        self.assertIn("is now the default", out.stderr)
        meta = self.metadata()
        self.assertEqual(len(meta["partition-specs"]), 3)
        seen = self.check()
        specs = collections.Counter(f["spec_id"] for f in self.data_files(seen))
        self.assertEqual(set(specs), {first["default-spec-id"], meta["default-spec-id"]})
        # The same terms again add nothing; an empty list makes new files unpartitioned.
        self.sync()
        self.assertEqual(len(self.metadata()["partition-specs"]), 3)
        self.write_pipeline(text.replace('["day(created_at)", "Region Name"]', "[]"))
        con = self.source()
        con.execute("INSERT INTO orders VALUES (90001, '2024-02-02 02:02:02', 'eu', 'x', 1)")
        con.commit()
        con.close()
        self.sync()
        meta = self.metadata()
        default = next(s for s in meta["partition-specs"] if s["spec-id"] == meta["default-spec-id"])
        self.assertEqual(default["fields"], [])
        self.check()

    def test_few_open_files_and_compaction_keep_each_file_in_its_partition(self):
        # Two open files at most: rows of a batch spread over many days close files early.
        self.configure(mode="incremental", stream_partition_by=["day(created_at)"],
                       extra="  max_open_files: 2\n")
        self.write_pipeline(self.read_pipeline().replace(
            "      partition_by", "      cursor: id\n      partition_by"))
        self.sync()
        for r in range(3):
            con = self.source()
            con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?)",
                            [self.row(100000 * (r + 1) + i) for i in range(400)])
            con.commit()
            con.close()
            self.sync()
        before = self.data_files(self.check())
        per_day = collections.Counter(f["partition"]["created_at_day"] for f in before)
        self.assertGreater(max(per_day.values()), 1)
        self.ferry("maintain", "-c", self.pipeline)
        after = self.data_files(self.check())
        per_day_after = collections.Counter(f["partition"]["created_at_day"] for f in after)
        self.assertEqual(set(per_day_after), set(per_day))
        self.assertLess(len(after), len(before))
        self.assertEqual(max(per_day_after.values()), 1)


    def test_kills_while_files_of_left_partitions_are_closed(self):
        # Two open files at most over ~60 days: files are handed to the closing thread all
        # through each chunk. Killed there (the 5th file, then the 40th of a later chunk), the
        # rerun must land every row once and leave no half-written file referenced.
        self.configure(partition_by=["day(created_at)", "bucket(2, id)"],
                       extra="  max_open_files: 2\n")
        for nth in (5, 40):
            with self.subTest(nth=nth):
                p = self.sync(env={"FERRY_FAULT": f"sink.closing_file:{nth}"}, check=False)
                self.assertEqual(p.returncode, -signal.SIGKILL, p.stderr)
                self.assertIn("fault point sink.closing_file reached", p.stderr)
                self.sync()
                files = self.data_files(self.check())
                self.assertGreater(len(files), 100)
                con = self.source()
                con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?)",
                                [self.row(20000 * nth + i) for i in range(500)])
                con.commit()
                con.close()

    def test_null_days_and_buckets_get_partitions_of_their_own(self):
        # Integer-valued partitions (day, bucket) with NULLs among them: rows of a NULL day go to
        # a partition of their own, apart from day 0 (1970-01-01), and no row is lost or doubled.
        con = self.source()
        con.execute("DROP TABLE orders")  # the destination's partition_by is for events alone
        con.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, at TIMESTAMP, note TEXT)")
        con.executemany("INSERT INTO events VALUES (?, ?, ?)",
                        [(i, None if i % 7 == 0 else
                          "1970-01-01 05:00:00" if i % 11 == 0 else stamp(i % 500), f"e{i} ü")
                         for i in range(1, 3001)])
        con.commit()
        con.close()
        self.configure(partition_by=["day(at)", "bucket(4, id)"])
        self.sync()
        seen = self.assert_table_equals_source("lake", "events")
        files = self.data_files(seen)
        null_days = [f for f in files if f["partition"]["at_day"] is None]
        self.assertTrue(null_days)
        self.assertTrue(all(f["partition"]["id_bucket"] is not None for f in files))
        self.assertEqual(sum(f["record_count"] for f in null_days), 3000 // 7)
        epoch = [f for f in files if f["partition"]["at_day"] == "0"]  # days since 1970-01-01
        self.assertEqual(sum(f["record_count"] for f in epoch),
                         sum(1 for i in range(1, 3001) if i % 7 != 0 and i % 11 == 0))
        self.assertEqual(len({f["partition"]["id_bucket"] for f in null_days}), 4)

    def test_a_small_write_buffer_flushes_row_groups_not_files(self):
        # 1MB for the buffers of 32 open files: row groups are flushed early, files stay one
        # per partition and commit (three batches of rows reach each file).
        self.configure(partition_by=["bucket(32, id)"], extra="  write_buffer: 1MB\n")
        self.write_pipeline(self.read_pipeline().replace("  chunk_rows: 1000\n", ""))
        con = self.source()
        con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?)",
                        [self.row(10000 + i) for i in range(140000)])
        con.commit()
        con.close()
        self.sync()
        files = self.data_files(self.check())
        self.assertEqual(len(files), 32)
        self.assertEqual(len({f["partition"]["id_bucket"] for f in files}), 32)
        self.assertTrue(any(len(f["split_offsets"]) > 1 for f in files),
                        [f["split_offsets"] for f in files])

    def test_appends_to_a_partitioned_table_another_engine_made(self):
        # A table written without ferry: DuckDB's Parquet files, avsc's manifests, partitioned by
        # day(ts) and identity(region), sorted by id, in a catalog made as pyiceberg makes it.
        con = self.source()
        con.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, ts TIMESTAMP NOT NULL, "
                    "region TEXT, payload TEXT)")
        rows = [(i, stamp(self.rng.randrange(24 * 20)),
                 self.rng.choice(["eu", "us", None, "ap süd"]), f"event {i}")
                for i in range(1, 301)]
        con.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", rows)
        con.commit()
        con.close()
        rows_json = os.path.join(self.dir, "fixture_rows.json")
        with open(rows_json, "w", encoding="utf-8") as f:
            json.dump(rows, f)
        table_dir = os.path.join(self.dir, "warehouse", "made_elsewhere", "events")
        p = subprocess.run(["node", os.path.join(ferrytest.ROOT, "tests", "interop",
                                                 "make_partitioned_table.mjs"),
                            table_dir, rows_json], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        metadata_file = p.stdout.strip()
        cat = sqlite3.connect(os.path.join(self.dir, "warehouse", "catalog.db"))
        cat.execute("CREATE TABLE iceberg_tables (catalog_name VARCHAR(255) NOT NULL, "
                    "table_namespace VARCHAR(255) NOT NULL, table_name VARCHAR(255) NOT NULL, "
                    "metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000), "
                    "PRIMARY KEY (catalog_name, table_namespace, table_name))")
        cat.execute("CREATE TABLE iceberg_namespace_properties (catalog_name VARCHAR(255) NOT NULL, "
                    "namespace VARCHAR(255) NOT NULL, property_key VARCHAR(255) NOT NULL, "
                    "property_value VARCHAR(1000), PRIMARY KEY (catalog_name, namespace, property_key))")
        cat.execute("INSERT INTO iceberg_tables VALUES ('ferry', 'lake', 'events', ?, NULL)",
                    ("file://" + metadata_file,))
        cat.execute("INSERT INTO iceberg_namespace_properties VALUES ('ferry', 'lake', 'exists', 'true')")
        cat.commit()
        cat.close()
        self.assert_table_equals_source("lake", "events")  # the fixture is sound to the readers

        self.write_pipeline(PIPELINE.format(mode="cdc_only", streams="  streams:\n    - name: events\n",
                                            destination=""))
        check = self.ferry("check", "-c", self.pipeline).stdout
        self.assertIn("partitioned: day(ts), identity(region) (the table's)", check)
        self.ferry("sync", "-c", self.pipeline, "--once")
        con = self.source()
        # New rows, rows moved to another day and region (their old versions live in the
        # fixture's files), deletes.
        con.executemany("INSERT INTO events VALUES (?, ?, ?, ?)",
                        [(i, stamp(self.rng.randrange(24 * 40)),
                          self.rng.choice(["eu", "us", None, "new region"]), f"event {i}")
                         for i in range(301, 601)])
        con.execute("UPDATE events SET ts = datetime(ts, '+9 days'), region = 'moved' "
                    "WHERE id % 7 = 0")
        con.execute("UPDATE events SET payload = 'changed' WHERE id % 11 = 0")
        con.execute("DELETE FROM events WHERE id % 13 = 0")
        con.commit()
        con.close()
        self.ferry("sync", "-c", self.pipeline, "--once")
        loc = self.catalog_tables()[("lake", "events")]
        with open(loc.removeprefix("file://"), encoding="utf-8") as f:
            meta = json.load(f)
        seen = self.assert_table_equals_source("lake", "events")
        # Written by the table's spec (still the default), its sort order and properties kept,
        # the fixture's files still there, ferry's next to them with tuples of that spec.
        self.assertEqual(meta["default-spec-id"], 0)
        self.assertEqual(meta["default-sort-order-id"], 1)
        self.assertEqual(meta["properties"].get("owner"), "fixture")
        files = self.data_files(seen)
        theirs = [f for f in files if os.path.basename(f["path"]).startswith("00000-")]
        ours = [f for f in files if f not in theirs]
        self.assertTrue(theirs and ours)
        self.assertTrue(all(f["spec_id"] == 0 for f in ours))
        self.assertTrue(any(f["partition"]["region"] == "moved" for f in ours))
        unpartitioned = {s["spec-id"] for s in meta["partition-specs"] if not s["fields"]}
        deletes = [f for f in seen["data_files"] if f["content"] == 2]
        self.assertTrue(deletes and all(f["spec_id"] in unpartitioned for f in deletes))

if __name__ == "__main__":
    unittest.main()
