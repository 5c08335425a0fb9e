"""MariaDB -> Iceberg: a real MariaDB server started by the test (once for the module), synced into a
local Iceberg warehouse, read back by readers nobody here wrote (icebird, DuckDB) and compared value
by value with what the server itself says each value is (computed in SQL: microseconds since the
epoch, day numbers, exact decimal text, hex of the bytes). Every type at its extremes, NULLs,
multi-byte text in several character sets, zero dates; key-range chunks over integer and composite
keys, a second database, a view, a table without a key; a crash at each fault point of a load and
the resumed load, exactly once; incremental windows with tied cursors; and the errors a user meets
(bad settings, an unreachable server, a wrong password, missing privileges, cdc on a server
without a binary log, unmappable types)."""
import json
import os
import shutil
import signal
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ferrytest  # noqa: E402
import mariadbserver  # noqa: E402
import pgserver  # noqa: E402
from test_postgres_to_iceberg import approx_decimals, canon  # noqa: E402

MARIA = None
NS = "maria"
READER_PASSWORD = "r3ader-Pa55"

PIPELINE = """
name: maria
source:
  type: mysql
{source}
destination:
  type: iceberg
  warehouse: ./warehouse
  namespace: maria
state: ./state.json
"""

SCHEMA = r"""
SET sql_mode = '';
SET time_zone = '+00:00';
CREATE TABLE all_types (
  id int PRIMARY KEY,
  ti tinyint, tiu tinyint unsigned, si smallint, siu smallint unsigned,
  mi mediumint, miu mediumint unsigned, i int, iu int unsigned, bi bigint, biu bigint unsigned,
  f float, d double, n10 decimal(10,2), n38 decimal(38,10), n65 decimal(65,30),
  b1 bit(1), b5 bit(5), b64 bit(64),
  dt date, dtm datetime, dtm6 datetime(6), ts timestamp(6) NULL, tm time, tm6 time(6), y year,
  c char(5), vc varchar(60), tx text, lt longtext CHARACTER SET latin1,
  vcl varchar(20) CHARACTER SET latin1, bn binary(4), vb varbinary(10), bl blob,
  e enum('small', 'medium', 'large 😀'), st set('a', 'b', 'c'), j json, u uuid, ip inet6,
  nn_dt date NOT NULL DEFAULT '2000-01-01',
  gen bigint AS (CAST(i AS SIGNED) * 2) VIRTUAL, gens varchar(70) AS (CONCAT(vc, '!')) STORED
) CHARACTER SET utf8mb4;
INSERT INTO all_types (id) VALUES (1);
INSERT INTO all_types VALUES (2, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0,
  -9223372036854775808, 0, -3.40282e38, -1.7976931348623157e308, -99999999.99,
  -9999999999999999999999999999.9999999999,
  -99999999999999999999999999999999999.999999999999999999999999999999, b'0', b'00000', 0,
  '1000-01-01', '1000-01-01 00:00:00', '1000-01-01 00:00:00.000000', '1970-01-01 00:00:01.000000',
  '-838:59:59', '-838:59:59.000000', 1901, '', '', '', '', '', X'00000000', X'', X'', 'small', '',
  '[]', '00000000-0000-0000-0000-000000000000', '::', '1000-01-01', DEFAULT, DEFAULT);
INSERT INTO all_types VALUES (3, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647,
  4294967295, 9223372036854775807, 18446744073709551615, 3.40282e38, 1.7976931348623157e308,
  99999999.99, 9999999999999999999999999999.9999999999,
  99999999999999999999999999999999999.999999999999999999999999999999, b'1', b'11111',
  18446744073709551615, '9999-12-31', '9999-12-31 23:59:59', '9999-12-31 23:59:59.999999',
  '2038-01-19 03:14:07.999999', '838:59:59', '838:59:59.999999', 2155, 'abcde',
  REPEAT('x', 60), REPEAT('long text ', 1000), REPEAT('é', 5000), 'ÿ', X'FFFFFFFF',
  X'FFFFFFFFFFFFFFFFFFFF', REPEAT(X'FF', 60000), 'large 😀', 'a,b,c',
  '{"k": [1, 2.5, "ü"], "n": null}', 'ffffffff-ffff-ffff-ffff-ffffffffffff',
  'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', '9999-12-31', DEFAULT, DEFAULT);
INSERT INTO all_types VALUES (4, 1, 1, -1, 1, -1, 1, -1, 1, -1, 1, 0.1, -0.0e0, 0.01,
  0.0000000001, 0.000000000000000000000000000001, b'1', b'10101', 9223372036854775808,
  '2024-02-29', '2024-02-29 12:34:56', '2024-02-29 12:34:56.789012', '2024-02-29 12:34:56.000001',
  '25:00:00', '-00:00:00.000001', 2024, 'ü€😀', 'Größe 😀 "q" \'s \\ tab\there', 'line\nbreak',
  'café ñ ½', 'Größe', X'DEADBEEF', X'00FF00', X'000102FEFF', 'medium', 'a,c',
  '{"s": "\\u00fc"}', '123e4567-e89b-12d3-a456-426614174000', '2001:db8::1', '2024-02-29',
  DEFAULT, DEFAULT);
INSERT INTO all_types (id, dt, dtm, dtm6, ts, y, nn_dt) VALUES
  (5, '0000-00-00', '0000-00-00 00:00:00', '2024-00-10 00:00:00', '0000-00-00 00:00:00', 0,
   '0000-00-00'),
  (6, '2024-05-00', '0001-01-01 00:00:00', '0001-01-01 00:00:00.5', NULL, 1999, '2024-00-00');
CREATE TABLE events (id bigint PRIMARY KEY, kind varchar(20) NOT NULL, amount decimal(12,2),
                     at datetime(6));
INSERT INTO events SELECT seq, CONCAT('kind ', seq % 13), seq * 1.25,
  TIMESTAMPADD(SECOND, seq, '2024-01-01 00:00:00') FROM seq_1_to_20000 WHERE seq % 97 <> 0;
CREATE TABLE sparse (id bigint PRIMARY KEY, v varchar(20));
INSERT INTO sparse SELECT seq * seq * 1000, CONCAT('v', seq) FROM seq_1_to_10000;
CREATE TABLE composite (a varchar(10) NOT NULL, b int NOT NULL, v text, PRIMARY KEY (a, b))
  CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
INSERT INTO composite SELECT ELT(1 + seq % 7, 'g', 'Z', 'ü', 'quote''s', 'back`tick', '😀', 'ñ'),
  seq, CONCAT('v', seq) FROM seq_1_to_500;
CREATE TABLE `Odd ``Tick`` Ü` (`Key` varbinary(8) PRIMARY KEY, `sel``ect` int, `from` text);
INSERT INTO `Odd ``Tick`` Ü` SELECT UNHEX(LPAD(HEX(seq * 7919), 8, '0')), seq, CONCAT('from ', seq)
  FROM seq_1_to_300;
CREATE TABLE ukey (id bigint unsigned PRIMARY KEY, at datetime(6) NOT NULL, v int,
                   UNIQUE KEY (at));
INSERT INTO ukey SELECT 18446744073709551615 - seq * 1000000000000, 
  TIMESTAMPADD(MICROSECOND, seq * 1000001, '1000-01-01'), seq FROM seq_1_to_300;
CREATE TABLE tkey (at datetime(6) PRIMARY KEY, v int);
INSERT INTO tkey SELECT at, v FROM ukey;
CREATE TABLE tsinc (id int PRIMARY KEY, at timestamp(6) NULL);
INSERT INTO tsinc SELECT seq, TIMESTAMPADD(SECOND, seq, '2024-01-01 00:00:00') FROM seq_1_to_100;
CREATE VIEW recent AS SELECT id, kind FROM events WHERE id < 100;
CREATE TABLE geo (id int PRIMARY KEY, p point);
CREATE TABLE zkey (d date PRIMARY KEY, v int);
INSERT INTO zkey VALUES ('2024-01-01', 1), ('0000-00-00', 2);
CREATE TABLE inc (id int PRIMARY KEY, name varchar(40), updated_at datetime(6) NOT NULL,
                  rev decimal(14,4));
INSERT INTO inc SELECT seq, CONCAT('row ', seq),
  TIMESTAMPADD(SECOND, seq DIV 100, '2024-01-01 00:00:00'),
  CASE WHEN seq % 250 = 0 THEN NULL ELSE seq / 100 END FROM seq_1_to_3000;
"""

