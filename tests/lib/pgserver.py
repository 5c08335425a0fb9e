"""A throw-away PostgreSQL server for tests: initdb into a temporary folder, listen on 127.0.0.1 at
a free port (and a Unix socket in that folder), fsync off; stopped by PID, also when a test fails.

Run as root, initdb and postgres refuse to start: the server then runs as the `postgres` user
(runuser) in a folder it owns. TCP logins need a password (scram-sha-256); Unix-socket logins are
trusted, which is how the tests set up data (psql)."""
import unittest
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

SUPERUSER = "postgres"
SUPERUSER_PASSWORD = "s3cret-Sup3ruser"


def find_bindir():
    env = os.environ.get("FERRY_PG_BINDIR")
    if env:
        return env
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(d, "initdb")):
            return d
    try:
        return subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def available():
    return find_bindir() is not None and shutil.which("psql") is not None


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    def __init__(self):
        self.bindir = find_bindir()
        if not self.bindir:
            raise RuntimeError("PostgreSQL is not installed: run scripts/setup.sh")
        self.dir = tempfile.mkdtemp(prefix="ferry_pg_")
        self.data = os.path.join(self.dir, "data")
        self.port = free_port()
        self.pid = None
        self.as_root = os.geteuid() == 0

    def _run(self, argv, **kw):
        if self.as_root:
            argv = ["runuser", "-u", "postgres", "--"] + argv
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, **kw)

    def start(self):
        if self.as_root:
            shutil.chown(self.dir, "postgres", "postgres")
        pwfile = os.path.join(self.dir, "pw")
        with open(pwfile, "w") as f:
            f.write(SUPERUSER_PASSWORD + "\n")
        if self.as_root:
            shutil.chown(pwfile, "postgres", "postgres")
        p = self._run([os.path.join(self.bindir, "initdb"), "-D", self.data, "-U", SUPERUSER,
                       "--pwfile", pwfile, "--auth-local=trust", "--auth-host=scram-sha-256",
                       "--no-sync", "-E", "UTF8", "--locale=C.UTF-8"])
        if p.returncode != 0:
            raise RuntimeError(f"initdb failed: {p.stdout}\n{p.stderr}")
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(f"\nlisten_addresses = '127.0.0.1'\nport = {self.port}\n"
                    f"unix_socket_directories = '{self.dir}'\nfsync = off\n"
                    "synchronous_commit = off\nfull_page_writes = off\n"
                    "wal_level = logical\nmax_replication_slots = 16\nmax_wal_senders = 16\n")
        log = os.path.join(self.dir, "server.log")
        p = self._run([os.path.join(self.bindir, "pg_ctl"), "-D", self.data, "-l", log, "-w",
                       "-t", "30", "start"])
        if p.returncode != 0:
            text = open(log).read() if os.path.exists(log) else ""
            self.stop()
            raise RuntimeError(f"pg_ctl start failed: {p.stdout}\n{p.stderr}\n{text}")
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            self.pid = int(f.readline().strip())
        return self

    def stop(self):
        """Fast shutdown by PID (SIGINT), SIGKILL after 15 s; then the folder goes."""
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGINT)
                deadline = time.time() + 15
                while time.time() < deadline:
                    os.kill(self.pid, 0)
                    time.sleep(0.1)
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.pid = None
        if os.environ.get("FERRY_KEEP_TEST_DIRS"):
            print(f"kept {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    # ---- talking to it ----
    def psql(self, sql, db="postgres", user=SUPERUSER, check=True):
        """Runs SQL through the Unix socket (trusted); returns stdout (unaligned, tuples only)."""
        p = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", self.dir,
                            "-p", str(self.port), "-U", user, "-d", db],
                           input=sql, capture_output=True, text=True, timeout=120)
        if check and p.returncode != 0:
            raise RuntimeError(f"psql failed: {p.stderr}\nSQL:\n{sql[:2000]}")
        return p.stdout

    def session(self, db, user=SUPERUSER):
        """An open psql session on `db` (ferrytest.SqlSession), e.g. to hold a lock."""
        import ferrytest
        return ferrytest.SqlSession(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                                     "-h", self.dir, "-p", str(self.port), "-U", user, "-d", db])

    def query_json(self, sql, db="postgres"):
        """The value of a query returning one JSON value (e.g. json_agg(...))."""
        out = self.psql(sql, db=db).strip()
        return json.loads(out) if out else None

    def create_test_database(self, prefix, test_name):
        """A fresh database for one test, named after it ("cdc_toast_values..."); returns its name."""
        db = prefix + "_" + test_name.removeprefix("test_")[:40]
        self.psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        self.psql(f"CREATE DATABASE {db}")
        return db

    def drop_test_database(self, db):
        """Drops a test's database with the replication slots left on it."""
        self.psql("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                  f"WHERE database = '{db}' AND NOT active")
        self.psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")

    def dsn(self, db, user=SUPERUSER, password_ref="${PGPASSWORD}"):
        return f"host=127.0.0.1 port={self.port} dbname={db} user={user} password={password_ref}"


def start_for_module(prepare=None):
    """Starts a server for a test module and runs `prepare(server)`; stops it again if either
    fails. Under scripts/test.sh (FERRY_REQUIRE_INTEROP set) a missing PostgreSQL installation is
    a failure; elsewhere the module is skipped."""
    if not available():
        if os.environ.get("FERRY_REQUIRE_INTEROP"):
            raise RuntimeError("PostgreSQL is not installed: run scripts/setup.sh")
        raise unittest.SkipTest("PostgreSQL is not installed: run scripts/setup.sh")
    server = PgServer()
    try:
        server.start()
        if prepare:
            prepare(server)
    except BaseException:
        server.stop()
        raise
    return server

