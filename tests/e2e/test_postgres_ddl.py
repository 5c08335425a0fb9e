"""PostgreSQL CDC across DDL the replication stream does not announce: a table dropped and created
again under its name, a column's type changed while changes from before the change are still
unread, and what `verify` says of a difference that no pending change explains. Every check reads
the Iceberg table back with icebird and DuckDB (delete files applied) and compares it value by
value with rows the server holds; the crash tests kill the sync at the commits that carry the
changes around the DDL and sync again."""
import json
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ferrytest  # noqa: E402
import pgserver  # noqa: E402
from test_postgres_to_iceberg import assert_pg_table_matches  # noqa: E402

SERVER = None
NS = "pgddl"

PIPELINE = """
name: {name}
source:
  type: postgres
  dsn: "{dsn}"
{extra}  streams:
    - name: {table}
      mode: cdc
destination: {{type: iceberg, warehouse: ./warehouse, namespace: pgddl}}
state: ./state.json
"""

SCHEMA = """
CREATE TABLE t (id int PRIMARY KEY, a int, b int, c int, d int, e int, note text);
INSERT INTO t SELECT i, i, i, i, i, i, 'n' || i FROM generate_series(1, 100) i;
CREATE TABLE unrelated (id int PRIMARY KEY, v text);
"""


def recreate(salt):
    # The same name and columns, other rows: ids 1..50 exist in both tables with other values.
    return f"""
        DROP TABLE t;
        CREATE TABLE t (id int PRIMARY KEY, a int, b int, c int, d int, e int, note text);
        INSERT INTO t SELECT i, -i, -i, -i, -i, -i, 'new {salt} ' || i
          FROM generate_series(1, 50) i;"""


def setUpModule():
    global SERVER
    SERVER = pgserver.start_for_module()


def tearDownModule():
    if SERVER:
        SERVER.stop()


