"""OAuth2 client credentials against a REST catalog: ferry's client fetching, refreshing and
re-fetching tokens while it syncs, and keeping every secret to itself.

`ferry catalog serve` (its own static token, FERRY_CATALOG_TOKEN) sits behind the validating proxy
(tests/interop/rest_proxy.mjs, --oauth) which is the catalog's OAuth2 server: it hands out tokens
that live 2 s (or until a test expires them), refuses without forwarding every request that lacks
a live one (401 NotAuthorizedException), and passes the accepted ones on with the server's token.
Every exchange, the token requests too, is checked against the protocol's OpenAPI document. A CDC
pipeline from SQLite follows the source for longer than many tokens live, tokens are expired
between syncs, between the rounds of a following sync and just before a commit, and a wrong
secret is refused: every change lands exactly once (icebird and DuckDB read the tables back),
and neither the client secret, nor a token, nor the server's token shows in any output, state
file, report or log."""
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, HERE)
import ferrytest  # noqa: E402
import restproxy  # noqa: E402
import test_sqlite_cdc  # noqa: E402

CLIENT_ID = "ferry-client"
# Random per run, so that a leak is never a coincidence.
CLIENT_SECRET = "Cl1ent-S3cret-" + secrets.token_hex(8)
WRONG_SECRET = "Wr0ng-S3cret-" + secrets.token_hex(8)
UPSTREAM_TOKEN = "Upstr3am-T0ken-" + secrets.token_hex(8)

PIPELINE = """
name: cdc
source:
  type: sqlite
  path: ./source.db
  mode: cdc
  chunk_rows: 700
destination:
  type: iceberg
  catalog: "rest+%(catalog)s"
  warehouse: ./lake
  namespace: lake
  rest: {credential: "${CLIENT_ID}:${CLIENT_SECRET}", oauth2-server-uri: "%(token_url)s"}
state: ./state.json
"""

WAIT_S = 90  # the longest any one wait lasts


