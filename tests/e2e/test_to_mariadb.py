"""PostgreSQL -> MariaDB: a source database on a PostgreSQL server and a destination database on a
MariaDB server, both started by the test. Every check asks both servers for their rows, each value
printed by the server's own functions in a common text form (timestamps in UTC with 6 decimals,
exact decimals, hex for bytes, JSON for lists), and compares them: no missing row, no extra row,
no stale version. The crash tests kill the sync at each fault point of the protocol (data written,
before and after COMMIT, state file, acknowledgement; for a full refresh also before and after the
swap of the load table) and sync again. Values MariaDB cannot hold stop the sync with the column
and the fix, and nothing of the failed commit lands."""
import decimal
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferrytest  # noqa: E402
import mariadbserver  # noqa: E402
import pgserver  # noqa: E402

PG = None
MARIA = None
ODD = 'Odd `Tick` "Q" Ünï'

PIPELINE = """
name: {name}
source:
  type: postgres
  dsn: "{dsn}"
  streams:
{streams}
destination:
{destination}
state: ./state.json
{top}"""

SCHEMA = r"""
CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, amount numeric(12,2), qty bigint,
                    ratio float8, r4 real, at timestamptz, ts timestamp, day date, tm time,
                    flag boolean, doc jsonb, ref uuid, raw bytea, tags text[], nums int[], big text);
INSERT INTO items SELECT i, 'item ' || i, i * 1.25, i * 1000, i / 7.0, i / 3.0,
    timestamptz '2024-01-01 00:00:00+00' + i * interval '61.000001 seconds',
    timestamp '1999-12-31 23:59:59.5' + i * interval '1 hour', date '2020-01-01' + i,
    time '00:00:00' + i * interval '1.5 seconds', i % 2 = 0,
    jsonb_build_object('k', i, 's', 'q''"\'), md5(i::text)::uuid, decode(md5(i::text), 'hex'),
    ARRAY['a' || i, NULL, 'ü"x'], ARRAY[i, -i],
    CASE WHEN i % 10 = 0 THEN (SELECT string_agg(md5(i::text || g::text), '')
                               FROM generate_series(1, 400) g) END
  FROM generate_series(1, 3000) i;
CREATE TABLE "Odd `Tick` ""Q"" Ünï" ("Key" text PRIMARY KEY, "sel`ect" int, "from" text,
                                     "Größe" numeric(38,10), "order" timestamptz);
INSERT INTO "Odd `Tick` ""Q"" Ünï" SELECT 'k' || i, i, 'from ' || i, i * 1.0000000001,
    timestamptz '1000-01-01 00:00:00+00' + i * interval '1 day' FROM generate_series(1, 300) i;
INSERT INTO "Odd `Tick` ""Q"" Ünï" ("Key", "from", "Größe") VALUES
    ('a', 'plain', 0), ('a ', 'trailing space', -1), ('A', 'capital', 1), ('ü', 'umlaut', 2),
    ('', 'empty', 3), (' lead', E'tab\there', 4), (E'tab\tkey', E'new\nline', 5),
    ('quote''s', 'back\slash', 6), ('back`tick', '"double"', 7), ('emoji 😀', '😀', 8),
    ('max', 'max', 9999999999999999999999999999.9999999999),
    ('min', 'min', -9999999999999999999999999999.9999999999);
CREATE TABLE composite (a text, b bigint, v text, PRIMARY KEY (a, b));
INSERT INTO composite SELECT 'g' || (i % 7), i, 'v' || i FROM generate_series(1, 500) i;
CREATE TABLE nokey (v text, n int);
INSERT INTO nokey SELECT 'v' || i, i FROM generate_series(1, 1200) i;
"""

STREAMS = ["items", ODD, "composite"]


def setUpModule():
    global PG, MARIA
    PG = pgserver.start_for_module()
    try:
        MARIA = mariadbserver.start_for_module()
    except BaseException:
        PG.stop()
        raise


def tearDownModule():
    for server in (MARIA, PG):
        if server:
            server.stop()


def pg_ident(name):
    return '"' + name.replace('"', '""') + '"'


def maria_ident(name):
    return "`" + name.replace("`", "``") + "`"


def sql_text(s):
    return "'" + s.replace("\\", "\\\\").replace("'", "''") + "'"