ARCHIVE = """
CREATE TABLE logbook (line text, n int);
INSERT INTO logbook SELECT CONCAT('line ', seq), seq FROM seq_1_to_1200;
"""


def setUpModule():
    global MARIA
    MARIA = mariadbserver.start_for_module()
    try:
        # Sessions that do not pin their zone get one far from UTC: ferry's must not depend on it.
        MARIA.sql("SET GLOBAL time_zone = '+05:30'")
        MARIA.create_database("shop")
        MARIA.create_database("archive")
        MARIA.sql(SCHEMA, db="shop")
        MARIA.sql(ARCHIVE, db="archive")
        MARIA.sql(f"CREATE USER 'reader'@'%' IDENTIFIED BY '{READER_PASSWORD}';"
                  "GRANT SELECT ON shop.events TO 'reader'@'%';"
                  "GRANT INSERT ON shop.composite TO 'reader'@'%';")
    except BaseException:
        MARIA.stop()
        raise


def tearDownModule():
    if MARIA:
        MARIA.stop()


def ident(name):
    return "`" + name.replace("`", "``") + "`"


def maria_expr(name, data_type, iceberg_type):
    """SQL giving a column's value in the form the canonical values are computed from."""
    q = ident(name)
    if data_type == "bit":
        return f"CAST({q} AS UNSIGNED)"
    if data_type == "time":
        return f"CAST(TIME_TO_SEC({q}) * 1000000 AS SIGNED)"
    if data_type == "float":
        return f"CAST(CAST({q} AS DOUBLE) AS CHAR)"
    if iceberg_type == "date":
        return f"DATEDIFF({q}, '1970-01-01')"  # NULL for zero dates
    if iceberg_type in ("timestamp", "timestamptz"):
        return f"TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {q})"
    if iceberg_type == "string":
        return f"HEX(CONVERT({q} USING utf8mb4))"
    if iceberg_type == "binary":
        return f"HEX({q})"
    if iceberg_type == "uuid":
        return f"REPLACE(CAST({q} AS CHAR), '-', '')"
    return f"CAST({q} AS CHAR)"


