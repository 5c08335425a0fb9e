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


if __name__ == "__main__":
    unittest.main()
