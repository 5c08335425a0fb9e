"""PostgreSQL -> PostgreSQL: a source database and a destination database on a real server started
by the test. Every check asks the destination database itself (psql) for its rows, each value
printed by PostgreSQL's own output functions, and compares them with the source's: no duplicate,
no missing row, no stale version. The crash tests kill the sync at each fault point of the
protocol (data written, before and after COMMIT, state file, acknowledgement, publish) and sync
again."""
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ferrytest  # noqa: E402
import pgserver  # noqa: E402
import test_postgres_cdc  # noqa: E402

SERVER = None
TARGET_SCHEMA = "copy"

PIPELINE = """
name: {name}
source:
  type: postgres
  dsn: "{dsn}"
  streams:
{streams}
destination:
  type: postgres
  dsn: "{target}"
  schema: {schema}
state: ./state.json
{top}"""

# Types whose text form is the same in both databases (numeric without precision and json travel
# as text; see docs/type-mapping.md).
EXTRA = r"""
CREATE TABLE arrays (id int PRIMARY KEY, ints int[], words text[], days date[]);
INSERT INTO arrays VALUES (1, '{1,NULL,3}', '{"a b","",NULL,"ü"}', '{2024-02-29}'),
                          (2, '{}', NULL, '{}'), (3, NULL, '{"x"}', NULL);
CREATE TABLE "Order" ("Select" int PRIMARY KEY, "from" text, "Über Größe" numeric(38,10));
INSERT INTO "Order" VALUES (1, 'quote '' and "double"', -1234567890123456789012345678.0123456789),
                           (2, NULL, 0), (3, 'tab	nl
x', 99999999999999999999999999.9999999999);
"""

STREAMS = ["items", "Odd Name", "full_ident", "arrays", "Order"]


def setUpModule():
    global SERVER
    SERVER = pgserver.start_for_module()


def tearDownModule():
    if SERVER:
        SERVER.stop()


def rows_as_text(db, schema, table, columns):
    """Every row as a tuple of PostgreSQL's text forms, sorted: what a user's SELECT shows."""
    cols = ", ".join(f'"{c}"::text' for c in columns)
    q = f'COPY (SELECT {cols} FROM "{schema}"."{table}") TO STDOUT WITH (FORMAT csv)'
    out = SERVER.psql(q, db=db)
    import csv
    import io
    return sorted(tuple(r) for r in csv.reader(io.StringIO(out)))


def columns_of(db, table):
    out = SERVER.psql("SELECT attname FROM pg_attribute WHERE attrelid = "
                      f"quote_ident('{table.replace(chr(39), chr(39) * 2)}')::regclass "
                      "AND attnum > 0 AND NOT attisdropped ORDER BY attnum", db=db)
    return [line for line in out.split("\n") if line]


class PostgresToPostgresTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
        self.db = SERVER.create_test_database("p2p", self._testMethodName)
        self.target = SERVER.create_test_database("p2pdst", self._testMethodName)
        SERVER.psql(test_postgres_cdc.SCHEMA + EXTRA, db=self.db)

    def tearDown(self):
        SERVER.drop_test_database(self.db)
        SERVER.drop_test_database(self.target)
        super().tearDown()

    def configure(self, streams=None, mode="cdc", top="", name=None):
        streams = streams or STREAMS
        text = "\n".join(f"    - name: {json.dumps(t)}\n      mode: {mode}\n      chunk_rows: 1000"
                         + ("\n      cursor: id" if mode == "incremental" else "")
                         for t in streams)
        self.name = name or self.db
        self.write_pipeline(PIPELINE.format(name=self.name, dsn=SERVER.dsn(self.db),
                                            target=SERVER.dsn(self.target), streams=text,
                                            schema=TARGET_SCHEMA, top=top))

    def sync(self, **kw):
        env = dict(self.env)
        env.update(kw.pop("env", {}))
        return self.ferry("sync", "--once", "-c", self.pipeline, env=env, **kw)

    def sql(self, text):
        return SERVER.psql(text, db=self.db)

    def target_sql(self, text):
        return SERVER.psql(text, db=self.target)

    # Used by test_postgres_cdc's change().
    change = test_postgres_cdc.PostgresCdcTest.change

    def assert_matches(self, *tables):
        for t in tables or STREAMS:
            cols = columns_of(self.db, t)
            src = rows_as_text(self.db, "public", t, cols)
            dst = rows_as_text(self.target, TARGET_SCHEMA, t, cols)
            self.assertEqual(len(dst), len(set(dst)), f"{t}: duplicate rows in the destination")
            missing = sorted(set(src) - set(dst))[:3]
            extra = sorted(set(dst) - set(src))[:3]
            self.assertEqual(src, dst, f"{t}: {len(src)} source rows, {len(dst)} destination "
                             f"rows; missing e.g. {missing}; extra e.g. {extra}")

    def crash(self, point, hit=1):
        p = self.sync(env={"FERRY_FAULT": f"{point}:{hit}"}, check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL,
                         f"{point}:{hit} did not kill the sync (exit {p.returncode})\n{p.stderr}")
        self.assertIn(f"fault point {point} reached", p.stderr)

    def checkpoint(self, stream):
        out = self.target_sql("SELECT marker::text FROM ferry_state.checkpoints WHERE "
                              f"pipeline = '{self.name}' AND split = '{stream}'").strip()
        return json.loads(out) if out else None

    def test_backfill_then_changes_land_exactly_with_keys_and_types(self):
        self.configure()
        p = self.sync()
        self.assertIn("new load", p.stdout)
        self.assert_matches()
        # The target's tables have the source's keys and types.
        key = self.target_sql(
            "SELECT string_agg(a.attname, ',' ORDER BY a.attnum) FROM pg_index i JOIN "
            "pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            f"WHERE i.indrelid = '\"{TARGET_SCHEMA}\".\"Odd Name\"'::regclass AND i.indisprimary")
        self.assertEqual(key.strip(), "Key")
        types = self.target_sql(
            "SELECT string_agg(format_type(atttypid, atttypmod), ',' ORDER BY attnum) FROM "
            f"pg_attribute WHERE attrelid = '\"{TARGET_SCHEMA}\".items'::regclass AND attnum > 0")
        self.assertEqual(types.strip(), "integer,text,numeric(12,2),bigint,double precision,"
                         "timestamp with time zone,date,boolean,text,uuid,text")
        # No load table is left behind.
        self.assertEqual(self.target_sql(
            "SELECT string_agg(tablename, ',') FROM pg_tables WHERE schemaname = 'ferry_state' "
            "AND tablename LIKE 'load\\_%'").strip(), "")
        self.change(1)
        self.change(2)
        p = self.sync()
        self.assertIn("cdc: changes", p.stdout)
        self.assert_matches()
        self.assertEqual(self.checkpoint("items")["mode"], "cdc")
        p = self.ferry("verify", "-c", self.pipeline, env=self.env)
        self.assertIn(f"{len(STREAMS)} of {len(STREAMS)} tables match", p.stdout)

    def test_crash_at_every_fault_point_then_exactly_once(self):
        self.configure()
        self.sync()
        points = ["sink.data_written", "sink.before_commit", "sink.after_commit",
                  "state.temp_written", "state.after_write", "source.before_acknowledge"]
        for i, point in enumerate(points):
            with self.subTest(point=point):
                self.change(10 + i)
                self.crash(point)
                self.change(100 + i)
                self.sync()
                self.assert_matches()

    def test_crash_during_the_load_resumes_and_publishes_once(self):
        self.configure(mode="full_refresh")
        for point, hit in [("sink.before_commit", 2), ("sink.after_commit", 2),
                           ("state.after_write", 3), ("sink.before_publish", 1),
                           ("sink.after_publish", 1)]:
            with self.subTest(point=point):
                self.sql(f"UPDATE items SET name = name || '{hit}' WHERE id % 5 = 0")
                self.crash(point, hit)
                p = self.sync()
                # The crashed load is finished, not started over (after its publish, a new
                # full refresh is a new load).
                if point != "sink.after_publish":
                    self.assertIn("resumed load", p.stdout)
                self.assert_matches()

    def test_a_commit_whose_answer_is_lost_is_settled_by_the_checkpoint_row(self):
        self.configure()
        self.sync()
        for hit in (1, 3):
            self.change(hit)
            p = self.sync(env={"FERRY_FAULT": f"sink.commit_outcome_lost:{hit}"})
            self.assertIn("injecting the failure", p.stderr)
            self.assertIn("reading the checkpoint row back", p.stderr)
            self.assert_matches()

    def test_a_settled_commit_counts_its_rows_in_the_report(self):
        # The COMMIT's answer is lost, the checkpoint row shows it landed: its rows were written
        # by this sync, and the report says so.
        self.configure(streams=["items"])
        self.sync()
        self.sql("INSERT INTO items (id, name) SELECT g, 'settled' FROM "
                 "generate_series(700001, 700025) g")
        p = self.sync(env={"FERRY_FAULT": "sink.commit_outcome_lost:1"})
        self.assertIn("reading the checkpoint row back", p.stderr)
        self.assertEqual(self.stream_report(p.stdout, "items")["rows"], 25, p.stdout)
        self.assert_matches("items")

    def test_a_lost_state_file_is_repaired_from_the_checkpoint_row(self):
        self.configure()
        self.sync()
        self.change(1)
        self.sync()
        os.remove(os.path.join(self.dir, "state.json"))
        self.change(2)
        p = self.sync()
        self.assertNotIn("new load", p.stdout)
        self.assert_matches()

    def test_destination_connections_killed_during_a_follow_sync(self):
        """The destination's connections are terminated every second or so while a following sync
        applies a stream of changes: a COMMIT cut off mid-way has an unknown outcome, settled by
        reading the checkpoint row back. At the end the tables equal the source."""
        self.configure(streams=["items", "Odd Name"], top="checkpoint: {max_changes: 300}\n")
        self.sync()
        stop = threading.Event()

        def writer():
            i = 0
            while not stop.is_set():
                i += 1
                SERVER.psql(f"""BEGIN;
                    INSERT INTO items (id, name, amount) VALUES ({700000 + i}, 'w{i}', {i});
                    UPDATE items SET name = 'u{i}', amount = amount + 1 WHERE id % 50 = {i % 50};
                    DELETE FROM items WHERE id = {(i * 13) % 2500 + 1};
                    UPDATE "Odd Name" SET "select" = {i} WHERE "Key" = {i % 400 + 1};
                    COMMIT;""", db=self.db)

        killed = [0]
        rnd = random.Random(20261129)

        def killer():
            while not stop.is_set():
                out = SERVER.psql(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                    f"datname = '{self.target}' AND application_name = 'ferry'", check=False)
                killed[0] += int(out.strip() or 0)
                time.sleep(rnd.uniform(0.5, 1.5))

        env = dict(os.environ, **self.env)
        env.pop("FERRY_FAULT", None)
        proc = subprocess.Popen([ferrytest.FERRY, "sync", "-c", self.pipeline, "--interval", "1"],
                                cwd=self.dir, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        threads = [threading.Thread(target=writer), threading.Thread(target=killer)]
        for t in threads:
            t.start()
        try:
            time.sleep(20)
        finally:
            stop.set()
            for t in threads:
                t.join()
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=120)
        self.assertGreater(killed[0], 5, "the killer terminated no destination connection\n" + err[-3000:])
        print(f"\n  {killed[0]} destination connections terminated; "
              f"{err.count('reading the checkpoint row back')} commits with an unknown outcome "
              "settled", file=sys.stderr)
        self.sync()
        self.assert_matches("items", "Odd Name")

    def lose_the_table_after_changes_landed(self, mode):
        # Changes land, then the table and its checkpoint row go: the next sync must stop and
        # say so, not go on with the later changes alone. Returns that sync's stderr.
        self.configure(streams=["items"], mode=mode)
        self.sync()
        self.change(1)
        self.sync()
        self.target_sql(f'DROP TABLE "{TARGET_SCHEMA}".items; DELETE FROM ferry_state.checkpoints')
        self.change(2)
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("has no marker of this pipeline", p.stderr)
        self.assertIn("remove the stream's entry from the state file", p.stderr)
        return p.stderr

    def test_a_dropped_table_is_reported_not_silently_left_empty(self):
        self.lose_the_table_after_changes_landed("cdc")
        p = self.ferry("state", "-c", self.pipeline, env=self.env)
        self.assertIn("stops:", p.stdout)
        os.remove(os.path.join(self.dir, "state.json"))
        p = self.sync()
        self.assertIn("new load", p.stdout)
        self.assert_matches("items")

    def test_a_dropped_cdc_only_table_is_reported_once_changes_had_landed(self):
        # cdc_only has no backfill, but once its changes landed, they are in the table only.
        self.assertIn("cdc_only", self.lose_the_table_after_changes_landed("cdc_only"))

    def test_a_dropped_incremental_table_is_reported_once_rows_had_landed(self):
        self.assertIn("every row is read again",
                      self.lose_the_table_after_changes_landed("incremental"))

    def test_incremental_upserts_by_key(self):
        self.configure(streams=["items"], mode="incremental")
        self.sync()
        self.assert_matches("items")
        self.sql("INSERT INTO items (id, name) SELECT i, 'inc' FROM generate_series(5001, 5100) i")
        p = self.sync()
        self.assertIn("incremental up to", p.stdout)
        self.assert_matches("items")

    def test_incremental_window_crashes_land_once(self):
        self.configure(streams=["items"], mode="incremental")
        self.sync()
        for i, point in enumerate(["sink.data_written", "sink.before_commit", "sink.after_commit",
                                   "state.temp_written", "state.after_write",
                                   "sink.commit_outcome_lost"]):
            with self.subTest(point=point):
                lo = 10000 + i * 1000
                self.sql(f"INSERT INTO items (id, name, amount) SELECT g, 'w{i}', g FROM "
                         f"generate_series({lo}, {lo + 499}) g")
                if point == "sink.commit_outcome_lost":
                    self.sync(env={"FERRY_FAULT": point})
                else:
                    self.crash(point)
                self.sql(f"INSERT INTO items (id, name) SELECT g, 'late' FROM "
                         f"generate_series({lo + 500}, {lo + 599}) g")
                self.sync()
                self.assert_matches("items")

    def test_columns_added_mid_stream_reach_the_target(self):
        self.configure(streams=["items"])
        self.sync()
        self.sql("UPDATE items SET name = 'before' WHERE id < 100;"
                 "ALTER TABLE items ADD COLUMN extra int;"
                 "UPDATE items SET extra = id, name = 'after' WHERE id < 200;")
        self.sync()
        self.assert_matches("items")

    def test_a_commit_blocked_past_the_checkpoint_timeout_is_abandoned_and_retried(self):
        # Another session holds a row lock the commit needs. PostgreSQL would let ferry wait
        # forever; checkpoint.timeout cancels the statement, nothing of the attempt is recorded,
        # and the round is tried again until the lock is gone. Then everything lands, once.
        self.configure(streams=["items"], top="checkpoint: {timeout: 1s}\n")
        self.sync()
        self.change(1)
        with SERVER.session(self.target) as holder:
            holder.run(f'BEGIN; SELECT id FROM "{TARGET_SCHEMA}".items WHERE id = 11 FOR UPDATE;',
                       until="locked")
            timer = threading.Timer(5, holder.finish, args=("COMMIT;",))
            timer.start()
            p = self.sync()
            timer.join()
        self.assertIn("(checkpoint.timeout); interrupting it", p.stderr)
        self.assertIn("did not complete within checkpoint.timeout (1 s) and was abandoned",
                      p.stderr)
        self.assertIn("retrying in", p.stderr)
        self.assert_matches("items")

    def test_check_names_the_guarantee_and_bad_targets_fail_clearly(self):
        self.configure(streams=["items"])
        p = self.ferry("check", "-c", self.pipeline, env=self.env)
        self.assertIn("exactly-once", p.stdout)
        self.assertIn("PostgreSQL transaction", p.stdout)
        # A target table whose column cannot take the source's values: stopped, with the fix.
        self.sync()
        self.target_sql(f'ALTER TABLE "{TARGET_SCHEMA}".items ALTER COLUMN qty TYPE text')
        self.sql("UPDATE items SET qty = 5 WHERE id = 1")
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("qty", p.stderr)
        self.assertIn("full refresh", p.stderr)
        # A narrower column is widened in place.
        self.target_sql(f'ALTER TABLE "{TARGET_SCHEMA}".items ALTER COLUMN qty TYPE integer '
                        "USING qty::integer")
        self.sync()
        self.assert_matches("items")
        # A destination that cannot be reached.
        self.write_pipeline(PIPELINE.format(
            name=self.name, dsn=SERVER.dsn(self.db), streams="    - name: items",
            target=f"host=127.0.0.1 port={pgserver.free_port()} dbname=x user=u password=s3cr3t",
            schema=TARGET_SCHEMA, top="checkpoint: {tolerable_failures: 1}\n"))
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("destination", p.stderr)
        self.assertIn("retrying in", p.stderr)
        self.assertIn("check host and port in destination.dsn", p.stderr)  # the setting to fix
        self.assertNotIn("source.dsn", p.stderr)
        self.assertNotIn("s3cr3t", p.stderr + p.stdout)



class SqliteToPostgresTest(ferrytest.FerryTestCase):
    """Values one engine holds and the other may not."""

    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
        self.target = SERVER.create_test_database("l2p", self._testMethodName)
        self.write_pipeline(f"""
name: l2p
source: {{type: sqlite, path: ./source.db, mode: full_refresh}}
destination: {{type: postgres, dsn: "{SERVER.dsn(self.target)}", schema: "Weird Schema"}}
state: ./state.json
""")

    def tearDown(self):
        SERVER.drop_test_database(self.target)
        super().tearDown()

    def test_odd_names_and_extreme_values_arrive_or_stop_with_the_column_named(self):
        con = self.source()
        con.execute('CREATE TABLE "Ünïcode ""Quoted"" Table" ("Select" INTEGER PRIMARY KEY, '
                    '"ça va" TEXT, "MixedCase" REAL, "big" INTEGER)')
        con.executemany('INSERT INTO "Ünïcode ""Quoted"" Table" VALUES (?, ?, ?, ?)',
                        [(1, "plain", float("inf"), 9223372036854775807),
                         (2, "😀 emoji", float("-inf"), -9223372036854775808),
                         (3, None, -0.0, 0), (4, "", float("nan"), None)])
        con.commit()
        p = self.ferry("sync", "-c", self.pipeline, env=self.env)
        out = SERVER.psql('SELECT "Select", "ça va", "MixedCase"::text, big FROM '
                          '"Weird Schema"."Ünïcode ""Quoted"" Table" ORDER BY 1', db=self.target)
        self.assertEqual(out.strip().split("\n"), [
            "1|plain|Infinity|9223372036854775807", "2|😀 emoji|-Infinity|-9223372036854775808",
            # SQLite itself keeps -0.0 as 0 and a NaN as NULL.
            "3||0|0", "4|||"], p.stderr)
        # PostgreSQL text cannot hold a NUL byte: the sync stops naming the column, and the table
        # keeps its last complete load.
        con.execute('CREATE TABLE nul (id INTEGER PRIMARY KEY, note TEXT)')
        con.execute("INSERT INTO nul VALUES (1, 'fine'), (2, 'a' || char(0) || 'b')")
        con.commit()
        con.close()
        p = self.ferry("sync", "-c", self.pipeline, env=self.env, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("note", p.stderr)
        self.assertIn("NUL", p.stderr)
        self.assertEqual(SERVER.psql('SELECT count(*) FROM "Weird Schema".nul',
                                     db=self.target).strip(), "0")
        # PostgreSQL would cut a longer name to 63 bytes, silently: refused with the fix.
        con = self.source()
        con.execute("DROP TABLE nul")
        con.execute(f'CREATE TABLE "{"ä" * 40}" (id INTEGER PRIMARY KEY)')
        con.commit()
        con.close()
        p = self.ferry("sync", "-c", self.pipeline, env=self.env, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("80 bytes long", p.stderr)
        self.assertIn("63 bytes", p.stderr)


if __name__ == "__main__":
    unittest.main()