def server_rows(db, table, fields, where=None):
    """The server's rows of `table`, each value in the form canon() takes."""
    types = dict(MARIA.rows(
        "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
        f"'{db}' AND TABLE_NAME = '{table.replace(chr(39), chr(39) * 2)}'"))
    cols = ", ".join(f"COALESCE({maria_expr(f['name'], types[f['name']], f['type'])}, '\\\\N')"
                     for f in fields)
    rows = []
    for r in MARIA.rows(f"SET time_zone = '+00:00'; SELECT {cols} FROM {ident(db)}.{ident(table)}"
                        + (f" WHERE {where}" if where else "")):
        row = []
        for f, v in zip(fields, r):
            if v == "\\N":
                v = None
            elif f["type"] == "string":
                v = bytes.fromhex(v).decode("utf-8")
            elif f["type"] == "boolean":
                v = int(v)
            row.append(v)
        rows.append(row)
    return rows


def assert_maria_table_matches(tc, db, table, iceberg_table=None, where=None):
    """The Iceberg table holds exactly the server's rows of db.table (those matching `where`),
    through DuckDB and icebird (decimals to 12 digits there: it reads them as JS numbers)."""
    iceberg_table = iceberg_table or table
    loc = tc.catalog_tables().get((NS, iceberg_table))
    tc.assertIsNotNone(loc, f"{iceberg_table} is not in the catalog: {tc.catalog_tables()}")
    seen = tc.inspect(loc)
    tc.assertEqual(seen["problems"], [], f"readers found problems in {iceberg_table}")
    fields = seen["schema"]["fields"]
    rows = server_rows(db, table, fields, where)
    duck = [[canon(f["type"], v, "duckdb") for f, v in zip(fields, r)] for r in rows]
    bird = [[canon(f["type"], v, "icebird") for f, v in zip(fields, r)] for r in rows]
    dec = [i for i, f in enumerate(fields) if f["type"].startswith("decimal")]
    names = [f["name"] for f in fields]
    expected = {r[0]: r for r in duck}
    diffs = []
    for r in seen["duckdb_rows"] if len(expected) == len(duck) else []:  # first column a key
        for n, x, y in zip(names, expected.get(r[0]) or [], r):
            if x != y:
                diffs.append(f"key {r[0]} column {n}: expected {str(x)[:80]!r}, read {str(y)[:80]!r}")
    tc.assertEqual(diffs[:10], [], f"{iceberg_table} via DuckDB")
    tc.assert_same_rows(duck, seen["duckdb_rows"], f"{iceberg_table} via DuckDB")
    tc.assert_same_rows([approx_decimals(r, dec) for r in bird],
                        [approx_decimals(r, dec) for r in seen["icebird_rows"]],
                        f"{iceberg_table} via icebird")
    return seen


class MysqlSourceTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        self.env = {"MARIADB_PASSWORD": MARIA.password}

    def configure(self, source):
        self.write_pipeline(PIPELINE.format(source=source))

    def url_source(self, streams=None, chunk_rows=None, extra="", url=None):
        text = f'  url: "{url or MARIA.url("shop")}"\n'
        if chunk_rows:
            text += f"  chunk_rows: {chunk_rows}\n"
        text += extra
        if streams:
            text += "  streams:\n" + "".join(f"    - {s}\n" for s in streams)
        self.configure(text)

    def run_ferry(self, *args, env=None, check=True):
        e = dict(self.env)
        e.update(env or {})
        return self.ferry(*args, "-c", self.pipeline, env=e, check=check)

    def rows_written(self, stdout, stream):
        for line in stdout.splitlines():
            parts = line.split()
            if parts and parts[0] == stream:
                return int(parts[-5])
        self.fail(f"no report line for {stream}:\n{stdout}")

    def marker(self, table):
        loc = self.catalog_tables().get((NS, table)) if os.path.exists(
            os.path.join(self.dir, "warehouse", "catalog.db")) else None
        if loc is None:
            return None
        with open(loc.removeprefix("file://")) as f:
            m = json.load(f).get("properties", {}).get("ferry.marker.maria")
        return json.loads(m) if m else None

    def state_run(self, table):
        path = os.path.join(self.dir, "state.json")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            for s in json.load(f)["streams"]:
                if s["stream"] == table:
                    return s["state"].get("run")
        return None

    def test_discover_check_and_sync_give_the_server_values_to_every_reader(self):
        self.url_source(chunk_rows=3000, extra="  databases: archive\n",
                        streams=["all_types", "events", "sparse", "composite", "'Odd `Tick` Ü'",
                                 "recent", "archive.logbook", "shop.inc"])
        disc = json.loads(self.run_ferry("discover", "--json").stdout)
        by_name = {s["name"]: s for s in disc}
        self.assertIn("archive.logbook", by_name)
        self.assertIn("geo", by_name)
        types = {c["name"]: c["iceberg_type"] for c in by_name["all_types"]["columns"]}
        self.assertEqual(types, {
            "id": "int", "ti": "int", "tiu": "int", "si": "int", "siu": "int", "mi": "int",
            "miu": "int", "i": "int", "iu": "long", "bi": "long", "biu": "decimal(20,0)",
            "f": "float", "d": "double", "n10": "decimal(10,2)", "n38": "decimal(38,10)",
            "n65": "string", "b1": "boolean", "b5": "long", "b64": "decimal(20,0)", "dt": "date",
            "dtm": "timestamp", "dtm6": "timestamp", "ts": "timestamptz", "tm": "long",
            "tm6": "long", "y": "int", "c": "string", "vc": "string", "tx": "string",
            "lt": "string", "vcl": "string", "bn": "binary", "vb": "binary", "bl": "binary",
            "e": "string", "st": "string", "j": "string", "u": "uuid", "ip": "string",
            "nn_dt": "date", "gen": "long", "gens": "string"})
        nullable = {c["name"]: c["nullable"] for c in by_name["all_types"]["columns"]}
        self.assertFalse(nullable["id"])
        self.assertTrue(nullable["nn_dt"])  # NOT NULL, but it may hold zero dates (read as NULL)
        self.assertEqual(by_name["all_types"]["primary_key"], ["id"])
        self.assertEqual(by_name["composite"]["primary_key"], ["a", "b"])
        self.assertEqual(by_name["events"]["chunking"], "ranges of primary key id")
        self.assertEqual(by_name["composite"]["chunking"], "ranges of primary key (a, b)")
        self.assertEqual(by_name["archive.logbook"]["chunking"], "whole table (no primary key)")
        self.assertEqual(by_name["recent"]["chunking"], "whole view")
        self.assertIn("updated_at", by_name["inc"]["cursor_candidates"])
        self.assertIn("cannot map type point of column `p`", by_name["geo"]["error"])

        check = self.run_ferry("check")
        self.assertIn("MariaDB 10.11", check.stdout)
        self.assertNotIn(MARIA.password, check.stdout + check.stderr)

        out = self.run_ferry("sync")
        self.assertNotIn(MARIA.password, out.stdout + out.stderr)
        seen = assert_maria_table_matches(self, "shop", "all_types")
        self.assertEqual(seen["schema"]["identifier-field-ids"], [1])
        events = assert_maria_table_matches(self, "shop", "events")
        self.assertEqual(int(events["summary"]["total-records"]), 20000 - 20000 // 97)
        self.assertGreaterEqual(len(events["data_files"]), 6)  # key ranges of 3000 ids
        sparse = assert_maria_table_matches(self, "shop", "sparse")
        self.assertGreaterEqual(len(sparse["data_files"]), 1)
        self.assertIn("boundaries from the data", out.stderr)  # sparse keys: walked, not a grid
        assert_maria_table_matches(self, "shop", "composite")
        assert_maria_table_matches(self, "shop", "Odd `Tick` Ü")
        assert_maria_table_matches(self, "shop", "recent")
        assert_maria_table_matches(self, "archive", "logbook", "archive.logbook")
        assert_maria_table_matches(self, "shop", "inc")
        with open(os.path.join(self.dir, "state.json")) as f:
            state = json.load(f)
        self.assertTrue(all(s["state"]["published"] for s in state["streams"]))
        plans = {s["stream"]: s["state"]["plan"] for s in state["streams"]}
        self.assertEqual(plans["composite"]["key"], '["a","b"]')
        self.assertGreater(len(plans["sparse"].get("bounds", [])), 0)

        # Changes, then a sync with small chunks of the composite key: replaced exactly.
        MARIA.sql("UPDATE events SET kind = 'changed' WHERE id % 5 = 0; "
                  "DELETE FROM events WHERE id % 7 = 0; "
                  "INSERT INTO composite SELECT 'new', seq, 'n' FROM seq_1_to_40;", db="shop")
        self.configure(f"""  url: "{MARIA.url('shop')}"
  chunk_rows: 60
  streams:
    - name: events
      chunk_rows: 5000
    - composite
    - 'Odd `Tick` Ü'
    - ukey
    - tkey
""")
        self.run_ferry("sync")
        assert_maria_table_matches(self, "shop", "events")
        composite = assert_maria_table_matches(self, "shop", "composite")
        self.assertGreaterEqual(len(composite["data_files"]), 8)
        odd = assert_maria_table_matches(self, "shop", "Odd `Tick` Ü")
        self.assertGreaterEqual(len(odd["data_files"]), 5)  # ranges of a binary key
        # Keys beyond 2^63 (bigint unsigned) and of datetimes: ranges in the server's order.
        ukey = assert_maria_table_matches(self, "shop", "ukey")
        self.assertGreaterEqual(len(ukey["data_files"]), 5)
        tkey = assert_maria_table_matches(self, "shop", "tkey")
        self.assertGreaterEqual(len(tkey["data_files"]), 5)

    def test_host_keys_and_several_databases_name_streams_by_database(self):
        self.configure(f"""  host: 127.0.0.1
  port: {MARIA.port}
  user: root
  password: ${{MARIADB_PASSWORD}}
  databases: archive, shop
  streams:
    - logbook
    - shop.sparse
""")
        self.run_ferry("sync")
        assert_maria_table_matches(self, "archive", "logbook")
        assert_maria_table_matches(self, "shop", "sparse", "shop.sparse")

    def test_crash_at_every_fault_point_of_a_load_then_resume_exactly_once(self):
        points = [("source.mid_chunk", 3), ("sink.data_written", 3), ("sink.before_commit", 3),
                  ("sink.after_commit", 3), ("state.after_write", 4),
                  ("sink.before_publish", 1), ("sink.after_publish", 1)]
        self.url_source(chunk_rows=2000, streams=["events"])
        for point, hit in points:
            with self.subTest(point=point):
                for name in ("warehouse", "state.json"):
                    p = os.path.join(self.dir, name)
                    if os.path.isdir(p):
                        shutil.rmtree(p)
                    elif os.path.exists(p):
                        os.remove(p)
                p = self.run_ferry("sync", env={"FERRY_FAULT": f"{point}:{hit}"}, check=False)
                self.assertEqual(p.returncode, -signal.SIGKILL,
                                 f"{point}:{hit} did not kill the sync\n{p.stderr}")
                self.assertIn(f"fault point {point} reached", p.stderr)
                m = self.marker("events") or {}
                landed = m if m.get("run") == self.state_run("events") else {}
                again = self.run_ferry("sync")
                events = assert_maria_table_matches(self, "shop", "events")
                n = int(MARIA.rows("SELECT COUNT(*) FROM events", db="shop")[0][0])
                self.assertEqual(int(events["summary"]["total-records"]), n)
                # Chunks that had landed were not read again: this run wrote only the rest.
                before = n if landed.get("published") else landed.get("rows", 0)
                self.assertEqual(self.rows_written(again.stdout, "events") + before, n,
                                 f"{before} rows had landed before the restart")

    def test_incremental_reads_ties_at_the_last_value_and_compares_decimals_as_numbers(self):
        self.configure(f"""  url: "{MARIA.url('shop')}"
  streams:
    - name: inc
      mode: incremental
      cursor: updated_at
""")
        MARIA.sql("DROP TABLE IF EXISTS inc2; CREATE TABLE inc2 LIKE inc; "
                  "INSERT INTO inc2 SELECT * FROM inc;", db="shop")
        first = self.run_ferry("sync")
        self.assertEqual(self.rows_written(first.stdout, "inc"), 3000)
        self.assertIn('"2024-01-01 00:00:30.000000"', first.stdout)  # the exact text
        assert_maria_table_matches(self, "shop", "inc")
        # Rows arriving at the last committed value, one changed there without moving the cursor.
        MARIA.sql("INSERT INTO inc SELECT 3000 + seq, CONCAT('tied ', seq), "
                  "'2024-01-01 00:00:30', seq FROM seq_1_to_50; "
                  "UPDATE inc SET name = 'changed in place' WHERE id = 3000;", db="shop")
        second = self.run_ferry("sync")
        self.assertEqual(self.rows_written(second.stdout, "inc"), 51)
        assert_maria_table_matches(self, "shop", "inc")
        snapshots = self.snapshot_count(NS, "inc")
        third = self.run_ferry("sync")
        self.assertIn("nothing new", third.stdout)
        self.assertEqual(self.rows_written(third.stdout, "inc"), 0)
        self.assertEqual(self.snapshot_count(NS, "inc"), snapshots)
        # A decimal cursor: 29.9900 < 100.0011 as numbers (not as text).
        self.configure(f"""  url: "{MARIA.url('shop')}"
  streams:
    - name: inc2
      mode: incremental
      cursor: rev
""")
        first = self.run_ferry("sync")
        self.assertEqual(self.rows_written(first.stdout, "inc2"), 3000 - 12)  # 12 NULL cursors
        self.assertIn('"29.9900"', first.stdout)
        MARIA.sql("UPDATE inc2 SET name = 'bumped', rev = 100 + id / 10000 WHERE id % 11 = 0; "
                  "INSERT INTO inc2 VALUES (3001, 'new', '2025-01-01', 1000.5), "
                  "(3002, 'no cursor', '2025-01-01', NULL);", db="shop")
        second = self.run_ferry("sync")
        self.assertEqual(self.rows_written(second.stdout, "inc2"), 3000 // 11 + 1)
        assert_maria_table_matches(self, "shop", "inc2", where="rev IS NOT NULL")

    def test_incremental_window_killed_at_each_fault_point_lands_once(self):
        MARIA.sql("DROP TABLE IF EXISTS inc3; CREATE TABLE inc3 (id int PRIMARY KEY, "
                  "name varchar(40), v bigint NOT NULL); INSERT INTO inc3 SELECT seq, "
                  "CONCAT('row ', seq), seq DIV 10 FROM seq_1_to_3000;", db="shop")
        self.configure(f"""  url: "{MARIA.url('shop')}"
  streams:
    - name: inc3
      mode: incremental
      cursor: v
""")
        self.run_ferry("sync")
        for n, point in enumerate(("source.mid_chunk", "sink.data_written", "sink.before_commit",
                                   "sink.after_commit", "state.after_write")):
            with self.subTest(point=point):
                # > 1024 rows move: the mid-read fault point is reached.
                MARIA.sql(f"UPDATE inc3 SET name = 'round {n}', v = {(n + 1) * 10000} + id "
                          f"WHERE id % 2 = {n % 2}", db="shop")
                p = self.run_ferry("sync", env={"FERRY_FAULT": point}, check=False)
                self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr}")
                self.run_ferry("sync")
                seen = assert_maria_table_matches(self, "shop", "inc3")
                self.assertEqual(len(seen["duckdb_rows"]), 3000)

    def test_timestamp_cursor_is_kept_in_utc_whatever_the_server_zone(self):
        self.configure(f"""  url: "{MARIA.url('shop')}"
  streams:
    - name: tsinc
      mode: incremental
      cursor: at
""")
        first = self.run_ferry("sync")
        self.assertEqual(self.rows_written(first.stdout, "tsinc"), 100)
        # The server's own zone is +05:30: the cursor is the UTC text all the same.
        self.assertIn('"2024-01-01 00:01:40.000000"', first.stdout)
        MARIA.sql("SET time_zone = '+00:00'; UPDATE tsinc SET at = '2024-01-01 00:01:40.000001' "
                  "WHERE id = 7; INSERT INTO tsinc VALUES (101, '2024-01-01 00:01:39');",
                  db="shop")
        second = self.run_ferry("sync")
        self.assertEqual(self.rows_written(second.stdout, "tsinc"), 1)  # id 7 only: 101 is older
        assert_maria_table_matches(self, "shop", "tsinc", where="id <> 101")

    def test_verify_reads_the_source_as_the_sync_does_and_names_the_differences(self):
        MARIA.sql("DROP TABLE IF EXISTS vfy; CREATE TABLE vfy (id int PRIMARY KEY, v varchar(10), "
                  "d double, at datetime(6)); INSERT INTO vfy SELECT seq, CONCAT('ü', seq), "
                  "seq / 7, TIMESTAMPADD(MICROSECOND, seq, '2024-01-01') FROM seq_1_to_500;",
                  db="shop")
        self.url_source(streams=["all_types", "vfy", "archive.logbook"],
                        extra="  databases: archive\n")
        self.run_ferry("sync")
        p = self.run_ferry("verify", "--json", check=False)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        tables = {t["stream"]: t for t in json.loads(p.stdout)}
        self.assertEqual(tables["all_types"]["source_rows"], 6)
        self.assertEqual(tables["vfy"]["source_rows"], 500)
        self.assertEqual(tables["archive.logbook"]["source_rows"], 1200)
        MARIA.sql("UPDATE vfy SET d = 0.5 WHERE id = 2; DELETE FROM vfy WHERE id = 3; "
                  "INSERT INTO vfy (id) VALUES (9000);", db="shop")
        p = self.run_ferry("verify", "--json", check=False)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        t = {t["stream"]: t for t in json.loads(p.stdout)}["vfy"]
        self.assertEqual((t["missing"], t["extra"], t["different"]), (1, 1, 1))

    def test_cursor_errors_name_the_column_and_the_candidates(self):
        self.configure(f"""  url: "{MARIA.url('shop')}"
  streams:
    - name: all_types
      mode: incremental
      cursor: e
""")
        p = self.run_ferry("sync", check=False)
        self.assertNotEqual(p.returncode, 0)
        # (information_schema holds names in utf8mb3: the server shows the emoji as '?')
        self.assertIn("column e (enum('small','medium','large ", p.stderr)
        self.assertIn(")) cannot be the cursor: ENUM and SET values sort by their position",
                      p.stderr)
        self.assertIn("candidates: id, ti", p.stderr)

    def test_settings_errors_name_the_key_and_the_fix(self):
        cases = [
            (f'  url: "{MARIA.url("shop")}"\n  host: 127.0.0.1\n',
             "source: give either url or host, port, user and database, not both"),
            ('  url: "postgres://x@h/db"\n', "source.url must start with mysql:// or mariadb://"),
            ("  host: 127.0.0.1\n  user: root\n", "source: name the database to read"),
            ("  url: mysql://@127.0.0.1/shop\n", "source: user is missing"),
            (f'  url: "{MARIA.url("shop")}"\n  schemas: x\n', "unknown key 'schemas'"),
            (f'  url: "{MARIA.url("shop")}"\n  databases: nope\n',
             "database `nope` does not exist"),
        ]
        for source, expected in cases:
            with self.subTest(expected=expected):
                self.configure(source)
                p = self.run_ferry("check", check=False)
                self.assertNotEqual(p.returncode, 0)
                self.assertIn(expected, p.stderr)

    def test_wrong_password_and_unreachable_server_are_clear_without_the_password(self):
        self.url_source(url=MARIA.url("shop", password_ref="not-the-Pa55"))
        p = self.run_ferry("check", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("cannot log in to the MySQL/MariaDB server at 127.0.0.1", p.stderr)
        self.assertIn("check source.user and source.password", p.stderr)
        self.assertNotIn("not-the-Pa55", p.stderr + p.stdout)
        port = mariadbserver.free_port()
        self.url_source(url=f"mariadb://root:${{MARIADB_PASSWORD}}@127.0.0.1:{port}/shop")
        p = self.run_ferry("sync", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(f"cannot connect to the MySQL/MariaDB server at 127.0.0.1:{port}", p.stderr)
        self.assertIn("check source.host and source.port", p.stderr)
        self.url_source(url=MARIA.url("missing_db"))
        p = self.run_ferry("check", check=False)
        self.assertIn("cannot open database 'missing_db'", p.stderr)

    def test_missing_select_privilege_names_the_grant(self):
        url = f"mysql://reader:{READER_PASSWORD}@127.0.0.1:{MARIA.port}/shop"
        self.url_source(url=url, streams=["events", "composite"])
        disc = json.loads(self.run_ferry("discover", "--json").stdout)
        names = sorted(s["name"] for s in disc)
        self.assertEqual(names, ["composite", "events"])  # what the user may see
        check = self.run_ferry("check", check=False)
        self.assertNotEqual(check.returncode, 0)
        self.assertIn("GRANT SELECT ON `shop`.`composite` TO 'reader'@'%'", check.stderr)
        p = self.run_ferry("sync", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("user 'reader'@'%' may not read shop.composite: GRANT SELECT ON "
                      "`shop`.`composite` TO 'reader'@'%'", p.stderr)
        self.assertNotIn(READER_PASSWORD, p.stderr + p.stdout)
        self.url_source(url=url, streams=["events"])
        self.run_ferry("sync")
        assert_maria_table_matches(self, "shop", "events")

    def test_cdc_on_a_server_without_a_binary_log_names_every_fix(self):
        url = f"mysql://reader:{READER_PASSWORD}@127.0.0.1:{MARIA.port}/shop"
        self.configure(f"""  url: "{url}"
  mode: cdc
  streams: [events]
""")
        check = self.run_ferry("check", check=False)
        self.assertNotEqual(check.returncode, 0)
        self.assertIn("stream events (cdc) reads the server's binary log, which needs:",
                      check.stderr)
        # What the server lacks, each with its fix (this test server runs without a log).
        self.assertIn("the binary log is off (log_bin = OFF): add log_bin", check.stderr)
        self.assertIn("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'reader'@'%'",
                      check.stderr)
        self.configure(f"""  url: "{url}"
  streams:
    - name: events
      mode: cdc_only
""")
        p = self.run_ferry("sync", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("the binary log is off", p.stderr)
        if os.path.exists(os.path.join(self.dir, "warehouse", "catalog.db")):
            self.assertEqual(self.catalog_tables(), {})

    def test_values_iceberg_cannot_hold_and_unmapped_types_stop_the_sync(self):
        self.url_source(streams=["zkey"])
        p = self.run_ferry("sync", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("table shop.zkey, column `d` (date), the row with `d` = 0000-00-00: the "
                      "zero date 0000-00-00 in a key column", p.stderr)
        self.url_source(streams=["geo"])
        p = self.run_ferry("sync", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("cannot map type point of column `p`", p.stderr)


class MysqlToPostgresTest(ferrytest.FerryTestCase):
    """MariaDB -> PostgreSQL: both servers asked for their rows, each value printed by the
    server's own functions in one text form."""

    def test_full_refresh_and_incremental_into_postgres(self):
        pg = pgserver.start_for_module()
        try:
            pg.psql("CREATE DATABASE replica")
            env = {"MARIADB_PASSWORD": MARIA.password, "PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
            MARIA.sql("DROP TABLE IF EXISTS to_pg; CREATE TABLE to_pg (id bigint PRIMARY KEY, "
                      "kind varchar(20) CHARACTER SET latin1, amount decimal(12,2), "
                      "at datetime(6), u bigint unsigned, raw varbinary(8));"
                      "INSERT INTO to_pg SELECT seq, CONCAT('kind é', seq % 13), seq * 1.25, "
                      "TIMESTAMPADD(MICROSECOND, seq * 1000001, '2024-01-01'), "
                      "18446744073709551615 - seq, UNHEX(HEX(seq)) FROM seq_1_to_5000;",
                      db="shop")
            self.write_pipeline(f"""
name: topg
source:
  type: mysql
  url: "{MARIA.url('shop')}"
  chunk_rows: 1000
  streams:
    - composite
    - name: to_pg
      mode: incremental
      cursor: at
destination:
  type: postgres
  dsn: "{pg.dsn('replica')}"
  schema: public
state: ./state.json
""")
            def check():
                for table, maria_cols, pg_cols in (
                        ("to_pg",
                         "CAST(id AS CHAR), HEX(CONVERT(kind USING utf8mb4)), CAST(amount AS CHAR), "
                         "DATE_FORMAT(at, '%Y-%m-%d %H:%i:%s.%f'), CAST(u AS CHAR), HEX(raw)",
                         "id::text, encode(convert_to(kind, 'UTF8'), 'hex'), amount::text, "
                         "to_char(at, 'YYYY-MM-DD HH24:MI:SS.US'), u::text, "
                         "upper(encode(raw, 'hex'))"),
                        ("composite", "HEX(CONVERT(a USING utf8mb4)), CAST(b AS CHAR), "
                         "HEX(CONVERT(v USING utf8mb4))",
                         "encode(convert_to(a, 'UTF8'), 'hex'), b::text, "
                         "encode(convert_to(v, 'UTF8'), 'hex')")):
                    want = sorted(tuple(v.lower() if v else v for v in r) for r in MARIA.rows(
                        f"SELECT {maria_cols} FROM {table}", db="shop"))
                    got = sorted(tuple(v.lower() if v else v for v in r) for r in pg.query_json(
                        f"SELECT COALESCE(json_agg(json_build_array({pg_cols})), '[]') "
                        f"FROM {table}", db="replica"))
                    self.assertEqual(len(got), len(want), table)
                    self.assertEqual(got, want, table)

            self.ferry("sync", "-c", self.pipeline, env=env)
            check()
            MARIA.sql("UPDATE to_pg SET kind = 'moved', at = '2030-01-01' WHERE id % 10 = 0; "
                      "INSERT INTO to_pg VALUES (9000, 'new', 1.5, '2030-01-01', 0, X'00');",
                      db="shop")
            out = self.ferry("sync", "-c", self.pipeline, env=env)
            self.assertIn("to_pg", out.stdout)
            check()
        finally:
            pg.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
