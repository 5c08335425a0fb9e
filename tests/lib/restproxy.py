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

With `oauth={"clients": {"ferry-client": SECRET}, "lifetime_s": 2, "upstreamToken": TOKEN}` the
proxy is also the catalog's OAuth2 server: it answers POST <url>/v1/oauth/tokens itself (client
credentials; OAuthTokenResponse with a fresh random token, or a 401 OAuthError for a wrong client
or secret) and refuses every other request that lacks a live token it issued (401
NotAuthorizedException, not forwarded); accepted ones reach the upstream with `Bearer TOKEN` (or no
Authorization header). `expire_tokens()` expires every token now, the fault action "expire" does
so just before a matching request; `oauth_stats()` counts tokens issued and requests refused, and
`oauth_events()` lists, in order, tokens issued and requests refused. Tokens begin with
TOKEN_PREFIX, so a test can look for any of them in what it must not leak:

    proxy = restproxy.start(server_url, oauth={"clients": {"c": "s"}, "lifetime_s": 2,
                                               "upstreamToken": TOKEN})

The report file (one JSON line per exchange) stays in the proxy's temporary folder, kept with
FERRY_KEEP_TEST_DIRS set; neither it nor the proxy's stderr ever holds a secret or a token."""
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
TOKEN_PREFIX = "rpx-oauth-"  # how every access token the proxy issues begins


def available():
    return shutil.which("node") is not None and os.path.isdir(
        os.path.join(INTEROP, "node_modules", "openapi-backend"))


def spec_path():
    """The REST catalog OpenAPI document the proxy checks against."""
    return os.environ.get("FERRY_ICEBERG_SPEC") or os.path.join(
        os.path.dirname(ROOT), "shared", "reference", "iceberg-spec", "rest-catalog-open-api.json")


class RestProxy:
    def __init__(self, upstream, base_path=None, faults=(), oauth=None, start_timeout=None):
        self.upstream = upstream.rstrip("/")
        self.base_path = base_path
        self.initial_faults = list(faults)
        self.oauth = oauth
        # With oauth the proxy compiles every validator before it listens (some seconds).
        self.start_timeout = start_timeout or (90 if oauth is not None else 20)
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
    def token_url(self):
        """Where the proxy (with oauth) hands out tokens: the client's oauth2-server-uri."""
        path = (self.oauth or {}).get("tokenPath") or f"{self.base_path or ''}/v1/oauth/tokens"
        return f"http://127.0.0.1:{self.port}{path}"

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
        if self.oauth is not None:
            argv += ["--oauth", json.dumps(self.oauth)]
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

    def expire_tokens(self):
        """Every token issued so far expires now (with oauth); returns how many were live."""
        return self._call("POST", "oauth/expire")["expired"]

    def oauth_stats(self):
        """{tokenRequests, tokensIssued, tokenRequestsRefused, refusedExpired, refusedUnknown,
        refusedMissing, expiredOnDemand, live} (with oauth)."""
        return self.stats()["oauth"]

    def oauth_events(self):
        """In the order the proxy received them: (seq, what, operationId) for each token request
        (what: "issued" or the OAuth error) and each request refused (what: "refused expired",
        "refused unknown", "refused missing")."""
        out = []
        for e in sorted(self.report(), key=lambda e: e["seq"]):
            if "oauth" in e:
                out.append((e["seq"], e["oauth"], e.get("operationId")))
            elif e.get("auth", "ok") != "ok":
                out.append((e["seq"], "refused " + e["auth"], e.get("operationId")))
        return out

    def files_text(self):
        """The report file and the proxy's stderr, whole: what must hold no secret."""
        text = ""
        for path in (self.report_path, self.stderr_path):
            if os.path.exists(path):
                with open(path, encoding="utf-8", errors="replace") as f:
                    text += f.read()
        return text

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