class Server:
    """`ferry catalog serve` on a free port of 127.0.0.1 with FERRY_CATALOG_TOKEN, its stderr in
    a file (read whole at the end), stopped by PID."""

    def __init__(self, test, verbose=False):
        e = dict(os.environ)
        e.pop("FERRY_FAULT", None)
        e["FERRY_CATALOG_TOKEN"] = UPSTREAM_TOKEN
        self.stderr_path = os.path.join(test.dir, "server.stderr")
        self.err = open(self.stderr_path, "w", encoding="utf-8")
        argv = [ferrytest.FERRY, "catalog", "serve", "--warehouse", "./lake", "--listen",
                "127.0.0.1:0"] + (["-v"] if verbose else [])
        self.proc = subprocess.Popen(argv, cwd=test.dir, stdout=subprocess.PIPE, stderr=self.err,
                                     stdin=subprocess.DEVNULL, text=True, env=e)
        self.url = None
        self.stdout = ""
        # The ready line ends with the URL; read on a thread so that the wait is bounded.
        got = []
        reader = threading.Thread(target=lambda: got.append(self.proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(30)
        line = got[0] if got else ""
        self.stdout = line
        if " on http://127.0.0.1:" in line:
            self.url = line.rsplit(" on ", 1)[1].strip()
        else:
            self.stop()
            test.fail(f"ferry catalog serve did not start: {line!r}\n{self.stderr()}")

    def stderr(self):
        self.err.flush()
        with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self):
        """Stops the server (if running); returns its exit code and its whole stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.stdout += self.proc.stdout.read()
            self.proc.stdout.close()
        self.err.close()
        with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
            return self.proc.returncode, f.read()


class RestCatalogAuthTest(ferrytest.FerryTestCase):
    def setUp(self):
        super().setUp()
        test_sqlite_cdc.create_source(self)
        self.server = None
        self.proxy = None
        self.follower = None
        self.outputs = []  # (what, text) of every ferry run: none may hold a secret

    def tearDown(self):
        if self.follower is not None and self.follower.poll() is None:
            self.follower.kill()
            self.follower.wait()
        if self.proxy:
            self.proxy.stop()
        if self.server:
            self.server.stop()
        super().tearDown()

    # ---- setup ----
    def start(self, lifetime_s, verbose_server=False):
        self.server = Server(self, verbose=verbose_server)
        self.proxy = restproxy.start(self.server.url, oauth={
            "clients": {CLIENT_ID: CLIENT_SECRET}, "lifetime_s": lifetime_s,
            "upstreamToken": UPSTREAM_TOKEN})
        self.write_pipeline(PIPELINE % {"catalog": self.proxy.url,
                                        "token_url": self.proxy.token_url})

    def env(self, secret=CLIENT_SECRET):
        return {"CLIENT_ID": CLIENT_ID, "CLIENT_SECRET": secret}

    def run_ferry(self, *args, secret=CLIENT_SECRET, check=True):
        p = self.ferry(*args, env=self.env(secret), check=check, timeout=300)
        self.outputs.append((f"ferry {' '.join(args)}", p.stdout + p.stderr))
        return p

    def sync_once(self, **kw):
        return self.run_ferry("sync", "-c", self.pipeline, "--once", **kw)

    def start_follower(self):
        """`ferry sync --interval 1`: follows the source until SIGTERM."""
        e = dict(os.environ)
        e.pop("FERRY_FAULT", None)
        e.update(self.env())
        self.follower_out = os.path.join(self.dir, "follow.stdout")
        self.follower_err = os.path.join(self.dir, "follow.stderr")
        with open(self.follower_out, "w") as out, open(self.follower_err, "w") as err:
            self.follower = subprocess.Popen(
                [ferrytest.FERRY, "sync", "-c", self.pipeline, "--interval", "1"], cwd=self.dir,
                stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=e)

    def stop_follower(self):
        """SIGTERM, then the exit code must be 0; returns stdout, stderr."""
        self.follower.send_signal(signal.SIGTERM)
        try:
            rc = self.follower.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.follower.kill()
            self.follower.wait()
            self.fail("the following sync did not stop within 60 s of SIGTERM")
        with open(self.follower_out, encoding="utf-8") as f:
            out = f.read()
        with open(self.follower_err, encoding="utf-8") as f:
            err = f.read()
        self.outputs.append(("ferry sync --interval 1", out + err))
        self.assertEqual(rc, 0, f"the following sync exited {rc}:\n{out}\n{err}")
        return out, err

    change = test_sqlite_cdc.SqliteCdcTest.change

    # ---- waiting ----
    def wait_for(self, what, cond, timeout=WAIT_S):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.follower is not None and self.follower.poll() is not None:
                with open(self.follower_err, encoding="utf-8") as f:
                    self.fail(f"the following sync exited {self.follower.returncode} while "
                              f"waiting for {what}:\n{f.read()[-4000:]}")
            if cond():
                return
            time.sleep(0.25)
        err = ""
        if self.follower is not None:
            with open(self.follower_err, encoding="utf-8") as f:
                err = f.read()[-4000:]
        self.fail(f"{what}: not within {timeout} s\n{err}")

    def pending_changes(self):
        """Changes captured in the source's change tables and not yet applied (released once
        committed); None before ferry installed the change tables."""
        con = sqlite3.connect(self.db_path, timeout=30)
        try:
            names = [r[0] for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name LIKE '\\_ferry\\_cdc\\_%' ESCAPE '\\'")]
            if len(names) < 2:
                return None
            return sum(con.execute('SELECT count(*) FROM "%s"' % n.replace('"', '""')).fetchone()[0]
                       for n in names)
        finally:
            con.close()

    def tables_exist(self):
        try:
            tables = self.catalog_tables("lake")
        except sqlite3.Error:
            return False
        return {("lake", "items"), ("lake", 'Odd "Keys"')} <= set(tables)

    def wait_applied(self, what):
        self.wait_for(what, lambda: self.tables_exist() and self.pending_changes() == 0)

    # ---- checking ----
    def verify(self):
        self.assert_table_equals_source("lake", "items", warehouse="lake")
        self.assert_table_equals_source("lake", 'Odd "Keys"', warehouse="lake")

    def assert_protocol_kept(self):
        self.assertEqual(self.proxy.violations(), [], self.proxy.format_violations())

    def commits(self):
        """The commits the server got (updateTable requests the proxy accepted)."""
        return [e for e in self.proxy.report()
                if e.get("operationId") == "updateTable" and e.get("auth") == "ok"]

    def assert_no_leak(self, texts, secret_list=(CLIENT_SECRET, WRONG_SECRET, UPSTREAM_TOKEN)):
        for what, text in texts:
            for s in secret_list:
                self.assertNotIn(s, text, f"a secret shows in {what}")
            self.assertNotIn(restproxy.TOKEN_PREFIX, text, f"an access token shows in {what}")

    def assert_nothing_leaked(self):
        """Nothing secret in any ferry output, the state file, the proxy's report and stderr, and
        (stopping it) the server's stderr."""
        texts = list(self.outputs)
        state = os.path.join(self.dir, "state.json")
        if os.path.exists(state):
            with open(state, encoding="utf-8") as f:
                texts.append(("the state file", f.read()))
        texts.append(("the proxy's report and stderr", self.proxy.files_text()))
        rc, err = self.server.stop()
        self.assertEqual(rc, 0, err)
        texts.append(("the server's stderr", err))
        texts.append(("the server's stdout", self.server.stdout))
        self.assert_no_leak(texts)
        self.server = None
        return err

    def events_since(self, seq):
        return [ev for ev in self.proxy.oauth_events() if ev[0] > seq]

    def last_seq(self):
        """The newest request the proxy received (the report lists exchanges as they finished,
        and two commits sent together may finish in either order)."""
        return max((e["seq"] for e in self.proxy.report()), default=0)

    # ---- tests ----
    def refreshes_in_session(self):
        """The tokens fetched by a catalog session already open (a refresh): a session opens with
        a token request and then GET /v1/config, so a token request followed by anything else
        (in the order the proxy received them; one ferry process at a time) is a refresh."""
        report = sorted(self.proxy.report(), key=lambda e: e["seq"])
        return [e for e, nxt in zip(report, report[1:])
                if e.get("oauth") == "issued" and nxt.get("operationId") != "getConfig"]

    def test_a_following_cdc_sync_outlives_two_second_tokens(self):
        self.start(lifetime_s=2)
        check = self.run_ferry("check", "-c", self.pipeline)
        self.assertIn("REST catalog " + self.proxy.url, check.stdout)
        began = time.time()
        self.start_follower()
        self.wait_applied("the backfill")
        rounds = 5
        for r in range(rounds):
            # A catalog session of the following sync kept past a token's lifetime: its first
            # request after the token (GET /v1/config) is answered 2.5 s late, so the table
            # loads and commits after it need a new token.
            self.proxy.add_fault({"match": {"operationId": "getConfig"}, "action": "delay",
                                  "ms": 2500})
            self.change()
            self.wait_applied(f"change {r + 1} of {rounds}")
            self.wait_for("the delay to be used", lambda: self.proxy.faults() == [])
            time.sleep(1)
        out, err = self.stop_follower()
        elapsed = time.time() - began
        self.assertIn("cdc: changes", out)
        self.verify()
        st = self.proxy.oauth_stats()
        refreshes = self.refreshes_in_session()
        self.assertGreaterEqual(st["tokensIssued"], 3, st)
        # Tokens are refreshed before they expire (at 80% of their lifetime), never only
        # after a refusal, and the client never sends a request without one.
        self.assertGreaterEqual(len(refreshes), rounds,
                                f"{len(refreshes)} tokens fetched within a catalog session")
        self.assertEqual(st["refusedExpired"], 0, (st, self.proxy.oauth_events()))
        self.assertEqual(st["refusedMissing"] + st["refusedUnknown"], 0, st)
        self.assertEqual(st["tokenRequestsRefused"], 0, st)
        self.assertGreaterEqual(len(self.commits()), 2 * rounds)
        print(f"\n  following sync: {elapsed:.1f} s, {st['tokensIssued']} tokens issued "
              f"({len(refreshes)} of them refreshes within a catalog session), "
              f"{sum(1 for e in self.proxy.report() if e.get('operationId') == 'getConfig')} "
              f"catalog sessions, {len(self.commits())} commits", file=sys.stderr)
        self.assert_protocol_kept()
        self.assert_nothing_leaked()

    def assert_refused_then_resent(self, mark):
        """After `mark`: a commit refused for an expired token (and any request sent at the same
        time with the same token), a new token fetched after the first refusal, each refused
        commit sent again and applied; one applied commit per table (two tables changed).
        Returns how many requests were refused."""
        events = [(w, op) for _, w, op in self.events_since(mark)]
        refusals = [ev for ev in events if ev[0].startswith("refused")]
        self.assertIn(("refused expired", "updateTable"), refusals, events)
        self.assertEqual({w for w, _ in refusals}, {"refused expired"}, events)
        first = events.index(refusals[0])
        self.assertIn(("issued", "getToken"), events[first + 1:], events)
        report = sorted((e for e in self.proxy.report() if e["seq"] > mark),
                        key=lambda e: e["seq"])
        for refusal in (e for e in report if e.get("auth") == "expired"):
            again = [e for e in report if e["seq"] > refusal["seq"]
                     and e["path"] == refusal["path"] and e.get("operationId") == "updateTable"]
            self.assertTrue(again and again[0].get("auth") == "ok" and again[0]["status"] == 200,
                            (refusal["path"], again))
        accepted = [e for e in report if e.get("operationId") == "updateTable"
                    and e.get("auth") == "ok"]
        self.assertEqual(sorted(e["path"] for e in accepted),
                         sorted({e["path"] for e in accepted}), "a table was committed twice")
        self.assertEqual(len(accepted), 2, [(e["path"], e["status"]) for e in accepted])
        self.assertTrue(all(e["status"] == 200 for e in accepted), accepted)
        return len(refusals)

    def test_tokens_expired_on_demand_are_refused_then_refreshed_and_no_commit_is_lost(self):
        self.start(lifetime_s=3600)  # nothing expires unless the test says so
        self.sync_once()
        self.verify()
        refused = 0  # requests refused for an expired token, as the subtests count them

        with self.subTest(expired="between two --once syncs"):
            mark = self.last_seq()
            self.assertGreaterEqual(self.proxy.expire_tokens(), 1)
            self.change()
            out = self.sync_once()
            self.assertIn("cdc: changes", out.stdout)
            self.verify()
            events = self.events_since(mark)
            # A new process fetches its own token when it opens the catalog: the expired one is
            # never offered.
            self.assertTrue(events and events[0][1] == "issued", events)
            self.assertNotIn("refused expired", [w for _, w, _ in events], events)

        with self.subTest(expired="just before a commit of a --once sync"):
            self.proxy.add_fault({"match": {"operationId": "updateTable"}, "action": "expire"})
            mark = self.last_seq()
            self.change()
            out = self.sync_once()
            self.assertIn("cdc: changes", out.stdout)
            self.assertEqual(self.proxy.faults(), [], "the expiry was not used")
            self.verify()
            refused += self.assert_refused_then_resent(mark)

        with self.subTest(expired="just before a commit of a following sync"):
            mark = self.last_seq()
            self.start_follower()
            self.wait_for("the following sync to open the catalog", lambda: any(
                e["seq"] > mark and e.get("operationId") == "getConfig"
                for e in self.proxy.report()))
            mark = self.last_seq()
            self.proxy.add_fault({"match": {"operationId": "updateTable"}, "action": "expire"})
            self.change()
            self.wait_applied("the change after the expiry")
            self.assertEqual(self.proxy.faults(), [], "the expiry was not used")
            refused += self.assert_refused_then_resent(mark)

        with self.subTest(expired="between two rounds of a following sync"):
            mark = self.last_seq()
            self.assertGreaterEqual(self.proxy.expire_tokens(), 1)
            self.change()
            self.wait_applied("the change after the expiry")
            out, err = self.stop_follower()
            self.verify()
            events = self.events_since(mark)
            # Each round opens the catalog with a token of its own; a round under way when the
            # tokens expired had its next request refused, and fetched a new one.
            self.assertIn("issued", [w for _, w, _ in events], events)
            for i, (_, what, _) in enumerate(events):
                if what.startswith("refused"):
                    self.assertEqual(what, "refused expired", events)
                    self.assertIn("issued", [w for _, w, _ in events[i + 1:]], events)
            refused += sum(1 for _, w, _ in events if w.startswith("refused"))

        st = self.proxy.oauth_stats()
        self.assertEqual(st["refusedExpired"], refused, st)
        self.assertEqual(st["refusedMissing"] + st["refusedUnknown"], 0, st)
        self.assert_protocol_kept()
        self.assert_nothing_leaked()

    def test_a_wrong_client_secret_is_named_and_no_secret_leaks(self):
        self.start(lifetime_s=2, verbose_server=True)
        p = self.run_ferry("check", "-c", self.pipeline, secret=WRONG_SECRET, check=False)
        msg = p.stdout + p.stderr
        self.assertNotEqual(p.returncode, 0, msg)
        self.assertIn("OAuth2 server " + self.proxy.token_url, msg)
        self.assertIn("refused the client credentials", msg)
        self.assertIn("destination.rest.credential", msg)
        self.assertIn("401", msg)
        p = self.run_ferry("sync", "-c", self.pipeline, "--once", secret=WRONG_SECRET,
                           check=False)
        self.assertNotEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("destination.rest.credential", p.stdout + p.stderr)
        self.assertEqual(self.proxy.stats()["forwarded"], 0,
                         "a request reached the server without a token")
        st = self.proxy.oauth_stats()
        self.assertEqual(st["tokensIssued"], 0, st)
        self.assertGreaterEqual(st["tokenRequestsRefused"], 2, st)
        self.assertTrue(all(w == "invalid_client" for _, w, _ in self.proxy.oauth_events()))
        # The right secret: everything works and shows no secret either, -v included.
        self.run_ferry("check", "-c", self.pipeline)
        self.run_ferry("sync", "-c", self.pipeline, "--once", "-v")
        self.change()
        self.run_ferry("sync", "-c", self.pipeline, "--once", "-v")
        self.verify()
        self.run_ferry("state", "-c", self.pipeline)
        self.run_ferry("state", "-c", self.pipeline, "--json")
        self.assertGreaterEqual(self.proxy.oauth_stats()["tokensIssued"], 2)
        self.assert_protocol_kept()
        server_log = self.assert_nothing_leaked()
        self.assertIn("/v1/config", server_log, "the server logged no request (-v)")


if __name__ == "__main__":
    unittest.main()
