"""Helpers for ferry's end-to-end and crash tests: run the ferry binary on a pipeline, read the
Iceberg tables it wrote with independent readers (icebird, DuckDB, avsc via iceberg_inspect.mjs)
and compare them with the source database, value by value."""
import collections
import datetime
import decimal
import json
import os
import shutil
import sqlite3
import struct
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INSPECT = os.path.join(ROOT, "tests", "interop", "iceberg_inspect.mjs")
FERRY = os.environ.get("FERRY_BIN", os.path.join(ROOT, "build", "debug", "src", "ferry", "cli", "ferry"))


class SqlSession:
    """A database client (psql, mariadb) reading statements from a pipe, kept open while a test
    goes on: to hold a lock or a transaction open while a sync runs."""

    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, sql, until):
        """Sends `sql`, then a query printing `until`, and waits for that line."""
        self.p.stdin.write(f"{sql}\nSELECT '{until}';\n")
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError(f"the session ended before '{until}' (exit {self.p.wait()})")
            if line.strip() == until:
                return

    def finish(self, sql):
        """Sends the last statements and ends the session's input; returns its exit code."""
        self.p.stdin.write(sql + "\n")
        self.p.stdin.close()
        return self.p.wait(timeout=120)

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        self.p.stdout.close()
        if not self.p.stdin.closed:
            try:
                self.p.stdin.close()
            except BrokenPipeError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def readers_available():
    return shutil.which("node") is not None and os.path.isdir(
        os.path.join(ROOT, "tests", "interop", "node_modules"))


