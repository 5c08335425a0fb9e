"""SQLite and PostgreSQL -> Redis: a real redis-server (with a password) started by the test. Every
check reads the hashes back with a RESP client written in tests/lib/redisserver.py (not ferry's)
and compares them with the source's rows, value by value in each type's text form: no missing
row, no extra row, no stale value. The crash tests kill the sync at each fault point of the
protocol (data written, before and after EXEC, state file, acknowledgement, publish) and sync
again."""
import datetime
import decimal
import json
import math
import os
import shutil
import signal
import struct
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ferrytest  # noqa: E402
import pgserver  # noqa: E402
import redisserver  # noqa: E402
import test_postgres_cdc  # noqa: E402

PASSWORD = "r3dis-Pa55word"
PREFIX = "my*app"  # a glob character: the publish's SCAN pattern must escape it
REDIS = None


def setUpModule():
    global REDIS
    REDIS = redisserver.start_for_module(password=PASSWORD)


def tearDownModule():
    if REDIS:
        REDIS.stop()


def esc(part):
    """A key part as ferry writes it: ':' and '\\' escaped by '\\'."""
    return part.replace("\\", "\\\\").replace(":", "\\:")


SPECIAL_FLOAT_TEXTS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def float_canon(v):
    """A float, or its text in ferry's form ("0.1", "-0", "NaN", "Infinity", "-Infinity"), as
    the double's bits; NaNs alike."""
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, str):
        if v in SPECIAL_FLOAT_TEXTS:
            v = SPECIAL_FLOAT_TEXTS[v]
        elif any(c.isalpha() and c not in "eE" for c in v):
            return "not a number: " + v
        else:
            v = float(v)
    if math.isnan(v):
        return "nan"
    return struct.pack(">d", v).hex()


