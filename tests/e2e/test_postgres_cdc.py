"""CDC, PostgreSQL -> Iceberg through logical replication (pgoutput, binary): a backfill read at
the replication slot's consistent point, then the changes from the slot applied as upserts and
deletes by key, one snapshot per checkpoint. Every check reads the tables back with icebird and
DuckDB (delete files applied) and compares them value by value with what the server holds; the
crash tests kill the sync at each fault point of the protocol and sync again."""
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
from test_postgres_to_iceberg import assert_pg_table_matches  # noqa: E402

SERVER = None
NS = "pgcdc"

PIPELINE = """
name: {name}
source:
  type: postgres
  dsn: "{dsn}"
{extra}  streams:
{streams}
destination: {{type: iceberg, warehouse: ./warehouse, namespace: pgcdc}}
state: ./state.json
{top}"""

# `big` is stored out of line (TOASTed): an UPDATE that leaves it alone does not send it.
SCHEMA = """
CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, amount numeric(12,2), qty bigint,
                    ratio float8, at timestamptz, day date, flag boolean, doc jsonb, ref uuid,
                    big text);
INSERT INTO items SELECT i, 'item ' || i, i * 1.25, i * 1000, i / 7.0,
    timestamptz '2024-01-01 00:00:00+00' + i * interval '1 minute', date '2020-01-01' + i,
    i % 2 = 0, jsonb_build_object('k', i), md5(i::text)::uuid,
    CASE WHEN i % 10 = 0 THEN (SELECT string_agg(md5(i::text || g::text), '')
                               FROM generate_series(1, 400) g) END
  FROM generate_series(1, 3000) i;
CREATE TABLE "Odd Name" ("Key" bigint PRIMARY KEY, "välue" text, "select" int);
INSERT INTO "Odd Name" SELECT i, 'v' || i, i FROM generate_series(1, 500) i;
CREATE TABLE full_ident (id int PRIMARY KEY, note text, big text);
ALTER TABLE full_ident REPLICA IDENTITY FULL;
INSERT INTO full_ident SELECT i, 'n' || i, (SELECT string_agg(md5(i::text || g::text), '')
                                            FROM generate_series(1, 400) g)
  FROM generate_series(1, 200) i;
CREATE TABLE nokey (v text, n int);
"""

STREAMS = ["items", "Odd Name", "full_ident"]


def setUpModule():
    global SERVER
    SERVER = pgserver.start_for_module()


def tearDownModule():
    if SERVER:
        SERVER.stop()


class PostgresCdcTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
        self.db = SERVER.create_test_database("cdc", self._testMethodName)
        SERVER.psql(SCHEMA, db=self.db)

    def tearDown(self):
        SERVER.drop_test_database(self.db)
        super().tearDown()

    def configure(self, streams=None, mode="cdc", extra="", name=None, top=""):
        streams = streams or STREAMS
        text = "\n".join(f"    - name: {json.dumps(t)}\n      mode: {mode}\n      chunk_rows: 1000"
                         for t in streams)
        self.name = name or self.db
        self.write_pipeline(PIPELINE.format(name=self.name, dsn=SERVER.dsn(self.db),
                                            streams=text, extra=extra, top=top))

    def sync(self, **kw):
        env = dict(self.env)
        env.update(kw.pop("env", {}))
        return self.ferry("sync", "--once", "-c", self.pipeline, env=env, **kw)

    def sql(self, text):
        return SERVER.psql(text, db=self.db)

    def slot_lsn(self):
        out = self.sql("SELECT confirmed_flush_lsn - '0/0'::pg_lsn FROM pg_replication_slots "
                       f"WHERE slot_name = 'ferry_{self.name}'").strip()
        return int(out) if out else None

    def wal_lsn(self):
        return int(self.sql("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").strip())

    def start_following(self):
        # `ferry sync` without --once, committing every second, in the background.
        env = dict(os.environ)
        env.update(self.env)
        env.pop("FERRY_FAULT", None)
        return subprocess.Popen([ferrytest.FERRY, "sync", "-c", self.pipeline, "--interval", "1"],
                                cwd=self.dir, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def item_names(self, upto):
        # The names of items with id <= upto, as DuckDB reads the Iceberg table.
        seen = self.inspect(self.catalog_tables()[(NS, "items")])
        cols = [f["name"] for f in seen["schema"]["fields"]]
        i, n = cols.index("id"), cols.index("name")
        return {r[n] for r in seen["duckdb_rows"] if int(r[i]) <= upto}

    def assert_matches(self, *tables):
        for t in tables or STREAMS:
            assert_pg_table_matches(self, SERVER, self.db, NS, t)

    def crash(self, point, hit=1):
        p = self.sync(env={"FERRY_FAULT": f"{point}:{hit}"}, check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL,
                         f"{point}:{hit} did not kill the sync (exit {p.returncode})\n{p.stderr}")
        self.assertIn(f"fault point {point} reached", p.stderr)

    # A mix of every kind of change, in several transactions.
    def change(self, salt):
        self.sql(f"""
            BEGIN;
            INSERT INTO items (id, name, amount, qty, ratio, at, day, flag, doc, ref, big)
              SELECT i, 'new {salt} ' || i, -i, NULL, 'NaN', timestamptz '1900-01-01 00:00:00+00',
                     date '0001-01-01', NULL,
                     '{{"a": [1, 2]}}', gen_random_uuid(), NULL
              FROM generate_series((SELECT max(id) + 1 FROM items),
                                   (SELECT max(id) + 50 FROM items)) i;
            UPDATE items SET name = name || ' {salt}', amount = amount + 1 WHERE id % 37 = 0;
            DELETE FROM items WHERE id % 41 = 0;
            COMMIT;
            -- one key, three changes in one transaction: the last wins
            BEGIN;
            INSERT INTO items (id, name) VALUES (900000 + {salt}, 'short-lived');
            UPDATE items SET name = 'updated twice' WHERE id = 900000 + {salt};
            DELETE FROM items WHERE id = 900000 + {salt};
            UPDATE items SET name = 'first' WHERE id = 11;
            UPDATE items SET name = 'second {salt}' WHERE id = 11;
            COMMIT;
            -- a key that changes
            UPDATE items SET id = -id WHERE id = (SELECT min(id) FROM items WHERE id % 43 = 0
                                                  AND id > 0);
            UPDATE "Odd Name" SET "välue" = 'changed {salt}', "select" = -1 WHERE "Key" % 9 = 0;
            DELETE FROM "Odd Name" WHERE "Key" % 13 = 0;
            INSERT INTO "Odd Name" SELECT i, 'late', i FROM generate_series(
                (SELECT max("Key") + 1 FROM "Odd Name"), (SELECT max("Key") + 5 FROM "Odd Name")) i;
            -- TOASTed values left alone by updates
            UPDATE items SET qty = coalesce(qty, 0) + 1 WHERE id % 10 = 0 AND id % 20 = 0;
            UPDATE full_ident SET note = 'changed {salt}' WHERE id % 3 = 0;
            DELETE FROM full_ident WHERE id % 29 = 0;
        """)

    def test_backfill_then_every_kind_of_change_lands_exactly(self):
        self.configure()
        p = self.sync()
        self.assertIn("new load", p.stdout)
        self.assert_matches()
        before = self.slot_lsn()
        self.assertIsNotNone(before, "the sync created no replication slot")
        self.change(1)
        self.change(2)
        p = self.sync()
        self.assertIn("cdc: changes", p.stdout)
        self.assert_matches()
        # The slot is acknowledged: the server may recycle the WAL that was applied.
        self.assertGreater(self.slot_lsn(), before)
        # Nothing new: no commit, nothing read twice.
        snapshots = self.inspect(self.catalog_tables()[(NS, "items")])["snapshot_count"]
        p = self.sync()
        self.assertIn("cdc: no new changes", p.stdout)
        self.assertEqual(self.inspect(self.catalog_tables()[(NS, "items")])["snapshot_count"],
                         snapshots)
        self.assert_matches()

    def test_unchanged_toasted_values_keep_their_value(self):
        self.configure()
        self.sync()
        # In its own sync: the value is neither in this checkpoint nor in the old row image
        # (REPLICA IDENTITY DEFAULT), so ferry reads it by key.
        self.sql("UPDATE items SET name = 'toast kept' WHERE id % 10 = 0")
        # Updated, then deleted later: the later delete must win.
        self.sql("UPDATE items SET name = 'gone soon' WHERE id = 20")
        self.sql("DELETE FROM items WHERE id = 20")
        self.sql("UPDATE full_ident SET note = 'full identity' WHERE id < 50")
        self.sync()
        self.assert_matches()
        n = int(self.sql("SELECT count(*) FROM items WHERE big IS NOT NULL AND "
                         "name = 'toast kept'").strip())
        self.assertGreater(n, 250)

    def test_checkpoint_settings_split_a_long_round_at_transaction_boundaries(self):
        def snapshots_after_12_transactions_of_100_updates(sign):
            for k in range(12):
                self.sql(f"UPDATE items SET qty = {sign}{k} WHERE id > {k * 100} "
                         f"AND id <= {(k + 1) * 100}")
            self.sync()
            return self.inspect(self.catalog_tables()[(NS, "items")])["snapshot_count"]

        self.configure(streams=["items"], top="checkpoint: {max_changes: 150}\n")
        self.sync()
        before = self.inspect(self.catalog_tables()[(NS, "items")])["snapshot_count"]
        after = snapshots_after_12_transactions_of_100_updates("")
        # 1,200 changes, a checkpoint once 150 keys are held, never inside a transaction.
        self.assertEqual(after - before, 6)
        self.assert_matches("items")
        # min_pause holds the next checkpoint back (max_bytes would not be): one at the end.
        self.configure(streams=["items"], top="checkpoint: {max_changes: 150, min_pause: 1h}\n")
        last = snapshots_after_12_transactions_of_100_updates("-")
        self.assertEqual(last - after, 1)
        self.assert_matches("items")

    def test_a_large_transaction_lands_whole(self):
        self.configure(streams=["items"])
        self.sync()
        self.sql("INSERT INTO items (id, name, amount) SELECT i, 'bulk', i FROM "
                 "generate_series(100001, 250000) i; UPDATE items SET amount = 0 WHERE id > 200000")
        p = self.sync()
        self.assertIn("cdc: changes", p.stdout)
        self.assert_matches("items")

    def spill_files(self):
        return [f for f in os.listdir(self.dir) if f.startswith("ferry-spill-")]

    def test_a_large_transaction_spills_past_memory_limit_and_lands_exactly(self):
        # Some 30 MB of held changes against a memory_limit of 1 MiB; updates that leave the
        # TOASTed `big` alone, whose earlier values are on disk, are read back from the table.
        self.configure(streams=["items"], top="memory_limit: 1MiB\n")
        self.sync()
        self.sql("BEGIN; UPDATE items SET qty = coalesce(qty, 0) + 1, name = name || ' u';"
                 "INSERT INTO items (id, name, amount) SELECT i, repeat('b', 150) || i, i FROM "
                 "generate_series(100001, 160000) i; UPDATE items SET amount = 0 WHERE id > 150000;"
                 "DELETE FROM items WHERE id % 11 = 0; COMMIT;")
        for point in ["source.spilling", "source.reading_spill"]:
            self.crash(point, 2)
            self.assertNotEqual(self.spill_files(), [])
        p = self.sync()
        self.assertIn("held changes past memory_limit (1 MiB): spilling them to", p.stderr)
        self.assertIn("spill file(s)", p.stderr)
        self.assertEqual(self.spill_files(), [])
        self.assert_matches("items")

    def test_large_transactions_stream_in_progress_and_land_only_at_their_commit(self):
        self.streamed_transactions(rows=4000)

    def test_streamed_transactions_spill_past_memory_limit_and_land_only_at_their_commit(self):
        self.streamed_transactions(rows=20000, top="memory_limit: 1MiB\n")

    def streamed_transactions(self, rows, top=""):
        # With a small logical_decoding_work_mem the server streams large transactions while
        # they run (pgoutput streaming), interleaved with small ones that commit meanwhile. What
        # a transaction rolled back (a savepoint, or the whole of it) never lands; what it
        # committed lands once, even when a round ended while it was still open, or died in it.
        self.configure(streams=["items"], top=top)
        self.sync()
        SERVER.psql("ALTER SYSTEM SET logical_decoding_work_mem = '64kB'; SELECT pg_reload_conf()")
        self.addCleanup(SERVER.psql, "ALTER SYSTEM RESET logical_decoding_work_mem; "
                                     "SELECT pg_reload_conf()")
        with SERVER.session(self.db) as holder:
            holder.run("BEGIN; UPDATE items SET qty = coalesce(qty, 0) + 1000 WHERE id <= 1500;"
                       "INSERT INTO items (id, name) SELECT g, 'streamed ' || g "
                       f"  FROM generate_series(100001, {100000 + rows}) g;", until="ready")
            self.sql("UPDATE items SET name = 'interleaved' WHERE id = 2501")
            self.sql("BEGIN; UPDATE items SET name = 'aborted' WHERE id > 2000; ROLLBACK;")
            # A round while the large transaction is open: the small one lands, nothing of the
            # open one does.
            self.sync()
            names = self.item_names(10 ** 6)
            self.assertIn("interleaved", names)
            self.assertFalse({n for n in names if n.startswith("streamed ") or n == "aborted"
                              or n == "rolled back"})
            # A subtransaction rolled back after the server streamed its changes.
            self.assertEqual(holder.finish(
                "SAVEPOINT s; UPDATE items SET name = 'rolled back' WHERE id <= 2000;"
                "ROLLBACK TO SAVEPOINT s;"
                "UPDATE items SET name = name || ' after' WHERE id % 100 = 0; COMMIT;"), 0)
        streamed = int(self.sql("SELECT stream_txns FROM pg_stat_replication_slots "
                                f"WHERE slot_name = 'ferry_{self.name}'").strip() or 0)
        self.assertGreater(streamed, 0, "the server streamed no transaction")
        self.crash("source.mid_transaction")
        p = self.sync()
        if top:
            self.assertIn("spilling them to", p.stderr)
            self.assertEqual(self.spill_files(), [])
        self.assert_matches("items")
        names = self.item_names(10 ** 6)
        self.assertTrue(f"streamed {100000 + rows - 1}" in names and
                        f"streamed {100000 + rows} after" in names)
        self.assertFalse("rolled back" in names)

    def test_writes_during_the_backfill_are_neither_lost_nor_doubled(self):
        self.configure()
        stop = threading.Event()

        def writer():
            i = 0
            while not stop.is_set():
                i += 1
                SERVER.psql(f"INSERT INTO items (id, name) VALUES ({500000 + i}, 'during');"
                            f"UPDATE items SET name = 'moved {i}' WHERE id = {i % 3000 + 1};"
                            f"DELETE FROM items WHERE id = {(i * 7) % 3000 + 1};", db=self.db)

        t = threading.Thread(target=writer)
        t.start()
        try:
            self.sync()
        finally:
            stop.set()
            t.join()
        self.sync()
        self.assert_matches()

    def test_crash_at_every_fault_point_then_exactly_once(self):
        self.configure()
        self.sync()
        points = ["sink.data_written", "sink.before_commit", "catalog.after_metadata_write",
                  "sink.after_commit", "state.temp_written", "state.after_write",
                  "source.before_acknowledge"]
        for i, point in enumerate(points):
            with self.subTest(point=point):
                self.change(10 + i)
                self.crash(point)
                self.change(100 + i)
                self.sync()
                self.assert_matches()

    def test_crash_inside_a_large_transaction(self):
        self.configure(streams=["items"])
        self.sync()
        self.sql("UPDATE items SET amount = amount * 2")
        self.crash("source.mid_transaction", 2)
        self.crash("sink.after_commit")
        self.sync()
        self.assert_matches("items")

    def test_the_slot_moves_on_at_each_checkpoint_not_only_at_the_end_of_a_round(self):
        # A small transaction (a checkpoint of its own), then a large one the sync dies in: the
        # server must already have been told that the first is in the table, so that it can
        # forget that WAL, however long the round goes on.
        self.configure(streams=["items"], top="checkpoint: {max_changes: 100}\n")
        self.sync()
        before = self.slot_lsn()
        self.sql("UPDATE items SET qty = -1 WHERE id <= 150")
        first_commit = self.wal_lsn()
        self.sql("INSERT INTO items (id, name) SELECT i, 'bulk' FROM "
                 "generate_series(100001, 400000) i")
        self.crash("source.mid_transaction", 280)
        after = self.slot_lsn()
        self.assertGreater(after, before, "the slot did not move before the end of the round")
        self.assertGreaterEqual(after, first_commit)
        self.sync()
        self.assert_matches("items")

    def test_columns_added_mid_stream_are_followed(self):
        self.configure(streams=["items"])
        self.sync()
        self.sql("UPDATE items SET name = 'before' WHERE id < 100;"
                 "ALTER TABLE items ADD COLUMN extra int;"
                 "UPDATE items SET extra = id, name = 'after' WHERE id < 200;")
        p = self.sync()
        self.assert_matches("items")
        seen = self.inspect(self.catalog_tables()[(NS, "items")])
        self.assertIn("extra", [f["name"] for f in seen["schema"]["fields"]], p.stderr)

    def test_truncate_stops_with_the_fix_or_is_ignored(self):
        self.configure(streams=["items"])
        self.sync()
        self.sql("UPDATE items SET name = 'kept' WHERE id = 1; TRUNCATE items;"
                 "INSERT INTO items (id, name) VALUES (1, 'after truncate')")
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("truncated", p.stderr)
        self.assertIn("truncate: ignore", p.stderr)
        # The change before the TRUNCATE landed.
        rows = self.inspect(self.catalog_tables()[(NS, "items")])["icebird_rows"]
        self.assertIn("kept", [r[1] for r in rows if r[0] == "1"])
        self.configure(streams=["items"], extra="  truncate: ignore\n")
        self.sync()
        rows = self.inspect(self.catalog_tables()[(NS, "items")])["icebird_rows"]
        self.assertEqual([r[1] for r in rows if r[0] == "1"], ["after truncate"])
        self.assertGreater(len(rows), 2000)  # the truncated rows stay

    def test_cdc_only_starts_from_now(self):
        self.configure(streams=["Odd Name"], mode="cdc_only")
        self.sync()
        self.sql("""UPDATE "Odd Name" SET "välue" = 'after' WHERE "Key" <= 10""")
        self.sync()
        seen = self.inspect(self.catalog_tables()[(NS, "Odd Name")])
        self.assertEqual(sorted(int(r[0]) for r in seen["icebird_rows"]), list(range(1, 11)))
        self.assertEqual({r[1] for r in seen["icebird_rows"]}, {"after"})

    def test_a_dropped_slot_stops_the_sync_and_says_how_to_recover(self):
        self.configure(streams=["items"])
        self.sync()
        self.sql("UPDATE items SET name = 'x' WHERE id = 1")
        self.sql(f"SELECT pg_drop_replication_slot('ferry_{self.name}')")
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("no longer exists as ferry left it", p.stderr)
        self.assertIn("are lost", p.stderr)
        self.assertIn("state file", p.stderr)

    def test_check_refuses_what_cdc_cannot_follow(self):
        self.configure(streams=["nokey"])
        p = self.ferry("check", "-c", self.pipeline, env=self.env, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("no primary key", p.stderr)
        self.assertIn("REPLICA IDENTITY FULL", p.stderr)
        SERVER.psql("DROP ROLE IF EXISTS plain; CREATE ROLE plain LOGIN PASSWORD 'pw';"
                    f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO plain", db=self.db)
        self.write_pipeline(PIPELINE.format(
            name=self.db, dsn=SERVER.dsn(self.db, user="plain", password_ref="pw"),
            streams="    - name: items\n      mode: cdc", extra="", top=""))
        p = self.ferry("check", "-c", self.pipeline, env=self.env, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("REPLICATION", p.stderr)
        self.assertNotIn("pw", p.stderr.replace("password", ""))

    def test_random_kills_during_a_long_follow_sync(self):
        """kill -9 at random moments of a following sync while the source keeps changing, many
        times; then one more sync, and the tables must equal the source."""
        self.configure()
        self.sync()
        stop = threading.Event()

        def writer():
            i = 0
            while not stop.is_set():
                i += 1
                SERVER.psql(f"""BEGIN;
                    INSERT INTO items (id, name, amount) VALUES ({700000 + i}, 'w{i}', {i});
                    UPDATE items SET name = 'u{i}', amount = amount + 1 WHERE id = {i % 2500 + 1};
                    DELETE FROM items WHERE id = {(i * 13) % 2500 + 1};
                    UPDATE "Odd Name" SET "select" = {i} WHERE "Key" = {i % 400 + 1};
                    UPDATE full_ident SET note = 'u{i}' WHERE id = {i % 150 + 1};
                    COMMIT;""", db=self.db)

        t = threading.Thread(target=writer)
        t.start()
        env = dict(os.environ)
        env.update(self.env)
        env.pop("FERRY_FAULT", None)
        rnd = random.Random(20261129)
        kills = 0
        try:
            for _ in range(8):
                proc = subprocess.Popen(
                    [ferrytest.FERRY, "sync", "-c", self.pipeline, "--interval", "1"],
                    cwd=self.dir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                time.sleep(rnd.uniform(0.3, 3.0))
                if proc.poll() is None:
                    proc.kill()
                    kills += 1
                proc.communicate(timeout=60)
        finally:
            stop.set()
            t.join()
        self.assertGreaterEqual(kills, 6, "the sync ended by itself instead of being killed")
        self.sync()
        self.assert_matches()

    def test_follow_mode_survives_a_terminated_connection(self):
        self.configure()
        self.sync()
        proc = self.start_following()
        try:
            for i in range(6):
                self.change(200 + i)
                time.sleep(1.5)
                SERVER.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_replication "
                            "UNION ALL SELECT pg_terminate_backend(active_pid) FROM "
                            f"pg_replication_slots WHERE database = '{self.db}' AND active",
                            check=False)
            time.sleep(4)
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 0, err)
        self.sync()
        self.assert_matches()

    def test_follow_mode_reads_on_one_session_and_lands_changes_every_interval(self):
        # Changes land within a few seconds each, all through the same walsender (no reconnect,
        # so no WAL decoded twice); SIGTERM ends the sync cleanly.
        self.configure()
        self.sync()
        proc = self.start_following()
        pids = set()
        try:
            for i in range(3):
                self.sql(f"UPDATE items SET name = 'follow {i}' WHERE id <= 100")
                deadline = time.monotonic() + 30
                while True:
                    names = self.item_names(upto=100)
                    if names == {f"follow {i}"}:
                        break
                    self.assertLess(time.monotonic(), deadline,
                                    f"round {i} did not land in 30 s: {names}")
                    time.sleep(0.3)
                pid = self.sql("SELECT active_pid FROM pg_replication_slots WHERE slot_name = "
                               f"'ferry_{self.name}'").strip()
                self.assertTrue(pid, "the slot is not in use while the sync follows it")
                pids.add(pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual(len(pids), 1, f"the slot was read by {len(pids)} sessions: {pids}")
        self.assertIn("on, until stopped", err)
        self.change(300)
        self.sync()
        self.assert_matches()

    def test_array_values_land_as_lists(self):
        # `big` is TOASTed: the UPDATE of id 1001 that leaves it alone makes ferry read it by key.
        self.sql("CREATE TABLE tagged (id int PRIMARY KEY, tags text[], nums int[], "
                 "prices numeric(8,2)[], big text[]);"
                 "INSERT INTO tagged SELECT i, ARRAY['t' || i, NULL], ARRAY[i, -i], ARRAY[i * 0.5], "
                 "NULL FROM generate_series(1, 300) i")
        self.configure(streams=["tagged"])
        self.sync()
        self.assert_matches("tagged")
        self.sql("INSERT INTO tagged VALUES (1001, '{}', NULL, '{NULL}', "
                 "ARRAY(SELECT md5(g::text) FROM generate_series(1, 500) g));"
                 "UPDATE tagged SET tags = ARRAY['changed', NULL, ''], nums = '{}' WHERE id % 10 = 0;"
                 "UPDATE tagged SET nums = NULL, prices = '[5:6]={1.25,NULL}' WHERE id = 7;"
                 "DELETE FROM tagged WHERE id = 3;")
        self.sql("UPDATE tagged SET tags = tags || 'x'::text WHERE id = 1001")
        p = self.sync()
        self.assertIn("cdc: changes", p.stdout)
        self.assert_matches("tagged")
        seen = self.inspect(self.catalog_tables()[(NS, "tagged")])
        tags = [f for f in seen["schema"]["fields"] if f["name"] == "tags"][0]["type"]
        self.assertEqual((tags["type"], tags["element"]), ("list", "string"))
        row = [r for r in seen["duckdb_rows"] if r[0] == "1001"][0]
        self.assertEqual(row[1], 'list:["x"]')
        self.assertTrue(row[4].startswith('list:["c4ca4238a0b923820dcc509a6f75849b"'), row[4][:80])
        # Compaction rewrites the list columns (reader and writer) without changing a value, and
        # folds the delete files away.
        self.ferry("maintain", "-c", self.pipeline, "--expire-older-than", "0s", "--retain-last",
                   "1", env=self.env)
        seen = assert_pg_table_matches(self, SERVER, self.db, NS, "tagged")
        self.assertEqual([f for f in seen["data_files"] if f["content"] != 0], [],
                         "delete files are left after compaction")
        p = self.ferry("verify", "-c", self.pipeline, env=self.env, check=False)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main()
