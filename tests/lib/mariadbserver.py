"""A throw-away MariaDB server for tests: mariadb-install-db into a temporary folder, mariadbd on
127.0.0.1 at a free port (and a Unix socket in that folder), durability off; stopped by PID, also
when a test fails.

Root logs in with a password over TCP (what ferry uses) and through the Unix socket (what the tests
use to set up and read data with the `mariadb` client, a reader nobody here wrote)."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

ROOT_PASSWORD = "Ma-s3cret-R00t"


def find(name, extra=()):
    for d in extra:
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    return shutil.which(name)


def binaries():
    """(mariadbd, mariadb-install-db, mariadb) or None when MariaDB is not installed."""
    server = find("mariadbd", ["/usr/sbin", "/usr/libexec"]) or find("mysqld", ["/usr/sbin"])
    install = find("mariadb-install-db") or find("mysql_install_db")
    client = find("mariadb") or find("mysql")
    if not (server and install and client):
        return None
    return server, install, client


def available():
    return binaries() is not None


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MariaDbServer:
    """binlog=True: the binary log on (ROW format, full row images, CRC32 checksums, server id 1),
    as a source followed by CDC needs it; `extra` adds server options."""

    def __init__(self, binlog=False, extra=()):
        found = binaries()
        if not found:
            raise RuntimeError("MariaDB is not installed: run scripts/setup.sh")
        self.server_bin, self.install_bin, self.client_bin = found
        self.dir = tempfile.mkdtemp(prefix="ferry_maria_")
        self.data = os.path.join(self.dir, "data")
        self.socket = os.path.join(self.dir, "mysqld.sock")
        self.log = os.path.join(self.dir, "error.log")
        self.port = free_port()
        self.pid = None
        self.proc = None
        self.password = None  # root's, once set
        self.binlog = binlog
        self.extra = list(extra)

    def start(self):
        p = subprocess.run([self.install_bin, "--no-defaults", f"--datadir={self.data}",
                            "--user=root", "--auth-root-authentication-method=normal",
                            "--skip-test-db"], capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed: {p.stdout}\n{p.stderr}")
        self._launch(password="")
        self._client(f"ALTER USER 'root'@'localhost' IDENTIFIED BY '{ROOT_PASSWORD}';"
                     f"CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';"
                     f"ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY '{ROOT_PASSWORD}';"
                     "GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;",
                     password="")
        self.password = ROOT_PASSWORD
        return self

    def restart(self):
        """Stops the server (SIGTERM, a clean shutdown) and starts it again on the same folder and
        port, as an operator's restart does."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        self._launch(password=self.password)

    def _launch(self, password):
        argv = [self.server_bin, "--no-defaults", f"--datadir={self.data}", "--user=root",
                f"--port={self.port}", "--bind-address=127.0.0.1", f"--socket={self.socket}",
                f"--pid-file={os.path.join(self.dir, 'mysqld.pid')}", f"--log-error={self.log}",
                "--skip-name-resolve", "--innodb-flush-log-at-trx-commit=2",
                "--innodb-doublewrite=0", "--innodb-buffer-pool-size=128M",
                "--innodb-log-file-size=64M", "--max-allowed-packet=64M",
                "--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci"]
        if self.binlog:
            argv += [f"--log-bin={os.path.join(self.data, 'binlog')}", "--server-id=1",
                     "--binlog-format=ROW", "--binlog-row-image=FULL",
                     "--binlog-checksum=CRC32", "--sync-binlog=0"]
        argv += self.extra
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.pid = self.proc.pid
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                text = open(self.log).read() if os.path.exists(self.log) else ""
                self.stop()
                raise RuntimeError(f"mariadbd exited with {self.proc.returncode}:\n{text}")
            r = self._client("SELECT 1", check=False, password=password)
            if r.returncode == 0:
                break
            if time.time() > deadline:
                text = open(self.log).read() if os.path.exists(self.log) else ""
                self.stop()
                raise RuntimeError(f"mariadbd did not answer within 60 s:\n{text}")
            time.sleep(0.2)

    def stop(self):
        """SIGTERM by PID, SIGKILL after 20 s; then the folder goes."""
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGTERM)
                deadline = time.time() + 20
                while time.time() < deadline:
                    if self.proc is not None and self.proc.poll() is not None:
                        break
                    time.sleep(0.1)
                else:
                    os.kill(self.pid, signal.SIGKILL)
                if self.proc is not None:
                    self.proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
            self.pid = None
        if os.environ.get("FERRY_KEEP_TEST_DIRS"):
            print(f"kept {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    # ---- talking to it ----
    def _client(self, sql, db=None, check=True, password=None, batch=True):
        pw = self.password if password is None else password
        argv = [self.client_bin, "--no-defaults", f"--socket={self.socket}", "-uroot",
                "--default-character-set=utf8mb4", "--binary-mode"]
        if pw:
            argv.append(f"-p{pw}")
        if batch:
            argv += ["--batch", "--skip-column-names", "--raw"]
        if db:
            argv.append(f"--database={db}")
        p = subprocess.run(argv, input=sql.encode("utf-8"), capture_output=True, timeout=120)
        r = subprocess.CompletedProcess(argv, p.returncode, p.stdout.decode("utf-8", "replace"),
                                        p.stderr.decode("utf-8", "replace"))
        if check and p.returncode != 0:
            raise RuntimeError(f"mariadb failed: {r.stderr}\nSQL:\n{sql[:2000]}")
        return r

    def session(self, db):
        """An open client session on `db` (ferrytest.SqlSession), e.g. to hold a lock."""
        import ferrytest
        return ferrytest.SqlSession([self.client_bin, "--no-defaults", f"--socket={self.socket}",
                                     "-uroot", f"-p{self.password}", "--batch",
                                     "--skip-column-names", "--unbuffered", f"--database={db}"])

    def sql(self, sql, db=None, check=True):
        """Runs SQL through the Unix socket; returns stdout (tab-separated rows, no header, values
        as the server prints them, NULL as 'NULL')."""
        return self._client(sql, db=db, check=check).stdout

    def rows(self, sql, db=None):
        """The rows of a query as tuples of the server's text forms (NULL -> None). Values must
        not hold tabs or newlines (select HEX(...) for such columns)."""
        out = self.sql(sql, db=db)
        rows = []
        for line in out.split("\n"):
            if line == "":
                continue
            rows.append(tuple(None if v == "NULL" else v for v in line.split("\t")))
        return rows

    def create_database(self, name):
        self.sql(f"DROP DATABASE IF EXISTS `{name}`; CREATE DATABASE `{name}` "
                 "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        return name

    def drop_database(self, name):
        self.sql(f"DROP DATABASE IF EXISTS `{name}`")

    def url(self, db, user="root", password_ref="${MARIADB_PASSWORD}"):
        return f"mysql://{user}:{password_ref}@127.0.0.1:{self.port}/{db}"


def start_for_module(binlog=False, extra=()):
    """Starts a server for a test module (binlog, extra: as MariaDbServer's); stops it again if
    that fails. Under scripts/test.sh
    (FERRY_REQUIRE_INTEROP set) a missing MariaDB installation is a failure; elsewhere the module
    is skipped."""
    if not available():
        if os.environ.get("FERRY_REQUIRE_INTEROP"):
            raise RuntimeError("MariaDB is not installed: run scripts/setup.sh")
        raise unittest.SkipTest("MariaDB is not installed: run scripts/setup.sh")
    server = MariaDbServer(binlog=binlog, extra=extra)
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    return server
