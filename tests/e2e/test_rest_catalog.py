"""Iceberg REST catalogs: ferry's client writing through ferry's server (`ferry catalog serve`),
every exchange checked against the protocol's official OpenAPI document by a validating proxy
(tests/interop/rest_proxy.mjs, openapi-backend) that can also make the server misbehave: 409, 500,
503 and connections dropped before or after a commit was applied. The tables are read back by
icebird and DuckDB from the metadata file the catalog names, and compared with the source; CDC
syncs are killed at the client's new fault points and restarted. iceberg-js, a REST client nobody
here wrote, drives the server: namespaces, tables, commits, a conflict, a multi-table commit."""
import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, HERE)
import ferrytest  # noqa: E402
import pgserver  # noqa: E402
import restproxy  # noqa: E402
import sigv4check  # noqa: E402
import test_postgres_cdc  # noqa: E402
import test_sqlite_cdc  # noqa: E402

PG = None


def setUpModule():
    global PG
    PG = pgserver.start_for_module()
    test_postgres_cdc.SERVER = PG  # the borrowed helpers below read it


def tearDownModule():
    if PG:
        PG.stop()

TOKEN = "s3cr3t-Catalog-T0ken"

PIPELINE = """
name: cdc
source:
  type: sqlite
  path: ./source.db
  mode: {mode}
  chunk_rows: 700
destination:
  type: iceberg
  catalog: "{catalog}"
  warehouse: ./lake
  namespace: lake
{rest}
state: ./state.json
"""


