"""MariaDB binary log CDC -> Iceberg: a real MariaDB server with its binary log on (started once for
the module), a backfill in one consistent snapshot handed over to the binary log at its exact
position, then every kind of change (inserts, updates, deletes, keys that change, several changes of
one key in one transaction, every type at its extremes) read from the log and compared value by
value with what the server itself says, through readers nobody here wrote (DuckDB, icebird). Kills
at every fault point, inside a large transaction and at random moments of a following sync, with
writes going on; a writer moving amounts between rows during the backfill (the totals stay whole);
TRUNCATE, ADD COLUMN, a purged binary log, a killed dump connection, cdc_only, verify, and
MariaDB -> PostgreSQL."""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ferrytest  # noqa: E402
import mariadbserver  # noqa: E402
import test_mysql_source  # noqa: E402
from test_mysql_source import SCHEMA as SOURCE_SCHEMA, assert_maria_table_matches  # noqa: E402

MARIA = None
NS = "maria"  # the namespace assert_maria_table_matches reads

PIPELINE = """
name: {name}
source:
  type: mysql
  url: "{url}"
{extra}
  streams:
{streams}
destination:
  type: iceberg
  warehouse: ./warehouse
  namespace: maria
state: ./state.json
{top}
"""

# all_types as the snapshot tests have it (every type at its extremes), rows 2.. inserted later,
# through the binary log.
ALL_TYPES = SOURCE_SCHEMA[:SOURCE_SCHEMA.index("INSERT INTO all_types (id) VALUES (1);")]
ALL_TYPES_ROWS = SOURCE_SCHEMA[SOURCE_SCHEMA.index("INSERT INTO all_types VALUES (2,"):
                               SOURCE_SCHEMA.index("CREATE TABLE events")]

SCHEMA = ALL_TYPES + """
INSERT INTO all_types (id) VALUES (1);
CREATE TABLE items (id int PRIMARY KEY, name varchar(80), amount decimal(12,2),
                    at datetime(6), note text CHARACTER SET latin1, data varbinary(100));
INSERT INTO items SELECT seq, CONCAT('item ', seq), seq * 1.5,
  TIMESTAMPADD(SECOND, seq, '2024-01-01 00:00:00'), CONCAT('café ', seq), UNHEX(HEX(seq))
  FROM seq_1_to_3000;
CREATE TABLE `Odd ``Name`` Ü` (`Key` int PRIMARY KEY, `välue` varchar(40), `select` int);
INSERT INTO `Odd ``Name`` Ü` SELECT seq, CONCAT('v', seq), seq FROM seq_1_to_400;
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO accounts SELECT seq, 1000 FROM seq_1_to_2000;
CREATE TABLE unfollowed (id int PRIMARY KEY, v text);
"""
STREAMS = ["items", "Odd `Name` Ü", "all_types"]

# The server's own record of the rows `items` loses (deleted, or moved to another key): each as it
# was, in `gone`, until its key comes back. What deletes: soft must keep.
TRACK_DELETED = """
CREATE TABLE gone LIKE items;
CREATE TRIGGER track_delete AFTER DELETE ON items FOR EACH ROW
  REPLACE INTO gone VALUES (OLD.id, OLD.name, OLD.amount, OLD.at, OLD.note, OLD.data);
CREATE TRIGGER track_move AFTER UPDATE ON items FOR EACH ROW
  REPLACE INTO gone SELECT OLD.id, OLD.name, OLD.amount, OLD.at, OLD.note, OLD.data
  FROM DUAL WHERE OLD.id <> NEW.id;
CREATE TRIGGER track_moved_back AFTER UPDATE ON items FOR EACH ROW FOLLOWS track_move
  DELETE FROM gone WHERE id = NEW.id;
CREATE TRIGGER track_back AFTER INSERT ON items FOR EACH ROW
  DELETE FROM gone WHERE id = NEW.id;
"""


def setUpModule():
    global MARIA
    MARIA = mariadbserver.start_for_module(binlog=True)
    test_mysql_source.MARIA = MARIA  # its comparison helpers read this server


def tearDownModule():
    if MARIA:
        MARIA.stop()


class MysqlCdcTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        self.env = {"MARIADB_PASSWORD": MARIA.password}
        self.db = "cdc_" + str(abs(hash(self._testMethodName)) % 10**8)
        MARIA.create_database(self.db)
        MARIA.sql("SET sql_mode = ''; SET time_zone = '+00:00';" + SCHEMA, db=self.db)

    def tearDown(self):
        MARIA.drop_database(self.db)
        super().tearDown()

    def configure(self, streams=None, mode="cdc", extra="", top="", name=None):
        streams = streams or STREAMS
        text = "\n".join(f"    - name: {json.dumps(t)}\n      mode: {mode}\n      chunk_rows: 1000"
                         for t in streams)
        self.name = name or self.db
        self.write_pipeline(PIPELINE.format(name=self.name, url=MARIA.url(self.db), extra=extra,
                                            streams=text, top=top))

    def sync(self, *args, **kw):
        env = dict(self.env)
        env.update(kw.pop("env", {}))
        return self.ferry("sync", "--once", *args, "-c", self.pipeline, env=env, **kw)

    def sql(self, text):
        return MARIA.sql("SET sql_mode = ''; SET time_zone = '+00:00';" + text, db=self.db)

    def assert_matches(self, *tables):
        for t in tables or STREAMS:
            assert_maria_table_matches(self, self.db, t)

    def crash(self, point, hit=1):
        p = self.sync(env={"FERRY_FAULT": f"{point}:{hit}"}, check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL,
                         f"{point}:{hit} did not kill the sync (exit {p.returncode})\n{p.stderr}")
        self.assertIn(f"fault point {point} reached", p.stderr)

    def following(self):
        env = dict(os.environ)
        env.update(self.env)
        env.pop("FERRY_FAULT", None)
        return subprocess.Popen([ferrytest.FERRY, "sync", "-c", self.pipeline, "--interval", "1"],
                                cwd=self.dir, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    # A mix of every kind of change, in several transactions.
    def change(self, salt):
        self.sql(f"""
            START TRANSACTION;
            INSERT INTO items (id, name, amount, at, note, data)
              SELECT m + seq, CONCAT('new {salt} ', m + seq), -(m + seq), '1000-01-01 00:00:00',
                     'ñ½', X'00FF'
              FROM (SELECT MAX(id) AS m FROM items) x, seq_1_to_50;
            UPDATE items SET name = CONCAT(name, ' {salt}'), amount = amount + 1 WHERE id % 37 = 0;
            DELETE FROM items WHERE id % 41 = 0;
            COMMIT;
            -- one key, three changes in one transaction: the last wins
            START TRANSACTION;
            INSERT INTO items (id, name) VALUES (900000 + {salt}, 'short-lived');
            UPDATE items SET name = 'updated twice' WHERE id = 900000 + {salt};
            DELETE FROM items WHERE id = 900000 + {salt};
            UPDATE items SET name = 'first' WHERE id = 11;
            UPDATE items SET name = 'second {salt}' WHERE id = 11;
            COMMIT;
            -- a key that changes
            UPDATE items SET id = -id WHERE id = (SELECT id FROM (SELECT MIN(id) AS id FROM items
                                                  WHERE id % 43 = 0 AND id > 0) y);
            UPDATE `Odd ``Name`` Ü` SET `välue` = 'changed {salt}', `select` = -1
              WHERE `Key` % 9 = 0;
            DELETE FROM `Odd ``Name`` Ü` WHERE `Key` % 13 = 0;
            INSERT INTO `Odd ``Name`` Ü` SELECT m + seq, 'late', seq
              FROM (SELECT MAX(`Key`) AS m FROM `Odd ``Name`` Ü`) x, seq_1_to_5;
            -- not followed: read past without decoding
            INSERT INTO unfollowed SELECT seq + 1000 * {salt}, 'x' FROM seq_1_to_20;
        """)

    def full_metadata(self):
        # Column names (and exact enum labels) in the log's table maps, for this test only.
        MARIA.sql("SET GLOBAL binlog_row_metadata = 'FULL'")
        self.addCleanup(MARIA.sql, "SET GLOBAL binlog_row_metadata = 'NO_LOG'")

    def test_backfill_then_every_kind_of_change_and_type_lands_exactly(self):
        # The enum label 'large 😀' is '?' in information_schema: only the log's own labels
        # (binlog_row_metadata = FULL) give it exactly.
        self.full_metadata()
        self.configure()
        first = self.sync()
        self.assertNotIn(MARIA.password, first.stdout + first.stderr)
        self.assert_matches()
        self.sql(ALL_TYPES_ROWS)
        self.change(1)
        out = self.sync()
        self.assertIn("reading the binary log", out.stderr)
        self.assert_matches()
        # Every row of all_types changed (before and after images of every type), one deleted.
        self.sql("UPDATE all_types SET id = id + 100 WHERE id = 4;"
                 "UPDATE all_types SET vc = CONCAT(COALESCE(vc, ''), 'ü') WHERE id <> 3;"
                 "DELETE FROM all_types WHERE id = 2;")
        self.change(2)
        self.sync()
        self.assert_matches()
        with open(os.path.join(self.dir, "state.json")) as f:
            state = json.load(f)
        positions = [s["state"]["position"] for s in state["streams"]]
        self.assertTrue(all(isinstance(p, dict) and set(p) == {"file", "offset"}
                            for p in positions), positions)
        # Nothing new: a sync reads nothing and changes nothing.
        again = self.sync()
        self.assertIn("cdc: no new changes", again.stdout)
        v = self.ferry("verify", "-c", self.pipeline, env=self.env)
        self.assertEqual(v.returncode, 0, v.stdout + v.stderr)

    def test_crash_at_every_fault_point_then_exactly_once(self):
        self.configure(streams=["items", "Odd `Name` Ü"])
        self.sync()
        points = ["sink.data_written", "sink.before_commit", "catalog.after_metadata_write",
                  "sink.after_commit", "state.temp_written", "state.after_write"]
        for i, point in enumerate(points):
            with self.subTest(point=point):
                self.change(10 + i)
                self.crash(point)
                self.change(100 + i)
                self.sync()
                self.assert_matches("items", "Odd `Name` Ü")

    def test_crash_inside_a_large_transaction(self):
        self.configure(streams=["items"])
        self.sync()
        self.sql("UPDATE items SET amount = amount * 2")
        self.crash("source.mid_transaction", 2)
        self.crash("sink.after_commit")
        self.sync()
        self.assert_matches("items")

    def peak_rss_sync(self):
        """ferry sync --once as the only child of a small Python process: its peak RSS (MiB)."""
        e = dict(os.environ, **self.env)
        e.pop("FERRY_FAULT", None)
        # Under AddressSanitizer, freed memory waits in a quarantine of up to 256 MiB, which
        # would hide what ferry itself holds.
        e["ASAN_OPTIONS"] = e.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=0"
        p = subprocess.run(
            [sys.executable, "-c",
             "import resource, subprocess, sys\n"
             "r = subprocess.run(sys.argv[1:])\n"
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)\n"
             "sys.exit(r.returncode if r.returncode >= 0 else 128 - r.returncode)",
             ferrytest.FERRY, "sync", "--once", "-c", self.pipeline],
            cwd=self.dir, env=e, capture_output=True, text=True, timeout=900)
        return p, int(p.stdout.strip().splitlines()[-1])

    def spill_files(self):
        return [f for f in os.listdir(self.dir) if f.startswith("ferry-spill-")]

    def test_a_large_transaction_spills_past_memory_limit_and_lands_exactly(self):
        # 40,000 rows of about 420 bytes changed in one transaction: some 20 MB of held changes,
        # against a memory_limit of 2 MiB.
        self.sql("CREATE TABLE wide (id int PRIMARY KEY, a varchar(250), b varchar(250));"
                 "INSERT INTO wide SELECT seq, REPEAT(CHAR(65 + seq % 26), 200), REPEAT('b', 200)"
                 " FROM seq_1_to_40000")
        self.configure(streams=["wide"], top="memory_limit: 2MiB")
        self.sync()
        self.sql("UPDATE wide SET a = CONCAT(LEFT(a, 190), id), b = REPEAT('c', 210);"
                 "DELETE FROM wide WHERE id % 7 = 0")
        keep = os.path.join(self.dir, "..", os.path.basename(self.dir) + "_before")
        shutil.copytree(self.dir, keep)
        self.addCleanup(shutil.rmtree, keep, True)
        spilled, spilled_peak = self.peak_rss_sync()
        self.assertEqual(spilled.returncode, 0, spilled.stderr)
        self.assertIn("held changes past memory_limit (2 MiB): spilling them to", spilled.stderr)
        self.assertIn("spill file(s)", spilled.stderr)
        self.assertEqual(self.spill_files(), [])
        self.assert_matches("wide")
        # The same changes without a limit, from the same state: all held in memory.
        shutil.rmtree(os.path.join(self.dir, "warehouse"))
        shutil.copytree(os.path.join(keep, "warehouse"), os.path.join(self.dir, "warehouse"))
        shutil.copy(os.path.join(keep, "state.json"), os.path.join(self.dir, "state.json"))
        self.configure(streams=["wide"], top="memory_limit: 0", name=self.name)
        held, held_peak = self.peak_rss_sync()
        self.assertEqual(held.returncode, 0, held.stderr)
        self.assertNotIn("spill", held.stderr)
        self.assert_matches("wide")
        print(f"peak RSS: spilling {spilled_peak} MiB, all in memory {held_peak} MiB",
              file=sys.stderr)
        self.assertLess(spilled_peak, held_peak - 10,
                        f"spilling {spilled_peak} MiB, all in memory {held_peak} MiB")

    def test_crashes_while_spilling_and_reading_a_spill_back_lose_nothing(self):
        self.sql("CREATE TABLE wide (id int PRIMARY KEY, a varchar(250));"
                 "INSERT INTO wide SELECT seq, REPEAT('a', 200) FROM seq_1_to_20000")
        self.configure(streams=["wide"], top="memory_limit: 1MiB")
        self.sync()
        for i, point in enumerate(["source.spilling", "source.reading_spill",
                                   "sink.before_commit", "state.after_write"]):
            with self.subTest(point=point):
                self.sql(f"UPDATE wide SET a = CONCAT(REPEAT('{i}', 190), id) WHERE id % 3 <> {i % 3};"
                         f"INSERT INTO wide VALUES ({200000 + i}, 'new')")
                self.crash(point, 3 if point == "source.spilling" else 1)
                if point.startswith("source."):
                    # Killed while its runs were on disk: they stay, until the next sync.
                    self.assertNotEqual(self.spill_files(), [])
                out = self.sync()
                self.assertEqual(self.spill_files(), [], out.stderr)
                self.assert_matches("wide")

    def test_writes_during_the_backfill_are_neither_lost_nor_doubled(self):
        # A writer moves amounts between accounts in different chunks while the backfill reads
        # them: the snapshot is one point, the log takes over exactly there.
        self.configure(streams=["accounts"])
        stop = threading.Event()
        moves = [0]

        def writer():
            rnd = random.Random(7)
            while not stop.is_set():
                a, b = rnd.randint(1, 2000), rnd.randint(1, 2000)
                MARIA.sql(f"START TRANSACTION; UPDATE accounts SET balance = balance - 7 WHERE "
                          f"id = {a}; UPDATE accounts SET balance = balance + 7 WHERE id = {b}; "
                          "COMMIT;", db=self.db)
                moves[0] += 1

        t = threading.Thread(target=writer)
        t.start()
        try:
            time.sleep(0.5)
            self.sync()
            time.sleep(0.5)
        finally:
            stop.set()
            t.join()
        self.assertGreater(moves[0], 5)
        self.sync()
        seen = assert_maria_table_matches(self, self.db, "accounts")
        total = sum(int(r[1]) for r in seen["duckdb_rows"])
        self.assertEqual(total, 2000 * 1000)

    def test_random_kills_during_a_long_follow_sync(self):
        self.configure(streams=["items", "Odd `Name` Ü"])
        self.sync()
        stop = threading.Event()

        def writer():
            i = 0
            while not stop.is_set():
                i += 1
                MARIA.sql(f"""START TRANSACTION;
                    INSERT INTO items (id, name, amount) VALUES ({700000 + i}, 'w{i}', {i});
                    UPDATE items SET name = 'u{i}', amount = amount + 1 WHERE id = {i % 2500 + 1};
                    DELETE FROM items WHERE id = {(i * 13) % 2500 + 1};
                    UPDATE `Odd ``Name`` Ü` SET `select` = {i} WHERE `Key` = {i % 400 + 1};
                    COMMIT;""", db=self.db)

        t = threading.Thread(target=writer)
        t.start()
        rnd = random.Random(20261202)
        kills = 0
        try:
            for _ in range(8):
                proc = self.following()
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
        self.assert_matches("items", "Odd `Name` Ü")
        v = self.ferry("verify", "-c", self.pipeline, env=self.env, check=False)
        self.assertEqual(v.returncode, 0, v.stdout + v.stderr)

    def test_follow_mode_survives_a_killed_dump_connection_and_stops_on_sigterm(self):
        self.configure(streams=["items"])
        self.sync()
        proc = self.following()
        try:
            for i in range(4):
                self.change(200 + i)
                time.sleep(1.5)
                ids = MARIA.rows("SELECT ID FROM information_schema.PROCESSLIST "
                                 "WHERE COMMAND LIKE 'Binlog Dump%'")
                for (pid,) in ids:
                    MARIA.sql(f"KILL {pid}", check=False)
            time.sleep(3)
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 0, err)
        self.sync()
        self.assert_matches("items")

    def test_quiet_followed_tables_still_move_their_position_on(self):
        self.configure(streams=["items"])
        self.sync()
        self.sql("UPDATE items SET name = 'x' WHERE id = 1")
        self.sync()
        before = self.position("items")
        self.sql("INSERT INTO unfollowed SELECT seq, 'x' FROM seq_1_to_100")
        self.sync()
        after = self.position("items")
        self.assertGreater((after["file"], after["offset"]), (before["file"], before["offset"]))

    def position(self, stream):
        with open(os.path.join(self.dir, "state.json")) as f:
            for s in json.load(f)["streams"]:
                if s["stream"] == stream:
                    return s["state"]["position"]
        self.fail(f"no state for {stream}")

    def test_truncate_stops_with_the_fix_or_is_ignored(self):
        self.configure(streams=["items"])
        self.sync()
        self.sql("UPDATE items SET name = 'before truncate' WHERE id = 5; TRUNCATE TABLE items;"
                 "INSERT INTO items (id, name) VALUES (1, 'after')")
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(f"table {self.db}.items was truncated on the source", p.stderr)
        self.assertIn("source.truncate: ignore", p.stderr)
        # The change before the TRUNCATE landed.
        seen = self.inspect(self.catalog_tables()[(NS, "items")])
        names = {r[1] for r in seen["duckdb_rows"]}
        self.assertIn("before truncate", names)
        self.configure(streams=["items"], extra="  truncate: ignore")
        self.sync()
        seen = self.inspect(self.catalog_tables()[(NS, "items")])
        rows = {int(r[0]): r[1] for r in seen["duckdb_rows"]}
        self.assertEqual(rows[1], "after")
        self.assertGreater(len(rows), 1000)  # the destination kept its rows

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
        # While a sync follows the log: the new shape's first change stops the read before it,
        # the table is discovered again, and the read goes on.
        proc = self.following()
        try:
            time.sleep(2)
            self.sql("ALTER TABLE items ADD COLUMN extra2 varchar(10);"
                     "UPDATE items SET extra2 = 'two', name = 'after 2' WHERE id < 50;")
            time.sleep(4)
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn("rediscovering the table", err)
        self.assert_matches("items")

    def test_a_column_widened_mid_stream_widens_the_table(self):
        self.configure(streams=["items"])
        self.sync()
        proc = self.following()
        try:
            time.sleep(2)
            self.sql("UPDATE items SET amount = 1.25 WHERE id = 1;"
                     "ALTER TABLE items MODIFY amount decimal(18,2);"
                     "UPDATE items SET amount = 1234567890123456.78 WHERE id = 2;")
            time.sleep(4)
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn("columns of another type in the binary log (amount)", err)
        seen = self.assert_table("items")
        types = {f["name"]: f["type"] for f in seen["schema"]["fields"]}
        self.assertEqual(types["amount"], "decimal(18,2)")
        # Changes logged before a widening, read after it (the table is discovered wider than the
        # log's rows): they convert to the wider type.
        self.sql("UPDATE items SET amount = -0.5 WHERE id = 3;"
                 "ALTER TABLE items MODIFY amount decimal(20,2);"
                 "UPDATE items SET amount = 123456789012345678.91 WHERE id = 4;")
        self.sync()
        self.assert_matches("items")

    def assert_table(self, table):
        return assert_maria_table_matches(self, self.db, table)

    def test_invisible_columns_are_read_past(self):
        self.sql("CREATE TABLE hid (id int PRIMARY KEY, secret blob INVISIBLE, v int,"
                 " e enum('x','y') INVISIBLE, w varchar(10));"
                 "INSERT INTO hid (id, secret, v, e, w) VALUES (1, 'abc', 1, 'y', 'one')")
        self.configure(streams=["hid"])
        self.sync()
        self.sql("INSERT INTO hid (id, secret, v, e, w) VALUES (2, REPEAT('z', 300), 2, 'x', 'two');"
                 "UPDATE hid SET v = 10, secret = NULL WHERE id = 1")
        self.sync()
        self.assert_matches("hid")

    def test_a_column_added_and_dropped_between_syncs_is_read_past_by_name(self):
        self.full_metadata()
        self.sql("CREATE TABLE dropper (id int PRIMARY KEY, w varchar(20));"
                 "INSERT INTO dropper SELECT seq, 'w' FROM seq_1_to_10")
        self.configure(streams=["dropper"])
        self.sync()
        self.sql("UPDATE dropper SET w = 'one' WHERE id = 1;"
                 "ALTER TABLE dropper ADD COLUMN gone int AFTER id;"
                 "UPDATE dropper SET gone = 5, w = 'two' WHERE id = 2;"
                 "ALTER TABLE dropper DROP COLUMN gone;"
                 "UPDATE dropper SET w = 'three' WHERE id = 3;")
        p = self.sync()
        self.assertIn("dropped since", p.stderr)
        self.assert_matches("dropper")

    def test_cdc_only_starts_from_now(self):
        self.configure(streams=["items"], mode="cdc_only")
        self.sync()
        self.sql("INSERT INTO items (id, name) VALUES (-5, 'after start');"
                 "UPDATE items SET name = 'changed' WHERE id = 7")
        self.sync()
        seen = self.inspect(self.catalog_tables()[(NS, "items")])
        self.assertEqual(sorted((int(r[0]), r[1]) for r in seen["duckdb_rows"]),
                         [(-5, "after start"), (7, "changed")])

    def test_a_purged_binary_log_stops_the_sync_and_says_how_to_recover(self):
        self.configure(streams=["items"])
        self.sync()
        self.sql("UPDATE items SET name = 'lost' WHERE id = 1")
        # MariaDB keeps a file until the engine has made its transactions durable (the binlog
        # checkpoint): flush and purge until only the newest file is left.
        deadline = time.time() + 30
        while True:
            MARIA.sql("FLUSH BINARY LOGS")
            current = MARIA.rows("SHOW MASTER STATUS")[0][0]
            MARIA.sql(f"PURGE BINARY LOGS TO '{current}'")
            if [r[0] for r in MARIA.rows("SHOW BINARY LOGS")] == [current]:
                break
            self.assertLess(time.time(), deadline, MARIA.rows("SHOW BINARY LOGS"))
            time.sleep(0.5)
        # check says so before a sync tries.
        c = self.ferry("check", "-c", self.pipeline, env=self.env, check=False)
        self.assertNotEqual(c.returncode, 0, c.stdout + c.stderr)
        self.assertIn("are gone from MariaDB", c.stderr)
        self.assertIn("A new backfill loads the tables again", c.stderr)
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("are gone from MariaDB", p.stderr)
        self.assertIn("A new backfill loads the tables again", p.stderr)

    def test_check_passes_on_a_server_set_up_for_cdc_and_refuses_a_table_without_a_key(self):
        self.configure()
        out = self.ferry("check", "-c", self.pipeline, env=self.env)
        self.assertIn("binary log", out.stdout)
        self.assertIn("binlog_row_metadata is NO_LOG", out.stderr)
        self.sql("CREATE TABLE nokey (a int, b text)")
        self.configure(streams=["nokey"])
        p = self.ferry("check", "-c", self.pipeline, env=self.env, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(f"table {self.db}.nokey has no primary key", p.stderr)
        self.assertIn("ADD PRIMARY KEY", p.stderr)

    def test_a_server_restart_mid_stream_is_retried_and_loses_nothing(self):
        self.configure(streams=["items", "Odd `Name` Ü"])
        self.sync()
        proc = self.following()
        try:
            self.change(300)
            time.sleep(2)
            MARIA.restart()  # the dump connection is lost; a new binary log file begins
            self.change(301)
            time.sleep(6)
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn("retrying", err.lower())
        self.sync()
        self.assert_matches("items", "Odd `Name` Ü")

    def test_soft_deletes_keep_deleted_rows_with_their_last_values(self):
        # The server's own record of what was deleted (or moved to another key): a trigger copies
        # the row as it was into `gone`, until its key comes back.
        self.sql(TRACK_DELETED + """
            CREATE VIEW expected_items AS
              SELECT id, name, amount, at, note, data, FALSE AS _ferry_deleted FROM items
              UNION ALL SELECT id, name, amount, at, note, data, TRUE FROM gone;
        """)
        self.configure(streams=["items"], extra="  deletes: soft")
        self.sync()
        assert_maria_table_matches(self, self.db, "expected_items", iceberg_table="items")
        for i, point in enumerate([None, "sink.before_commit", "state.after_write"]):
            with self.subTest(point=point):
                self.change(30 + i)
                # A deleted key back again: a live row again.
                back = [r[0] for r in MARIA.rows(
                    f"SELECT id FROM gone WHERE id > 0 AND id % 41 = 0 ORDER BY id LIMIT {i + 1}",
                    db=self.db)]
                self.sql("".join(f"INSERT INTO items (id, name) VALUES ({k}, 'back {i}');"
                                 for k in back))
                if point:
                    self.crash(point)
                self.sync()
                seen = assert_maria_table_matches(self, self.db, "expected_items",
                                                  iceberg_table="items")
        kept = [r for r in seen["duckdb_rows"] if r[-1] == "true"]
        self.assertGreater(len(kept), 50)
        # Every column of a deleted row as it was (the binary log's full row image).
        self.assertTrue(all(r[1] is not None for r in kept))
        self.assertGreater(sum(1 for r in kept if r[2] is not None and r[4] is not None), 40)
        v = self.ferry("verify", "-c", self.pipeline, env=self.env)
        self.assertIn("1 of 1 tables match", v.stdout)

    def test_a_mariadb_destination_keeps_soft_deleted_rows(self):
        target, state_db = self.db + "_soft", self.db + "_softstate"
        MARIA.create_database(target)
        self.addCleanup(MARIA.drop_database, target)
        self.addCleanup(MARIA.drop_database, state_db)
        self.sql(TRACK_DELETED)
        self.write_pipeline(f"""
name: {self.db}
source:
  type: mysql
  url: "{MARIA.url(self.db)}"
  server_id: 4343
  streams:
    - name: items
      mode: cdc
      deletes: soft
destination:
  type: mariadb
  url: "mysql://root:${{MARIADB_PASSWORD}}@127.0.0.1:{MARIA.port}/{target}"
  state_database: {state_db}
state: ./state.json
""")
        cols = ("id, name, CAST(amount AS CHAR), HEX(CONVERT(note USING utf8mb4)), HEX(data), "
                "CAST(at AS CHAR)")
        for n in range(3):
            if n:
                self.change(600 + n)
            self.sync()
            live = MARIA.rows(f"SELECT {cols} FROM items", db=self.db)
            gone = MARIA.rows(f"SELECT {cols} FROM gone", db=self.db)
            want = sorted([tuple(r) + ("0",) for r in live] + [tuple(r) + ("1",) for r in gone])
            got = sorted(tuple(r) for r in MARIA.rows(
                f"SELECT {cols}, CAST(_ferry_deleted AS CHAR) FROM items", db=target))
            self.assertEqual(len(got), len(want), f"round {n}")
            self.assertEqual(got, want, f"round {n}")
        self.assertGreater(sum(1 for r in got if r[-1] == "1"), 50)

    def test_metadata_columns_say_what_each_change_was_when_and_where(self):
        self.configure(streams=["items"], extra="  deletes: soft\n  metadata_columns: "
                       "[_ferry_op, _ferry_source_ts, _ferry_position]")
        self.sync()

        def rows():
            seen = self.inspect(self.catalog_tables()[(NS, "items")])
            names = [f["name"] for f in seen["schema"]["fields"]]
            self.assertEqual(names[-4:], ["_ferry_op", "_ferry_source_ts", "_ferry_position",
                                          "_ferry_deleted"])
            return {r[0]: r for r in seen["duckdb_rows"]}

        self.assertTrue(all(r[-4:-1] == ["read", None, None] for r in rows().values()))
        t0 = int(time.time())
        self.sql("""
            START TRANSACTION;
            UPDATE items SET name = 'changed' WHERE id = 5;
            DELETE FROM items WHERE id = 6;
            INSERT INTO items (id, name) VALUES (800000, 'new');
            COMMIT;
            UPDATE items SET name = 'later' WHERE id = 7;
        """)
        t1 = int(time.time())
        self.sync()
        got = rows()
        changed = {k: r for k, r in got.items() if r[-4] != "read"}
        self.assertEqual({k: (r[-4], r[-1]) for k, r in changed.items()},
                         {"5": ("update", "false"), "6": ("delete", "true"),
                          "800000": ("insert", "false"), "7": ("update", "false")})
        for r in changed.values():
            # The binary log's times are whole seconds.
            self.assertTrue(t0 <= int(r[-3]) // 1000000 <= t1 + 1, r)
            self.assertRegex(r[-2], r"^binlog \d{6}:\d+$")
        # One transaction, one end; the later one ends after it.
        self.assertEqual(len({changed[k][-2] for k in ("5", "6", "800000")}), 1)
        end = lambda r: tuple(int(x) for x in r[-2].split(" ")[1].split(":"))  # noqa: E731
        self.assertLess(end(changed["5"]), end(changed["7"]))

    def test_changes_into_mariadb_killed_at_every_fault_point(self):
        target, state_db = self.db + "_copy", self.db + "_state"
        MARIA.create_database(target)
        self.addCleanup(MARIA.drop_database, target)
        self.addCleanup(MARIA.drop_database, state_db)
        self.write_pipeline(f"""
name: {self.db}
source:
  type: mysql
  url: "{MARIA.url(self.db)}"
  server_id: 4242
  streams:
    - name: items
      mode: cdc
destination:
  type: mariadb
  url: "mysql://root:${{MARIADB_PASSWORD}}@127.0.0.1:{MARIA.port}/{target}"
  state_database: {state_db}
state: ./state.json
""")
        cols = ("id, name, CAST(amount AS CHAR), HEX(CONVERT(note USING utf8mb4)), HEX(data), "
                "CAST(at AS CHAR)")

        def same():
            want = MARIA.rows(f"SELECT {cols} FROM items ORDER BY id", db=self.db)
            got = MARIA.rows(f"SELECT {cols} FROM items ORDER BY id", db=target)
            self.assertEqual(len(got), len(want))
            self.assertEqual(got, want)

        self.sync()
        same()
        for i, point in enumerate(["sink.data_written", "sink.before_commit",
                                   "sink.commit_outcome_lost", "sink.after_commit",
                                   "state.after_write"]):
            with self.subTest(point=point):
                self.change(400 + i)
                p = self.sync(env={"FERRY_FAULT": f"{point}:1"}, check=False)
                if point != "sink.commit_outcome_lost":
                    self.assertEqual(p.returncode, -signal.SIGKILL, p.stderr)
                self.change(500 + i)
                self.sync()
                same()

    def test_changes_into_postgres(self):
        import pgserver
        pg = pgserver.start_for_module()  # missing: a failure under scripts/test.sh
        try:
            pg.psql("CREATE DATABASE target")
            self.write_pipeline(f"""
name: {self.db}
source:
  type: mysql
  url: "{MARIA.url(self.db)}"
  streams:
    - name: items
      mode: cdc
destination:
  type: postgres
  dsn: "{pg.dsn('target')}"
  schema: copied
state: ./state.json
""")
            env = dict(self.env)
            env["PGPASSWORD"] = pgserver.SUPERUSER_PASSWORD
            self.ferry("sync", "--once", "-c", self.pipeline, env=env)
            self.change(3)
            self.ferry("sync", "--once", "-c", self.pipeline, env=env)
            want = MARIA.rows("SELECT id, name, CAST(amount AS CHAR) FROM items ORDER BY id",
                              db=self.db)
            got = pg.psql("COPY (SELECT id, name, amount::text FROM copied.items ORDER BY id) "
                          "TO STDOUT", db="target")
            got_rows = [tuple(None if v == "\\N" else v for v in line.split("\t"))
                        for line in got.splitlines() if line]
            self.assertEqual(got_rows, want)
        finally:
            pg.stop()


if __name__ == "__main__":
    unittest.main()
