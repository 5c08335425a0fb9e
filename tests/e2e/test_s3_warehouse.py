"""End to end with the warehouse on an object store: SQLite and PostgreSQL synced into Iceberg
tables at s3://bucket/prefix on a real S3 server (moto_server, with authentication and IAM
policies on, so every request's SigV4 signature is checked), the SQL catalog in a local file.
What ferry wrote is fetched from the store with boto3 and read by readers nobody here wrote
(icebird, DuckDB, avsc), compared with the source, and checked by `ferry verify`. Then the
failures a user meets: a crash at every fault point (one inside a multipart upload) and a rerun
(exactly once), a store that answers 503/500, drops connections or stops answering for a while
(retried, exactly once), and wrong credentials, a missing bucket or a missing permission, named
by `ferry check`."""
import json
import os
import random
import shutil
import signal
import sqlite3
import string
import subprocess
import sys
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferrytest  # noqa: E402
import pgserver  # noqa: E402
import restproxy  # noqa: E402
import s3server  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_rest_catalog import Server as CatalogServer  # noqa: E402

SERVER = None


def setUpModule():
    global SERVER
    SERVER = s3server.start_for_module()


def tearDownModule():
    if SERVER:
        SERVER.stop()


PIPELINE = """
name: lake
source:
  type: sqlite
  path: ./source.db
{source_extra}
destination:
  type: iceberg
  warehouse: s3://{bucket}/{prefix}
  catalog: sqlite:./catalog.db
  namespace: lake
  s3:
    endpoint: {endpoint}
{s3_extra}
state: ./state.json
"""


def make_source(path, n_a=12000, n_b=3000, big=0, salt=""):
    con = sqlite3.connect(path)
    con.executescript("""
      DROP TABLE IF EXISTS a; DROP TABLE IF EXISTS b; DROP TABLE IF EXISTS big;
      CREATE TABLE a (id INTEGER PRIMARY KEY, v TEXT, r REAL, n INTEGER);
      CREATE TABLE b (id INTEGER PRIMARY KEY, w BLOB);
    """)
    con.executemany("INSERT INTO a VALUES (?, ?, ?, ?)",
                    [(i, f"value {i}{salt} é😀", i / 7, None if i % 5 == 0 else i * 3)
                     for i in range(1, n_a + 1)])
    con.executemany("INSERT INTO b VALUES (?, ?)",
                    [(i, bytes([i % 256]) * 3) for i in range(1, n_b + 1)])
    if big:
        # Random printable text compresses little: the data file is larger than a 5 MiB part,
        # so it goes up in parts.
        rng = random.Random(11)
        alphabet = string.ascii_letters + string.digits + string.punctuation
        con.execute("CREATE TABLE big (id INTEGER PRIMARY KEY, payload TEXT)")
        con.executemany("INSERT INTO big VALUES (?, ?)",
                        [(i, "".join(rng.choices(alphabet, k=100))) for i in range(1, big + 1)])
    con.commit()
    con.close()


