"""End to end with the SQL catalog on PostgreSQL: a SQLite database synced into Iceberg tables whose
catalog rows live in a real PostgreSQL server (`destination.catalog: postgresql://...`), read back
by icebird and DuckDB from the metadata file the catalog names, and compared with the source. Also:
the password never shows (check, logs, errors, state), the key=value form, two pipelines writing
one table at the same time, and the errors a user meets (wrong password, unreachable server, no
right to create the catalog tables)."""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferrytest  # noqa: E402
import pgserver  # noqa: E402

SERVER = None
LIMITED_PASSWORD = "l1mited-Pa55word"

PIPELINE = """
name: {name}
source:
  type: sqlite
  path: {source}
  chunk_rows: 400
{streams}
destination:
  type: iceberg
  warehouse: ./warehouse
  namespace: shop
  catalog: "{catalog}"
state: ./{name}.state.json
"""


def setUpModule():
    global SERVER

    def prepare(server):
        server.psql("CREATE DATABASE locked")
        server.psql(f"CREATE ROLE limited LOGIN PASSWORD '{LIMITED_PASSWORD}'")
        # PostgreSQL 15 no longer lets every user create tables in public; say it for older ones.
        server.psql("REVOKE CREATE ON SCHEMA public FROM PUBLIC", db="locked")

    SERVER = pgserver.start_for_module(prepare)


def tearDownModule():
    if SERVER:
        SERVER.stop()


def uri(db, user=pgserver.SUPERUSER, password="${CATALOG_PASSWORD}", port=None):
    return f"postgresql://{user}:{password}@127.0.0.1:{port or SERVER.port}/{db}"


class PostgresCatalogTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        self.env = {"CATALOG_PASSWORD": pgserver.SUPERUSER_PASSWORD}
        # Each test its own catalog database: a table name means one table per catalog.
        self.db = "cat_" + os.path.basename(self.dir).lower().replace("-", "_")
        SERVER.psql(f"CREATE DATABASE {self.db}")
        con = self.source()
        con.executescript("""
            CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, credit REAL,
                                    signed_up DATE);
            CREATE TABLE "Odd ""Name"" €" ("Line No" INTEGER PRIMARY KEY, "naïve 名" TEXT);
        """)
        con.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2500) "
            "INSERT INTO customers SELECT i, 'Zoë ' || i, CASE WHEN i % 5 = 0 THEN NULL ELSE "
            "i / 4.0 END, date('2000-01-01', '+' || i || ' days') FROM n")
        con.executemany('INSERT INTO "Odd ""Name"" €" VALUES (?, ?)',
                        [(i, None if i % 3 == 0 else f"ключ 🔑 {i}") for i in range(1, 301)])
        con.commit()
        con.close()

    def configure(self, catalog, name="shop", source="./source.db", streams=""):
        text = PIPELINE.format(name=name, source=source, catalog=catalog, streams=streams)
        path = os.path.join(self.dir, f"{name}.yaml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def run_ferry(self, *args, pipeline=None, env=None, check=True):
        return self.ferry(*args, "-c", pipeline or self.pipeline, env=env or self.env,
                          check=check)

    def catalog_rows(self, db=None):
        rows = SERVER.query_json(
            "SELECT COALESCE(json_agg(json_build_array(catalog_name, table_namespace, table_name, "
            "metadata_location, previous_metadata_location, iceberg_type)), '[]') "
            "FROM iceberg_tables", db=db or self.db)
        return {(r[1], r[2]): r for r in rows}

    def assert_table_matches(self, table, db=None):
        row = self.catalog_rows(db).get(("shop", table))
        self.assertIsNotNone(row, f"{table} is not in the catalog")
        seen = self.inspect(row[3])
        self.assertEqual(seen["problems"], [], f"readers found problems in {table}")
        duck, bird = self.source_rows(table, seen["schema"]["fields"])
        self.assert_same_rows(duck, seen["duckdb_rows"], f"{table} via DuckDB")
        self.assert_same_rows(bird, seen["icebird_rows"], f"{table} via icebird")
        return row, seen

    def assert_no_password(self, *texts):
        for t in texts:
            self.assertNotIn(pgserver.SUPERUSER_PASSWORD, t)
            self.assertNotIn(LIMITED_PASSWORD, t)

    def test_sync_with_the_catalog_on_postgresql_reads_back_everywhere(self):
        self.pipeline = self.configure(uri(self.db))
        check = self.run_ferry("check")
        self.assertIn(f"SQL catalog postgresql://postgres@127.0.0.1:{SERVER.port}/{self.db}",
                      check.stdout)
        out = self.run_ferry("sync", "-v")
        self.assert_no_password(check.stdout, check.stderr, out.stdout, out.stderr)
        for table in ["customers", 'Odd "Name" €']:
            row, seen = self.assert_table_matches(table)
            self.assertEqual(row[0], "ferry")
            self.assertEqual(row[5], "TABLE")
            self.assertIsNotNone(row[4])  # previous_metadata_location is kept by every swap
        self.assertEqual(seen["refs"], ["main"])
        ns = SERVER.psql("SELECT namespace, property_key, property_value "
                         "FROM iceberg_namespace_properties", db=self.db).split()
        self.assertEqual(ns, ["shop|exists|true"])
        # Nothing went to an embedded catalog, and the state file holds no secret.
        self.assertFalse(os.path.exists(os.path.join(self.dir, "warehouse", "catalog.db")))
        with open(os.path.join(self.dir, "shop.state.json")) as f:
            self.assert_no_password(f.read())

        # A second sync after changes: the tables follow the source, and the metadata file the
        # catalog names carries the snapshot-log and metadata-log of every commit.
        con = self.source()
        con.execute("DELETE FROM customers WHERE id % 7 = 0")
        con.execute("INSERT INTO customers VALUES (9000, 'new', 1.5, '2024-02-29')")
        con.commit()
        con.close()
        self.run_ferry("sync")
        row, _ = self.assert_table_matches("customers")
        with open(row[3].removeprefix("file://")) as f:
            meta = json.load(f)
        self.assertEqual(meta["properties"]["write.metadata.delete-after-commit.enabled"], "true")
        self.assertEqual(meta["metadata-log"][-1]["metadata-file"], row[4])
        self.assertEqual(meta["snapshot-log"][-1]["snapshot-id"], meta["current-snapshot-id"])
        current = [s for s in meta["snapshots"]
                   if s["snapshot-id"] == meta["current-snapshot-id"]][0]
        for key in ["total-records", "total-data-files", "total-files-size", "added-records",
                    "total-delete-files", "operation"]:
            self.assertIn(key, current["summary"])
        self.assertEqual(current["summary"]["total-records"], str(2500 - 2500 // 7 + 1))

    def test_a_key_value_connection_string_works_too(self):
        self.pipeline = self.configure(
            f"postgresql:host=127.0.0.1 port={SERVER.port} dbname={self.db} "
            f"user={pgserver.SUPERUSER} password=${{CATALOG_PASSWORD}}", name="kv")
        check = self.run_ferry("check")
        self.assertIn(f"postgresql://postgres@127.0.0.1:{SERVER.port}/{self.db}", check.stdout)
        self.assert_no_password(check.stdout, check.stderr)
        self.run_ferry("sync")
        self.assert_table_matches("customers")

    def test_two_pipelines_write_one_table_at_the_same_time(self):
        # Two sources with disjoint keys, each its own pipeline (and marker), one table.
        for n in (1, 2):
            path = os.path.join(self.dir, f"part{n}.db")
            con = __import__("sqlite3").connect(path)
            con.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)")
            con.executemany("INSERT INTO events VALUES (?, ?)",
                            [(n * 100000 + i, i) for i in range(1, 1201)])
            con.commit()
            con.close()
        streams = "  mode: incremental\n  streams:\n    - name: events\n      cursor: id"
        pipelines = [self.configure(uri(self.db), name=f"part{n}", source=f"./part{n}.db",
                                    streams=streams) for n in (1, 2)]
        env = dict(os.environ, **self.env)
        env.pop("FERRY_FAULT", None)
        procs = [subprocess.Popen([ferrytest.FERRY, "sync", "-c", p], cwd=self.dir, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for p in pipelines]
        for p in procs:
            out, err = p.communicate(timeout=600)
            self.assertEqual(p.returncode, 0, f"sync failed:\n{out}\n{err}")
        row = self.catalog_rows()[("shop", "events")]
        seen = self.inspect(row[3])
        self.assertEqual(seen["problems"], [])
        expected = [[str(n * 100000 + i), str(i)] for n in (1, 2) for i in range(1, 1201)]
        self.assert_same_rows(expected, seen["duckdb_rows"], "events via DuckDB")
        self.assert_same_rows(expected, seen["icebird_rows"], "events via icebird")
        with open(row[3].removeprefix("file://")) as f:
            props = json.load(f)["properties"]
        self.assertIn("ferry.marker.part1", props)
        self.assertIn("ferry.marker.part2", props)

    def test_errors_name_the_problem_and_the_fix_without_the_password(self):
        # Wrong password.
        self.pipeline = self.configure(uri(self.db, password="Wr0ng-Secret"), name="bad")
        p = self.run_ferry("check", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(f"cannot log in to the catalog database "
                      f"postgresql://postgres@127.0.0.1:{SERVER.port}/{self.db}", p.stderr)
        self.assertIn("check the user and password in destination.catalog", p.stderr)
        self.assertNotIn("Wr0ng-Secret", p.stdout + p.stderr)

        # Nothing listens on the port.
        self.pipeline = self.configure(uri(self.db, port=pgserver.free_port()), name="down")
        p = self.run_ferry("check", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("check host and port in destination.catalog", p.stderr)
        self.assert_no_password(p.stdout, p.stderr)

        # A database where the user may not create the catalog tables.
        self.pipeline = self.configure(uri("locked", user="limited"), name="locked")
        p = self.run_ferry("sync", env={"CATALOG_PASSWORD": LIMITED_PASSWORD}, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("cannot create the catalog table iceberg_tables", p.stderr)
        self.assertIn("GRANT CREATE ON SCHEMA public", p.stderr)
        self.assert_no_password(p.stdout, p.stderr)

        # Once an administrator made the tables and granted their use, the same user syncs.
        SERVER.psql("SET ROLE postgres;" + """
            CREATE TABLE iceberg_tables (catalog_name VARCHAR(255) NOT NULL,
              table_namespace VARCHAR(255) NOT NULL, table_name VARCHAR(255) NOT NULL,
              metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000),
              iceberg_type VARCHAR(5), PRIMARY KEY (catalog_name, table_namespace, table_name));
            CREATE TABLE iceberg_namespace_properties (catalog_name VARCHAR(255) NOT NULL,
              namespace VARCHAR(255) NOT NULL, property_key VARCHAR(255),
              property_value VARCHAR(1000), PRIMARY KEY (catalog_name, namespace, property_key));
            GRANT SELECT, INSERT, UPDATE ON iceberg_tables, iceberg_namespace_properties
              TO limited;
        """, db="locked")
        p = self.run_ferry("sync", env={"CATALOG_PASSWORD": LIMITED_PASSWORD})
        self.assert_no_password(p.stdout, p.stderr)
        self.assert_table_matches("customers", db="locked")


if __name__ == "__main__":
    unittest.main()
