"""A checking proxy in front of an Iceberg REST catalog server, for tests:
tests/interop/rest_proxy.mjs (node, openapi-backend and the protocol's official OpenAPI document;
see that file) on 127.0.0.1 at a port of its own choosing, started per test or per module and
stopped by PID, also when a test fails.

Every exchange between a client (ferry, iceberg-js, ...) and the server through `url` is checked
against the spec, both ways, and listed in `report()`; `violations()` is what a test asserts to be
empty. `add_fault()` makes the server misbehave on the next matching requests: answer an error
status without forwarding, forward and then answer an error status (the change landed, the client
is told it failed), drop the connection before or after forwarding, or delay:

    proxy = RestProxy(upstream="http://127.0.0.1:%d" % port).start()
    proxy.add_fault({"match": {"method": "POST", "pathRegex": "/tables/[^/]+$"},
                     "action": "status", "status": 409, "after": "before", "count": 1})
    ... point the client at proxy.url ...
    self.assertEqual(proxy.violations(), [])
    proxy.stop()

The report file (one JSON line per exchange) stays in the proxy's temporary folder, kept with
FERRY_KEEP_TEST_DIRS set."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INTEROP = os.path.join(ROOT, "tests", "interop")
SCRIPT = os.path.join(INTEROP, "rest_proxy.mjs")


def available():
    return shutil.which("node") is not None and os.path.isdir(
        os.path.join(INTEROP, "node_modules", "openapi-backend"))


def spec_path():
    """The REST catalog OpenAPI document the proxy checks against."""
    return os.environ.get("FERRY_ICEBERG_SPEC") or os.path.join(
        os.path.dirname(ROOT), "shared", "reference", "iceberg-spec", "rest-catalog-open-api.json")


class RestProxy:
    def __init__(self, upstream, base_path=None, faults=(), start_timeout=20):
        self.upstream = upstream.rstrip("/")
        self.base_path = base_path
        self.initial_faults = list(faults)
        self.start_timeout = start_timeout
        self.dir = tempfile.mkdtemp(prefix="ferry_restproxy_")
        self.report_path = os.path.join(self.dir, "report.jsonl")
        self.stderr_path = os.path.join(self.dir, "proxy.stderr")
        self.port = None
        self.proc = None

    @property
    def url(self):
        """What the client is given as its catalog URI (with the base path, if any)."""
        return f"http://127.0.0.1:{self.port}{self.base_path or ''}"

    @property
    def control_url(self):
        return f"http://127.0.0.1:{self.port}/__proxy"

    def start(self):
        argv = ["node", SCRIPT, "--upstream", self.upstream, "--listen", "0",
                "--report", self.report_path, "--control"]
        if self.base_path:
            argv += ["--base-path", self.base_path]
        for f in self.initial_faults:
            argv += ["--fault", json.dumps(f)]
        with open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen(argv, cwd=INTEROP, stdout=subprocess.PIPE, stderr=err,
                                         stdin=subprocess.DEVNULL, text=True)
        # The first line on stdout is `listening <port>`; read it on a thread so that the wait is
        # bounded even if the proxy prints nothing and does not exit.
        first = []
        reader = threading.Thread(target=lambda: first.append(self.proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(self.start_timeout)
        line = first[0].strip() if first else ""
        if not line.startswith("listening "):
            if first:  # stdout ended or said something else: the proxy is exiting
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            code = self.proc.poll()
            err = self.stderr()
            self.stop()
            what = (f"exited with code {code}" if code is not None
                    else f"did not say it listens within {self.start_timeout} s")
            raise RuntimeError(f"rest_proxy.mjs {what} (stdout {line!r}):\n{err}")
        self.port = int(line.split()[1])
        return self

    def stderr(self):
        if not os.path.exists(self.stderr_path):
            return ""
        with open(self.stderr_path) as f:
            return f.read()[-4000:]

    def _call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.control_url}/{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"rest_proxy {method} /__proxy/{path}: HTTP {e.code}: "
                               f"{e.read().decode(errors='replace')}") from None

    def add_fault(self, fault):
        """Arms a fault (a dict, see rest_proxy.mjs); returns it as the proxy holds it."""
        return self._call("POST", "faults", fault)

    def faults(self):
        """The faults still armed."""
        return self._call("GET", "faults")

    def clear_faults(self):
        return self._call("DELETE", "faults")

    def report(self):
        """Every exchange so far: dicts with method, path, query, status, operationId,
        requestErrors, responseErrors, notes (and fault, upstreamStatus, dropped)."""
        return self._call("GET", "report")

    def clear_report(self):
        return self._call("DELETE", "report")

    def stats(self):
        return self._call("GET", "stats")

    def violations(self):
        """The exchanges in which the client or the server broke the spec, or that matched no
        operation of it."""
        return [e for e in self.report()
                if e.get("operationId") is None or e.get("requestErrors") or e.get("responseErrors")]

    def format_violations(self, limit=20):
        """A readable list of the violations, for an assertion message."""
        lines = []
        for e in self.violations()[:limit]:
            lines.append(f"{e['method']} {e['path']} -> {e['status']} ({e.get('operationId')})")
            lines += [f"    {x}" for x in e.get("requestErrors", []) + e.get("responseErrors", [])]
        return "\n".join(lines)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc and self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None
        if os.environ.get("FERRY_KEEP_TEST_DIRS"):
            print(f"kept {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def start(upstream, **kwargs):
    """Starts a proxy in front of `upstream`. Under scripts/test.sh (FERRY_REQUIRE_INTEROP set) a
    missing node, openapi-backend or spec is a failure; elsewhere the test is skipped."""
    missing = None
    if not available():
        missing = "node or tests/interop/node_modules is missing: run scripts/setup.sh"
    elif not os.path.exists(spec_path()):
        missing = f"the REST catalog spec {spec_path()} is missing"
    if missing:
        if os.environ.get("FERRY_REQUIRE_INTEROP"):
            raise RuntimeError(missing)
        raise unittest.SkipTest(missing)
    proxy = RestProxy(upstream, **kwargs)
    try:
        proxy.start()
    except BaseException:
        proxy.stop()
        raise
    return proxy