class S3WarehouseCase(ferrytest.FerryTestCase):
    """A fresh bucket per test; the catalog and state stay in the test's folder."""

    def setUp(self):
        super().setUp()
        self.bucket = "ferry-" + uuid.uuid4().hex[:12]
        self.prefix = "wh"
        SERVER.create_bucket(self.bucket)
        self.endpoint = SERVER.endpoint

    def pipeline_text(self, source_extra="", s3_extra="", endpoint=None, bucket=None):
        return PIPELINE.format(source_extra=source_extra, s3_extra=s3_extra,
                               endpoint=endpoint or self.endpoint, bucket=bucket or self.bucket,
                               prefix=self.prefix)

    def ferry(self, *args, env=None, user="admin", **kw):
        e = SERVER.env(user) if user else {}
        e.update(env or {})
        return super().ferry(*args, env=e, **kw)

    # The catalog is ./catalog.db; the table's files are read from a copy of the bucket.
    def catalog_tables(self, warehouse=None, namespace=None):
        cat = sqlite3.connect(os.path.join(self.dir, "catalog.db"))
        rows = cat.execute(
            "SELECT table_namespace, table_name, metadata_location FROM iceberg_tables").fetchall()
        cat.close()
        return {(ns, t): loc for ns, t, loc in rows if namespace is None or ns == namespace}

    def inspect(self, metadata_location):
        self.assertTrue(metadata_location.startswith(f"s3://{self.bucket}/{self.prefix}/"),
                        metadata_location)
        mirror = os.path.join(self.dir, "mirror")
        shutil.rmtree(mirror, ignore_errors=True)
        SERVER.mirror(self.bucket, mirror)
        local = os.path.join(mirror, metadata_location.removeprefix("s3://"))
        p = subprocess.run(["node", ferrytest.INSPECT, local], capture_output=True, text=True,
                           timeout=600, env={**os.environ, "FERRY_INSPECT_S3_MIRROR": mirror})
        if p.returncode != 0:
            self.fail(f"iceberg_inspect failed: {p.stderr}")
        return json.loads(p.stdout)

    def metadata(self, table):
        loc = self.catalog_tables().get(("lake", table))
        if loc is None:
            return None
        key = loc.removeprefix(f"s3://{self.bucket}/")
        body = SERVER.client().get_object(Bucket=self.bucket, Key=key)["Body"].read()
        return json.loads(body)

    def marker(self, table):
        m = ((self.metadata(table) or {}).get("properties") or {}).get("ferry.marker.lake")
        return json.loads(m) if m else None

    def assert_no_secret_in(self, *texts, user="admin"):
        _, secret = SERVER.keys[user]
        for t in texts:
            self.assertNotIn(secret, t)

    def assert_nothing_left_over(self):
        """No multipart upload was left open, and no probe file."""
        self.assertEqual(SERVER.multipart_uploads(self.bucket), [])
        self.assertEqual([k for k in SERVER.objects(self.bucket) if ".ferry-probe-" in k], [])


