"""End to end: a real PostgreSQL server started by the test, synced into a local Iceberg warehouse,
read back by readers nobody here wrote (icebird, DuckDB, avsc) and compared value by value with
what the server itself says each value is (computed in SQL: epoch microseconds, day numbers, the
types' output functions). Also the errors a user meets: a wrong password, an unreachable server,
an unknown stream, unmappable types, values Iceberg cannot hold, a missing privilege."""
import json
import os
import random
import struct
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferrytest  # noqa: E402
import pgserver  # noqa: E402

SERVER = None
DB = "shop"
READER_PASSWORD = "r3ader-Pa55word"

PIPELINE = """
name: pgshop
source:
  type: postgres
  dsn: "{dsn}"
  chunk_rows: {chunk_rows}
{extra}
destination:
  type: iceberg
  warehouse: ./warehouse
  namespace: pgshop
state: ./state.json
"""

SCHEMA = r"""
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy 😀');
CREATE DOMAIN money2 AS numeric(12,2);
CREATE DOMAIN short_text AS varchar(10) NOT NULL;
CREATE TABLE all_types (
  id int PRIMARY KEY,
  i2 smallint, i4 integer, i8 bigint,
  n_10_2 numeric(10,2), n_38_0 numeric(38,0), n_38_38 numeric(38,38), n_free numeric,
  n_neg numeric(5,-2),
  f4 real, f8 double precision,
  t text, vc varchar(20), ch char(5), b bytea, flag boolean,
  d date, ttz timetz, ts timestamp, tstz timestamptz, iv interval,
  j json, jb jsonb, m mood, dm money2, ds short_text, ts3 timestamp(3)
);
INSERT INTO all_types (id, ds) VALUES (1, 'all null');
INSERT INTO all_types VALUES
 (2, -32768, -2147483648, -9223372036854775808, -99999999.99,
  -99999999999999999999999999999999999999, -0.99999999999999999999999999999999999999,
  '-123456789012345678901234567890.123456789012345678901234567890', -9999900,
  '-Infinity', '-Infinity', '', 'ü', 'a', '\x', false,
  '4713-01-01 BC', '00:00:00+15:59', '4713-01-01 00:00:00 BC',
  '4713-01-01 00:00:00+00 BC', '-1 year -2 months -3 days -04:05:06.789',
  '[]', '{}', 'sad', -0.01, '', '2000-01-01 00:00:00.123'),
 (3, 32767, 2147483647, 9223372036854775807, 99999999.99,
  99999999999999999999999999999999999999, 0.99999999999999999999999999999999999999,
  'NaN', 9999900, 'NaN', 'NaN', repeat('long ✓ ', 20000), 'tab	nl
 q''"\', 'abc', decode(repeat('00ff', 500), 'hex'), true,
  '9999-12-31', '23:59:59.999999-15:59', '9999-12-31 23:59:59.999999',
  '9999-12-31 23:59:59.999999+00', '178000000 years 11 months 2147483647 days 2562047788:00:54.775807',
  '{"a": [1, 2.50, "x"]}', '{"b": 1, "a": [1, 2.50]}',
  'happy 😀', 9999999999.99, 'zzzzzzzzzz', '1969-12-31 23:59:59.999'),
 (4, 0, 0, 0, 0, 0, 0, 'Infinity', 0, '-0', '-0', 'Zoë 山田 🔑', 'O''Brien', NULL,
  decode('000102feff', 'hex'), NULL, '0001-01-01', '12:34:56.789+05:30',
  '0001-01-01 00:00:00', '2024-06-01 12:00:00.000001+05:30', '0', 'null', 'null', 'ok',
  0, 'x', NULL),
 (5, 1, 1, 1, 0.01, 1, 0.00000000000000000000000000000000000001, '-Infinity', -100, 1.1,
  5e-324, 'x', 'y', 'z', '\x00', true, '1970-01-01', '00:00:00+00',
  '1970-01-01 00:00:00', '1970-01-01 00:00:00+00', '1 day',
  '"s"', '"s"', 'sad', 1, 'y', NULL),
 (6, NULL, NULL, NULL, NULL, NULL, NULL, '0.000000000000000000000000000001', NULL, 3.4028235e38,
  1.7976931348623157e308, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  '-0.000001 seconds', NULL, NULL, NULL, NULL, 'z', NULL);
INSERT INTO all_types (id, i4, n_free, f8, t, d, ts, tstz, ds)
  SELECT i, i * 7, i * 1.5, i / 3.0, 'row ' || i, date '2000-01-01' + i * 37,
         timestamp '1999-12-31 00:00:00' + i * interval '1 hour 1.5 seconds',
         timestamptz '1960-01-01 00:00:00+00' - i * interval '17 days 0.25 seconds', 'g'
    FROM generate_series(7, 200) i;

-- uuid and time apart: iceberg_inspect.mjs's DuckDB part cannot read them (hex() of a UUID,
-- a time as BigInt); icebird checks them.
CREATE TABLE ids (id int PRIMARY KEY, u uuid, tm time);
INSERT INTO ids VALUES (1, '00000000-0000-0000-0000-000000000000', '00:00:00'),
  (2, 'ffffffff-ffff-ffff-ffff-ffffffffffff', '23:59:59.999999'),
  (3, '123e4567-e89b-12d3-a456-426614174000', '12:34:56.789'), (4, NULL, NULL),
  (5, NULL, '00:00:00.000001');

CREATE TABLE events (id bigserial PRIMARY KEY, kind text NOT NULL, at timestamptz NOT NULL,
                     amount numeric(12,2), payload jsonb);
INSERT INTO events (kind, at, amount, payload)
  SELECT CASE WHEN i % 3 = 0 THEN 'click' WHEN i % 3 = 1 THEN 'view' ELSE 'buy' END,
         timestamptz '2024-01-01 00:00:00+00' + i * interval '1 minute',
         CASE WHEN i % 10 = 0 THEN NULL ELSE (i % 1000) * 1.25 END,
         jsonb_build_object('i', i)
    FROM generate_series(1, 20000) i;
DELETE FROM events WHERE id % 97 = 0;

CREATE TABLE logbook (line text NOT NULL, n int);  -- no key: split by ctid blocks
INSERT INTO logbook SELECT 'line ' || i, i FROM generate_series(1, 12000) i;

CREATE TABLE measurements (city text NOT NULL, at date NOT NULL, temp real,
                           PRIMARY KEY (city, at)) PARTITION BY RANGE (at);
CREATE TABLE measurements_2023 PARTITION OF measurements FOR VALUES FROM ('2023-01-01') TO ('2024-01-01');
CREATE TABLE measurements_2024 PARTITION OF measurements FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
INSERT INTO measurements SELECT 'city ' || (i % 5), date '2023-06-01' + i, i / 4.0
  FROM generate_series(0, 400) i;

CREATE VIEW kinds AS SELECT kind, count(*) AS n FROM events GROUP BY kind;

CREATE SCHEMA "Sales Dept";
CREATE TABLE "Sales Dept"."Odd ""Name"" Ü" ("Line No" int PRIMARY KEY, "SELECT" text,
                                            "naïve 名" text, "CamelCase" bigint);
INSERT INTO "Sales Dept"."Odd ""Name"" Ü"
  SELECT i, 'from', CASE WHEN i % 2 = 0 THEN 'ключ 🔑 ' || i END, i::int8 * 1000000000 FROM generate_series(1, 50) i;
ALTER TABLE "Sales Dept"."Odd ""Name"" Ü" REPLICA IDENTITY FULL;

CREATE SCHEMA unmapped;
CREATE TABLE unmapped.hosts (id int PRIMARY KEY, addr inet, tags inet[]);
INSERT INTO unmapped.hosts VALUES (1, '10.0.0.1', '{10.0.0.2}');

-- Arrays become Iceberg lists: NULL lists, empty lists, NULL elements, extremes, a non-default
-- lower bound, a domain over an array, arrays of a domain and of an enum, long arrays.
CREATE SCHEMA lists;
CREATE DOMAIN lists.int_list AS int[];
CREATE DOMAIN lists.pos_int AS int CHECK (VALUE > 0);
CREATE TABLE lists.arrays (
  id int PRIMARY KEY, ints int[], bigs bigint[], smalls smallint[], reals real[], dbls float8[],
  nums numeric(10,2)[], free_nums numeric[], texts text[], vcs varchar(5)[], flags boolean[],
  days date[], tss timestamp[], tstzs timestamptz[], docs jsonb[], blobs bytea[], moods mood[],
  dom lists.int_list, posints lists.pos_int[]);
INSERT INTO lists.arrays (id) VALUES (1);
INSERT INTO lists.arrays VALUES (2, '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}',
  '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}');
INSERT INTO lists.arrays VALUES (3, '{1,NULL,-2147483648,2147483647}',
  '{-9223372036854775808,9223372036854775807,NULL}', '{-32768,32767}',
  '{NaN,-Infinity,-0,3.4028235e38,NULL}', '{Infinity,5e-324,-0,NULL}', '{-99999999.99,0.01,NULL}',
  '{NaN,1.50,-0.000000000000000000000000000001}', ARRAY['', NULL, 'Zoë 山田 🔑', 'a,b', '{x}', 'q"'],
  '{abc,NULL}', '{true,false,NULL}', '{"4713-01-01 BC",9999-12-31,NULL}',
  '{"1970-01-01 00:00:00.000001","4713-01-01 00:00:00 BC"}', '{"2024-06-01 12:00:00.000001+05:30"}',
  ARRAY['{"a": [1, 2.50]}'::jsonb, 'null', NULL], ARRAY['\x00ff'::bytea, NULL, '\x'],
  '{sad,"happy 😀",NULL}', '{7,8}', '{1,2}');
INSERT INTO lists.arrays (id, ints, texts) VALUES (4, '[0:2]={5,6,7}', '[-3:-3]={low}');
INSERT INTO lists.arrays (id, ints, bigs, dbls, texts, days, nums)
  SELECT i, ARRAY(SELECT j FROM generate_series(1, i % 60) j),
         ARRAY(SELECT j::int8 * 1000000007 FROM generate_series(1, i % 7) j),
         ARRAY(SELECT j / 7.0 FROM generate_series(1, i % 3) j),
         CASE WHEN i % 11 = 0 THEN NULL
              ELSE ARRAY(SELECT 'item ' || (j % 13) FROM generate_series(1, i % 40) j) END,
         ARRAY[date '2000-01-01' + i, NULL], ARRAY[i * 0.25]
    FROM generate_series(5, 3000) i;
CREATE TABLE lists.array_ids (id int PRIMARY KEY, uids uuid[], times time[]);
INSERT INTO lists.array_ids VALUES (1, '{00000000-0000-0000-0000-000000000000,NULL}', '{00:00:00}'),
  (2, '{ffffffff-ffff-ffff-ffff-ffffffffffff}', '{23:59:59.999999,NULL}'), (3, NULL, '{}');
CREATE TABLE lists.grid (id int PRIMARY KEY, cells int[]);
INSERT INTO lists.grid VALUES (1, '{1,2}'), (2, '{{1,2},{3,4}}');

CREATE SCHEMA badvalues;
CREATE TABLE badvalues.nan_amount (id int PRIMARY KEY, amount numeric(10,2));
INSERT INTO badvalues.nan_amount VALUES (1, 1.5), (2, 'NaN');
CREATE TABLE badvalues.forever (id int PRIMARY KEY, until date);
INSERT INTO badvalues.forever VALUES (1, 'infinity');
CREATE TABLE badvalues.secret (id int PRIMARY KEY);

CREATE ROLE reader LOGIN PASSWORD '{reader_password}';
GRANT USAGE ON SCHEMA badvalues TO reader;
"""


