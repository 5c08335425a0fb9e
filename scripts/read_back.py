#!/usr/bin/env python3
"""Reads every table of a pipeline's Iceberg warehouse with icebird (an independent reader) and
prints its row count next to the source table's. Exits 1 if any count differs.

Usage: read_back.py PIPELINE.yaml [--rest URL]
  (the quick start's pipeline: SQLite source, Iceberg destination)
  --rest URL   find the tables through the Iceberg REST catalog at URL (`ferry catalog serve`)
               with iceberg-js, a REST client nobody here wrote, instead of reading the SQL
               catalog's file
"""
import json
import os
import sqlite3
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSPECT = os.path.join(ROOT, "tests", "interop", "iceberg_inspect.mjs")
REST_TABLES = os.path.join(ROOT, "tests", "interop", "rest_tables.mjs")


def simple_yaml(path):
    """The few keys this script needs, from the quick start's flat pipeline file."""
    keys = {}
    section = None
    for raw in open(path, encoding="utf-8"):
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if not line.startswith(" "):
            k, _, v = line.partition(":")
            section = k.strip()
            if v.strip():
                keys[section] = v.strip()
        else:
            k, _, v = line.strip().partition(":")
            keys[f"{section}.{k.strip()}"] = v.strip()
    return keys


def main():
    pipeline = os.path.abspath(sys.argv[1])
    base = os.path.dirname(pipeline)
    cfg = simple_yaml(pipeline)
    db = os.path.join(base, cfg["source.path"])
    warehouse = os.path.join(base, cfg["destination.warehouse"])
    namespace = cfg.get("destination.namespace", cfg["name"])
    if len(sys.argv) == 4 and sys.argv[2] == "--rest":
        listed = subprocess.run(["node", REST_TABLES, "--url", sys.argv[3], "--namespace",
                                 namespace], capture_output=True, text=True, check=False)
        if listed.returncode != 0:
            print(f"listing the tables through the REST catalog failed: {listed.stderr.strip()}")
            sys.exit(1)
        tables = [(t["name"], t["metadataLocation"]) for t in json.loads(listed.stdout)["tables"]]
        print(f"tables of {namespace} as iceberg-js sees them through {sys.argv[3]}:")
    else:
        catalog = sqlite3.connect(os.path.join(warehouse, "catalog.db"))
        tables = catalog.execute(
            "SELECT table_name, metadata_location FROM iceberg_tables WHERE table_namespace = ?"
            " ORDER BY table_name", (namespace,)).fetchall()
    source = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    ok = bool(tables)
    print(f"{'table':<28} {'source rows':>12} {'icebird rows':>13}  {'duckdb rows':>12}  result")
    for (table, location) in tables:
        src = source.execute(f'SELECT count(*) FROM "{table.replace(chr(34), chr(34) * 2)}"').fetchone()[0]
        out = subprocess.run(["node", INSPECT, location.removeprefix("file://")],
                             capture_output=True, text=True, check=False)
        if out.returncode != 0:
            print(f"{namespace}.{table:<22} reader failed: {out.stderr.strip()}")
            ok = False
            continue
        seen = json.loads(out.stdout)
        icebird, duck = len(seen["icebird_rows"]), len(seen["duckdb_rows"])
        good = icebird == src and duck == src and not seen["problems"]
        ok &= good
        print(f"{namespace + '.' + table:<28} {src:>12} {icebird:>13}  {duck:>12}  "
              f"{'ok' if good else 'DIFFERENT'}")
        for p in seen["problems"]:
            print(f"    problem: {p}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
