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
    - name: t
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


class PostgresDdlTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
        self.db = SERVER.create_test_database("ddl", self._testMethodName)
        SERVER.psql(SCHEMA, db=self.db)

    def tearDown(self):
        SERVER.drop_test_database(self.db)
        super().tearDown()

    def configure(self, extra=""):
        self.write_pipeline(PIPELINE.format(name=self.db, dsn=SERVER.dsn(self.db), extra=extra))

    def sync(self, **kw):
        env = dict(self.env)
        env.update(kw.pop("env", {}))
        return self.ferry("sync", "--once", "-c", self.pipeline, env=env, **kw)

    def sql(self, text):
        return SERVER.psql(text, db=self.db)

    def matches(self, source_table=None, icebird=True):
        """The Iceberg table t holds exactly the rows of `source_table` (t by default)."""
        return assert_pg_table_matches(self, SERVER, self.db, NS, "t", source_table=source_table,
                                       icebird=icebird)

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

    def assert_stops_at_the_recreated_table(self, p):
        self.assertNotEqual(p.returncode, 0, f"the sync went on past the recreated table\n"
                                             f"{p.stdout}\n{p.stderr}")
        self.assertIn("public.t was dropped and created again", p.stderr)
        self.assertIn("remove its entry from the state file", p.stderr)  # the fix
        self.assertIn("truncate: ignore", p.stderr)  # the other choice

    def start_over(self):
        """What the stop's message says to do: the stream's entry leaves the state file."""
        path = os.path.join(self.dir, "state.json")
        with open(path) as f:
            state = json.load(f)
        state["streams"] = [s for s in state["streams"] if s["stream"] != "t"]
        with open(path, "w") as f:
            json.dump(state, f)

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
            self.sql("UPDATE t SET note = 'before drop' WHERE id <= 10")
            self.sql("CREATE TABLE t_before AS SELECT * FROM t")
            self.sql(recreate(1))
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        self.assertIn("was dropped or renamed on the source while its changes were read", err)
        self.assert_stops_at_the_recreated_table(subprocess.CompletedProcess([], proc.returncode,
                                                                             out, err))
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


if __name__ == "__main__":
    unittest.main()