class RedisTestCase(ferrytest.FerryTestCase):
    def setUp(self):  # no Iceberg readers needed
        self.dir = tempfile.mkdtemp(prefix="ferry_e2e_redis_")
        self.db_path = os.path.join(self.dir, "source.db")
        self.pipeline = os.path.join(self.dir, "pipeline.yaml")
        self.env = {"REDIS_PASSWORD": PASSWORD}
        self.redis = REDIS.client()
        self.redis.command("FLUSHALL")

    def tearDown(self):
        self.redis.close()
        if os.environ.get("FERRY_KEEP_TEST_DIRS"):
            print(f"kept {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def destination(self, prefix=PREFIX, password_ref="${REDIS_PASSWORD}"):
        return (f"destination:\n  type: redis\n  url: \"{REDIS.url(password_ref)}\"\n"
                f"  prefix: {json.dumps(prefix)}\n")

    def sync(self, **kw):
        env = dict(self.env)
        env.update(kw.pop("env", {}))
        return self.ferry("sync", "--once", "-c", self.pipeline, env=env, **kw)

    def crash(self, point, hit=1):
        p = self.sync(env={"FERRY_FAULT": f"{point}:{hit}"}, check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL,
                         f"{point}:{hit} did not kill the sync (exit {p.returncode})\n{p.stderr}")
        self.assertIn(f"fault point {point} reached", p.stderr)

    def verify_passes(self):
        p = self.ferry("verify", "--json", "-c", self.pipeline, env=self.env, check=False)
        tables = json.loads(p.stdout)
        for t in tables:
            self.assertTrue(t["matches"], json.dumps(t, indent=1))
        self.assertEqual(p.returncode, 0, p.stderr)
        return tables

    # ---- reading Redis ----
    def table_rows(self, table, prefix=PREFIX):
        """{key: {field: value}} of every hash of `table` (bytes)."""
        head = f"{prefix}:{esc(table)}:".encode()
        pattern = b"".join(b"\\" + bytes([c]) if c in b"*?[]\\" else bytes([c]) for c in head)
        keys = self.redis.scan(pattern + b"*")
        return self.redis.hgetall_many(keys)

    def assert_rows(self, table, expected, canon, prefix=PREFIX):
        """`expected`: {key suffix (str): {field: canonical value}}; `canon(field, bytes)` makes a
        stored value canonical. Zero missing, zero extra, zero stale."""
        head = f"{prefix}:{esc(table)}:".encode()
        got = {}
        for k, h in self.table_rows(table, prefix).items():
            got[k[len(head):].decode()] = {f.decode(): canon(f.decode(), v) for f, v in h.items()}
        missing = sorted(set(expected) - set(got))
        extra = sorted(set(got) - set(expected))
        stale = sorted(k for k in set(got) & set(expected) if got[k] != expected[k])
        example = stale[0] if stale else None
        self.assertTrue(
            not missing and not extra and not stale,
            f"{table}: {len(got)} hashes, {len(expected)} source rows; missing {len(missing)} "
            f"e.g. {missing[:3]}; extra {len(extra)} e.g. {extra[:3]}; stale {len(stale)}"
            + (f" e.g. {example}: got {got[example]} expected {expected[example]}"
               if example else ""))

    def ferry_keys(self, prefix=PREFIX):
        """ferry's own keys (state, schema, load sets) under the prefix, decoded."""
        return sorted(k.decode() for k in self.redis.scan(
            prefix.replace("*", "\\*").encode() + b":ferry_*"))


# ---- SQLite sources ----

SQLITE_SCHEMA = r"""
CREATE TABLE "Odd ""Tab"" ü:x" ("Id" INTEGER PRIMARY KEY, "naïve Col" TEXT, "Qty" INTEGER,
    price REAL, data BLOB, day DATE, at DATETIME, attz TIMESTAMPTZ, t TIME, amount DECIMAL(12,3),
    flag BOOLEAN, "Select" TEXT);
CREATE TABLE pairs (a TEXT NOT NULL, b INTEGER NOT NULL, v TEXT, PRIMARY KEY (a, b));
"""

ODD = 'Odd "Tab" ü:x'
ODD_DECL = {"Id": "INTEGER", "naïve Col": "TEXT", "Qty": "INTEGER", "price": "REAL",
            "data": "BLOB", "day": "DATE", "at": "DATETIME", "attz": "TIMESTAMPTZ", "t": "TIME",
            "amount": "DECIMAL(12,3)", "flag": "BOOLEAN", "Select": "TEXT"}
PAIRS_DECL = {"a": "TEXT", "b": "INTEGER", "v": "TEXT"}

SPECIAL_FLOATS = [0.0, -0.0, math.inf, -math.inf, 5e-324, 1.7976931348623157e308, 0.1, 1e16,
                  123.0, -2.5e-7]


def fill_sqlite(con, n):
    con.executescript(SQLITE_SCHEMA)
    rows = []
    for i in range(1, n + 1):
        rows.append((
            i,
            None if i % 9 == 0 else ["Zoë", "山田 🔑", "O'Brien \"q\"", "", "tab\tnl\n"][i % 5] + str(i),
            None if i % 7 == 0 else i * 1000 - 500000,
            None if i % 11 == 0 else SPECIAL_FLOATS[i % len(SPECIAL_FLOATS)] * (1 if i % 2 else -1),
            None if i % 3 == 0 else bytes([0, i % 256, 255, 13, 10]),
            None if i % 13 == 0 else (datetime.date(1900, 1, 1)
                                      + datetime.timedelta(days=i * 37 % 60000)).isoformat(),
            (datetime.datetime(1960, 1, 1) + datetime.timedelta(seconds=i * 3613,
                                                                  microseconds=i)).isoformat(" "),
            f"2024-03-01 10:{i % 60:02d}:00+02:00" if i % 4 else f"2024-03-01T10:00:00.5Z",
            f"{i % 24:02d}:{i % 60:02d}:{i % 60:02d}.{i:06d}"[:15],
            None if i % 6 == 0 else f"{i - 500}.{i % 1000:03d}" if i % 2 else (i - 500) / 8,
            None if i % 8 == 0 else i % 2,
            "from" if i % 2 else None,
        ))
    con.executemany(f'INSERT INTO "{ODD.replace(chr(34), chr(34) * 2)}" VALUES '
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    con.executemany("INSERT INTO pairs VALUES (?, ?, ?)",
                    [(f"k:{i % 7}\\", i, f"v{i}") for i in range(300)])
    con.commit()


def sqlite_text(decl, v):
    """The text ferry writes for SQLite value `v` of a column declared `decl` (computed here,
    independently), as the canonical form `sqlite_canon` gives stored values."""
    if decl == "REAL":
        return float_canon(float(v))
    if decl == "INTEGER":
        return str(v).encode()
    if decl == "BLOB":
        return bytes(v)
    if decl == "BOOLEAN":
        return b"true" if v else b"false"
    if decl == "DATE":
        return v.encode()
    if decl == "DATETIME":
        return datetime.datetime.fromisoformat(v).strftime("%Y-%m-%d %H:%M:%S.%f").encode()
    if decl == "TIMESTAMPTZ":
        t = datetime.datetime.fromisoformat(v.replace("Z", "+00:00")).astimezone(
            datetime.timezone.utc)
        return t.strftime("%Y-%m-%d %H:%M:%S.%f+00:00").encode()
    if decl == "TIME":
        return datetime.time.fromisoformat(v).strftime("%H:%M:%S.%f").encode()
    if decl.startswith("DECIMAL"):
        d = decimal.Decimal(repr(v) if isinstance(v, float) else str(v))
        return str(d.quantize(decimal.Decimal("0.001"))).encode()
    return str(v).encode()  # TEXT


def sqlite_canon(decls):
    def canon(field, stored):
        return float_canon(stored) if decls[field] == "REAL" else stored
    return canon


SQLITE_PIPELINE = """
name: lite
source:
  type: sqlite
  path: ./source.db
  chunk_rows: {chunk_rows}
  mode: {mode}
{streams}{destination}state: ./state.json
"""


class SqliteToRedisTest(RedisTestCase):
    def configure(self, mode="full_refresh", chunk_rows=700, streams=""):
        self.write_pipeline(SQLITE_PIPELINE.format(chunk_rows=chunk_rows, mode=mode,
                                                   streams=streams,
                                                   destination=self.destination()))

    def setUp(self):
        super().setUp()
        con = self.source()
        if self._testMethodName.startswith("test_cdc"):
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
            parts = [sqlite_text(decls[k], values[k]).decode() for k in key]
            k = parts[0] if len(parts) == 1 else ":".join(esc(p) for p in parts)
            out[k] = {c: sqlite_text(decls[c], v) for c, v in values.items() if v is not None}
        return out

    def assert_matches(self, tables=(ODD, "pairs")):
        if ODD in tables:
            self.assert_rows(ODD, self.expected(ODD, ODD_DECL, ["Id"]), sqlite_canon(ODD_DECL))
        if "pairs" in tables:
            self.assert_rows("pairs", self.expected("pairs", PAIRS_DECL, ["a", "b"]),
                             sqlite_canon(PAIRS_DECL))

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

    def test_full_refresh_writes_every_type_and_drops_deleted_rows(self):
        self.configure()
        p = self.sync()
        self.assertIn("new load", p.stdout)
        self.assert_matches()
        # Exact forms of a few values, spelled out.
        h = self.table_rows(ODD)[f"{PREFIX}:{esc(ODD)}:5".encode()]
        self.assertEqual(h[b"flag"], b"true")
        self.assertEqual(h[b"amount"], b"-495.005")
        self.assertEqual(h[b"attz"], b"2024-03-01 08:05:00.000000+00:00")
        self.assertNotIn(b"Select", self.table_rows(ODD)[f"{PREFIX}:{esc(ODD)}:2".encode()])
        self.assertIn(f"{PREFIX}:pairs:k\\:3\\\\:3".encode(), self.table_rows("pairs"))
        schema = json.loads(self.redis.command("GET", f"{PREFIX}:ferry_schema:{esc(ODD)}"))
        self.assertEqual(schema["key"], ["Id"])
        self.assertEqual({c["name"]: c["type"] for c in schema["columns"]}["amount"],
                         "decimal(12,3)")
        # Rows deleted and changed at the source: gone and replaced at the next full refresh,
        # no load set left behind.
        con = self.source()
        con.execute(f'DELETE FROM "{ODD.replace(chr(34), chr(34) * 2)}" WHERE "Id" % 3 = 0')
        con.execute("DELETE FROM pairs WHERE b > 100")
        con.execute(f'UPDATE "{ODD.replace(chr(34), chr(34) * 2)}" SET "Qty" = NULL')
        con.commit()
        con.close()
        self.sync()
        self.assert_matches()
        self.assertEqual(self.ferry_keys(), sorted([
            f"{PREFIX}:ferry_schema:{esc(ODD)}", f"{PREFIX}:ferry_schema:pairs",
            f"{PREFIX}:ferry_state:lite:{esc(ODD)}", f"{PREFIX}:ferry_state:lite:pairs"]))
        self.verify_passes()

    def test_crash_during_the_load_resumes_and_publishes_once(self):
        self.configure()
        self.sync()
        for point, hit in [("sink.before_commit", 2), ("sink.after_commit", 3),
                           ("sink.before_publish", 1), ("sink.after_publish", 1)]:
            with self.subTest(point=point):
                self.change()  # rows deleted before the load: gone after its publish
                self.crash(point, hit)
                p = self.sync()
                if point != "sink.after_publish":
                    self.assertIn("resumed load", p.stdout)
                self.assert_matches()
                self.assertFalse([k for k in self.ferry_keys() if ":ferry_load" in k])

    def test_cdc_changes_then_crash_at_every_fault_point(self):
        self.configure(mode="cdc")
        self.sync()
        self.assert_matches()
        self.change()
        p = self.sync()
        self.assertIn("cdc: changes", p.stdout)
        self.assert_matches()
        for point in ("sink.data_written", "sink.before_commit", "sink.after_commit",
                      "state.temp_written", "state.after_write"):
            with self.subTest(point=point):
                self.change()
                self.crash(point)
                self.change()  # the source moves on before the restart
                self.sync()
                self.assert_matches()
        self.verify_passes()

    def test_soft_deletes_keep_deleted_rows_marked(self):
        # `pairs` (a composite key) with deletes: soft: a deleted row's hash stays, with its last
        # values and _ferry_deleted true; a crash between changes loses or doubles nothing.
        self.configure(mode="cdc", streams="  deletes: soft\n  streams: [pairs]\n")
        self.sync()
        gone = {}

        def expected():
            out = {}
            for k, h in self.expected("pairs", PAIRS_DECL, ["a", "b"]).items():
                out[k] = dict(h, _ferry_deleted=b"false")
            for k, h in gone.items():
                out.setdefault(k, dict(h, _ferry_deleted=b"true"))
            return out

        def canon(field, v):
            return v if field == "_ferry_deleted" else sqlite_canon(PAIRS_DECL)(field, v)

        self.assert_rows("pairs", expected(), canon)
        for n, point in enumerate((None, "sink.before_commit", "state.after_write")):
            with self.subTest(point=point):
                before = self.expected("pairs", PAIRS_DECL, ["a", "b"])
                con = self.source()
                con.execute("UPDATE pairs SET v = ? WHERE b % 7 = ?", (f"last {n}", n))
                con.execute("DELETE FROM pairs WHERE b % 7 = ? AND b % 2 = 0", (n,))
                con.commit()
                con.close()
                after = self.expected("pairs", PAIRS_DECL, ["a", "b"])
                for k in set(before) - set(after):
                    h = dict(before[k])
                    h["v"] = sqlite_text(PAIRS_DECL["v"], f"last {n}")
                    gone[k] = h
                if point:
                    self.crash(point)
                self.sync()
                self.assert_rows("pairs", expected(), canon)
        self.assertGreater(len(gone), 10)

    def test_incremental_windows_crash_at_every_fault_point(self):
        self.configure(mode="incremental",
                       streams=f'  streams:\n    - {{name: {json.dumps(ODD)}, cursor: "Id"}}\n')
        self.sync()
        t = '"' + ODD.replace('"', '""') + '"'
        for i, point in enumerate(("sink.data_written", "sink.before_commit", "sink.after_commit",
                                   "state.temp_written", "state.after_write")):
            with self.subTest(point=point):
                lo = 100000 + 1000 * i
                con = self.source()
                con.executemany(f'INSERT INTO {t} ("Id", "naïve Col", price, amount) '
                                "VALUES (?, ?, ?, ?)",
                                [(lo + k, f"inc {k}", k / 3, "1.5") for k in range(200)])
                con.commit()
                con.close()
                self.crash(point)
                con = self.source()
                con.executemany(f'INSERT INTO {t} ("Id", "naïve Col") VALUES (?, ?)',
                                [(lo + 500 + k, "late") for k in range(30)])
                con.commit()
                con.close()
                self.sync()
                self.assert_matches(tables=(ODD,))

    def test_a_commit_whose_answer_is_lost_is_settled_by_the_checkpoint_key(self):
        # EXEC is sent and the connection cut before its answer: the sync reads the checkpoint
        # key back on a new connection and goes on (the commit landed).
        self.configure(streams="  streams: [pairs]\n")  # one chunk
        for hit in (1, 2):  # the chunk's commit; the publish
            self.change()
            p = self.sync(env={"FERRY_FAULT": f"sink.commit_outcome_lost:{hit}"})
            self.assertIn("injecting the failure", p.stderr)
            self.assertIn("reading the checkpoint key back", p.stderr)
            self.assert_matches(["pairs"])
        os.remove(os.path.join(self.dir, "state.json"))
        self.redis.command("FLUSHALL")
        self.configure(mode="cdc")
        self.sync()
        for hit in (1, 2):  # changes
            self.change()
            p = self.sync(env={"FERRY_FAULT": f"sink.commit_outcome_lost:{hit}"})
            self.assertIn("injecting the failure", p.stderr)
            self.assert_matches()

    def test_check_names_the_guarantee_and_bad_settings_fail_clearly(self):
        self.configure()
        p = self.ferry("check", "-c", self.pipeline, env=self.env)
        self.assertIn("exactly-once (rows and checkpoint key in one MULTI/EXEC transaction)",
                      p.stdout)
        self.assertIn(f"Redis at 127.0.0.1:{REDIS.port} db 0, prefix {PREFIX}", p.stdout)
        self.assertNotIn(PASSWORD, p.stdout + p.stderr)
        # A wrong password: refused, named as such, never shown.
        for env in ({"REDIS_PASSWORD": "wr0ng-Secret"}, {"REDIS_PASSWORD": ""}):
            p = self.ferry("check", "-c", self.pipeline, env=env, check=False)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("password", p.stderr)
            self.assertIn(f"127.0.0.1:{REDIS.port}", p.stderr)
            self.assertNotIn("wr0ng-Secret", p.stdout + p.stderr)
        # A password written into the file itself is not shown either.
        self.write_pipeline(SQLITE_PIPELINE.format(
            chunk_rows=700, mode="full_refresh", streams="",
            destination=self.destination(password_ref="wr0ng-Secret")))
        p = self.ferry("sync", "-c", self.pipeline, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertNotIn("wr0ng-Secret", p.stdout + p.stderr)
        # A server that is not there: unavailable, with the address.
        text = SQLITE_PIPELINE.format(chunk_rows=700, mode="full_refresh", streams="",
                                      destination=self.destination())
        self.write_pipeline(text.replace(f":{REDIS.port}/", f":{redisserver.free_port()}/")
                            + "checkpoint: {tolerable_failures: 0}\n")  # no retries
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("cannot connect to Redis at 127.0.0.1:", p.stderr)
        # A table without a primary key cannot become hashes.
        con = self.source()
        con.execute("CREATE TABLE nokey (v TEXT)")
        con.commit()
        con.close()
        self.configure(streams="  streams: [nokey]\n")
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("no primary key", p.stderr)
        self.assertIn("primary_key", p.stderr)


# ---- PostgreSQL source ----

PG_PIPELINE = """
name: {name}
source:
  type: postgres
  dsn: "{dsn}"
  streams:
{streams}
{destination}state: ./state.json
"""

PG_EXTRA = r"""
CREATE TABLE arrays (id int PRIMARY KEY, ints int[], words text[], days date[]);
INSERT INTO arrays VALUES (1, '{1,NULL,3}', '{"a b","",NULL,"ü"}', '{2024-02-29}'),
                          (2, '{}', NULL, '{}'), (3, NULL, '{"x"}', NULL);
"""


def pg_canon(pgtype, v, stored):
    """A value canonical: `stored` (bytes from Redis) or `v` (from PostgreSQL's json)."""
    if pgtype in ("integer", "bigint", "smallint"):
        return int(stored) if stored is not None else int(v)
    if pgtype == "double precision":
        return float_canon(stored if stored is not None else v)  # json: NaN etc. as strings
    if pgtype.startswith("numeric"):
        return decimal.Decimal(stored.decode() if stored is not None else str(v)).normalize()
    if pgtype == "timestamp with time zone":
        text = stored.decode() if stored is not None else v
        return datetime.datetime.fromisoformat(text).astimezone(datetime.timezone.utc)
    if pgtype == "boolean":
        return (stored == b"true") if stored is not None else v
    if pgtype in ("jsonb", "json") or pgtype.endswith("[]"):
        return json.loads(stored) if stored is not None else v
    return stored.decode() if stored is not None else str(v)  # text, date, uuid


def pg_table(server, db, table):
    """A PostgreSQL table as the checks read it: ({column: type}, its one-column key, its rows as
    JSON objects)."""
    quoted = '"' + table.replace('"', '""') + '"'
    types = dict(line.split("|", 1) for line in server.psql(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE "
        f"attrelid = '{quoted}'::regclass AND attnum > 0 AND NOT attisdropped", db=db
    ).splitlines() if line)
    key = server.psql(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        f"AND a.attnum = ANY(i.indkey) WHERE i.indrelid = '{quoted}'::regclass "
        "AND i.indisprimary", db=db).strip()
    rows = server.query_json(f"SELECT json_agg(t) FROM {quoted} t", db=db) or []
    return types, key, rows


class PostgresToRedisTest(RedisTestCase):
    PG = None

    @classmethod
    def setUpClass(cls):
        cls.PG = pgserver.start_for_module()

    @classmethod
    def tearDownClass(cls):
        if cls.PG:
            cls.PG.stop()

    STREAMS = ["items", "Odd Name", "full_ident", "arrays"]

    def setUp(self):
        super().setUp()
        self.env["PGPASSWORD"] = pgserver.SUPERUSER_PASSWORD
        self.db = self.PG.create_test_database("p2r", self._testMethodName)
        self.PG.psql(test_postgres_cdc.SCHEMA + PG_EXTRA, db=self.db)
        streams = "\n".join(f"    - name: {json.dumps(t)}\n      mode: cdc\n      chunk_rows: 1000"
                            for t in self.STREAMS)
        self.name = self.db
        self.write_pipeline(PG_PIPELINE.format(name=self.name, dsn=self.PG.dsn(self.db),
                                               streams=streams, destination=self.destination()))

    def tearDown(self):
        self.PG.drop_test_database(self.db)
        super().tearDown()

    def sql(self, text):
        return self.PG.psql(text, db=self.db)

    # A mix of every kind of change (uses self.sql).
    change = test_postgres_cdc.PostgresCdcTest.change

    def assert_matches(self):
        for t in self.STREAMS:
            types, key, rows = pg_table(self.PG, self.db, t)
            expected = {}
            for r in rows:
                expected[str(r[key])] = {c: pg_canon(types[c], v, None)
                                         for c, v in r.items() if v is not None}
            self.assert_rows(t, expected, lambda f, stored, types=types:
                             pg_canon(types[f], None, stored))

    def test_cdc_changes_then_crash_at_every_fault_point(self):
        p = self.sync()
        self.assertIn("new load", p.stdout)
        self.assert_matches()
        self.change(1)
        p = self.sync()
        self.assertIn("cdc: changes", p.stdout)
        self.assert_matches()
        for i, point in enumerate(["sink.data_written", "sink.before_commit", "sink.after_commit",
                                   "state.temp_written", "state.after_write",
                                   "source.before_acknowledge"]):
            with self.subTest(point=point):
                self.change(10 + i)
                self.crash(point)
                self.change(100 + i)
                self.sync()
                self.assert_matches()
        self.verify_passes()


if __name__ == "__main__":
    unittest.main(verbosity=2)
