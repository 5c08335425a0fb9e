"""Full refresh of tables whose integer keys are not a tidy sequence, as users have them:
snowflake-like random 63-bit ids, dense ids with far outliers at both ends of int64, a table after
deleting 99% of its rows. The plan must hold about `chunk_rows` rows a chunk whatever the key
distribution (at most twice the chunks the rows need, where a grid over the key's span would
need billions), the load must read back exactly (icebird and DuckDB, `ferry verify`), and a load
killed at the fault points must resume and land every row once. SQLite and PostgreSQL; and
PostgreSQL tables keyed by text (unicode), uuid, numeric and a composite key, split by ranges of
the key in the server's own order."""
import json
import os
import random
import shutil
import signal
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, HERE)
import ferrytest  # noqa: E402
import pgserver  # noqa: E402
from test_postgres_to_iceberg import assert_pg_table_matches  # noqa: E402

SERVER = None
DB = "sparse"
CHUNK_ROWS = 2000
INT64_MIN, INT64_MAX = -2**63, 2**63 - 1


def setUpModule():
    global SERVER
    SERVER = pgserver.start_for_module(lambda s: s.psql(f"CREATE DATABASE {DB}"))


def tearDownModule():
    if SERVER:
        SERVER.stop()


def tables(rng):
    """{table: keys}: the shapes of keys this file loads."""
    snow = set()
    while len(snow) < 20000:
        snow.add(rng.randrange(1, 2**63))  # random 63-bit ids
    outliers = list(range(1, 15001)) + [INT64_MIN, INT64_MIN + 1, -1, 2**62, INT64_MAX]
    survivors = list(range(100, 2000001, 100))  # 2,000,000 ids, 99% deleted
    return {"snow": sorted(snow), "outliers": outliers, "deleted": survivors}


def row(k):
    return (k, f"value {k % 997} ✓", k % 7 == 0)


class SparseKeys:
    """What both sources' tests share: the sync, the plans in the state file, the crash rounds."""
    env = {}

    def sync(self, **kw):
        return self.ferry("sync", "-c", self.pipeline, env=dict(self.env, **kw.pop("env", {})),
                          **kw)

    def plans(self):
        with open(os.path.join(self.dir, "state.json"), encoding="utf-8") as f:
            state = json.load(f)
        return {e["stream"].split(".")[-1]: e["state"]["plan"] for e in state["streams"]}

    def assert_chunks_follow_the_rows(self, sizes, bounds):
        """Each table's plan holds about `chunk_rows` rows a chunk (within 2x), by boundaries
        taken from the data (`bounds`: "bounds" of integers, or "key_bounds" of key values)."""
        plans = self.plans()
        for table, rows in sizes.items():
            plan = plans[table]
            needed = rows // CHUNK_ROWS + 1
            self.assertLessEqual(plan["count"], 2 * needed, f"{table}: {plan}")
            self.assertGreaterEqual(plan["count"], needed // 2, f"{table}: {plan}")
            self.assertIn(bounds, plan, table)
            self.assertEqual(len(plan[bounds]) + 1, plan["count"], table)
        return plans

    def assert_plans_follow_the_rows(self, sizes):
        plans = self.assert_chunks_follow_the_rows(sizes, "bounds")
        for table in sizes:
            # Boundaries taken from the data: a grid over these spans would be billions of chunks,
            # and a plan of boundaries is a list, not one entry per chunk of the key's span.
            self.assertLessEqual(len(json.dumps(plans[table])), 40 * (plans[table]["count"] + 10),
                                 table)

    def assert_plans_of_key_ranges(self, sizes):
        """Tables keyed otherwise than by one integer: plans of key values; `pairs` is keyed by
        (tenant, name)."""
        plans = self.assert_chunks_follow_the_rows(sizes, "key_bounds")
        self.assertEqual(json.loads(plans["pairs"]["key"]), ["tenant", "name"])

    def assert_verify_matches(self):
        p = self.ferry("verify", "-c", self.pipeline, "--json", env=self.env, check=False)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def crash_rounds(self, change, check):
        """Kills a reload at each point, resumes it, checks the table against the source."""
        points = ["source.mid_chunk", "sink.data_written", "sink.before_commit",
                  "sink.after_commit", "state.after_write", "sink.before_publish",
                  "sink.after_publish", "sink.after_commit:3"]
        for i, point in enumerate(points):
            with self.subTest(point=point):
                change(i)
                p = self.sync(env={"FERRY_FAULT": point}, check=False)
                self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr[-2000:]}")
                self.sync()
                check()