def time_micros(text):
    h, m, s = text.split(":")
    sec, _, frac = s.partition(".")
    return ((int(h) * 60 + int(m)) * 60 + int(sec)) * 1000000 + int((frac + "000000")[:6])


def f32(v):
    return struct.unpack("<f", struct.pack("<f", float(v)))[0]


# Per PostgreSQL type: the expression printing a value on each server, and how the two texts
# are made comparable.
def pg_expr(col, typ):
    q = pg_ident(col)
    if typ == "timestamp with time zone":
        return f"to_char({q} AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')"
    if typ == "timestamp without time zone":
        return f"to_char({q}, 'YYYY-MM-DD HH24:MI:SS.US')"
    if typ == "bytea":
        return f"encode({q}, 'hex')"
    if typ.endswith("[]"):
        return f"array_to_json({q})"
    return f"{q}::text"


def maria_expr(col, typ):
    q = maria_ident(col)
    if typ.startswith("timestamp"):
        return f"DATE_FORMAT({q}, '%Y-%m-%d %H:%i:%s.%f')"
    if typ == "bytea":
        return f"LOWER(HEX({q}))"
    if typ == "real":
        return f"CAST({q} + 0e0 AS CHAR)"
    return f"CAST({q} AS CHAR)"


def normalize(typ, v):
    if v is None:
        return None
    if typ == "boolean":
        return v in ("true", "1", True)
    if typ == "double precision":
        return float(v)
    if typ == "real":
        return f32(v)
    if typ.startswith("numeric"):
        return decimal.Decimal(v)
    if typ == "time without time zone":
        return time_micros(v)
    if typ.endswith("[]"):
        return json.dumps(json.loads(v) if isinstance(v, str) else v, ensure_ascii=False)
    return v


class ToMariaDbTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD,
                    "MARIADB_PASSWORD": mariadbserver.ROOT_PASSWORD}
        self.db = PG.create_test_database("m", self._testMethodName)
        short = self._testMethodName.removeprefix("test_")[:40]
        self.target = MARIA.create_database("dst_" + short)
        self.state_db = "st_" + short
        MARIA.drop_database(self.state_db)
        PG.psql(SCHEMA, db=self.db)

    def tearDown(self):
        PG.drop_test_database(self.db)
        MARIA.drop_database(self.target)
        MARIA.drop_database(self.state_db)
        super().tearDown()

    def destination(self, password_ref="${MARIADB_PASSWORD}", port=None):
        return ("  type: mariadb\n"
                f"  url: \"mysql://root:{password_ref}@127.0.0.1:{port or MARIA.port}/"
                f"{self.target}\"\n"
                f"  state_database: {self.state_db}\n")

    def configure(self, streams=None, mode="cdc", top="", destination=None):
        streams = streams or STREAMS
        text = "\n".join(f"    - name: {json.dumps(t)}\n      mode: {mode}\n      chunk_rows: 1000"
                         for t in streams)
        self.name = self.db
        self.write_pipeline(PIPELINE.format(name=self.name, dsn=PG.dsn(self.db), streams=text,
                                            destination=destination or self.destination(),
                                            top=top))

    def sync(self, **kw):
        env = dict(self.env)
        env.update(kw.pop("env", {}))
        return self.ferry("sync", "--once", "-c", self.pipeline, env=env, **kw)

    def sql(self, text):
        return PG.psql(text, db=self.db)

    def maria(self, text):
        return MARIA.sql(text, db=self.target)

    # ---- comparing ----
    def pg_columns(self, table):
        out = self.sql("SELECT attname || chr(9) || format_type(atttypid, atttypmod) FROM "
                       f"pg_attribute WHERE attrelid = {sql_text(pg_ident(table))}::regclass "
                       "AND attnum > 0 AND NOT attisdropped ORDER BY attnum")
        return [tuple(line.split("\t")) for line in out.split("\n") if line]

    def source_rows(self, table, cols):
        exprs = ", ".join(pg_expr(c, t) for c, t in cols)
        out = self.sql(f"SELECT json_build_array({exprs})::text FROM {pg_ident(table)}")
        return self.rows_from_json(out, cols)

    def target_rows(self, table, cols):
        exprs = ", ".join(maria_expr(c, t) for c, t in cols)
        out = self.maria(f"SELECT JSON_ARRAY({exprs}) FROM {maria_ident(table)}")
        return self.rows_from_json(out, cols)

    @staticmethod
    def rows_from_json(out, cols):
        rows = []
        for line in out.split("\n"):
            if line:
                values = json.loads(line)
                rows.append(tuple(normalize(t, v) for (_, t), v in zip(cols, values)))
        return sorted(rows, key=repr)

    def assert_matches(self, *tables):
        for t in tables or STREAMS:
            cols = self.pg_columns(t)
            src = self.source_rows(t, cols)
            dst = self.target_rows(t, cols)
            src_set, dst_set = set(src), set(dst)
            self.assertEqual(len(dst), len(dst_set), f"{t}: duplicate rows in the destination")
            if src != dst:
                missing = [r for r in src if r not in dst_set][:2]
                extra = [r for r in dst if r not in src_set][:2]
                self.fail(f"{t}: {len(src)} source rows, {len(dst)} destination rows; missing "
                          f"(or stale) e.g. {missing}; extra e.g. {extra}")

    def checkpoint(self, stream):
        out = MARIA.sql(f"SELECT marker FROM {self.state_db}.checkpoints WHERE pipeline = "
                        f"{sql_text(self.name)} AND split = {sql_text(stream)}").strip()
        return json.loads(out) if out else None

    def crash(self, point, hit=1):
        p = self.sync(env={"FERRY_FAULT": f"{point}:{hit}"}, check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL,
                         f"{point}:{hit} did not kill the sync (exit {p.returncode})\n{p.stderr}")
        self.assertIn(f"fault point {point} reached", p.stderr)

    # A mix of every kind of change, in several transactions, with values at MariaDB's limits.
    def change(self, salt):
        self.sql(f"""
            BEGIN;
            INSERT INTO items (id, name, amount, qty, ratio, r4, at, ts, day, tm, flag, doc, ref,
                               raw, tags, nums, big)
              SELECT i, E'new {salt}\t"q''\\\\ 😀\n' || i, -i, NULL, -1.5e300, 3.4e38,
                     timestamptz '1000-01-01 00:00:00.000001+00',
                     timestamp '9999-12-31 23:59:59.999999', date '9999-12-31',
                     time '23:59:59.999999', NULL, '{{"a": [1, 2]}}', gen_random_uuid(),
                     '\\x00ff', '{{}}', NULL, NULL
              FROM generate_series((SELECT max(id) + 1 FROM items),
                                   (SELECT max(id) + 50 FROM items)) i;
            UPDATE items SET name = name || ' {salt}', amount = amount + 1 WHERE id % 37 = 0;
            DELETE FROM items WHERE id % 41 = 0;
            COMMIT;
            BEGIN;
            INSERT INTO items (id, name) VALUES (900000 + {salt}, 'short-lived');
            UPDATE items SET name = 'updated twice' WHERE id = 900000 + {salt};
            DELETE FROM items WHERE id = 900000 + {salt};
            UPDATE items SET name = 'first' WHERE id = 11;
            UPDATE items SET name = 'second {salt}' WHERE id = 11;
            COMMIT;
            UPDATE items SET id = -id WHERE id = (SELECT min(id) FROM items WHERE id % 43 = 0
                                                  AND id > 0);
            UPDATE items SET qty = coalesce(qty, 0) + 1 WHERE id % 20 = 0;
            UPDATE {pg_ident(ODD)} SET "from" = 'changed {salt}', "sel`ect" = -1
              WHERE "Key" IN ('a', 'a ', 'k9', 'k18', '') OR "Key" LIKE 'k%7';
            DELETE FROM {pg_ident(ODD)} WHERE "Key" IN ('A', 'k13', 'k{salt}');
            INSERT INTO {pg_ident(ODD)} ("Key", "from", "order") VALUES
              ('new {salt} ', 'trailing', now()), ('NEW {salt}', 'caps', NULL)
              ON CONFLICT DO NOTHING;
            UPDATE composite SET v = 'c{salt}' WHERE b % 11 = 0;
            DELETE FROM composite WHERE b % 13 = {salt % 13};
            INSERT INTO composite VALUES ('g0 ', {salt}, 'space'), ('G0', {salt}, 'caps')
              ON CONFLICT DO NOTHING;
        """)

    # ---- the tests ----
    def test_backfill_then_changes_land_exactly_with_keys_types_and_odd_names(self):
        self.configure()
        p = self.ferry("check", "-c", self.pipeline, env=self.env)
        self.assertIn("exactly-once (rows and checkpoint row in one MySQL/MariaDB transaction",
                      p.stdout)
        self.assertIn("MariaDB 10.", p.stdout)
        self.assertNotIn(mariadbserver.ROOT_PASSWORD, p.stdout + p.stderr)
        p = self.sync()
        self.assertIn("new load", p.stdout)
        self.assert_matches()
        # Keys and types as documented in mysql_sink.h.
        types = MARIA.rows("SELECT COLUMN_NAME, COLUMN_TYPE, COLUMN_KEY, COLUMN_COMMENT FROM "
                           "information_schema.COLUMNS WHERE TABLE_SCHEMA = "
                           f"'{self.target}' AND TABLE_NAME = 'items' ORDER BY ORDINAL_POSITION")
        self.assertEqual([(c, t) for c, t, _, _ in types], [
            ("id", "int(11)"), ("name", "longtext"), ("amount", "decimal(12,2)"),
            ("qty", "bigint(20)"), ("ratio", "double"), ("r4", "float"), ("at", "datetime(6)"),
            ("ts", "datetime(6)"), ("day", "date"), ("tm", "time(6)"), ("flag", "tinyint(1)"),
            ("doc", "longtext"), ("ref", "char(36)"), ("raw", "longblob"), ("tags", "longtext"),
            ("nums", "longtext"), ("big", "longtext")])
        self.assertEqual(types[0][2], "PRI")
        self.assertEqual(types[6][3], "ferry:timestamptz")
        self.assertEqual(types[14][3], "ferry:list<string>")
        key = MARIA.rows("SELECT COLUMN_NAME, COLUMN_TYPE, COLLATION_NAME FROM "
                         "information_schema.COLUMNS WHERE TABLE_SCHEMA = "
                         f"'{self.target}' AND COLUMN_KEY = 'PRI' AND TABLE_NAME = "
                         f"{sql_text(ODD)}")
        self.assertEqual(key, [("Key", "varchar(768)", "utf8mb4_nopad_bin")])
        # No load table is left behind.
        self.assertEqual(MARIA.sql(f"SHOW TABLES FROM {self.state_db}").split(),
                         ["checkpoints", "loads"])
        self.change(1)
        self.change(2)
        p = self.sync()
        self.assertIn("cdc: changes", p.stdout)
        self.assert_matches()
        self.assertEqual(self.checkpoint("items")["mode"], "cdc")
        p = self.ferry("verify", "-c", self.pipeline, env=self.env)
        self.assertIn("3 of 3 tables match", p.stdout)

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

    def test_crash_during_a_full_refresh_resumes_and_publishes_once(self):
        streams = ["items", "nokey"]
        self.configure(streams=streams, mode="full_refresh")
        for point, hit in [("sink.data_written", 2), ("sink.before_commit", 2),
                           ("sink.after_commit", 2), ("state.after_write", 3),
                           ("sink.before_publish", 1), ("sink.after_publish", 1)]:
            with self.subTest(point=point):
                self.sql(f"UPDATE items SET name = name || '{hit}' WHERE id % 5 = 0;"
                         f"UPDATE nokey SET n = n + 1 WHERE n % 7 = 0")
                self.crash(point, hit)
                if point == "sink.before_publish":
                    # The swap of the stream that reached the point happened (a RENAME commits at
                    # once), its marker did not: the table names the run in its comment, and the
                    # next sync writes only the marker.
                    swapped = []
                    for t in streams:
                        comment = MARIA.rows("SELECT TABLE_COMMENT FROM information_schema.TABLES "
                                             f"WHERE TABLE_SCHEMA = '{self.target}' AND "
                                             f"TABLE_NAME = '{t}'")[0][0]
                        marker = self.checkpoint(t)
                        if comment == f"ferry load {marker['run']}" and not marker["published"]:
                            swapped.append(t)
                    self.assertGreaterEqual(len(swapped), 1,
                                            "no table was swapped in without its marker")
                p = self.sync()
                # The crashed load is finished, not started over (after its publish, a new full
                # refresh is a new load).
                if point != "sink.after_publish":
                    self.assertIn("resumed load", p.stdout)
                self.assert_matches(*streams)
                self.assertEqual(MARIA.sql(f"SHOW TABLES FROM {self.state_db}").split(),
                                 ["checkpoints", "loads"])
        p = self.ferry("verify", "-c", self.pipeline, env=self.env)
        self.assertIn("2 of 2 tables match", p.stdout)

    def test_incremental_windows_crash_at_every_fault_point(self):
        self.name = self.db
        self.write_pipeline(PIPELINE.format(
            name=self.name, dsn=PG.dsn(self.db), destination=self.destination(), top="",
            streams="    - name: items\n      mode: incremental\n      cursor: id"))
        self.sync()
        for i, point in enumerate(["sink.data_written", "sink.before_commit", "sink.after_commit",
                                   "state.temp_written", "state.after_write"]):
            with self.subTest(point=point):
                lo = 100000 + 1000 * i
                self.sql(f"INSERT INTO items (id, name, amount) SELECT g, 'inc', g / 4.0 "
                         f"FROM generate_series({lo}, {lo + 299}) g")
                self.crash(point)
                self.sql(f"INSERT INTO items (id, name) SELECT g, 'late' "
                         f"FROM generate_series({lo + 500}, {lo + 549}) g")
                self.sync()
                self.assert_matches("items")

    def test_a_commit_whose_answer_is_lost_is_settled_by_the_checkpoint_row(self):
        self.configure()
        self.sync()
        for hit in (1, 3):
            self.change(hit)
            p = self.sync(env={"FERRY_FAULT": f"sink.commit_outcome_lost:{hit}"})
            self.assertIn("reading the checkpoint row back", p.stderr)
            self.assert_matches()

    def sync_while_a_row_is_locked(self, seconds):
        # Another session holds the lock of row 11 of items for `seconds` while the sync runs.
        with MARIA.session(self.target) as holder:
            holder.run("BEGIN; SELECT id FROM items WHERE id = 11 FOR UPDATE;", until="locked")
            timer = threading.Timer(seconds, holder.finish, args=("COMMIT;",))
            timer.start()
            p = self.sync()
            timer.join()
            return p

    def test_a_lock_wait_timeout_is_retried_and_lands_once(self):
        # The lock is held longer than the server lets ferry wait (error 1205): nothing of the
        # attempt lands, the sync tries again and lands once.
        self.configure()
        self.sync()
        self.change(1)
        MARIA.sql("SET GLOBAL innodb_lock_wait_timeout = 1")
        try:
            p = self.sync_while_a_row_is_locked(4)
        finally:
            MARIA.sql("SET GLOBAL innodb_lock_wait_timeout = 50")
        self.assertIn("Lock wait timeout", p.stderr)
        self.assertIn("retrying in", p.stderr)
        self.assert_matches()

    def test_a_commit_blocked_past_the_checkpoint_timeout_is_killed_and_retried(self):
        # The server would let ferry wait 50 s; checkpoint.timeout ends the statement sooner
        # (KILL QUERY), nothing of the attempt is recorded, and the round is tried again.
        self.configure(top="checkpoint: {timeout: 1s}\n")
        self.sync()
        self.change(1)
        p = self.sync_while_a_row_is_locked(5)
        self.assertIn("(checkpoint.timeout); interrupting it", p.stderr)
        self.assertIn("did not complete within checkpoint.timeout (1 s) and was abandoned",
                      p.stderr)
        self.assertIn("retrying in", p.stderr)
        self.assert_matches()

    def test_values_mariadb_cannot_hold_stop_the_sync_and_nothing_lands(self):
        self.configure(streams=["items", ODD])
        self.sync()
        odd = pg_ident(ODD)
        cases = [
            # (the table, a change it cannot hold, what the error names, the fix at the source)
            ("items", "UPDATE items SET ratio = 'NaN' WHERE id = 5",
             ["`ratio`", "NaN", "id = 5", "replace the value at the source"],
             "UPDATE items SET ratio = NULL WHERE id = 5"),
            ("items", "UPDATE items SET day = '0500-01-01' WHERE id = 6",
             ["`day`", "0500-01-01", "1000 to 9999", "correct the value at the source"],
             "UPDATE items SET day = '2000-01-01' WHERE id = 6"),
            (ODD, f"INSERT INTO {odd} (\"Key\") VALUES (repeat('k', 769))",
             ["`Key`", "769 characters", "VARCHAR(768)", "primary_key"],
             f"DELETE FROM {odd} WHERE length(\"Key\") > 768"),
        ]
        good = {"items": "INSERT INTO items (id, name) VALUES ({n}, 'good')",
                ODD: f"INSERT INTO {odd} (\"Key\") VALUES ('good {{n}}')"}
        for n, (table, change, named, fix) in enumerate(cases):
            with self.subTest(change=change):
                cols = self.pg_columns(table)
                before = self.target_rows(table, cols)
                marker = self.checkpoint(table)
                # A good change of the same table in the same transaction must not land either.
                self.sql(f"BEGIN; {good[table].format(n=800000 + n)}; {change}; COMMIT;")
                p = self.sync(check=False)
                self.assertNotIn(p.returncode, (0, -signal.SIGKILL), p.stderr)
                for text in named:
                    self.assertIn(text, p.stderr)
                self.assertEqual(self.checkpoint(table), marker)
                self.assertEqual(self.target_rows(table, cols), before,
                                 f"{table} changed although its commit failed")
                self.sql(fix)
                self.sync()
                self.assert_matches("items", ODD)

    def test_a_full_refresh_that_fails_leaves_the_table_as_it_was(self):
        self.configure(streams=["items"], mode="full_refresh")
        self.sync()
        cols = self.pg_columns("items")
        before = self.target_rows("items", cols)
        self.sql("UPDATE items SET name = 'changed'; UPDATE items SET r4 = 'Infinity' "
                 "WHERE id = 2900")
        p = self.sync(check=False)
        self.assertNotIn(p.returncode, (0, -signal.SIGKILL), p.stderr)
        self.assertIn("`r4`", p.stderr)
        self.assertIn("Infinity", p.stderr)
        self.assertEqual(self.target_rows("items", cols), before)
        self.sql("UPDATE items SET r4 = 1 WHERE id = 2900")
        self.sync()
        self.assert_matches("items")

    def test_target_columns_widen_in_place_and_incompatible_ones_stop_with_the_fix(self):
        self.configure(streams=["items"])
        self.sync()
        self.sql("UPDATE items SET name = 'before' WHERE id < 100;"
                 "ALTER TABLE items ADD COLUMN extra int;"
                 "UPDATE items SET extra = id, name = 'after' WHERE id < 200;")
        self.sync()
        self.assert_matches("items")
        # A narrower column is widened in place.
        self.maria("ALTER TABLE items MODIFY COLUMN qty INT")
        self.sql("UPDATE items SET qty = 5000000000 WHERE id = 1")
        self.sync()
        self.assert_matches("items")
        self.assertEqual(MARIA.rows("SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE "
                                    f"TABLE_SCHEMA = '{self.target}' AND TABLE_NAME = 'items' "
                                    "AND COLUMN_NAME = 'qty'"), [("bigint(20)",)])
        # A column that cannot take the source's values: stopped, with the fix.
        self.maria("ALTER TABLE items MODIFY COLUMN qty LONGTEXT")
        self.sql("UPDATE items SET qty = 6 WHERE id = 1")
        p = self.sync(check=False)
        self.assertNotIn(p.returncode, (0, -signal.SIGKILL), p.stderr)
        self.assertIn("qty", p.stderr)
        self.assertIn("full refresh", p.stderr)

    def test_bad_credentials_and_unreachable_servers_fail_clearly_without_the_password(self):
        wrong = "Wr0ng-Passw0rd-xyz"
        self.configure(streams=["items"])
        for password in ("${BAD_PASSWORD}", wrong):
            self.configure(streams=["items"], destination=self.destination(password))
            p = self.sync(check=False, env={"BAD_PASSWORD": wrong})
            self.assertNotIn(p.returncode, (0, -signal.SIGKILL), p.stderr)
            self.assertIn("cannot log in", p.stderr)
            self.assertIn("'root'", p.stderr)
            self.assertIn("password", p.stderr)
            self.assertNotIn(wrong, p.stdout + p.stderr)
        # Not retried: a server that never answers would be tried tolerable_failures times.
        self.configure(streams=["items"], top="checkpoint: {tolerable_failures: 0}\n",
                       destination=self.destination(wrong, port=mariadbserver.free_port()))
        p = self.sync(check=False)
        self.assertNotIn(p.returncode, (0, -signal.SIGKILL), p.stderr)
        self.assertIn("cannot connect", p.stderr)
        self.assertNotIn(wrong, p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main()