class FerryTestCase(unittest.TestCase):
    """A temporary folder with a pipeline file, a source database and a warehouse."""

    def setUp(self):
        if not readers_available():
            self.fail("the interop readers are missing: run scripts/setup.sh")
        self.dir = tempfile.mkdtemp(prefix="ferry_e2e_")
        self.db_path = os.path.join(self.dir, "source.db")
        self.pipeline = os.path.join(self.dir, "pipeline.yaml")

    def tearDown(self):
        if os.environ.get("FERRY_KEEP_TEST_DIRS"):
            print(f"kept {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    # ---- setup ----
    def write_pipeline(self, text):
        with open(self.pipeline, "w", encoding="utf-8") as f:
            f.write(text)

    def source(self, path=None):
        return sqlite3.connect(path or self.db_path)

    # ---- running ferry ----
    def ferry(self, *args, env=None, check=True, timeout=600):
        e = dict(os.environ)
        e.pop("FERRY_FAULT", None)
        if env:
            e.update(env)
        p = subprocess.run([FERRY, *args], capture_output=True, text=True, env=e, timeout=timeout,
                           cwd=self.dir)
        if check and p.returncode != 0:
            self.fail(f"ferry {' '.join(args)} exited {p.returncode}\nstdout:\n{p.stdout}\n"
                      f"stderr:\n{p.stderr}")
        return p

    def sync(self, **kw):
        return self.ferry("sync", "-c", self.pipeline, **kw)

    # ---- reading the destination ----
    def catalog_tables(self, warehouse="warehouse", namespace=None):
        cat = sqlite3.connect(os.path.join(self.dir, warehouse, "catalog.db"))
        q = "SELECT table_namespace, table_name, metadata_location FROM iceberg_tables"
        rows = cat.execute(q).fetchall()
        cat.close()
        return {(ns, t): loc for ns, t, loc in rows if namespace is None or ns == namespace}

    def snapshot_count(self, namespace, table, warehouse="warehouse"):
        """How many snapshots the table's current metadata file lists (read from the JSON file
        itself): a sync that commits nothing leaves it as it was."""
        loc = self.catalog_tables(warehouse).get((namespace, table))
        self.assertIsNotNone(loc, f"table {namespace}.{table} is not in the catalog")
        with open(loc.removeprefix("file://"), encoding="utf-8") as f:
            return len(json.load(f).get("snapshots") or [])

    def stream_report(self, stdout, stream):
        """The line of the sync's report for `stream` (a name without spaces): {"rows": rows
        written, "action": what the sync did, "line": the line}."""
        for line in stdout.splitlines():
            parts = line.split()
            if parts and parts[0] == stream and len(parts) >= 8:
                # ... action  rows files <bytes> <unit> seconds
                return {"rows": int(parts[-5]), "action": " ".join(parts[2:-5]), "line": line}
        self.fail(f"no report line for stream {stream}:\n{stdout}")

    def inspect(self, metadata_location):
        p = subprocess.run(["node", INSPECT, metadata_location.removeprefix("file://")],
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            self.fail(f"iceberg_inspect failed: {p.stderr}")
        return json.loads(p.stdout)

    def assert_table_equals_source(self, namespace, table, source_table=None, warehouse="warehouse",
                                   source_paths=None):
        """The Iceberg table holds exactly the source table's rows (of every database in
        `source_paths`, when several sources merge into it): same multiset, through both icebird
        (the whole Iceberg read path) and DuckDB (every data file)."""
        source_table = source_table or table
        loc = self.catalog_tables(warehouse).get((namespace, table))
        self.assertIsNotNone(loc, f"table {namespace}.{table} is not in the catalog")
        seen = self.inspect(loc)
        self.assertEqual(seen["problems"], [], f"readers found problems in {table}")
        fields = seen["schema"]["fields"]
        expected_duck, expected_bird = [], []
        for path in source_paths or [None]:
            duck, bird = self.source_rows(source_table, fields, path)
            expected_duck += duck
            expected_bird += bird
        self.assert_same_rows(expected_duck, seen["duckdb_rows"], f"{table} via DuckDB")
        self.assert_same_rows(expected_bird, seen["icebird_rows"], f"{table} via icebird")
        return seen

    def assert_same_rows(self, expected, actual, what):
        e = collections.Counter(tuple(r) for r in expected)
        a = collections.Counter(tuple(r) for r in actual)
        missing = e - a
        extra = a - e
        dups = sum(n - 1 for n in a.values() if n > 1) - sum(n - 1 for n in e.values() if n > 1)
        msg = (f"{what}: {len(actual)} rows, expected {len(expected)}; "
               f"missing {sum(missing.values())} e.g. {list(missing)[:3]}; "
               f"unexpected {sum(extra.values())} e.g. {list(extra)[:3]}; extra duplicates {dups}")
        self.assertTrue(not missing and not extra, msg)

    def source_rows(self, table, fields, path=None):
        """The source rows in the canonical forms iceberg_inspect.mjs uses for DuckDB and icebird."""
        con = self.source(path)
        cols = ", ".join('"' + f["name"].replace('"', '""') + '"' for f in fields)
        quoted = '"' + table.replace('"', '""') + '"'
        rows = con.execute(f"SELECT {cols} FROM {quoted}").fetchall()
        con.close()
        duck, bird = [], []
        for r in rows:
            duck.append([canon(f["type"], v, "duckdb") for f, v in zip(fields, r)])
            bird.append([canon(f["type"], v, "icebird") for f, v in zip(fields, r)])
        return duck, bird


EPOCH = datetime.date(1970, 1, 1)


def micros_of(text):
    """Microseconds since the epoch of ISO text; a zone offset ('Z', '+02:00') is applied."""
    text = text.replace("T", " ")
    if len(text) == 10:
        text += " 00:00:00"
    dt = datetime.datetime.fromisoformat(text)
    if dt.tzinfo is not None:
        dt = dt.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    delta = dt - datetime.datetime(1970, 1, 1)
    return delta.days * 86400000000 + delta.seconds * 1000000 + delta.microseconds


def canon(iceberg_type, v, reader):
    """A SQLite value in the canonical form a reader's value takes in iceberg_inspect.mjs."""
    if v is None:
        return None
    t = iceberg_type
    if t == "boolean":
        return "true" if v else "false"
    if t in ("int", "long"):
        return str(int(v))
    if t in ("float", "double"):
        return "f:" + struct.pack(">d", float(v)).hex()
    if t.startswith("decimal"):
        scale = int(t.split(",")[1].rstrip(")"))
        d = decimal.Decimal(repr(v) if isinstance(v, float) else str(v)).quantize(
            decimal.Decimal(1).scaleb(-scale))
        return str(d) if reader == "duckdb" else "~" + f"{float(d):.{scale}f}"
    if t == "date":
        return str((datetime.date.fromisoformat(v) - EPOCH).days)
    if t in ("timestamp", "timestamptz"):
        us = micros_of(v)
        return str(us) if reader == "duckdb" else f"ms:{us // 1000}"
    if t in ("binary", "uuid"):
        b = v if isinstance(v, bytes) else str(v).encode()
        if reader == "icebird":  # it decodes bytes as UTF-8 (see iceberg_inspect.mjs)
            return "utf8:" + b.decode("utf-8", errors="replace").encode().hex()
        return "hex:" + b.hex()
    if isinstance(v, float):
        return repr(v)
    return str(v)
