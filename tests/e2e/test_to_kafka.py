"""SQLite and PostgreSQL -> Kafka: a mock Kafka cluster (librdkafka's, in ferry_kafka_mock,
started once for the module) and kcat, a client nobody here wrote, reading the topics back. Each
check reduces a topic's committed events by key and compares the result with the source's rows,
value by value: no missing row, no extra row, no stale value, and no change event twice. The
crash tests kill the sync at each fault point (data written, before and after the commit, state
file, acknowledgement, publish) and sync again; broker failures mid-transaction come from the
mock's error injection.

The mock writes no transaction markers, so records of a transaction that never committed stay
visible to every consumer (tests/lib/kafkamock.py); the checks count the records of committed
transactions only, which is what a read_committed consumer of a real broker sees."""
import base64
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import shutil
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ferrytest  # noqa: E402
import kafkamock  # noqa: E402
import pgserver  # noqa: E402
import test_postgres_cdc  # noqa: E402
import test_to_redis  # noqa: E402
from test_to_redis import (ODD, ODD_DECL, PAIRS_DECL, PG_EXTRA, fill_sqlite, float_canon,  # noqa: E402
                           pg_canon, pg_table, sqlite_text)

KAFKA = None
PASSWORD = "k4fka-Secr3t"


def setUpModule():
    global KAFKA
    KAFKA = kafkamock.start_for_module()


def tearDownModule():
    if KAFKA:
        KAFKA.stop()


def sanitized(name):
    """`name` with each byte Kafka refuses in a topic name as '_'."""
    return "".join(c if re.fullmatch(r"[A-Za-z0-9._-]", c) else "_" * len(c.encode())
                   for c in name)


def topic_of(pipeline, table):
    """The topic ferry names for `table` by the default template, computed here."""
    return sanitized(f"{pipeline}.{table}")


