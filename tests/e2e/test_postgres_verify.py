"""`ferry verify` on a PostgreSQL source: values read through COPY binary and values read back from
the Parquet files ferry wrote compare equal across every mapped type (NaN, -0.0, numerics at the
column's scale, timestamps with and without a zone, bytea, uuid, '' against NULL); changes made
without a sync are named by key."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferrytest  # noqa: E402
import pgserver  # noqa: E402

SERVER = None

PIPELINE = """
name: pgverify
source:
  type: postgres
  dsn: "{dsn}"
destination: {{type: iceberg, warehouse: ./warehouse, namespace: pgv}}
state: ./state.json
"""

SCHEMA = """
CREATE TABLE typed (id bigint PRIMARY KEY, s smallint, i int, f4 real, f8 double precision,
                    n numeric(12,3), d date, t time, ts timestamp, tz timestamptz, b bytea,
                    u uuid, txt text, flag boolean, tags text[], nums int[]);
INSERT INTO typed SELECT i, (i % 100)::smallint, i * 7, i / 8.0, i / 3.0, i * 1.5, date '2000-01-01' + i,
    time '00:00:00' + i * interval '1.5 second', timestamp '2024-01-01' + i * interval '1 minute',
    timestamptz '2024-01-01 00:00:00+02' + i * interval '1.000001 second',
    decode(lpad(to_hex(i), 8, '0'), 'hex'), md5(i::text)::uuid,
    CASE i % 3 WHEN 0 THEN '' WHEN 1 THEN NULL ELSE 'text ' || i END, i % 2 = 0,
    CASE i % 4 WHEN 0 THEN NULL WHEN 1 THEN '{}' ELSE ARRAY['t' || i, NULL] END,
    ARRAY[i, i + 1]
  FROM generate_series(1, 2500) i;
INSERT INTO typed (id, f4, f8, n) VALUES (-1, 'NaN', 'NaN', NULL),
    (-2, '-0', '-0', 0), (-3, 'Infinity', '-Infinity', -0.001);
CREATE TABLE nokey (word text, n int);
INSERT INTO nokey VALUES ('a', 1), ('a', 1), ('b', NULL);
"""


def setUpModule():
    global SERVER
    SERVER = pgserver.start_for_module()


def tearDownModule():
    if SERVER:
        SERVER.stop()


class PostgresVerifyTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
        self.db = SERVER.create_test_database("verify", self._testMethodName)
        self.write_pipeline(PIPELINE.format(dsn=SERVER.dsn(self.db)))

    def tearDown(self):
        SERVER.drop_test_database(self.db)
        super().tearDown()

    def verify(self):
        p = self.ferry("verify", "-c", self.pipeline, "--json", env=self.env, check=False)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        return p.returncode, {t["stream"]: t for t in json.loads(p.stdout)}

    def test_values_match_across_types_and_changes_are_named(self):
        SERVER.psql(SCHEMA, db=self.db)
        self.ferry("sync", "-c", self.pipeline, env=self.env)
        code, tables = self.verify()
        self.assertEqual(code, 0, tables)
        self.assertEqual(tables["typed"]["source_rows"], 2503)
        self.assertEqual(tables["typed"]["key"], ["id"])
        self.assertEqual(tables["nokey"]["key"], [])

        SERVER.psql("""
            UPDATE typed SET f8 = 'NaN', txt = NULL WHERE id = 2;  -- was 0.666..., 'text 2'
            UPDATE typed SET f4 = 0 WHERE id = -2;                 -- -0.0 becomes 0.0
            UPDATE typed SET tz = tz + interval '1 microsecond' WHERE id = 10;
            UPDATE typed SET nums = ARRAY[11, 12, NULL] WHERE id = 11;  -- was {11,12}
            DELETE FROM typed WHERE id = 100;
            INSERT INTO typed (id) VALUES (5000);
            INSERT INTO nokey VALUES ('a', 1);
        """, db=self.db)
        code, tables = self.verify()
        self.assertEqual(code, 1)
        t = tables["typed"]
        self.assertEqual((t["missing"], t["extra"], t["different"]), (1, 1, 4))
        got = {(e["kind"], e["key"]): [c.split(":")[0] for c in e["columns"]] for e in t["examples"]}
        self.assertEqual(got, {("different values", "id=2"): ["f8", "txt"],
                               ("different values", "id=-2"): ["f4"],
                               ("different values", "id=10"): ["tz"],
                               ("different values", "id=11"): ["nums"],
                               ("extra in destination", "id=100"): [],
                               ("missing in destination", "id=5000"): []})
        n = tables["nokey"]
        self.assertEqual((n["source_rows"], n["destination_rows"], n["missing"]), (4, 3, 1))

        self.ferry("sync", "-c", self.pipeline, env=self.env)
        code, tables = self.verify()
        self.assertEqual(code, 0, tables)


if __name__ == "__main__":
    unittest.main(verbosity=2)