class SqliteSparseKeysTest(SparseKeys, ferrytest.FerryTestCase):
    PIPELINE = f"""
name: sparse
source:
  type: sqlite
  path: ./source.db
  chunk_rows: {CHUNK_ROWS}
destination: {{type: iceberg, warehouse: ./warehouse, namespace: lake}}
state: ./state.json
"""

    def setUp(self):
        super().setUp()
        self.write_pipeline(self.PIPELINE)
        self.keys = tables(random.Random(7))
        con = self.source()
        for table, keys in self.keys.items():
            con.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, v TEXT, flag BOOLEAN)")
            con.executemany(f"INSERT INTO {table} VALUES (?, ?, ?)", [row(k) for k in keys])
        # WITHOUT ROWID: chunked by its integer primary key, the same way.
        con.execute("CREATE TABLE wr (id INTEGER PRIMARY KEY, v TEXT, flag BOOLEAN) WITHOUT ROWID")
        con.executemany("INSERT INTO wr VALUES (?, ?, ?)", [row(k) for k in self.keys["snow"]])
        # WITHOUT ROWID keyed by text (unicode), and by two columns with one value of the first
        # holding most rows: ranges of the key's row value.
        con.execute("CREATE TABLE words (w TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID")
        prefixes = ["Ünïcode", "zebra", "Apple", "apple", "a b", "日本", "ß", "O'Brien", "", "-"]
        con.executemany("INSERT INTO words VALUES (?, ?)",
                        [(f"{prefixes[i % 10]} {i * 7919 % 100003}", f"v{i}")
                         for i in range(9000)])
        con.execute("CREATE TABLE pairs (tenant INTEGER, name TEXT, v INTEGER,"
                    " PRIMARY KEY (tenant, name)) WITHOUT ROWID")
        con.executemany("INSERT INTO pairs VALUES (?, ?, ?)",
                        [(7 if i < 8000 else i % 13, f"n{i * 31 % 9001}", i) for i in range(9000)])
        con.commit()
        con.close()

    TYPED = {"words": 9000, "pairs": 9000}

    def check_all(self):
        for table in ("snow", "outliers", "deleted", "wr", *self.TYPED):
            self.assert_table_equals_source("lake", table)

    def test_sparse_keys_load_in_chunks_of_rows_and_read_back_exactly(self):
        out = self.sync()
        self.assertIn("snow", out.stdout)
        sizes = {t: len(k) for t, k in self.keys.items()}
        sizes["wr"] = len(self.keys["snow"])
        self.assert_plans_follow_the_rows(sizes)
        self.assert_plans_of_key_ranges(self.TYPED)
        self.check_all()
        self.assert_verify_matches()

    def test_killed_loads_of_sparse_keys_resume_and_land_every_row_once(self):
        self.sync()

        def change(i):
            con = self.source()
            # New far keys and deletes between rounds: each reload plans again.
            con.execute("INSERT INTO snow VALUES (?, ?, ?)", row(INT64_MAX - 1 - i))
            con.execute("DELETE FROM outliers WHERE id = ?", (100 + i,))
            con.execute("INSERT INTO words VALUES (?, 'late')", (f"Ωmega {i}",))
            con.execute("UPDATE pairs SET v = -v WHERE tenant = 7 AND v % 50 = ?", (i,))
            con.commit()
            con.close()
        self.crash_rounds(change, self.check_all)


