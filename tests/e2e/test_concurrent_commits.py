"""Concurrent writers: two processes commit many times to the same Iceberg table at the same
moment through one SQL catalog on a real PostgreSQL server. Every commit of both must land exactly
once (no lost commit, no file twice), the readers (icebird, DuckDB) must see exactly the rows both
wrote, and both writers must have lost compare-and-swap races and retried, so the test cannot pass
without concurrency. A second run does the same while catalog connections are killed by the
server again and again: reconnects, and unknown outcomes read back instead of written twice."""
import json
import os
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferrytest  # noqa: E402
import pgserver  # noqa: E402

SERVER = None
WRITER = os.environ.get("FERRY_COMMIT_WRITER", os.path.join(
    os.path.dirname(ferrytest.FERRY), "..", "..", "..", "tests", "ferry_commit_writer"))
COMMITS = 80
ROWS = 3


def setUpModule():
    global SERVER
    SERVER = pgserver.start_for_module(lambda s: s.psql("CREATE DATABASE lake"))


def tearDownModule():
    if SERVER:
        SERVER.stop()


class ConcurrentCommitsTest(ferrytest.FerryTestCase):
    def catalog_uri(self, db):
        return (f"postgresql://{pgserver.SUPERUSER}:{pgserver.SUPERUSER_PASSWORD}"
                f"@127.0.0.1:{SERVER.port}/{db}")

    def run_writers(self, db, table, during=None):
        SERVER.psql(f"DROP DATABASE IF EXISTS {db}; CREATE DATABASE {db}")
        warehouse = os.path.join(self.dir, "warehouse")
        procs = []
        start_at = int((time.time() + 2) * 1000)  # both have opened the table by then
        for n, name in enumerate(["alpha", "beta"]):
            procs.append(subprocess.Popen(
                [WRITER, "--catalog", self.catalog_uri(db), "--warehouse", warehouse,
                 "--namespace", "lake", "--table", table, "--writer", name,
                 "--commits", str(COMMITS), "--rows", str(ROWS), "--id-base", str(n * 1000000),
                 "--start-at", str(start_at)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        stop = threading.Event()
        helper = None
        if during:
            helper = threading.Thread(target=during, args=(stop,))
            helper.start()
        reports = []
        try:
            for p in procs:
                out, err = p.communicate(timeout=600)
                self.assertEqual(p.returncode, 0, f"writer failed:\n{err}")
                reports.append(json.loads(out))
        finally:
            stop.set()
            if helper:
                helper.join()
        return reports

    def check_table(self, db, table, reports):
        loc = SERVER.psql("SELECT metadata_location FROM iceberg_tables WHERE catalog_name = "
                          f"'ferry' AND table_namespace = 'lake' AND table_name = '{table}'",
                          db=db).strip()
        self.assertTrue(loc, "the table is not in the catalog")
        seen = self.inspect(loc)
        self.assertEqual(seen["problems"], [])
        # Every file each writer committed is in the table, once; no other file is.
        in_table = sorted(f["path"] for f in seen["data_files"])
        committed = sorted(f for r in reports for f in r["files"])
        self.assertEqual(len(committed), 2 * COMMITS)
        self.assertEqual(in_table, committed)
        # Both readers see exactly the rows both writers wrote.
        expected = []
        for n, r in enumerate(reports):
            for i in range(1, COMMITS + 1):
                for j in range(ROWS):
                    expected.append([str(n * 1000000 + (i - 1) * ROWS + j), r["writer"], str(i)])
        self.assert_same_rows(expected, seen["duckdb_rows"], "DuckDB")
        self.assert_same_rows(expected, seen["icebird_rows"], "icebird")
        self.assertEqual(seen["summary"]["total-records"], str(2 * COMMITS * ROWS))
        # Each commit left its writer's marker; the last ones say every commit landed.
        with open(loc.removeprefix("file://")) as f:
            meta = json.load(f)
        for r in reports:
            self.assertEqual(meta["properties"][f"ferry.marker.{r['writer']}"], str(COMMITS))
        # Old metadata files were pruned (previous-versions-max 20), the live ones kept.
        folder = os.path.dirname(loc.removeprefix("file://"))
        files = [f for f in os.listdir(folder) if f.endswith(".metadata.json")]
        logged = {os.path.basename(e["metadata-file"]) for e in meta["metadata-log"]}
        self.assertEqual(len(meta["metadata-log"]), 20)
        self.assertIn(os.path.basename(loc), files)
        self.assertTrue(logged <= set(files), "a metadata file still in the log was deleted")
        unknown = sum(r["unknown_outcomes"] for r in reports)
        # Files whose swap had an unknown outcome and did not land are never deleted.
        self.assertLessEqual(len(files), 21 + unknown, sorted(files))
        return meta

    def test_two_writer_processes_both_land_every_commit(self):
        reports = self.run_writers("lake", "events")
        counts = [{k: v for k, v in r.items() if k != "files"} for r in reports]
        for c in counts:
            self.assertEqual(c["already_landed"], 0, c)
            self.assertEqual(c["unknown_outcomes"], 0, c)
        # Races were lost and retried: the writers really committed at the same time. (Which of
        # the two loses depends on scheduling: on a loaded machine one may win every race.)
        self.assertGreater(sum(c["conflicts"] for c in counts), 0,
                           f"neither writer ever had to retry: {counts}")
        self.check_table("lake", "events", reports)

    def test_commits_survive_catalog_connections_killed_mid_run(self):
        kills = []

        def killer(stop):
            while not stop.is_set():
                out = SERVER.psql(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = 'ferry-catalog' AND pid <> pg_backend_pid()",
                    check=False)
                if out.strip().isdigit():
                    kills.append(int(out.strip()))
                time.sleep(0.15)

        reports = self.run_writers("chaos", "events", during=killer)
        self.assertGreater(sum(kills), 0, "no catalog connection was killed")
        print(f"killed {sum(kills)} catalog connections; unknown outcomes read back: "
              f"{[r['unknown_outcomes'] for r in reports]}, conflicts: "
              f"{[r['conflicts'] for r in reports]}", file=sys.stderr)
        self.check_table("chaos", "events", reports)


if __name__ == "__main__":
    unittest.main()