def setUpModule():
    global SERVER
    def prepare(server):
        server.psql(f"CREATE DATABASE {DB}")
        server.psql(SCHEMA.replace("{reader_password}", READER_PASSWORD), db=DB)

    SERVER = pgserver.start_for_module(prepare)


def tearDownModule():
    if SERVER:
        SERVER.stop()


def quote(name):
    return '"' + name.replace('"', '""') + '"'


def pg_expr(name, t):
    """SQL giving a column's raw value in a form the canonical values are computed from."""
    return pg_value(quote(name), t)


def pg_value(c, t):
    """pg_expr of an expression; a list gives the JSON array of its elements' forms."""
    if isinstance(t, dict):
        elem = pg_value("u.x", t["element"])
        return (f"CASE WHEN {c} IS NULL THEN NULL ELSE COALESCE((SELECT json_agg({elem} ORDER BY u.o) "
                f"FROM unnest({c}) WITH ORDINALITY u(x, o)), '[]'::json) END")
    if t == "boolean":
        return c
    if t in ("date",):
        return f"({c} - date '1970-01-01')::text"
    if t in ("time", "timestamp", "timestamptz"):
        return f"(extract(epoch from {c}) * 1000000)::numeric(30,0)::text"
    if t == "binary":
        return f"encode({c}, 'hex')"
    if t == "uuid":
        return f"replace({c}::text, '-', '')"
    if t == "string":
        return f"CASE WHEN {c} IS NULL THEN NULL ELSE format('%s', {c}) END"
    return f"{c}::text"