def stored(binary, v):
    """A JSON value of an event in the text form the Redis tests' canonical forms read (bytes)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return b"true" if v else b"false"
    if isinstance(v, int):
        return str(v).encode()
    if isinstance(v, float):
        return repr(v).encode()
    if isinstance(v, list):
        return json.dumps(v).encode()
    if binary:
        return base64.b64decode(v)
    return v.encode()


class KafkaTestCase(ferrytest.FerryTestCase):
    counter = 0

    def setUp(self):  # no Iceberg readers needed
        self.dir = tempfile.mkdtemp(prefix="ferry_e2e_kafka_")
        self.db_path = os.path.join(self.dir, "source.db")
        self.pipeline = os.path.join(self.dir, "pipeline.yaml")
        self.env = {"KAFKA_PASSWORD": PASSWORD}
        self.new_name()

    def new_name(self):
        """A pipeline name of its own: its topics and checkpoints are new."""
        KafkaTestCase.counter += 1
        self.name = f"k{KafkaTestCase.counter}_{self._testMethodName[5:25]}"

    def tearDown(self):
        if os.environ.get("FERRY_KEEP_TEST_DIRS"):
            print(f"kept {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def destination(self, extra=""):
        return (f"destination:\n  type: kafka\n  brokers: \"{KAFKA.bootstrap}\"\n  timeout: 20s\n"
                f"  properties:\n    sasl.password: \"${{KAFKA_PASSWORD}}\"\n{extra}")

    def sync(self, **kw):
        env = dict(self.env)
        env.update(kw.pop("env", {}))
        return self.ferry("sync", "--once", "-c", self.pipeline, env=env, **kw)

    def crash(self, point, hit=1):
        p = self.sync(env={"FERRY_FAULT": f"{point}:{hit}"}, check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL,
                         f"{point}:{hit} did not kill the sync (exit {p.returncode})\n{p.stderr}")
        self.assertIn(f"fault point {point} reached", p.stderr)
        self.assertNotIn(PASSWORD, p.stderr + p.stdout)

    def events(self, table):
        return KAFKA.committed_events(topic_of(self.name, table), self.name)

    def verify_passes(self):
        """`ferry verify` reads each topic back (each key's last event) and compares it with
        the source."""
        p = self.ferry("verify", "--json", "-c", self.pipeline, env=self.env, check=False)
        tables = json.loads(p.stdout)
        for t in tables:
            self.assertTrue(t["matches"], json.dumps(t, indent=1))
        self.assertEqual(p.returncode, 0, p.stderr)
        return tables

    def assert_topic(self, table, expected, canon, key_cols, binary=()):
        """`expected`: {key tuple: {column: canonical value}} of non-NULL columns; the topic's
        committed events reduced by key must equal it, and no change event may appear twice."""
        events = self.events(table)
        got = {}
        for _, after in kafkamock.reduce_by_key(events).items():
            row = {c: canon(c, stored(c in binary, v)) for c, v in after.items() if v is not None}
            got[tuple(canon(c, stored(c in binary, after[c])) for c in key_cols)] = row
        missing = sorted(set(expected) - set(got), key=str)
        extra = sorted(set(got) - set(expected), key=str)
        stale = sorted((k for k in set(got) & set(expected) if got[k] != expected[k]), key=str)
        example = stale[0] if stale else None
        self.assertTrue(
            not missing and not extra and not stale,
            f"{table}: {len(got)} keys in the topic, {len(expected)} source rows; missing "
            f"{len(missing)} e.g. {missing[:3]}; extra {len(extra)} e.g. {extra[:3]}; stale "
            f"{len(stale)}" + (f" e.g. {example}: got {got[example]} expected {expected[example]}"
                              if example else ""))
        self.assertEqual(kafkamock.duplicates(events), [], f"{table}: change events twice")
        return events


# ---- SQLite sources ----

SQLITE_PIPELINE = """
name: {name}
source:
  type: sqlite
  path: ./source.db
  chunk_rows: {chunk_rows}
  mode: {mode}
{destination}state: ./state.json
"""


def sqlite_canon(decls):
    def canon(field, value):
        if value is None:
            return None
        return float_canon(value) if decls[field] == "REAL" else value
    return canon


class SqliteToKafkaTest(KafkaTestCase):
    def configure(self, mode="full_refresh", chunk_rows=700, extra=""):
        self.write_pipeline(SQLITE_PIPELINE.format(name=self.name, chunk_rows=chunk_rows,
                                                   mode=mode, destination=self.destination(extra)))

    def setUp(self):
        super().setUp()
        con = self.source()
        con.execute("PRAGMA journal_mode=WAL")
        fill_sqlite(con, 3000)
        con.close()
        self.round = 0

    def expected(self, table, decls, key):
        con = self.source()
        cols = list(decls)
        quoted = ", ".join('"' + c.replace('"', '""') + '"' for c in cols)
        rows = con.execute(f'SELECT {quoted} FROM "{table.replace(chr(34), chr(34) * 2)}"').fetchall()
        con.close()
        out = {}
        for r in rows:
            values = dict(zip(cols, r))
            # sqlite_text gives the canonical forms (a REAL's bits).
            row = {c: sqlite_text(decls[c], v) for c, v in values.items() if v is not None}
            out[tuple(row[k] for k in key)] = row
        return out

    def assert_matches(self):
        self.assert_topic(ODD, self.expected(ODD, ODD_DECL, ["Id"]), sqlite_canon(ODD_DECL),
                          ["Id"], binary=("data",))
        self.assert_topic("pairs", self.expected("pairs", PAIRS_DECL, ["a", "b"]),
                          sqlite_canon(PAIRS_DECL), ["a", "b"])

    def change(self):
        """Updates (also to NULL), deletes, inserts; a key changes."""
        self.round += 1
        r = self.round
        con = self.source()
        t = '"' + ODD.replace('"', '""') + '"'
        con.execute(f'UPDATE {t} SET "naïve Col" = ?, price = ?, flag = NULL WHERE "Id" % 17 = ?',
                    (f"upd {r}", -0.0, r % 17))
        con.execute(f'DELETE FROM {t} WHERE "Id" % 23 = ?', (r % 23,))
        con.executemany(f'INSERT INTO {t} ("Id", "naïve Col", price, amount) VALUES (?, ?, ?, ?)',
                        [(3000 + 50 * r + i, f"new {i}", i / 3, "-0.5") for i in range(40)])
        con.execute(f'UPDATE {t} SET "Id" = -"Id" WHERE "Id" > 0 AND "Id" % 97 = ?', (r % 97,))
        con.execute("UPDATE pairs SET v = ? WHERE b % 5 = ?", (f"w{r}", r % 5))
        con.execute("DELETE FROM pairs WHERE b % 11 = ?", (r % 11,))
        con.commit()
        con.close()

    def load_counts(self, table):
        """How many committed load ("r") events each key has."""
        counts = {}
        for e in self.events(table):
            if e["value"] is not None and json.loads(e["value"])["source"]["snapshot"]:
                counts[e["key"]] = counts.get(e["key"], 0) + 1
        return counts

    def test_full_refresh_writes_every_type_as_json_events(self):
        self.configure()
        p = self.sync()
        self.assertIn("new load", p.stdout)
        self.assertIn(topic_of(self.name, ODD), p.stdout)
        self.assert_matches()
        events = self.events(ODD)
        self.assertEqual(len(events), 3000)
        by_key = {json.loads(e["key"])["Id"]: json.loads(e["value"]) for e in events}
        e5 = by_key[5]
        self.assertEqual(e5["op"], "r")
        self.assertIsNone(e5["before"])
        self.assertEqual(e5["source"]["pipeline"], self.name)
        self.assertEqual(e5["source"]["table"], ODD)
        self.assertTrue(e5["source"]["snapshot"])
        a = e5["after"]
        self.assertIs(a["flag"], True)
        self.assertEqual(a["amount"], "-495.005")
        self.assertEqual(a["attz"], "2024-03-01 08:05:00.000000+00:00")
        self.assertEqual(base64.b64decode(a["data"]), bytes([0, 5, 255, 13, 10]))
        self.assertIsNone(by_key[2]["after"]["Select"])
        # Every record carries its transaction's id; the checkpoints name this pipeline's tables.
        self.assertTrue(all(re.fullmatch(r"[0-9a-f]{16}", e["commit"]) for e in events))
        keys = {k for k, _, _ in KAFKA.checkpoints(self.name)}
        self.assertEqual(keys, {f"{self.name}/{ODD}", f"{self.name}/pairs"})
        self.assertEqual(set(self.load_counts(ODD).values()), {1})
        self.assertEqual(len(self.load_counts(ODD)), 3000)
        self.assertEqual(len(self.verify_passes()), 2)

    def test_crash_during_the_load_resumes_exactly_once(self):
        for point, hit in [("sink.data_written", 2), ("sink.before_commit", 2),
                           ("sink.after_commit", 3), ("sink.before_publish", 1),
                           ("sink.after_publish", 1), ("state.after_write", 2)]:
            with self.subTest(point=point):
                self.new_name()
                if os.path.exists(os.path.join(self.dir, "state.json")):
                    os.remove(os.path.join(self.dir, "state.json"))
                self.configure()
                self.change()
                self.crash(point, hit)
                p = self.sync()
                if point not in ("sink.after_publish",):
                    self.assertRegex(p.stdout, "resumed load|new load|published")
                self.assert_matches()
                # Each row once: a chunk committed before the kill is not sent again.
                counts = self.load_counts(ODD)
                self.assertEqual([k for k, n in counts.items() if n != 1], [], point)

    def test_cdc_changes_then_crash_at_every_fault_point(self):
        self.configure(mode="cdc")
        self.sync()
        self.assert_matches()
        self.change()
        p = self.sync()
        self.assertIn("cdc: changes", p.stdout)
        self.assert_matches()
        for point in ["sink.data_written", "sink.before_commit", "sink.after_commit",
                      "state.temp_written", "state.after_write"]:
            with self.subTest(point=point):
                self.change()
                self.crash(point)
                self.change()
                self.sync()
                self.assert_matches()
        # A commit whose answer is lost is settled by the checkpoint read back: no second copy.
        self.change()
        p = self.sync(env={"FERRY_FAULT": "sink.commit_outcome_lost:1"})
        self.assert_matches()
        events = self.events(ODD)
        ops = {json.loads(e["value"])["op"] for e in events if e["value"] is not None}
        self.assertEqual(ops, {"r", "c", "u", "d"})
        deletes = [e for e in events if e["value"] is not None
                   and json.loads(e["value"])["op"] == "d"]
        for d in deletes[:20]:
            v = json.loads(d["value"])
            self.assertEqual(set(v["before"]), {"Id"})
            self.assertIsNone(v["after"])
            # The tombstone follows its delete event in the key's partition.
            after = [e for e in events if e["partition"] == d["partition"]
                     and e["offset"] > d["offset"] and e["key"] == d["key"]]
            self.assertIsNone(after[0]["value"])
        self.verify_passes()

    def test_flat_events_and_deletes_without_tombstones(self):
        self.configure(mode="cdc", extra="  format: flat\n  deletes: event\n  topic: \"cdc-{name}\"\n")
        self.sync()
        self.change()
        self.sync()
        records = KAFKA.committed_events("cdc-pairs", self.name)
        self.assertTrue(records)
        self.assertFalse([r for r in records if r["value"] is None], "no tombstones")
        rows = {}
        for r in records:
            v = json.loads(r["value"])
            self.assertIn(v["__op"], ("r", "c", "u", "d"))
            if v["__deleted"]:
                self.assertEqual(set(v), {"a", "b", "__op", "__deleted", "__commit"})
                rows.pop(r["key"], None)
            else:
                rows[r["key"]] = (v["a"], v["b"], v["v"])
        con = self.source()
        expected = sorted(con.execute("SELECT a, b, v FROM pairs").fetchall())
        con.close()
        self.assertEqual(sorted(rows.values()), expected)

    def test_broker_errors_mid_transaction(self):
        self.configure(mode="cdc")
        self.sync()
        # The coordinator moves twice during a commit: retried, committed once.
        self.change()
        KAFKA.errors(kafkamock.API_END_TXN, kafkamock.ERR_NOT_COORDINATOR,
                     kafkamock.ERR_COORDINATOR_NOT_AVAILABLE)
        self.sync()
        KAFKA.clear(kafkamock.API_END_TXN)
        self.assert_matches()
        # Another producer took the transactional id: this sync stops, saying why.
        self.change()
        KAFKA.errors(kafkamock.API_END_TXN, kafkamock.ERR_PRODUCER_FENCED)
        p = self.sync(check=False)
        KAFKA.clear(kafkamock.API_END_TXN)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("fenced", p.stderr)
        self.assertIn("Give each pipeline its own name", p.stderr)
        self.sync()
        self.assert_matches()
        # Partitions refused when added to the transaction: aborted, and the next sync sends them.
        self.change()
        KAFKA.errors(kafkamock.API_ADD_PARTITIONS_TO_TXN, *([kafkamock.ERR_PRODUCER_FENCED] * 1))
        p = self.sync(check=False)
        KAFKA.clear(kafkamock.API_ADD_PARTITIONS_TO_TXN)
        print("ADDPARTS", p.returncode, p.stderr[-1500:])
        self.sync()
        self.assert_matches()

    def test_check_names_the_guarantee_and_bad_settings_fail_clearly(self):
        self.configure(mode="cdc")
        p = self.ferry("check", "-c", self.pipeline, env=self.env)
        self.assertIn("exactly-once for consumers with isolation.level=read_committed", p.stdout)
        self.assertIn("at-least-once for read_uncommitted", p.stdout)
        self.assertIn(topic_of(self.name, "pairs"), p.stdout)
        self.assertNotIn(PASSWORD, p.stdout + p.stderr)
        self.sync()
        with open(os.path.join(self.dir, "state.json"), encoding="utf-8") as f:
            self.assertNotIn(PASSWORD, f.read())
        for extra, message in [
            ("  format: avro\n", "use json"),
            ("  deletes: never\n", "use tombstone"),
            ("  topic: \"{pipeline}.{tabel}\"\n", "unknown placeholder '{tabel}'"),
            ("  brokerz: x\n", "unknown key 'brokerz'"),
        ]:
            with self.subTest(extra=extra):
                self.configure(mode="cdc", extra=extra)
                p = self.ferry("check", "-c", self.pipeline, env=self.env, check=False)
                self.assertNotEqual(p.returncode, 0)
                self.assertIn(message, p.stderr)
        for prop, message in [("transactional.id: x", "is set by ferry itself"),
                              ("bootstrap.servers: x", "destination.brokers"),
                              ("no.such.setting: 1", "destination.properties.no.such.setting")]:
            with self.subTest(prop=prop):
                self.configure(mode="cdc", extra=f"  properties:\n    {prop}\n")
                with open(self.pipeline, encoding="utf-8") as f:
                    text = f.read().replace(
                        "  properties:\n    sasl.password: \"${KAFKA_PASSWORD}\"\n", "", 1)
                self.write_pipeline(text)
                p = self.ferry("check", "-c", self.pipeline, env=self.env, check=False)
                self.assertNotEqual(p.returncode, 0)
                self.assertIn(message, p.stderr)
        # Two tables whose names meet in one topic name: refused, never merged.
        con = self.source()
        con.executescript('CREATE TABLE "a b" (id INTEGER PRIMARY KEY, v TEXT);'
                          'CREATE TABLE "a_b" (id INTEGER PRIMARY KEY, v TEXT);')
        con.close()
        self.configure(mode="cdc")
        for command in ("check", "sync"):
            p = self.ferry(command, "-c", self.pipeline, env=self.env, check=False)
            self.assertNotEqual(p.returncode, 0, command)
            self.assertIn(f"would both be written to {self.name}.a_b", p.stderr)
        # Brokers nobody answers at: the error names them, within the timeout.
        self.write_pipeline(SQLITE_PIPELINE.format(
            name=self.name, chunk_rows=700, mode="cdc",
            destination="destination:\n  type: kafka\n  brokers: \"127.0.0.1:1\"\n  timeout: 2s\n"))
        start = time.monotonic()
        p = self.ferry("sync", "--once", "-c", self.pipeline, env=self.env, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("127.0.0.1:1", p.stderr)
        self.assertLess(time.monotonic() - start, 60)


# ---- PostgreSQL sources ----

PG_PIPELINE = """
name: {name}
source:
  type: postgres
  dsn: "{dsn}"
  streams:
{streams}
{destination}checkpoint:
  interval: 1s
state: ./state.json
"""


class PostgresToKafkaTest(KafkaTestCase):
    PG = None
    STREAMS = ["items", "Odd Name", "full_ident", "arrays"]

    @classmethod
    def setUpClass(cls):
        cls.PG = pgserver.start_for_module()

    @classmethod
    def tearDownClass(cls):
        if cls.PG:
            cls.PG.stop()

    def setUp(self):
        super().setUp()
        self.env["PGPASSWORD"] = pgserver.SUPERUSER_PASSWORD
        self.db = self.PG.create_test_database("p2k", self._testMethodName)
        self.PG.psql(test_postgres_cdc.SCHEMA + PG_EXTRA, db=self.db)
        streams = "\n".join(f"    - name: {json.dumps(t)}\n      mode: cdc\n      chunk_rows: 1000"
                            for t in self.STREAMS)
        self.write_pipeline(PG_PIPELINE.format(name=self.name, dsn=self.PG.dsn(self.db),
                                               streams=streams, destination=self.destination()))
        # The changes rewrite wide rows many times (each change() sends ~2 MB of `items`): room
        # for them in the mock's partitions (5 MB each).
        for t in self.STREAMS:
            KAFKA.topic(topic_of(self.name, t), 64)

    def tearDown(self):
        self.PG.drop_test_database(self.db)
        super().tearDown()

    def sql(self, text):
        return self.PG.psql(text, db=self.db)

    change = test_postgres_cdc.PostgresCdcTest.change

    def assert_matches(self):
        for t in self.STREAMS:
            types, key, rows = pg_table(self.PG, self.db, t)
            expected = {}
            for r in rows:
                row = {c: pg_canon(types[c], v, None) for c, v in r.items() if v is not None}
                expected[(row[key],)] = row

            def canon(field, value, types=types):
                return None if value is None else pg_canon(types[field], None, value)
            self.assert_topic(t, expected, canon, [key])

    def test_cdc_changes_then_crash_at_every_fault_point(self):
        # The Redis destination's round: a load, changes, a kill at every sink, state and
        # source point with changes before and after it, the table compared each time, verify.
        test_to_redis.PostgresToRedisTest.test_cdc_changes_then_crash_at_every_fault_point(self)
        # Positions and commit times of the changes come from the WAL.
        e = [json.loads(r["value"]) for r in self.events("items")
             if r["value"] is not None and json.loads(r["value"])["op"] == "u"][0]
        self.assertRegex(e["source"]["position"], r"^[0-9A-F]+/[0-9A-F]+")
        self.assertGreater(e["source"]["ts_ms"], 1.7e12)

    def test_random_kills_under_live_writes(self):
        self.sync()
        loaded = len(KAFKA.checkpoints(self.name))
        stop = threading.Event()
        errors = []

        def writer():
            salt = 1000
            while not stop.is_set() and salt < 1060:  # at most 60 rounds: the mock's room
                salt += 1
                try:
                    self.change(salt)
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(e)
                    return
                time.sleep(0.05)

        t = threading.Thread(target=writer)
        t.start()
        rng = random.Random(int(os.environ.get("FERRY_TEST_SEED", "20261203")))
        try:
            for _ in range(6):
                e = dict(os.environ)
                e.update(self.env)
                e.pop("FERRY_FAULT", None)
                proc = subprocess.Popen([ferrytest.FERRY, "sync", "-c", self.pipeline],
                                        cwd=self.dir, env=e, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
                time.sleep(rng.uniform(1.0, 4.0))
                proc.send_signal(signal.SIGKILL)
                _, err = proc.communicate()
                self.assertNotIn(PASSWORD, err)
        finally:
            stop.set()
            t.join()
        self.assertEqual(errors, [])
        # The killed syncs committed changes between the kills (checkpoint interval 1 s).
        self.assertGreater(len(KAFKA.checkpoints(self.name)), loaded + 6)
        self.sync()
        self.assert_matches()


if __name__ == "__main__":
    unittest.main(verbosity=2)
