"""A throw-away Prometheus server for tests (Debian's `prometheus`): scrapes given targets every
second into a temporary folder, on 127.0.0.1 at a free port; queried through its HTTP API;
stopped by PID, also when a test fails."""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.parse
import urllib.request


def binary():
    return shutil.which("prometheus") or (
        "/usr/bin/prometheus" if os.path.exists("/usr/bin/prometheus") else None)


def promtool():
    return shutil.which("promtool") or (
        "/usr/bin/promtool" if os.path.exists("/usr/bin/promtool") else None)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrometheusServer:
    def __init__(self, targets):
        self.dir = tempfile.mkdtemp(prefix="ferry_prom_")
        self.port = free_port()
        self.targets = targets
        self.proc = None
        self.log = os.path.join(self.dir, "prometheus.log")

    def start(self):
        config = os.path.join(self.dir, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
                    "scrape_configs:\n  - job_name: ferry\n    static_configs:\n"
                    f"      - targets: {json.dumps(self.targets)}\n")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                [binary(), f"--config.file={config}",
                 f"--storage.tsdb.path={os.path.join(self.dir, 'data')}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}:\n"
                                   + open(self.log).read()[-3000:])
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2):
                    return self
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("prometheus did not become ready:\n" + open(self.log).read())
            time.sleep(0.2)

    def query(self, expr):
        """The instant vector of `expr` as [(labels, float value)]."""
        url = (f"http://127.0.0.1:{self.port}/api/v1/query?"
               + urllib.parse.urlencode({"query": expr}))
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        if body.get("status") != "success":
            raise RuntimeError(f"query {expr} failed: {body}")
        return [(v["metric"], float(v["value"][1])) for v in body["data"]["result"]]

    def wait_for(self, expr, check, timeout=60):
        """Polls `expr` until check(result) is true; returns the result (or fails)."""
        deadline = time.time() + timeout
        result = None
        while time.time() < deadline:
            result = self.query(expr)
            if check(result):
                return result
            time.sleep(0.5)
        raise AssertionError(f"{expr}: never as expected within {timeout} s; last: {result}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def start_for_module(targets):
    """Under scripts/test.sh (FERRY_REQUIRE_INTEROP set) a missing Prometheus is a failure;
    elsewhere the module is skipped."""
    if not binary() or not promtool():
        msg = "prometheus is not installed: run scripts/setup.sh"
        if os.environ.get("FERRY_REQUIRE_INTEROP"):
            raise RuntimeError(msg)
        raise unittest.SkipTest(msg)
    server = PrometheusServer(targets)
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    return server