class FileSizeTest(ferrytest.FerryTestCase):
    """Without chunk_rows, a load's chunks commit together until the files reach the destination's
    target_file_size: few files of the size lake engines want, not one per chunk."""
    PIPELINE = """
name: files
source:
  type: sqlite
  path: ./source.db
destination: {type: iceberg, warehouse: ./warehouse, namespace: lake@TARGET@}
state: ./state.json
"""

    def setUp(self):
        super().setUp()
        con = self.source()
        con.execute("CREATE TABLE big (id INTEGER PRIMARY KEY, note TEXT, n INTEGER)")
        con.execute("WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 350000)"
                    " INSERT INTO big SELECT i * 7, printf('note %d %x', i, i * 2654435761), i % 1000"
                    " FROM s")
        con.commit()
        con.close()

    def live_files(self):
        """The table's live data files, as the independent readers list them, after checking the
        rows against the source."""
        seen = self.assert_table_equals_source("lake", "big")
        return [f for f in seen["data_files"] if f["content"] == 0]

    def test_chunks_share_files_up_to_the_target_size(self):
        self.write_pipeline(self.PIPELINE.replace("@TARGET@", ""))
        self.sync()
        self.assertEqual(self.plan()["count"], 4)  # 350,000 rows in chunks of 100,000
        self.assertEqual(len(self.live_files()), 1)
        # A smaller target: files of about that size, still not one per chunk boundary.
        shutil.rmtree(os.path.join(self.dir, "warehouse"))
        os.unlink(os.path.join(self.dir, "state.json"))
        self.write_pipeline(self.PIPELINE.replace("@TARGET@", ", target_file_size: 1MB"))
        self.sync()
        sizes = sorted(f["file_size_in_bytes"] for f in self.live_files())
        self.assertGreater(len(sizes), 2)
        # Near the target, but for the smallest (a load's last file holds what is left): a file
        # closes once its estimated size (its open pages counted at the compression the table's
        # columns got so far) reaches the target, or at a commit once the files hold half of it.
        self.assertTrue(all(400_000 < s < 1_250_000 for s in sizes[1:]), sizes)

    def test_a_crash_reads_again_the_chunks_waiting_for_their_commit(self):
        self.write_pipeline(self.PIPELINE.replace("@TARGET@", ""))
        # In the third chunk: the first two were read, but not committed yet.
        p = self.sync(env={"FERRY_FAULT": "source.mid_chunk:250"}, check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL, p.stderr)
        self.assertEqual(self.plan().get("committed"), [])
        again = self.sync()
        self.assertEqual(self.stream_report(again.stdout, "big")["rows"], 350000)
        self.assertEqual(len(self.live_files()), 1)  # the killed run's file is not referenced

    def plan(self):
        with open(os.path.join(self.dir, "state.json"), encoding="utf-8") as f:
            entry = json.load(f)["streams"][0]["state"]
        return dict(entry["plan"], committed=entry["committed"])


class PostgresSparseKeysTest(SparseKeys, ferrytest.FerryTestCase):
    PIPELINE = f"""
name: sparse
source:
  type: postgres
  dsn: "@DSN@"
  chunk_rows: {CHUNK_ROWS}
  streams: [snow, outliers, deleted, ints]
destination: {{type: iceberg, warehouse: ./warehouse, namespace: lake}}
state: ./state.json
"""

    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
        self.write_pipeline(self.PIPELINE.replace("@DSN@", SERVER.dsn(DB)))
        self.keys = tables(random.Random(11))
        sql = []
        for table, keys in self.keys.items():
            sql.append(f"DROP TABLE IF EXISTS {table}; CREATE TABLE {table} "
                       "(id bigint PRIMARY KEY, v text, flag boolean);")
            values = ",".join(f"({k}, 'value {k % 997} ✓', {'true' if k % 7 == 0 else 'false'})"
                              for k in keys)
            sql.append(f"INSERT INTO {table} VALUES {values};")
        # An int4 key spanning its whole range, never analyzed: planned by sampling alone.
        sql.append("DROP TABLE IF EXISTS ints; CREATE TABLE ints (id int PRIMARY KEY, v text);"
                   "INSERT INTO ints SELECT g, 'i' FROM generate_series(1, 9000) g;"
                   "INSERT INTO ints VALUES (-2147483648, 'min'), (2147483647, 'max');")
        SERVER.psql("\n".join(sql), db=DB)
        # Statistics as a busy server has them for two of the tables, none for the others.
        SERVER.psql("ANALYZE snow; ANALYZE deleted;", db=DB)

    def check_all(self):
        for table in ("snow", "outliers", "deleted", "ints"):
            assert_pg_table_matches(self, SERVER, DB, "lake", table)

    def test_sparse_keys_load_in_chunks_of_rows_and_read_back_exactly(self):
        self.sync()
        sizes = {t: len(k) for t, k in self.keys.items()}
        sizes["ints"] = 9002
        self.assert_plans_follow_the_rows(sizes)
        self.check_all()
        self.assert_verify_matches()

    def test_killed_loads_of_sparse_keys_resume_and_land_every_row_once(self):
        self.sync()

        def change(i):
            SERVER.psql(f"INSERT INTO snow VALUES ({INT64_MAX - 1 - i}, 'late', true);"
                        f"DELETE FROM outliers WHERE id = {100 + i};"
                        f"UPDATE deleted SET v = 'round {i}' WHERE id % 1000 = 0;", db=DB)
        self.crash_rounds(change, self.check_all)