class Server:
    """`ferry catalog serve` on a free port of 127.0.0.1, stopped by PID."""

    def __init__(self, test, warehouse, env=None, args=()):
        e = dict(os.environ)
        e.pop("FERRY_FAULT", None)
        e.update(env or {})
        self.proc = subprocess.Popen(
            [ferrytest.FERRY, "catalog", "serve", "--warehouse", warehouse, "--listen",
             "127.0.0.1:0", *args], cwd=test.dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=e)
        self.url = None
        deadline = time.time() + 30
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = re.search(r"on (http://127\.0\.0\.1:\d+)\s*$", line)
            if m:
                self.url = m.group(1)
                break
        if self.url is None:
            self.stop()
            test.fail(f"ferry catalog serve did not start: {self.proc.stderr.read()}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        out, err = self.proc.communicate()
        return self.proc.returncode, err


class RestCatalogTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        test_sqlite_cdc.create_source(self)
        self.server = None
        self.proxy = None

    def tearDown(self):
        if self.proxy:
            self.proxy.stop()
        if self.server:
            self.server.stop()
        super().tearDown()

    def start(self, token=None, mode="cdc", client_token=None):
        self.server = Server(self, "./lake", env={"FERRY_CATALOG_TOKEN": token} if token else None)
        self.proxy = restproxy.start(self.server.url)
        rest = ""
        if client_token:
            rest = "  rest: {token: \"${ICEBERG_TOKEN}\"}"
        self.write_pipeline(PIPELINE.format(mode=mode, catalog="rest+" + self.proxy.url, rest=rest))

    def sync(self, **kw):
        return self.ferry("sync", "-c", self.pipeline, "--once", **kw)

    change = test_sqlite_cdc.SqliteCdcTest.change

    def verify(self):
        self.assert_table_equals_source("lake", "items", warehouse="lake")
        self.assert_table_equals_source("lake", 'Odd "Keys"', warehouse="lake")

    def assert_protocol_kept(self):
        self.assertEqual(self.proxy.violations(), [], self.proxy.format_violations())

    def commits(self):
        return [e for e in self.proxy.report()
                if e["method"] == "POST" and e.get("operationId") == "updateTable"]

    def test_cdc_through_a_rest_catalog_reads_back_and_keeps_the_protocol(self):
        self.start()
        check = self.ferry("check", "-c", self.pipeline)
        self.assertIn("REST catalog " + self.proxy.url, check.stdout)
        self.sync()
        self.verify()
        for _ in range(2):
            self.change()
            out = self.sync()
            self.assertIn("cdc: changes", out.stdout)
            self.verify()
        ops = {e.get("operationId") for e in self.proxy.report()}
        self.assertTrue({"getConfig", "createNamespace", "createTable", "loadTable",
                         "updateTable"} <= ops, ops)
        self.assertTrue(self.commits())
        self.assert_protocol_kept()
        # Nothing bypassed the server: the only catalog is the one it serves.
        self.assertEqual({ns for ns, _ in self.catalog_tables("lake")}, {"lake"})

    def test_a_token_is_required_by_the_server_and_never_shown(self):
        self.start(token=TOKEN)
        p = self.ferry("check", "-c", self.pipeline, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("401", p.stdout + p.stderr)
        self.assertIn("rest.token", p.stdout + p.stderr)
        self.write_pipeline(PIPELINE.format(mode="cdc", catalog="rest+" + self.proxy.url,
                                            rest='  rest: {token: "${ICEBERG_TOKEN}"}'))
        env = {"ICEBERG_TOKEN": TOKEN}
        outputs = [self.ferry("check", "-c", self.pipeline, env=env),
                   self.ferry("sync", "-c", self.pipeline, "--once", "-v", env=env)]
        self.verify()
        for p in outputs:
            self.assertNotIn(TOKEN, p.stdout + p.stderr)
        with open(os.path.join(self.dir, "state.json"), encoding="utf-8") as f:
            self.assertNotIn(TOKEN, f.read())
        rc, err = self.server.stop()
        self.assertEqual(rc, 0, err)
        self.assertNotIn(TOKEN, err)
        self.assert_protocol_kept()

    def test_commits_the_server_refuses_loses_or_fails_land_exactly_once(self):
        self.start()
        self.sync()
        commit = {"method": "POST", "pathRegex": "/namespaces/[^/]+/tables/[^/]+$"}
        # (what, fault, whether the commit is sent again: a commit that was applied is found by
        # reloading the table and never sent twice)
        cases = [
            ("a lost race (409)", {"action": "status", "status": 409, "after": "before"}, True),
            ("not ready (503)", {"action": "status", "status": 503, "after": "before"}, True),
            ("applied, then 500", {"action": "status", "status": 500, "after": "after"}, False),
            ("applied, then the connection dropped", {"action": "drop", "after": "after"}, False),
            ("dropped before it reached the server", {"action": "drop", "after": "before"}, True),
            ("applied, then 502", {"action": "status", "status": 502, "after": "after"}, False),
        ]
        for what, fault, resent in cases:
            with self.subTest(fault=what):
                self.change()
                self.proxy.add_fault(dict(fault, match=commit, count=1))
                before = len(self.commits())
                out = self.sync()
                self.assertIn("cdc: changes", out.stdout)
                # Two tables changed: one commit each, and one more if the faulted one is resent.
                self.assertEqual(len(self.commits()) - before, 3 if resent else 2, out.stderr)
                if not resent:
                    self.assertIn("has an unknown outcome", out.stderr)
                self.verify()
                self.assertEqual(self.proxy.faults(), [], "the fault was not used")
        self.assert_protocol_kept()

    def test_kills_between_request_and_answer_lose_and_duplicate_nothing(self):
        self.start()
        self.sync()
        for point in ("sink.before_commit", "rest.commit_sent", "rest.commit_answered",
                      "sink.after_commit"):
            with self.subTest(point=point):
                self.change(n=900)
                p = self.sync(env={"FERRY_FAULT": point}, check=False)
                self.assertEqual(p.returncode, -signal.SIGKILL, f"{point}: {p.stderr}")
                self.change(n=20)
                again = self.sync()
                if point in ("rest.commit_answered", "sink.after_commit"):
                    self.assertIn("state repaired from the marker", again.stderr)
                self.verify()
        self.assert_protocol_kept()

    def test_a_full_refresh_killed_mid_load_resumes_through_the_catalog(self):
        self.start(mode="full_refresh")
        p = self.sync(env={"FERRY_FAULT": "rest.commit_sent:3"}, check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL, p.stderr)
        self.sync()
        self.verify()
        self.assert_protocol_kept()

    def test_iceberg_js_drives_the_server_and_icebird_reads_what_it_points_at(self):
        self.start()
        self.sync()
        p = subprocess.run(["node", os.path.join(ferrytest.ROOT, "tests", "interop",
                                                 "iceberg_js_drive.mjs"),
                            "--url", self.proxy.url, "--namespace", "js_probe",
                            "--warehouse-dir", os.path.join(self.dir, "lake")],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, f"iceberg-js: {p.stdout}\n{p.stderr}")
        # The table ferry synced, as a REST client sees it: its metadata location, read by icebird
        # and DuckDB, holds the source's rows.
        with urllib.request.urlopen(self.server.url + "/v1/config") as r:
            prefix = json.load(r)["overrides"].get("prefix", "")
        path = "/v1/" + (prefix + "/" if prefix else "") + "namespaces/lake/tables/items"
        with urllib.request.urlopen(self.proxy.url + path) as r:
            loaded = json.load(r)
        seen = self.inspect(loaded["metadata-location"])
        self.assertEqual(seen["problems"], [])
        duck, bird = self.source_rows("items", seen["schema"]["fields"])
        self.assert_same_rows(duck, seen["duckdb_rows"], "items via DuckDB")
        self.assert_same_rows(bird, seen["icebird_rows"], "items via icebird")
        self.assert_protocol_kept()

    def test_a_server_that_is_not_there_or_a_wrong_url_is_named(self):
        self.write_pipeline(PIPELINE.format(mode="cdc", catalog="rest+http://127.0.0.1:1",
                                            rest=""))
        p = self.ferry("check", "-c", self.pipeline, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("127.0.0.1:1", p.stdout + p.stderr)
        self.assertIn("is the catalog server running", p.stdout + p.stderr)
        self.write_pipeline(PIPELINE.format(mode="cdc", catalog="rest+ftp://x", rest=""))
        p = self.ferry("check", "-c", self.pipeline, check=False)
        self.assertNotEqual(p.returncode, 0)


class SigV4Test(ferrytest.FerryTestCase):
    """Catalog requests signed with AWS SigV4 (`signing_region`, `signing_name`), as Glue's and S3
    Tables' endpoints want them, each signature checked again by botocore."""
    KEY_ID, SECRET = "AKIAFERRYTEST0001", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYFERRYSECRET"

    def test_signed_requests_pass_botocores_check_and_a_wrong_secret_is_refused(self):
        test_sqlite_cdc.create_source(self)
        server = Server(self, "./lake")
        try:
            with sigv4check.SigV4Check(server.url, self.KEY_ID, self.SECRET, "eu-west-1",
                                       "glue") as check:
                self.write_pipeline(PIPELINE.format(
                    mode="cdc", catalog="rest+" + check.url,
                    rest="  rest: {signing_region: eu-west-1, signing_name: glue}"))
                env = {"AWS_ACCESS_KEY_ID": self.KEY_ID, "AWS_SECRET_ACCESS_KEY": self.SECRET}
                out = self.ferry("sync", "-c", self.pipeline, "--once", "-v", env=env)
                self.assertEqual(check.refused, 0, check.problems)
                self.assertGreater(check.verified, 5)
                self.assert_table_equals_source("lake", "items", warehouse="lake")
                test_sqlite_cdc.SqliteCdcTest.change(self)
                self.ferry("sync", "-c", self.pipeline, "--once", env=env)  # commits are signed
                self.assertEqual(check.refused, 0, check.problems)
                self.assert_table_equals_source("lake", "items", warehouse="lake")
                bad = dict(env, AWS_SECRET_ACCESS_KEY="not-the-secret")
                p = self.ferry("check", "-c", self.pipeline, env=bad, check=False)
                self.assertNotEqual(p.returncode, 0)
                self.assertIn("403", p.stdout + p.stderr)
                self.assertGreater(check.refused, 0)
                for text in (out.stdout, out.stderr, p.stdout, p.stderr):
                    self.assertNotIn(self.SECRET, text)
                    self.assertNotIn("not-the-secret", text)
        finally:
            server.stop()


PG_PIPELINE = """
name: {name}
source:
  type: postgres
  dsn: "{dsn}"
  mode: cdc
  streams:
{streams}
destination:
  type: iceberg
  catalog: "{catalog}"
  warehouse: ./warehouse
  namespace: pgcdc
state: ./state.json
"""


class PostgresCdcThroughRestTest(ferrytest.FerryTestCase):
    """PostgreSQL CDC (every type, TOASTed values, REPLICA IDENTITY FULL, odd names) into tables
    committed through the REST catalog, killed at every fault point of the protocol."""
    sync = test_postgres_cdc.PostgresCdcTest.sync
    sql = test_postgres_cdc.PostgresCdcTest.sql
    crash = test_postgres_cdc.PostgresCdcTest.crash
    change = test_postgres_cdc.PostgresCdcTest.change
    assert_matches = test_postgres_cdc.PostgresCdcTest.assert_matches

    def setUp(self):
        super().setUp()
        self.env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
        self.db = PG.create_test_database("rest", self._testMethodName)
        PG.psql(test_postgres_cdc.SCHEMA, db=self.db)
        self.server = Server(self, "./warehouse")
        self.proxy = restproxy.start(self.server.url)
        streams = "\n".join(f"    - name: {json.dumps(t)}\n      chunk_rows: 1000"
                            for t in test_postgres_cdc.STREAMS)
        self.name = self.db
        self.write_pipeline(PG_PIPELINE.format(name=self.name, dsn=PG.dsn(self.db),
                                               streams=streams, catalog="rest+" + self.proxy.url))

    def tearDown(self):
        self.proxy.stop()
        self.server.stop()
        PG.drop_test_database(self.db)
        super().tearDown()

    def test_crash_at_every_fault_point_then_exactly_once(self):
        self.sync()
        self.assert_matches()
        # `ferry state` prints positions as the logs do: LSNs as 0/4DA96D0, not as numbers.
        state = self.ferry("state", "-c", self.pipeline, env=self.env).stdout
        self.assertRegex(state, r"published, \d+ rows, changes from [0-9A-F]+/[0-9A-F]+\n")
        points = ["sink.data_written", "sink.before_commit", "rest.commit_sent",
                  "rest.commit_answered", "sink.after_commit", "state.temp_written",
                  "state.after_write", "source.before_acknowledge"]
        for i, point in enumerate(points):
            with self.subTest(point=point):
                self.change(10 + i)
                self.crash(point)
                self.change(100 + i)
                self.sync()
                self.assert_matches()
        self.assertEqual(self.proxy.violations(), [], self.proxy.format_violations())
        state = self.ferry("state", "-c", self.pipeline, env=self.env).stdout
        self.assertRegex(state, r"changes applied up to [0-9A-F]+/[0-9A-F]+ \(since [0-9A-F]+/")
        self.assertNotRegex(state, r"\"position\": ?\d")


if __name__ == "__main__":
    unittest.main()