class SqliteToS3Test(S3WarehouseCase):
    def test_sync_writes_every_file_to_the_store_and_independent_readers_agree(self):
        make_source(self.db_path)
        self.write_pipeline(self.pipeline_text())
        check = self.ferry("check", "-c", self.pipeline)
        self.assertIn(f"Iceberg warehouse s3://{self.bucket}/wh on S3 (endpoint {self.endpoint}",
                      check.stdout)
        self.assertIn("credentials from the environment (AWS_ACCESS_KEY_ID)", check.stdout)
        out = self.sync()
        for t in ("a", "b"):
            seen = self.assert_table_equals_source("lake", t)
            # Data files, manifests, manifest lists and metadata all live on the store.
            for f in seen["data_files"]:
                self.assertTrue(f["path"].startswith(f"s3://{self.bucket}/wh/lake/{t}/data/"),
                                f["path"])
            meta = self.metadata(t)
            self.assertTrue(meta["location"].startswith(f"s3://{self.bucket}/wh/lake/{t}"))
            for s in meta["snapshots"]:
                self.assertTrue(s["manifest-list"].startswith(f"s3://{self.bucket}/"))
        keys = SERVER.objects(self.bucket)
        self.assertTrue(any(k.endswith(".metadata.json") for k in keys))
        self.assertTrue(any(k.endswith(".parquet") for k in keys))
        self.assertTrue(any(k.endswith(".avro") for k in keys))
        # Locally, only the catalog and the state: nothing of the tables.
        local = [n for n in os.listdir(self.dir) if not n.startswith(
            ("catalog.db", "source.db", "pipeline.yaml", "state.json", "mirror"))]
        self.assertEqual(local, [])
        self.assert_nothing_left_over()
        with open(os.path.join(self.dir, "state.json")) as f:
            state = f.read()
        self.assert_no_secret_in(check.stdout, check.stderr, out.stdout, out.stderr, state)

        v = self.ferry("verify", "-c", self.pipeline)
        self.assertIn("2 of 2 tables match", v.stdout)
        # A second full refresh replaces the contents, again exactly.
        make_source(self.db_path, n_a=500, n_b=20, salt=" v2")
        self.sync()
        self.assert_table_equals_source("lake", "a")
        self.assert_table_equals_source("lake", "b")
        self.ferry("verify", "-c", self.pipeline)
        # maintain compacts, expires and removes orphans on the store; the rows stay the same,
        # and no file a snapshot references is taken for an orphan, even with no safety age.
        m = self.ferry("maintain", "-c", self.pipeline, "--expire-older-than", "0s",
                       "--orphans-older-than", "0s")
        self.assertIn("orphans: 0 of", m.stdout)
        self.assert_table_equals_source("lake", "a")
        self.assert_table_equals_source("lake", "b")
        self.ferry("verify", "-c", self.pipeline)
        self.assert_no_secret_in(m.stdout, m.stderr)

    def test_a_large_file_goes_up_in_parts_and_no_upload_stays_open(self):
        make_source(self.db_path, n_a=10, n_b=10, big=90000)
        self.write_pipeline(self.pipeline_text(s3_extra="    part_size: 5MiB\n"
                                                        "    upload_concurrency: 2"))
        self.sync()
        self.assert_table_equals_source("lake", "big")
        sizes = {k: v for k, v in SERVER.objects(self.bucket, "wh/lake/big/data/").items()}
        self.assertEqual(len(sizes), 1, sizes)
        key, size = next(iter(sizes.items()))
        self.assertGreater(size, 5 << 20)
        # A multipart object's ETag is "<md5 of the parts' md5s>-<number of parts>".
        etag = SERVER.client().head_object(Bucket=self.bucket, Key=key)["ETag"].strip('"')
        self.assertEqual(etag.split("-")[-1], str((size + (5 << 20) - 1) // (5 << 20)), etag)
        self.assert_nothing_left_over()

    def test_metadata_files_are_never_overwritten(self):
        # Every commit writes a new metadata file under a new name; the old ones are untouched
        # (a conditional put would refuse to replace them).
        make_source(self.db_path, n_a=100, n_b=10)
        self.write_pipeline(self.pipeline_text())
        self.sync()
        first = {k: v for k, v in SERVER.objects(self.bucket).items() if k.endswith(".json")}
        bodies = {k: SERVER.client().get_object(Bucket=self.bucket, Key=k)["Body"].read()
                  for k in first}
        self.sync()
        after = {k for k in SERVER.objects(self.bucket) if k.endswith(".json")}
        self.assertGreater(len(after - set(first)), 0)
        for k in first.keys() & after:
            self.assertEqual(SERVER.client().get_object(Bucket=self.bucket, Key=k)["Body"].read(),
                             bodies[k])


# (fault point, hit): the hit picks a chunk in the middle of the load where it makes sense.
POINTS = [
    ("source.mid_chunk", 3),
    ("sink.data_written", 3),
    ("sink.before_commit", 3),
    ("catalog.after_metadata_write", 3),
    ("sink.after_commit", 3),
    ("state.temp_written", 4),
    ("state.after_write", 4),
    ("sink.before_publish", 1),
    ("sink.after_publish", 1),
]


class S3CrashTest(S3WarehouseCase):
    def crash(self, point, hit):
        p = self.sync(env={"FERRY_FAULT": f"{point}:{hit}"}, check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL,
                         f"{point}:{hit} did not kill the sync (exit {p.returncode})\n{p.stderr}")
        self.assertIn(f"fault point {point} reached", p.stderr)

    def reset(self):
        for name in ("catalog.db", "state.json"):
            p = os.path.join(self.dir, name)
            if os.path.exists(p):
                os.remove(p)
        self.prefix = "wh-" + uuid.uuid4().hex[:8]

    def test_every_fault_point_then_a_rerun_lands_exactly_once(self):
        make_source(self.db_path)
        for point, hit in POINTS:
            with self.subTest(point=point):
                self.reset()
                self.write_pipeline(self.pipeline_text(source_extra="  chunk_rows: 2000"))
                self.crash(point, hit)
                self.sync()
                self.assert_table_equals_source("lake", "a")
                self.assert_table_equals_source("lake", "b")
                self.ferry("verify", "-c", self.pipeline)

    def test_a_crash_inside_a_multipart_upload_then_a_rerun_lands_exactly_once(self):
        make_source(self.db_path, n_a=10, n_b=10, big=90000)
        self.write_pipeline(self.pipeline_text(s3_extra="    part_size: 5MiB"))
        self.crash("s3.mid_multipart_upload", 1)
        # The killed process left its upload open; its parts are no file anyone sees.
        self.assertEqual(len(SERVER.multipart_uploads(self.bucket)), 1)
        self.assertEqual(SERVER.objects(self.bucket, "wh/lake/big/data/"), {})
        self.sync()
        self.assert_table_equals_source("lake", "big")
        self.assert_table_equals_source("lake", "a")
        self.assertEqual(len(SERVER.objects(self.bucket, "wh/lake/big/data/")), 1)
        # maintain aborts the upload the killed process left open; the rows stay.
        m = self.ferry("maintain", "-c", self.pipeline, "--orphans-older-than", "0s")
        self.assertIn("1 open uploads aborted", m.stdout)
        self.assertEqual(SERVER.multipart_uploads(self.bucket), [])
        self.assert_table_equals_source("lake", "big")

    def test_maintain_removes_the_files_a_crash_left_and_nothing_else(self):
        make_source(self.db_path)
        self.write_pipeline(self.pipeline_text(source_extra="  chunk_rows: 2000"))
        self.crash("sink.data_written", 3)  # data files on the store that no snapshot names
        self.sync()
        before = SERVER.objects(self.bucket, "wh/lake/")
        kept = self.ferry("maintain", "-c", self.pipeline, "--no-compact", "--no-expire")
        self.assertIn("orphans: 0 of", kept.stdout)  # younger than the default 3 days
        self.assertEqual(SERVER.objects(self.bucket, "wh/lake/"), before)
        m = self.ferry("maintain", "-c", self.pipeline, "--no-compact", "--no-expire",
                       "--orphans-older-than", "0s")
        after = SERVER.objects(self.bucket, "wh/lake/")
        removed = set(before) - set(after)
        self.assertGreater(len(removed), 0, m.stdout)
        self.assertTrue(all("/data/" in k for k in removed), removed)
        self.assertEqual(set(after) - set(before), set())
        self.assert_table_equals_source("lake", "a")
        self.assert_table_equals_source("lake", "b")


class S3FaultTest(S3WarehouseCase):
    """The store misbehaves while a sync runs: ferry retries, and every row lands once."""

    def setUp(self):
        super().setUp()
        self.proxy = s3server.FaultProxy(SERVER.port)
        self.endpoint = self.proxy.endpoint

    def tearDown(self):
        self.proxy.close()
        super().tearDown()

    def test_503_500_resets_and_cut_connections_are_retried(self):
        make_source(self.db_path, n_a=30000, n_b=3000)
        # More retries than faults: even a request that met every fault gets through.
        self.write_pipeline(self.pipeline_text(source_extra="  chunk_rows: 1000",
                                               s3_extra="    retries: 12"))
        stop = threading.Event()

        def misbehave():
            # A budget of faults, two at a time, and of cuts of every open connection, spread
            # over the sync. A cut counts only when it closed a connection (between two requests
            # the client may hold none open).
            kinds = ["503", "500", "reset"]
            faults, cuts, i = 10, 6, 0
            while not stop.is_set():
                if faults > 0 and not self.proxy.faults:
                    self.proxy.queue(kinds[i % 3], 2)
                    faults -= 2
                    i += 1
                time.sleep(0.3)
                if cuts > 0 and self.proxy.cut_all() > 0:
                    cuts -= 1
                    time.sleep(0.3)

        t = threading.Thread(target=misbehave, daemon=True)
        t.start()
        try:
            out = self.sync()
        finally:
            stop.set()
            t.join()
        injected = self.proxy.injected
        self.assertGreater(injected["503"] + injected["500"] + injected["reset"], 3, injected)
        self.assertGreater(injected["cut"], 0, injected)
        self.assert_table_equals_source("lake", "a")
        self.assert_table_equals_source("lake", "b")
        self.ferry("verify", "-c", self.pipeline)
        self.assert_no_secret_in(out.stdout, out.stderr)

    def test_a_store_that_stops_answering_for_a_while_is_waited_out(self):
        make_source(self.db_path, n_a=20000, n_b=100)
        self.write_pipeline(self.pipeline_text(source_extra="  chunk_rows: 2000",
                                               s3_extra="    timeout: 1s\n    retries: 10"))
        proc = subprocess.Popen([ferrytest.FERRY, "sync", "-c", self.pipeline], cwd=self.dir,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, **SERVER.env()})
        time.sleep(1.0)
        SERVER.pause()
        try:
            time.sleep(3.0)
        finally:
            SERVER.resume()
        out, err = proc.communicate(timeout=300)
        self.assertEqual(proc.returncode, 0, err)
        self.assert_table_equals_source("lake", "a")
        self.assert_table_equals_source("lake", "b")

    def test_a_store_that_stays_down_fails_the_sync_clearly_and_a_rerun_finishes(self):
        make_source(self.db_path, n_a=5000, n_b=100)
        # checkpoint.tolerable_failures 0: the sync stops at the first failed round.
        self.write_pipeline(self.pipeline_text(source_extra="  chunk_rows: 1000",
                                               s3_extra="    retries: 2")
                            + "checkpoint: {tolerable_failures: 0}\n")
        self.proxy.queue("503", 1000)
        p = self.sync(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("failed 3 time(s), the last with HTTP 503 SlowDown", p.stderr)
        self.proxy.faults.clear()
        self.sync()
        self.assert_table_equals_source("lake", "a")
        self.assert_nothing_left_over()


class S3CheckTest(S3WarehouseCase):
    """`ferry check` probes the bucket (list, put, get, delete) and names what is wrong."""

    def check_fails(self, *expected, env=None, user="admin", text=None):
        self.write_pipeline(text or self.pipeline_text())
        p = self.ferry("check", "-c", self.pipeline, env=env, user=user, check=False)
        self.assertNotEqual(p.returncode, 0, p.stdout)
        for e in expected:
            self.assertIn(e, p.stderr)
        for u in SERVER.keys:
            self.assert_no_secret_in(p.stdout, p.stderr, user=u)
        return p

    def setUp(self):
        super().setUp()
        make_source(self.db_path, n_a=10, n_b=10)

    def test_a_good_setup_passes_and_leaves_no_probe(self):
        self.write_pipeline(self.pipeline_text())
        p = self.ferry("check", "-c", self.pipeline)
        self.assertIn("OK", p.stdout)
        self.assert_nothing_left_over()
        self.assertEqual(SERVER.objects(self.bucket), {})

    def test_a_wrong_secret(self):
        p = self.check_fails("the secret access key does not match the access key id",
                             "SignatureDoesNotMatch", "AWS_ACCESS_KEY_ID",
                             env={"AWS_SECRET_ACCESS_KEY": "not-the-secret"})
        # The wrong secret is a secret too: it stays out of the output like the right one.
        self.assertNotIn("not-the-secret", p.stdout + p.stderr)

    def test_an_unknown_access_key(self):
        self.check_fails("the store does not know the access key id", "InvalidAccessKeyId",
                         env={"AWS_ACCESS_KEY_ID": "AKIAUNKNOWNKEY000000"})

    def test_a_missing_bucket(self):
        self.check_fails("bucket 'no-such-bucket-here' does not exist at " + self.endpoint,
                         "create it, or fix the bucket in destination.warehouse",
                         text=self.pipeline_text(bucket="no-such-bucket-here"))

    def test_a_user_who_may_not_write(self):
        self.check_fails("PutObject s3://" + self.bucket + "/wh/.ferry-probe-",
                         "lack the permission s3:PutObject on bucket " + self.bucket,
                         "writing the probe file", user="reader")

    def test_no_credentials(self):
        home = os.path.join(self.dir, "home")
        os.makedirs(home)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env["HOME"] = home
        self.write_pipeline(self.pipeline_text())
        p = subprocess.run([ferrytest.FERRY, "check", "-c", self.pipeline], capture_output=True,
                           text=True, env=env, cwd=self.dir, timeout=120)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("no AWS credentials for the s3:// warehouse", p.stderr)

    def test_credentials_from_a_profile(self):
        home = os.path.join(self.dir, "home")
        os.makedirs(os.path.join(home, ".aws"))
        key_id, secret = SERVER.keys["admin"]
        with open(os.path.join(home, ".aws", "credentials"), "w") as f:
            f.write(f"[lake]\naws_access_key_id = {key_id}\naws_secret_access_key = {secret}\n")
        with open(os.path.join(home, ".aws", "config"), "w") as f:
            f.write(f"[profile lake]\nregion = us-east-1\ns3 =\n  endpoint_url = {self.endpoint}\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update({"HOME": home, "AWS_PROFILE": "lake"})
        text = self.pipeline_text().replace(f"  s3:\n    endpoint: {self.endpoint}\n", "")
        self.assertNotIn("  s3:", text)
        self.write_pipeline(text)
        p = subprocess.run([ferrytest.FERRY, "sync", "-c", self.pipeline], capture_output=True,
                           text=True, env=env, cwd=self.dir, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_table_equals_source("lake", "a")
        self.assert_no_secret_in(p.stdout, p.stderr)

    def test_an_unreachable_endpoint(self):
        port = s3server.free_port()
        self.check_fails(f"(S3 endpoint http://127.0.0.1:{port})",
                         "check that the store is running and reachable",
                         text=self.pipeline_text(endpoint=f"http://127.0.0.1:{port}")
                         .replace("    endpoint:", "    retries: 1\n    endpoint:"))

    def test_a_warehouse_on_s3_needs_a_catalog_and_bad_keys_are_named(self):
        self.check_fails("destination.catalog is required for an s3:// warehouse",
                         text=self.pipeline_text().replace("  catalog: sqlite:./catalog.db\n", ""))
        self.check_fails("unknown key 's3.regoin'", "did you mean 's3.region'",
                         text=self.pipeline_text(s3_extra="    regoin: x"))
        self.check_fails("destination.s3.part_size (line", "5MiB",
                         text=self.pipeline_text(s3_extra="    part_size: 1MiB"))
        self.check_fails("destination.s3.path_style (line", "must be auto, true",
                         text=self.pipeline_text(s3_extra="    path_style: maybe"))
        local = ("name: lake\nsource: {type: sqlite, path: ./source.db}\n"
                 "destination: {type: iceberg, warehouse: ./w, s3: {region: eu-west-1}}\n")
        self.check_fails("destination.s3.region (line 3) applies to an s3:// warehouse only",
                         text=local)


PG_SCHEMA = """
CREATE TABLE orders (id int PRIMARY KEY, customer text NOT NULL, amount bigint, note text);
INSERT INTO orders SELECT g, 'customer ' || (g % 97), g * 10, CASE WHEN g % 3 = 0 THEN NULL
  ELSE 'note ' || g END FROM generate_series(1, 20000) g;
"""


class PostgresToS3Test(S3WarehouseCase):
    PG = None

    @classmethod
    def setUpClass(cls):
        cls.PG = pgserver.start_for_module(
            lambda s: (s.psql("CREATE DATABASE shop"), s.psql(PG_SCHEMA, db="shop")))

    @classmethod
    def tearDownClass(cls):
        if cls.PG:
            cls.PG.stop()

    def pg_rows(self):
        out = self.PG.psql("SELECT id, customer, amount, note FROM orders", db="shop")
        rows = []
        for line in out.splitlines():
            id_, customer, amount, note = line.split("|")
            rows.append([id_, customer, amount or None, note or None])
        return rows

    def test_postgres_full_refresh_and_crash_land_exactly_once_on_the_store(self):
        text = (f"name: lake\nsource:\n  type: postgres\n  dsn: \"{self.PG.dsn('shop')}\"\n"
                f"  chunk_rows: 2000\n  streams: [public.orders]\n"
                f"destination:\n  type: iceberg\n  warehouse: s3://{self.bucket}/wh\n"
                f"  catalog: sqlite:./catalog.db\n  namespace: lake\n"
                f"  s3: {{endpoint: '{self.endpoint}'}}\nstate: ./state.json\n")
        self.write_pipeline(text)
        env = {"PGPASSWORD": pgserver.SUPERUSER_PASSWORD}
        p = self.ferry("sync", "-c", self.pipeline, env={**env, "FERRY_FAULT": "sink.after_commit:3"},
                       check=False)
        self.assertEqual(p.returncode, -signal.SIGKILL, p.stderr)
        self.ferry("sync", "-c", self.pipeline, env=env)
        tables = self.catalog_tables()
        (ns, name), loc = next(iter(tables.items()))
        seen = self.inspect(loc)
        self.assertEqual(seen["problems"], [])
        self.assert_same_rows(self.pg_rows(), seen["duckdb_rows"], "orders via DuckDB")
        self.assert_same_rows(self.pg_rows(), seen["icebird_rows"], "orders via icebird")
        self.ferry("verify", "-c", self.pipeline, env=env)


class VendedCredentialsTest(S3WarehouseCase):
    """A REST catalog that vends the storage credentials (`ferry catalog serve
    --vend-credentials` on the bucket): ferry, holding no AWS credentials of its own, writes the
    tables with the ones the catalog hands out for each table."""

    PIPELINE = """
name: lake
source:
  type: sqlite
  path: ./source.db
destination:
  type: iceberg
  catalog: "rest+{url}"
  warehouse: lakehouse
  namespace: lake
{rest}
state: ./state.json
"""

    def setUp(self):
        super().setUp()
        make_source(self.db_path)
        env = dict(SERVER.env("admin"), AWS_ENDPOINT_URL=SERVER.endpoint)
        self.server = CatalogServer(self, f"s3://{self.bucket}/{self.prefix}", env=env,
                                    args=["--catalog", "sqlite:./catalog.db",
                                          "--vend-credentials"])
        self.proxy = restproxy.start(self.server.url)

    def tearDown(self):
        self.proxy.stop()
        self.server.stop()
        super().tearDown()

    def test_tables_are_written_with_the_credentials_the_catalog_vends(self):
        self.write_pipeline(self.PIPELINE.format(
            url=self.proxy.url, rest="  rest: {access_delegation: vended-credentials}"))
        secret = SERVER.keys["admin"][1]
        out = self.ferry("sync", "-c", self.pipeline, "-v", user=None)
        self.assertNotIn(secret, out.stdout + out.stderr)
        for table in ("a", "b"):
            self.assert_table_equals_source("lake", table)
        with open(os.path.join(self.dir, "state.json"), encoding="utf-8") as f:
            self.assertNotIn(secret, f.read())
        # A second sync (a new full refresh) loads the tables again, with credentials again.
        self.ferry("sync", "-c", self.pipeline, user=None)
        self.assert_table_equals_source("lake", "a")
        self.assertEqual(self.proxy.violations(), [], self.proxy.format_violations())
        loads = [e for e in self.proxy.report() if e.get("operationId") == "loadTable"]
        self.assertTrue(loads)

    def test_credentials_that_expired_are_fetched_again_before_the_store_is_used(self):
        self.write_pipeline(self.PIPELINE.format(
            url=self.proxy.url, rest="  rest: {access_delegation: vended-credentials}"))
        # Every table the catalog hands out comes with credentials that expired long ago (and
        # whose secret is wrong): only those fetched again work.
        for op in ("createTable", "loadTable"):
            self.proxy.add_fault({"match": {"operationId": op}, "action": "merge",
                                  "after": "after", "count": 1000,
                                  "body": {"config": {"s3.secret-access-key": "stale-secret",
                                                      "s3.session-token-expires-at-ms": "1000"},
                                           "storage-credentials": []}})
        self.ferry("sync", "-c", self.pipeline, user=None)
        for table in ("a", "b"):
            self.assert_table_equals_source("lake", table)
        fetched = [e for e in self.proxy.report() if e.get("operationId") == "loadCredentials"]
        self.assertTrue(fetched, "the credentials were not fetched again")
        self.assertEqual(self.proxy.violations(), [], self.proxy.format_violations())

    def test_without_delegation_or_credentials_the_store_refuses_and_is_named(self):
        self.write_pipeline(self.PIPELINE.format(url=self.proxy.url, rest=""))
        p = self.ferry("sync", "-c", self.pipeline, user=None, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("AWS_ACCESS_KEY_ID", p.stderr + p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