class PostgresTypedKeysTest(SparseKeys, ferrytest.FerryTestCase):
    """Keys that are not one integer column chunk by ranges of the key too: the plan's boundaries
    are key values in the server's order (its collation for text), so a resumed load reads what
    it planned even after updates moved rows to other blocks (ctid ranges would read a moved row
    twice)."""
    PIPELINE = f"""
name: typed
source:
  type: postgres
  dsn: "@DSN@"
  chunk_rows: {CHUNK_ROWS}
  streams: [words, uuids, pairs, amounts]
destination: {{type: iceberg, warehouse: ./warehouse, namespace: lake}}
state: ./state.json
"""
    SIZES = {"words": 12000, "uuids": 12000, "pairs": 12000, "amounts": 8000}
    SCHEMA = """
DROP TABLE IF EXISTS words, uuids, pairs, amounts;
CREATE TABLE words (w text PRIMARY KEY, v text);
INSERT INTO words SELECT (ARRAY['Ünïcode', 'zebra', 'Apple', 'apple', 'a b', '日本', 'ß', 'O''Brien',
                                '', '-'])[1 + g % 10] || ' ' || md5(g::text), 'v' || g
  FROM generate_series(1, 12000) g;
CREATE TABLE uuids (id uuid PRIMARY KEY, v text);
INSERT INTO uuids SELECT md5('u' || g)::uuid, 'v' || g FROM generate_series(1, 12000) g;
-- Skewed: one tenant holds most rows.
CREATE TABLE pairs (tenant int, name text, v int, PRIMARY KEY (tenant, name));
INSERT INTO pairs SELECT CASE WHEN g <= 10000 THEN 7 ELSE g % 13 END, 'n' || md5(g::text), g
  FROM generate_series(1, 12000) g;
CREATE TABLE amounts (a numeric PRIMARY KEY, v text);
INSERT INTO amounts SELECT (g - 4000) * 1234567.000000001 + g / 7.0, 'v' || g
  FROM generate_series(1, 8000) g;
ANALYZE words; ANALYZE pairs;
"""

    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
        self.write_pipeline(self.PIPELINE.replace("@DSN@", SERVER.dsn(DB)))
        SERVER.psql(self.SCHEMA, db=DB)

    def check_all(self):
        for table in self.SIZES:
            assert_pg_table_matches(self, SERVER, DB, "lake", table)

    def test_typed_keys_load_in_chunks_of_key_ranges_and_read_back_exactly(self):
        p = self.ferry("discover", "-c", self.pipeline, env=self.env)
        self.assertIn("ranges of primary key (tenant, name)", p.stdout)
        self.sync()
        self.assert_plans_of_key_ranges(self.SIZES)
        self.check_all()
        self.assert_verify_matches()

    def test_killed_loads_of_typed_keys_resume_and_land_every_row_once(self):
        self.sync()

        def change(i):
            SERVER.psql(f"INSERT INTO words VALUES ('Ωmega {i}', 'late');"
                        f"DELETE FROM uuids WHERE id = md5('u{100 + i}')::uuid;"
                        f"UPDATE pairs SET v = -v WHERE tenant = 7 AND v % 50 = {i};"
                        f"INSERT INTO amounts VALUES ({i}.5, 'new');", db=DB)
        self.crash_rounds(change, self.check_all)

    def test_rows_moved_between_a_kill_and_the_resume_are_read_once(self):
        self.sync()
        for point in ("sink.after_commit:2", "state.after_write:3"):
            with self.subTest(point=point):
                p = self.sync(env={"FERRY_FAULT": point}, check=False)
                self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr[-2000:]}")
                # Every row moves to a new block: by ctid, rows of committed chunks would be read
                # again by the chunks after them.
                SERVER.psql("UPDATE words SET v = v; UPDATE pairs SET v = v;", db=DB)
                self.sync()
                for table, key in (("words", ["w"]), ("pairs", ["tenant", "name"])):
                    seen = self.inspect(self.catalog_tables()[("lake", table)])
                    names = [f["name"] for f in seen["schema"]["fields"]]
                    at = [names.index(k) for k in key]
                    keys = [tuple(str(r[i]) for i in at) for r in seen["duckdb_rows"]]
                    self.assertEqual(len(keys), self.SIZES[table], table)
                    self.assertEqual(len(set(keys)), len(keys), f"{table}: a key twice")
                self.check_all()


if __name__ == "__main__":
    unittest.main()