class DdlCase(ferrytest.FerryTestCase):
    """One database a test, holding SCHEMA; the pipeline follows the table TABLE."""
    SCHEMA = SCHEMA
    TABLE = "t"

    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
        self.db = SERVER.create_test_database("ddl", self._testMethodName)
        SERVER.psql(self.SCHEMA, db=self.db)

    def tearDown(self):
        SERVER.drop_test_database(self.db)
        super().tearDown()

    def configure(self, extra=""):
        self.write_pipeline(PIPELINE.format(name=self.db, dsn=SERVER.dsn(self.db), extra=extra,
                                            table=self.TABLE))

    def sync(self, **kw):
        env = dict(self.env)
        env.update(kw.pop("env", {}))
        return self.ferry("sync", "--once", "-c", self.pipeline, env=env, **kw)

    def sql(self, text):
        return SERVER.psql(text, db=self.db)

    def matches(self, source_table=None, icebird=True):
        """The Iceberg table TABLE holds exactly the rows of `source_table` (TABLE by default)."""
        return assert_pg_table_matches(self, SERVER, self.db, NS, self.TABLE,
                                       source_table=source_table, icebird=icebird)

    def crash(self, point):
        p = self.sync(env={"FERRY_FAULT": point}, check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL,
                         f"{point} did not kill the sync (exit {p.returncode})\n{p.stderr}")
        self.assertIn(f"fault point {point} reached", p.stderr)

    def verify(self):
        p = self.ferry("verify", "-c", self.pipeline, "--json", env=self.env, check=False)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        tables = json.loads(p.stdout)
        self.assertEqual(len(tables), 1, p.stdout)
        return p.returncode, tables[0]

    def start_over(self):
        """What the stop's message says to do: the stream's entry leaves the state file."""
        path = os.path.join(self.dir, "state.json")
        with open(path) as f:
            state = json.load(f)
        state["streams"] = [s for s in state["streams"] if s["stream"] != self.TABLE]
        with open(path, "w") as f:
            json.dump(state, f)

    def follow_until_stopped(self, change):
        """Follows the log (`ferry sync --interval 1`), runs `change` once the slot is read, and
        returns how the sync ended."""
        env = dict(os.environ)
        env.update(self.env)
        env.pop("FERRY_FAULT", None)
        proc = subprocess.Popen([ferrytest.FERRY, "sync", "-c", self.pipeline, "--interval", "1"],
                                cwd=self.dir, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 30
            while not self.sql("SELECT 1 FROM pg_replication_slots WHERE active AND slot_name = "
                               f"'ferry_{self.db}'").strip():
                self.assertLess(time.monotonic(), deadline, "the sync did not start following")
                time.sleep(0.2)
            change()
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        return subprocess.CompletedProcess([], proc.returncode, out, err)


class PostgresDdlTest(DdlCase):
    def assert_stops_at_the_recreated_table(self, p):
        self.assertNotEqual(p.returncode, 0, f"the sync went on past the recreated table\n"
                                             f"{p.stdout}\n{p.stderr}")
        self.assertIn("public.t was dropped and created again", p.stderr)
        self.assertIn("remove its entry from the state file", p.stderr)  # the fix
        self.assertIn("truncate: ignore", p.stderr)  # the other choice

    # ---- item: a table dropped and created again ----

    def test_a_recreated_table_stops_after_the_changes_before_it(self):
        self.configure()
        self.sync()
        self.sql("UPDATE t SET note = 'before drop' WHERE id <= 10; DELETE FROM t WHERE id = 100;"
                 "INSERT INTO t (id, a, note) VALUES (101, 101, 'inserted before drop')")
        self.sql("CREATE TABLE t_before AS SELECT * FROM t")
        self.sql(recreate(1))
        p = self.sync(check=False)
        self.assert_stops_at_the_recreated_table(p)
        # The changes before the DROP landed; nothing of the new table did.
        self.matches(source_table="t_before")
        # Every sync stops there, and adds nothing.
        p = self.sync(check=False)
        self.assert_stops_at_the_recreated_table(p)
        self.matches(source_table="t_before")
        code, v = self.verify()
        self.assertEqual(code, 1)
        notes = " ".join(v["notes"])
        self.assertIn("divergence", notes)
        self.assertIn("dropped and created again", notes)
        self.assertNotIn("replication lag", notes)
        # The fix: a new backfill loads the new table, whose changes are followed from then on.
        self.start_over()
        p = self.sync()
        self.assertIn("new load", p.stdout)
        self.matches()
        self.sql("UPDATE t SET note = 'after' WHERE id <= 5; DELETE FROM t WHERE id = 50;"
                 "INSERT INTO t (id, a, note) VALUES (51, 51, 'new row')")
        p = self.sync()
        self.assertIn("cdc: changes", p.stdout)
        self.matches()
        self.assertEqual(self.verify()[0], 0)

    def test_a_recreated_table_is_followed_with_its_old_rows_kept_when_ignored(self):
        self.configure(extra="  truncate: ignore\n")
        self.sync()
        self.sql("UPDATE t SET note = 'before drop' WHERE id <= 10")
        self.sql("CREATE TABLE t_before AS SELECT * FROM t")
        self.sql(recreate(1))
        p = self.sync()
        self.assertIn("public.t was dropped and created again", p.stderr)
        self.assertIn("truncate: ignore", p.stderr)
        # The rows of the dropped table stay; the new table's rows written before ferry added it
        # to the publication are not in the log.
        self.matches(source_table="t_before")
        self.sql("UPDATE t SET note = 'later' WHERE id <= 5;"
                 "INSERT INTO t (id, a, note) VALUES (500, 500, 'new row')")
        p = self.sync()
        self.assertIn("cdc: changes", p.stdout)
        self.assertNotIn("dropped and created again", p.stderr)  # warned once
        self.sql("CREATE TABLE expected AS SELECT * FROM t_before WHERE id > 5 UNION ALL "
                 "SELECT * FROM t WHERE id <= 5 OR id = 500")
        self.matches(source_table="expected")

    def test_a_table_recreated_while_the_log_is_followed_stops_the_sync(self):
        self.configure()
        self.sync()

        def change():
            self.sql("UPDATE t SET note = 'before drop' WHERE id <= 10")
            self.sql("CREATE TABLE t_before AS SELECT * FROM t")
            self.sql(recreate(1))
        p = self.follow_until_stopped(change)
        self.assertIn("was dropped or renamed on the source while its changes were read", p.stderr)
        self.assert_stops_at_the_recreated_table(p)
        self.matches(source_table="t_before")

    def test_crash_around_the_commit_before_a_recreated_table(self):
        self.configure()
        self.sync()
        # (source.before_acknowledge is not reached: the sync stops before acknowledging.)
        for k, point in enumerate(["sink.before_commit", "sink.after_commit",
                                   "state.after_write"]):
            with self.subTest(point=point):
                self.sql(f"UPDATE t SET note = 'round {k}' WHERE id % 7 = {k};"
                         f"DELETE FROM t WHERE id = {40 + k};"
                         f"INSERT INTO t (id, a, note) VALUES ({600 + k}, {k}, 'round {k}')")
                self.sql(f"CREATE TABLE t_before_{k} AS SELECT * FROM t")
                self.sql(recreate(k))
                self.crash(point)
                p = self.sync(check=False)
                self.assert_stops_at_the_recreated_table(p)
                self.matches(source_table=f"t_before_{k}")
                self.start_over()
                self.sync()
                self.matches()

    # ---- item: a column's type changed while older changes are unread ----

    def test_changes_before_and_after_a_type_change_land_with_their_values(self):
        self.configure()
        self.sync()
        self.sql("UPDATE t SET a = a + 1000 WHERE id <= 20; DELETE FROM t WHERE id = 99;"
                 "INSERT INTO t (id, a, note) VALUES (200, 7, 'key retyped later')")
        self.sql("ALTER TABLE t ALTER COLUMN a TYPE bigint")
        self.sql("UPDATE t SET a = 5000000000 + id WHERE id > 80;"
                 "INSERT INTO t (id, a, note) SELECT i, 6000000000 + i, 'after' "
                 "  FROM generate_series(300, 310) i; DELETE FROM t WHERE id = 200")
        p = self.sync()
        self.assertIn("cdc: changes", p.stdout)
        seen = self.matches()
        types = {f["name"]: f["type"] for f in seen["schema"]["fields"]}
        self.assertEqual((types["id"], types["a"], types["b"]), ("int", "long", "int"))
        p = self.sync()
        self.assertIn("cdc: no new changes", p.stdout)
        self.matches()
        self.assertEqual(self.verify()[0], 0)

    def test_a_key_widened_between_an_insert_and_its_delete_is_one_key(self):
        self.configure()
        self.sync()
        self.sql("INSERT INTO t (id, a, note) VALUES (200, 7, 'deleted after the key widens');"
                 "UPDATE t SET note = 'before' WHERE id <= 3")
        self.sql("ALTER TABLE t ALTER COLUMN id TYPE bigint")
        self.sql("DELETE FROM t WHERE id = 200; UPDATE t SET note = 'after' WHERE id = 1;"
                 "INSERT INTO t (id, note) VALUES (9000000000, 'a bigint key')")
        p = self.sync()
        self.assertIn("cdc: changes", p.stdout)
        # icebird matches equality deletes by strict equality, so a bigint key never deletes the
        # rows of files written while it was an integer (docs/interop.md): DuckDB reads it here.
        seen = self.matches(icebird=False)
        self.assertEqual({f["name"]: f["type"] for f in seen["schema"]["fields"]}["id"], "long")
        self.assertEqual(self.verify()[0], 0)

    def test_crash_around_the_commits_that_carry_a_type_change(self):
        self.configure()
        self.sync()
        points = ["sink.before_commit", "sink.after_commit", "state.after_write",
                  "source.before_acknowledge"]
        for k, (point, col) in enumerate(zip(points, ["b", "c", "d", "e"])):
            with self.subTest(point=point):
                self.sql(f"UPDATE t SET {col} = {col} + 1 WHERE id % 4 = {k};"
                         f"INSERT INTO t (id, {col}, note) VALUES ({700 + k}, {k}, 'before')")
                self.sql(f"ALTER TABLE t ALTER COLUMN {col} TYPE bigint")
                self.sql(f"UPDATE t SET {col} = 10000000000 + id WHERE id % 3 = {k % 3};"
                         f"DELETE FROM t WHERE id = {700 + k}")
                self.crash(point)
                self.sync()
                self.matches()

    # ---- item: verify tells a divergence from replication lag ----

    def test_verify_calls_a_difference_no_pending_change_explains_a_divergence(self):
        self.configure(extra="  truncate: ignore\n")
        self.sync()
        self.sync()
        # Ignored: the destination keeps the truncated rows, and nothing in the log mends them.
        self.sql("TRUNCATE t; INSERT INTO t (id, note) VALUES (1, 'after truncate')")
        self.sync()

        def notes():
            code, v = self.verify()
            self.assertEqual(code, 1)
            self.assertFalse(v["matches"])
            self.assertEqual(v["extra"], 99, v)
            return " ".join(v["notes"])

        n = notes()
        self.assertIn("divergence", n)
        self.assertNotIn("replication lag", n)
        # The log moves on for other tables: still nothing of t's, still a divergence.
        self.sql("INSERT INTO unrelated SELECT i, 'x' FROM generate_series(1, 1000) i")
        n = notes()
        self.assertIn("divergence", n)
        self.assertNotIn("replication lag", n)
        # A change of t not yet synced is lag.
        self.sql("UPDATE t SET note = 'pending' WHERE id = 1")
        n = notes()
        self.assertIn("replication lag", n)
        self.assertNotIn("divergence", n)
        self.sync()
        n = notes()
        self.assertIn("divergence", n)


PARTITIONED = """
CREATE TABLE m (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE m_1 PARTITION OF m FOR VALUES FROM (1) TO (100);
CREATE TABLE m_2 PARTITION OF m FOR VALUES FROM (100) TO (200);
INSERT INTO m SELECT i, 'v' || i FROM generate_series(1, 150) i;
CREATE TABLE unrelated (id int PRIMARY KEY, v text);
"""



def attach(name="m_3", low=200):
    """A table that already holds 10 rows becomes a partition: no change of the log carries its
    rows."""
    return f"""
        CREATE TABLE {name} (id int PRIMARY KEY, v text);
        INSERT INTO {name} SELECT i, 'attached ' || i FROM generate_series({low}, {low + 9}) i;
        ALTER TABLE m ATTACH PARTITION {name} FOR VALUES FROM ({low}) TO ({low + 100});"""



class PostgresPartitionTest(DdlCase):
    """A partitioned table whose partitions change while it is followed: ATTACH PARTITION of a
    table with rows (never in the log), DETACH PARTITION and DROP of a partition (no deletes in the
    log). Each stops the sync after the changes before it, with the fix; `truncate: ignore` goes
    on with the partitions as they are."""
    SCHEMA = PARTITIONED
    TABLE = "m"

    def assert_stops_at_the_partitions(self, p):
        self.assertNotEqual(p.returncode, 0, f"the sync went on past the partitions' change\n"
                                             f"{p.stdout}\n{p.stderr}")
        self.assertIn("the partitions of public.m changed on the source", p.stderr)
        self.assertIn("remove its entry from the state file", p.stderr)  # the fix
        self.assertIn("truncate: ignore", p.stderr)  # the other choice

    def before(self, name, changes):
        self.sql(changes)
        self.sql(f"CREATE TABLE {name} AS SELECT * FROM m")

    def test_an_attached_partition_stops_the_sync_until_the_stream_starts_over(self):
        self.configure()
        self.sync()
        self.before("m_before", "UPDATE m SET v = 'before attach' WHERE id % 10 = 0;"
                                "DELETE FROM m WHERE id = 3; INSERT INTO m VALUES (160, 'new')")
        self.sql(attach())
        p = self.sync(check=False)
        self.assert_stops_at_the_partitions(p)
        self.assertIn("public.m_3", p.stderr)  # what the table is made of now
        # The changes before the ATTACH landed; the attached rows are not silently missing.
        self.matches(source_table="m_before")
        p = self.sync(check=False)
        self.assert_stops_at_the_partitions(p)
        code, v = self.verify()
        self.assertEqual(code, 1)
        self.assertEqual(v["missing"], 10, v)
        notes = " ".join(v["notes"])
        self.assertIn("divergence", notes)
        self.assertIn("partitions", notes)
        self.assertNotIn("replication lag", notes)
        self.start_over()
        self.sync()
        self.matches()
        self.assertEqual(self.verify()[0], 0)
        # Followed on from the new backfill, the attached partition's changes arrive.
        self.sql("UPDATE m SET v = 'later' WHERE id IN (5, 205); DELETE FROM m WHERE id = 201")
        self.sync()
        self.matches()

    def test_new_partitions_are_followed_and_detached_or_dropped_ones_stop_the_sync(self):
        self.configure()
        self.sync()
        # A partition created empty, its rows inserted after (in one transaction, or later):
        # every row is in the log, and the sync follows it without a stop.
        self.sql("BEGIN; CREATE TABLE m_9 PARTITION OF m FOR VALUES FROM (900) TO (1000);"
                 "INSERT INTO m SELECT i, 'nine' FROM generate_series(900, 905) i; COMMIT")
        self.sql("CREATE TABLE m_8 PARTITION OF m FOR VALUES FROM (800) TO (900)")
        self.sql("INSERT INTO m SELECT i, 'eight' FROM generate_series(800, 810) i")
        p = self.sync()
        self.assertIn("the partitions of public.m changed: every partition that joined it holds "
                      "only rows written since", p.stderr)
        self.matches()
        self.assertEqual(self.verify()[0], 0)
        self.sql("UPDATE m SET v = 'later' WHERE id IN (1, 801, 901)")
        p = self.sync()
        self.assertNotIn("partitions of public.m changed", p.stderr)  # recorded
        self.matches()
        for k, ddl in enumerate(["ALTER TABLE m DETACH PARTITION m_2", "DROP TABLE m_9"]):
            with self.subTest(ddl=ddl):
                self.before(f"m_before_{k}", f"UPDATE m SET v = 'round {k}' WHERE id < 10")
                self.sql(ddl)
                p = self.sync(check=False)
                self.assert_stops_at_the_partitions(p)
                # The partition's rows are still in the destination, and said to be.
                self.matches(source_table=f"m_before_{k}")
                code, v = self.verify()
                self.assertEqual(code, 1)
                self.assertIn("divergence", " ".join(v["notes"]))
                self.start_over()
                self.sync()
                self.matches()

    def test_partitions_changed_are_followed_with_the_rows_kept_when_ignored(self):
        self.configure(extra="  truncate: ignore\n")
        self.sync()
        self.before("m_before", "UPDATE m SET v = 'before attach' WHERE id < 10")
        self.sql(attach())
        p = self.sync()
        self.assertIn("the partitions of public.m changed on the source", p.stderr)
        self.assertIn("truncate: ignore", p.stderr)
        self.matches(source_table="m_before")
        # From here on the attached partition's changes land like any other's.
        self.sql("UPDATE m SET v = 'later' WHERE id IN (1, 200, 201); DELETE FROM m WHERE id = 202")
        p = self.sync()
        self.assertNotIn("partitions of public.m changed", p.stderr)  # warned once
        self.sql("CREATE TABLE expected AS SELECT * FROM m_before WHERE id <> 1 UNION ALL "
                 "SELECT * FROM m WHERE id IN (1, 200, 201)")
        self.matches(source_table="expected")

    def test_a_partition_attached_while_the_log_is_followed_stops_the_sync(self):
        self.configure()
        self.sync()

        def change():
            self.before("m_before", "UPDATE m SET v = 'before attach' WHERE id < 10")
            self.sql(attach())
        p = self.follow_until_stopped(change)
        self.assert_stops_at_the_partitions(p)
        self.matches(source_table="m_before")

    def test_crash_around_the_commit_before_an_attached_partition(self):
        self.configure()
        self.sync()
        for k, point in enumerate(["sink.before_commit", "sink.after_commit",
                                   "state.after_write"]):
            with self.subTest(point=point):
                self.before(f"m_before_{k}", f"UPDATE m SET v = 'round {k}' WHERE id % 7 = {k};"
                                             f"DELETE FROM m WHERE id = {40 + k};"
                                             f"INSERT INTO m VALUES ({170 + k}, 'round {k}')")
                # (Round 1 fills the table and attaches it in one transaction.)
                ddl = attach(f"m_3{k}", 300 + 100 * k)
                self.sql(f"BEGIN; {ddl}; COMMIT" if k == 1 else ddl)
                self.crash(point)
                p = self.sync(check=False)
                self.assert_stops_at_the_partitions(p)
                self.matches(source_table=f"m_before_{k}")
                self.start_over()
                self.sync()
                self.matches()


if __name__ == "__main__":
    unittest.main()