def js_ms(us):
    """icebird's milliseconds: BigInt division, truncating toward zero."""
    return -((-us) // 1000) if us < 0 else us // 1000


def canon(t, v, reader):
    if v is None:
        return None
    if isinstance(t, dict):  # a list: as iceberg_inspect.mjs's canonical list form
        return "list:" + json.dumps([canon(t["element"], e, reader) for e in v],
                                    ensure_ascii=False, separators=(",", ":"))
    if t == "boolean":
        return "true" if v else "false"
    if t in ("int", "long", "date"):
        return str(int(v))
    if t in ("float", "double"):
        x = float(v)
        if t == "float":
            x = struct.unpack(">f", struct.pack(">f", x))[0]
        return "f:" + struct.pack(">d", x).hex()
    if t.startswith("decimal"):
        if reader == "duckdb":
            precision, scale = t[len("decimal("):-1].split(",")
            if precision == scale:  # DuckDB writes decimal(38,38) without the leading zero
                return v.replace("0.", ".", 1)
            return v
        scale = int(t.split(",")[1].rstrip(")"))
        x = float(v)
        return "~" + (repr(x) if abs(x) >= 1e21 else f"{x:.{scale}f}")
    if t in ("timestamp", "timestamptz"):
        us = int(v)
        return str(us) if reader == "duckdb" else f"ms:{js_ms(us)}"
    if t == "time":
        us = int(v)
        if reader == "duckdb":
            s, f = divmod(us, 1000000)
            text = f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"
            return text + (f".{f:06d}" if f else "")
        return str(us)
    if t == "uuid":  # annotated UUID: both readers return the 16 bytes
        return "hex:" + v
    if t == "binary":
        return ferrytest.canon(t, bytes.fromhex(v), reader)
    return v


def approx_decimals(row, columns):
    row = list(row)
    for i in columns:
        if row[i] is not None:
            row[i] = "~" + format(float(row[i][1:]), ".12g")
    return row


def assert_pg_table_matches(tc, server, db, ns, table, where=None, source_table=None,
                            icebird=True):
    """The Iceberg table `ns.table` of the test's warehouse holds exactly the server's rows of
    `table` (or of `source_table`; those matching `where`; of every database when `db` is a list:
    several sources merged into one table), through icebird and DuckDB, both applying delete
    files (icebird=False: DuckDB only, for what icebird cannot read; see docs/interop.md)."""
    loc = tc.catalog_tables().get((ns, table))
    tc.assertIsNotNone(loc, f"{table} is not in the catalog: {tc.catalog_tables()}")
    seen = tc.inspect(loc)
    tc.assertEqual(seen["problems"], [], f"readers found problems in {table}")
    fields = seen["schema"]["fields"]
    cols = ", ".join(pg_expr(f["name"], f["type"]) for f in fields)
    rows = []
    for one in db if isinstance(db, list) else [db]:
        rows += server.query_json(
            "SET intervalstyle = iso_8601; SET datestyle = ISO; "
            f"SELECT COALESCE(json_agg(json_build_array({cols})), '[]') "
            f"FROM {quote(source_table or table)}" +
            (f" WHERE {where}" if where else ""), db=one)
    duck = [[canon(f["type"], v, "duckdb") for f, v in zip(fields, r)] for r in rows]
    bird = [[canon(f["type"], v, "icebird") for f, v in zip(fields, r)] for r in rows]
    dec = [i for i, f in enumerate(fields)
           if isinstance(f["type"], str) and f["type"].startswith("decimal")]
    tc.assert_same_rows(duck, seen["duckdb_rows"], f"{table} via DuckDB")
    if not icebird:
        return seen
    tc.assert_same_rows([approx_decimals(r, dec) for r in bird],
                        [approx_decimals(r, dec) for r in seen["icebird_rows"]],
                        f"{table} via icebird")
    return seen


class PostgresToIcebergTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}

    def configure(self, chunk_rows=100000, extra="", dsn=None):
        self.write_pipeline(PIPELINE.format(dsn=dsn or SERVER.dsn(DB), chunk_rows=chunk_rows,
                                            extra=extra))

    def run_ferry(self, *args, env=None, check=True):
        return self.ferry(*args, "-c", self.pipeline, env=env or self.env, check=check)

    def expected_rows(self, schema, table, fields):
        cols = ", ".join(pg_expr(f["name"], f["type"]) for f in fields)
        rows = SERVER.query_json(
            "SET intervalstyle = iso_8601; SET datestyle = ISO; "
            f"SELECT COALESCE(json_agg(json_build_array({cols})), '[]') "
            f"FROM {quote(schema)}.{quote(table)}", db=DB)
        duck = [[canon(f["type"], v, "duckdb") for f, v in zip(fields, r)] for r in rows]
        bird = [[canon(f["type"], v, "icebird") for f, v in zip(fields, r)] for r in rows]
        return duck, bird

    def assert_table_matches(self, schema, table, iceberg_table, duckdb=True):
        loc = self.catalog_tables().get(("pgshop", iceberg_table))
        self.assertIsNotNone(loc, f"{iceberg_table} is not in the catalog: {self.catalog_tables()}")
        seen = self.inspect(loc)
        problems = seen["problems"]
        if not duckdb:  # the inspector's DuckDB query cannot read this table's types
            problems = [p for p in problems if not p.startswith("duckdb:")]
        self.assertEqual(problems, [], f"readers found problems in {iceberg_table}")
        duck, bird = self.expected_rows(schema, table, seen["schema"]["fields"])
        names = [f["name"] for f in seen["schema"]["fields"]]
        # icebird computes decimals as JS numbers with its own rounding: compare 12 digits.
        dec = [i for i, f in enumerate(seen["schema"]["fields"])
               if isinstance(f["type"], str) and f["type"].startswith("decimal")]
        bird_seen = [approx_decimals(r, dec) for r in seen["icebird_rows"]]
        bird = [approx_decimals(r, dec) for r in bird]
        if duckdb:
            self.assert_same_columns(names, duck, seen["duckdb_rows"], f"{iceberg_table} via DuckDB")
            self.assert_same_rows(duck, seen["duckdb_rows"], f"{iceberg_table} via DuckDB")
        self.assert_same_columns(names, bird, bird_seen, f"{iceberg_table} via icebird")
        self.assert_same_rows(bird, bird_seen, f"{iceberg_table} via icebird")
        return seen

    def assert_same_columns(self, names, expected, actual, what):
        """Rows matched by their first column (the key): the first differing values, by column."""
        exp = {r[0]: r for r in expected}
        if len(exp) != len(expected):
            return  # the first column is no key: assert_same_rows alone compares
        diffs = []
        for r in actual:
            e = exp.get(r[0])
            for i, (x, y) in enumerate(zip(e or [], r)):
                if x != y:
                    diffs.append(f"key {r[0]} column {names[i]}: expected {str(x)[:80]!r}, "
                                 f"read {str(y)[:80]!r}")
        self.assertEqual(diffs[:10], [], what)

    def test_discover_check_and_sync_give_the_server_values_to_every_reader(self):
        self.configure(chunk_rows=3000, extra='  schemas: "public, Sales Dept"')
        disc = json.loads(self.run_ferry("discover", "--json").stdout)
        by_name = {s["name"]: s for s in disc}
        odd = 'Sales Dept.Odd "Name" Ü'
        # Partitions are read through their parent; views are streams.
        self.assertEqual(sorted(by_name), sorted(["all_types", "ids", "events", "logbook", "measurements", "kinds", odd]))
        types = {c["name"]: c["iceberg_type"] for c in by_name["all_types"]["columns"]}
        self.assertEqual(types, {
            "id": "int", "i2": "int", "i4": "int", "i8": "long", "n_10_2": "decimal(10,2)",
            "n_38_0": "decimal(38,0)", "n_38_38": "decimal(38,38)", "n_free": "string",
            "n_neg": "decimal(7,0)", "f4": "float", "f8": "double", "t": "string", "vc": "string",
            "ch": "string", "b": "binary", "flag": "boolean", "d": "date",
            "ttz": "string", "ts": "timestamp", "tstz": "timestamptz", "iv": "string",
            "j": "string", "jb": "string", "m": "string", "dm": "decimal(12,2)",
            "ds": "string", "ts3": "timestamp"})
        src_types = {c["name"]: c["source_type"] for c in by_name["all_types"]["columns"]}
        self.assertEqual(src_types["n_10_2"], "numeric(10,2)")
        self.assertEqual(src_types["dm"], "money2")
        self.assertEqual(by_name["all_types"]["primary_key"], ["id"])
        self.assertEqual(by_name["measurements"]["primary_key"], ["city", "at"])
        self.assertEqual(by_name[odd]["primary_key"], ["Line No"])
        # A single integer key splits by key ranges (updates never move a row to another chunk);
        # other tables by ctid blocks.
        self.assertEqual(by_name["events"]["chunking"], "ranges of primary key id")
        self.assertEqual(by_name["logbook"]["chunking"], "ctid block ranges")
        self.assertEqual(by_name["measurements"]["chunking"], "one chunk per partition")
        self.assertIn("at", by_name["events"]["cursor_candidates"])
        self.assertGreater(by_name["events"]["estimated_rows"], 10000)

        check = self.run_ferry("check")
        self.assertIn("exactly-once", check.stdout)
        self.assertIn("PostgreSQL 15", check.stdout)
        self.assertNotIn(pgserver.SUPERUSER_PASSWORD, check.stdout + check.stderr)

        out = self.run_ferry("sync")
        self.assertNotIn(pgserver.SUPERUSER_PASSWORD, out.stdout + out.stderr)
        seen = self.assert_table_matches("public", "all_types", "all_types")
        self.assertEqual(seen["schema"]["identifier-field-ids"], [1])
        ids = self.assert_table_matches("public", "ids", "ids", duckdb=False)
        self.assertEqual([f["type"] for f in ids["schema"]["fields"]], ["int", "uuid", "time"])
        events = self.assert_table_matches("public", "events", "events")
        # 20000 rows minus every 97th, in key ranges of 3000 ids: one data file each.
        self.assertEqual(int(events["summary"]["total-records"]), 20000 - 20000 // 97)
        self.assertGreaterEqual(len(events["data_files"]), 5)
        self.assert_table_matches("public", "measurements", "measurements")
        self.assert_table_matches("public", "kinds", "kinds")
        logbook = self.assert_table_matches("public", "logbook", "logbook")
        self.assertGreaterEqual(len(logbook["data_files"]), 3)  # ctid chunks of ~3000 rows
        self.assert_table_matches("Sales Dept", 'Odd "Name" Ü', odd)

        with open(os.path.join(self.dir, "state.json")) as f:
            state = f.read()
        self.assertNotIn(pgserver.SUPERUSER_PASSWORD, state)
        self.assertTrue(all(s["state"]["published"] for s in json.loads(state)["streams"]))

        # A second sync after changes replaces the contents; "public.events" names the same stream.
        SERVER.psql("UPDATE events SET kind = 'changed' WHERE id % 5 = 0; "
                    "DELETE FROM events WHERE id % 7 = 0; "
                    "INSERT INTO events (kind, at) SELECT 'late', now() FROM generate_series(1, 500)",
                    db=DB)
        self.configure(chunk_rows=3000, extra="  streams:\n    - public.events")
        self.run_ferry("sync")
        self.assert_table_matches("public", "events", "events")

    def test_parallel_readers_share_one_snapshot_while_the_tables_change(self):
        # Every transaction moves amounts between a row in the first half of a table and one in
        # the second, so each table's total never changes. The chunks are read on 4 connections
        # while those transactions run: had each reader its own snapshot, the loaded rows would
        # catch some transfers half done and the totals would differ.
        SERVER.psql("""
            DROP SCHEMA IF EXISTS ledger CASCADE; CREATE SCHEMA ledger;
            CREATE TABLE ledger.accounts (id int PRIMARY KEY, balance bigint NOT NULL, note text);
            INSERT INTO ledger.accounts SELECT i, 100, repeat('x', 40) FROM generate_series(1, 40000) i;
            CREATE TABLE ledger.entries (id bigint PRIMARY KEY, amount bigint NOT NULL)
              PARTITION BY RANGE (id);
            CREATE TABLE ledger.entries_low PARTITION OF ledger.entries FOR VALUES FROM (MINVALUE) TO (20001);
            CREATE TABLE ledger.entries_high PARTITION OF ledger.entries FOR VALUES FROM (20001) TO (MAXVALUE);
            INSERT INTO ledger.entries SELECT i, 10 FROM generate_series(1, 40000) i;
            CREATE TABLE ledger.moves (n bigint NOT NULL); INSERT INTO ledger.moves VALUES (0);
        """, db=DB)
        self.addCleanup(SERVER.psql, "DROP SCHEMA IF EXISTS ledger CASCADE", db=DB)
        self.configure(chunk_rows=500, extra='  schemas: "ledger"\n  readers: 4\n  streams:\n'
                                              '    - ledger.accounts\n    - ledger.entries')
        disc = {s["name"]: s for s in json.loads(self.run_ferry("discover", "--json").stdout)}
        self.assertEqual(disc["ledger.entries"]["chunking"],
                         "ranges of primary key id (across partitions)")
        # The writer runs until the load is over (its pipe paces the transactions).
        writer = subprocess.Popen(
            ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", SERVER.dir, "-p", str(SERVER.port),
             "-U", pgserver.SUPERUSER, "-d", DB], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        stop = threading.Event()

        def feed():
            rng = random.Random(7)
            try:
                while not stop.is_set():
                    block = []
                    for _ in range(100):
                        a, b, k = rng.randint(1, 20000), rng.randint(20001, 40000), rng.randint(1, 9)
                        block.append(
                            f"BEGIN; UPDATE ledger.accounts SET balance = balance - {k} WHERE id = {a};"
                            f"UPDATE ledger.accounts SET balance = balance + {k} WHERE id = {b};"
                            f"UPDATE ledger.entries SET amount = amount - 3 WHERE id = {b};"
                            f"UPDATE ledger.entries SET amount = amount + 3 WHERE id = {a};"
                            "UPDATE ledger.moves SET n = n + 1; COMMIT;\n")
                    writer.stdin.write("".join(block))
                    writer.stdin.flush()
                writer.stdin.close()
            except (BrokenPipeError, ValueError, OSError):
                pass  # killed once the load was over

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        moves = lambda: int(SERVER.psql("SELECT n FROM ledger.moves", db=DB).strip())  # noqa: E731
        try:
            while moves() < 100:
                self.assertIsNone(writer.poll(), "the writer stopped")
                time.sleep(0.05)
            before = moves()
            p = self.run_ferry("sync")
            after = moves()
        finally:
            stop.set()
            writer.kill()
            writer.wait()
            feeder.join()
            writer.stderr.close()
        self.assertGreater(after, before + 20, "the tables hardly changed during the load")
        for stream in ("ledger.accounts", "ledger.entries"):
            self.assertRegex(p.stderr, stream.replace(".", r"\.") +
                             r": \d+ chunks, read on 4 connections sharing one snapshot")
        for table, column, total in (("accounts", "balance", 4000000), ("entries", "amount", 400000)):
            seen = self.inspect(self.catalog_tables()[("pgshop", "ledger." + table)])
            self.assertEqual(seen["problems"], [])
            cols = [f["name"] for f in seen["schema"]["fields"]]
            ids = [int(r[cols.index("id")]) for r in seen["duckdb_rows"]]
            self.assertEqual(sorted(ids), list(range(1, 40001)), f"ledger.{table}: rows")
            got = sum(int(r[cols.index(column)]) for r in seen["duckdb_rows"])
            self.assertEqual(got, total, f"ledger.{table}: the total of {column} as loaded")

    def test_a_load_read_in_parallel_survives_kills_in_readers_and_sink(self):
        # Kills while 3 readers are inside their chunks, and between a chunk's commit and the
        # state file: each restart resumes the same load, and the table ends with every row once.
        SERVER.psql("""
            DROP SCHEMA IF EXISTS crashy CASCADE; CREATE SCHEMA crashy;
            CREATE TABLE crashy.rows (id int PRIMARY KEY, v text NOT NULL);
            INSERT INTO crashy.rows SELECT i, md5(i::text) FROM generate_series(1, 30000) i;
        """, db=DB)
        self.addCleanup(SERVER.psql, "DROP SCHEMA IF EXISTS crashy CASCADE", db=DB)
        self.configure(chunk_rows=2000, extra='  schemas: crashy\n  readers: 3')
        for point in ("source.mid_chunk:4", "sink.after_commit:2", "source.mid_chunk:9",
                      "state.after_write:3"):
            p = self.run_ferry("sync", env=dict(self.env, FERRY_FAULT=point), check=False)
            self.assertEqual(p.returncode, -9, f"{point}: {p.stderr}")
        p = self.run_ferry("sync")
        self.assertIn("resum", p.stderr)
        seen = self.assert_table_matches("crashy", "rows", "crashy.rows")
        self.assertEqual(int(seen["summary"]["total-records"]), 30000)

    def test_partitions_are_chunks_and_a_load_starts_over_when_they_changed(self):
        # A partitioned table without a single integer key: one chunk per leaf partition
        # (sub-partitions included), read in parallel. A load that died cannot resume once the
        # partitions changed: a new load starts, and the table ends up exact.
        SERVER.psql("""
            DROP SCHEMA IF EXISTS parts CASCADE; CREATE SCHEMA parts;
            CREATE TABLE parts.readings (sensor text NOT NULL, at date NOT NULL, v real,
                                         PRIMARY KEY (sensor, at)) PARTITION BY RANGE (at);
            CREATE TABLE parts.readings_2023 PARTITION OF parts.readings
              FOR VALUES FROM ('2023-01-01') TO ('2024-01-01');
            CREATE TABLE parts.readings_2024 PARTITION OF parts.readings
              FOR VALUES FROM ('2024-01-01') TO ('2025-01-01') PARTITION BY LIST (sensor);
            CREATE TABLE parts.readings_2024_a PARTITION OF parts.readings_2024 FOR VALUES IN ('a');
            CREATE TABLE parts.readings_2024_rest PARTITION OF parts.readings_2024 DEFAULT;
            INSERT INTO parts.readings SELECT s, date '2023-06-01' + i, i / 4.0
              FROM generate_series(0, 500) i, unnest(ARRAY['a', 'b', 'c']) s;
        """, db=DB)
        self.addCleanup(SERVER.psql, "DROP SCHEMA IF EXISTS parts CASCADE", db=DB)
        self.configure(extra='  schemas: parts\n  readers: 2')
        disc = json.loads(self.run_ferry("discover", "--json").stdout)
        self.assertEqual([(s["name"], s["chunking"]) for s in disc],
                         [("parts.readings", "one chunk per partition")])
        p = self.run_ferry("sync", env=dict(self.env, FERRY_FAULT="sink.after_commit:1"),
                           check=False)
        self.assertEqual(p.returncode, -9, p.stderr)
        SERVER.psql("CREATE TABLE parts.readings_2025 PARTITION OF parts.readings "
                    "FOR VALUES FROM ('2025-01-01') TO ('2026-01-01')", db=DB)
        SERVER.psql("INSERT INTO parts.readings VALUES ('a', '2025-03-01', 1)", db=DB)
        p = self.run_ferry("sync")
        self.assertIn("the unfinished load cannot resume (its partitions changed since the load "
                      "was planned); a new load starts", p.stderr)
        self.assertIn("parts.readings: 4 chunks, read on 2 connections sharing one snapshot",
                      p.stderr)
        seen = self.assert_table_matches("parts", "readings", "parts.readings")
        self.assertEqual(int(seen["summary"]["total-records"]), 501 * 3 + 1)

    def test_wrong_password_is_refused_without_echoing_it(self):
        wrong = "Wr0ng-Secret-Value"
        self.configure()
        p = self.run_ferry("check", env={"PGPASSWORD": wrong}, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("password authentication failed", p.stderr)
        self.assertIn("check the user and password in source.dsn", p.stderr)
        self.assertNotIn(wrong, p.stdout + p.stderr)
        # A password written in the file itself is not echoed either.
        self.configure(dsn=SERVER.dsn(DB, password_ref=wrong))
        p = self.run_ferry("discover", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertNotIn(wrong, p.stdout + p.stderr)

    def test_unreachable_server_names_host_and_fix(self):
        port = pgserver.free_port()
        self.configure(dsn=f"host=127.0.0.1 port={port} dbname={DB} user=postgres "
                          "password=${PGPASSWORD} connect_timeout=3")
        p = self.run_ferry("check", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(f"port={port}", p.stderr)
        self.assertIn("Connection refused", p.stderr)
        self.assertNotIn(pgserver.SUPERUSER_PASSWORD, p.stderr)
        self.configure(dsn=SERVER.dsn("nosuchdb"))
        p = self.run_ferry("check", check=False)
        self.assertIn('database "nosuchdb" does not exist', p.stderr)

    def test_unknown_stream_lists_the_tables(self):
        self.configure(extra="  streams:\n    - public.nosuch")
        p = self.run_ferry("check", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("'nosuch'", p.stderr)
        self.assertIn("events", p.stderr)

    def test_unmappable_types_are_listed_and_refused(self):
        self.configure(extra="  schemas: unmapped")
        disc = json.loads(self.run_ferry("discover", "--json").stdout)
        self.assertEqual([s["name"] for s in disc], ["unmapped.hosts"])
        p = self.run_ferry("check", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("ferry cannot map type inet of column addr; cast it in a view", p.stderr)
        self.assertIn("column tags has array type inet[] of an element type ferry cannot map",
                      p.stderr)

    def test_arrays_become_lists_read_back_by_every_reader(self):
        self.configure(chunk_rows=1000, extra="  schemas: lists")
        disc = json.loads(self.run_ferry("discover", "--json").stdout)
        by_name = {s["name"]: s for s in disc}
        types = {c["name"]: c["iceberg_type"] for c in by_name["lists.arrays"]["columns"]}
        self.assertEqual(types["ints"], "list<int>")
        self.assertEqual(types["nums"], "list<decimal(10,2)>")
        self.assertEqual(types["free_nums"], "list<string>")
        self.assertEqual(types["moods"], "list<string>")
        self.assertEqual(types["dom"], "list<int>")
        self.assertEqual(types["posints"], "list<int>")
        self.assertEqual(types["blobs"], "list<binary>")
        self.assertFalse(by_name["lists.arrays"].get("error"))

        self.configure(chunk_rows=1000, extra="  streams:\n    - lists.arrays\n    - lists.array_ids")
        self.run_ferry("sync")
        seen = self.assert_table_matches("lists", "arrays", "lists.arrays")
        fields = {f["name"]: f for f in seen["schema"]["fields"]}
        self.assertEqual(fields["ints"]["type"]["type"], "list")
        self.assertEqual(fields["ints"]["type"]["element"], "int")
        self.assertFalse(fields["ints"]["type"]["element-required"])
        ids = [f["id"] for f in seen["schema"]["fields"]] + [
            f["type"]["element-id"] for f in seen["schema"]["fields"] if isinstance(f["type"], dict)]
        self.assertEqual(len(ids), len(set(ids)), ids)
        ints = [f["name"] for f in seen["schema"]["fields"]].index("ints")
        for reader in ("duckdb_rows", "icebird_rows"):
            by_id = {r[0]: r[ints] for r in seen[reader]}
            self.assertIsNone(by_id["1"], reader)  # a NULL array
            self.assertEqual(by_id["2"], "list:[]", reader)  # an empty one
            self.assertEqual(by_id["3"], 'list:["1",null,"-2147483648","2147483647"]', reader)
            self.assertEqual(by_id["4"], 'list:["5","6","7"]', reader)  # lower bound 0 dropped
        self.assertEqual(int(seen["summary"]["total-records"]), 3000)
        self.assertGreaterEqual(len(seen["data_files"]), 3)
        self.assert_table_matches("lists", "array_ids", "lists.array_ids", duckdb=False)

        # A second sync keeps the list and element ids (a full refresh of the same schema).
        self.run_ferry("sync")
        again = self.assert_table_matches("lists", "arrays", "lists.arrays")
        self.assertEqual(again["schema"]["fields"], seen["schema"]["fields"])

        # More than one dimension stops the sync, naming the column and the fix.
        self.configure(extra="  streams:\n    - lists.grid")
        p = self.run_ferry("sync", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("column cells", p.stderr)
        self.assertIn("2-dimensional array", p.stderr)
        self.assertIn("to_jsonb(col)", p.stderr)

    def test_values_iceberg_cannot_hold_stop_the_sync_naming_the_fix(self):
        self.configure(extra="  streams:\n    - badvalues.nan_amount")
        p = self.run_ferry("sync", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("table badvalues.nan_amount, column amount, ctid (0,2)", p.stderr)
        self.assertIn("NaN cannot be stored in Iceberg decimal(10,2)", p.stderr)
        self.assertIn("numeric without precision", p.stderr)
        self.configure(extra="  streams:\n    - badvalues.forever")
        p = self.run_ferry("sync", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("column until", p.stderr)
        self.assertIn("infinity has no Iceberg date", p.stderr)

    def test_missing_privilege_names_the_grant(self):
        self.configure(dsn=SERVER.dsn(DB, user="reader"), extra="  streams:\n    - badvalues.secret")
        p = self.run_ferry("check", env={"PGPASSWORD": READER_PASSWORD}, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn('grant SELECT on "badvalues"."secret"', p.stderr)
        self.assertNotIn(READER_PASSWORD, p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
