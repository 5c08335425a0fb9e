"""A throw-away Redis server for tests: redis-server on 127.0.0.1 at a free port, in a temporary
folder, without persistence (--save '' --appendonly no), daemonized with a pid file; stopped by
PID (SIGTERM, SIGKILL after 10 s), also when a test fails.

`RespClient` is a tiny RESP2 client written here (raw socket, binary-safe), so that what ferry
wrote is read back by code that shares nothing with ferry's own client."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest


def find_binary():
    return os.environ.get("FERRY_REDIS_SERVER") or shutil.which("redis-server")


def available():
    return find_binary() is not None


def alive(pid):
    """Whether process `pid` still runs (a zombie does not: a daemon's parent may never reap)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisError(Exception):
    """An error reply."""


class RespClient:
    """Commands as lists of str/bytes; replies as bytes, int, None, lists, or RedisError raised."""

    def __init__(self, port, password=None, host="127.0.0.1", timeout=30):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""
        if password is not None:
            self.command("AUTH", password)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def command(self, *args):
        return self.pipeline([args])[0]

    def pipeline(self, commands):
        """Sends every command, then reads one reply per command; error replies raise after all
        replies are read."""
        out = bytearray()
        for args in commands:
            out += b"*%d\r\n" % len(args)
            for a in args:
                a = a if isinstance(a, bytes) else str(a).encode()
                out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(bytes(out))
        replies = [self._reply() for _ in commands]
        for r in replies:
            if isinstance(r, RedisError):
                raise r
        return replies

    def _fill(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the Redis server closed the connection")
        self.buf += chunk

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest
        if kind == b"-":
            return RedisError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            items = [self._reply() for _ in range(n)]
            for i in items:
                if isinstance(i, RedisError):
                    return items  # EXEC's failed commands: left to the caller
            return items
        raise ConnectionError(f"not a RESP2 reply: {line[:40]!r}")

    # ---- conveniences ----
    def scan(self, pattern):
        """Every key matching `pattern` (deduplicated)."""
        keys, cursor = set(), b"0"
        while True:
            cursor, batch = self.command("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
            keys.update(batch)
            if cursor == b"0":
                return keys

    def hgetall_many(self, keys):
        """{key: {field: value}} for `keys` (bytes), pipelined."""
        keys = list(keys)
        out = {}
        for i in range(0, len(keys), 1000):
            part = keys[i:i + 1000]
            for k, flat in zip(part, self.pipeline([("HGETALL", k) for k in part])):
                out[k] = dict(zip(flat[0::2], flat[1::2]))
        return out


class RedisServer:
    def __init__(self, password=None):
        self.binary = find_binary()
        if not self.binary:
            raise RuntimeError("redis-server is not installed: run scripts/setup.sh")
        self.dir = tempfile.mkdtemp(prefix="ferry_redis_")
        self.port = free_port()
        self.password = password
        self.pidfile = os.path.join(self.dir, "redis.pid")
        self.pid = None

    def start(self):
        argv = [self.binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
                "--appendonly", "no", "--daemonize", "yes", "--pidfile", self.pidfile,
                "--dir", self.dir, "--logfile", os.path.join(self.dir, "redis.log")]
        if self.password is not None:
            argv += ["--requirepass", self.password]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        if p.returncode != 0:
            self.stop()
            raise RuntimeError(f"redis-server failed to start: {p.stdout}\n{p.stderr}")
        deadline = time.time() + 30
        last = None
        while time.time() < deadline:
            if self.pid is None and os.path.exists(self.pidfile):
                with open(self.pidfile) as f:
                    text = f.read().strip()
                self.pid = int(text) if text else None
            try:
                with self.client() as c:
                    if c.command("PING") == b"PONG" and self.pid:
                        return self
            except (OSError, RedisError) as e:
                last = e
            time.sleep(0.05)
        log = os.path.join(self.dir, "redis.log")
        text = open(log).read() if os.path.exists(log) else ""
        self.stop()
        raise RuntimeError(f"redis-server did not answer PING within 30 s ({last}):\n{text}")

    def client(self):
        return RespClient(self.port, self.password)

    def url(self, password_ref=None, db=0):
        """redis://[:password@]127.0.0.1:port/db; `password_ref` is what the pipeline file holds
        (e.g. "${REDIS_PASSWORD}")."""
        auth = f":{password_ref}@" if password_ref else ""
        return f"redis://{auth}127.0.0.1:{self.port}/{db}"

    def stop(self):
        """SIGTERM by PID, SIGKILL after 10 s; then the folder goes."""
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGTERM)
                deadline = time.time() + 10
                while time.time() < deadline and alive(self.pid):
                    time.sleep(0.05)
                if alive(self.pid):
                    os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.pid = None
        if os.environ.get("FERRY_KEEP_TEST_DIRS"):
            print(f"kept {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


def start_for_module(password=None):
    """Starts a server for a test module. Under scripts/test.sh (FERRY_REQUIRE_INTEROP set) a
    missing redis-server is a failure; elsewhere the module is skipped."""
    if not available():
        if os.environ.get("FERRY_REQUIRE_INTEROP"):
            raise RuntimeError("redis-server is not installed: run scripts/setup.sh")
        raise unittest.SkipTest("redis-server is not installed: run scripts/setup.sh")
    server = RedisServer(password)
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    return server
