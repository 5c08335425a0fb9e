"""A throw-away S3-compatible object store for tests: moto_server (moto's S3, with its IAM) on
127.0.0.1 at a free port, started once per test module and stopped by PID (SIGTERM, SIGKILL after
10 s), also when a test fails.

Requests are authenticated: the server starts with INITIAL_NO_AUTH_ACTION_COUNT set to the few
IAM calls that create two users, so every later request must carry a valid SigV4 signature of a
known access key, and IAM policies decide what it may do:
  - `admin`:  s3:* (what ferry and the test's own client use);
  - `reader`: s3:ListBucket and s3:GetObject only (a user who cannot write).
The test reads what ferry wrote with boto3 (a client nobody here wrote), and copies a bucket to a
local folder for the Iceberg readers (`mirror`). moto keeps its objects in memory: a stopped
server forgets them, so "the store stops answering" is SIGSTOP/SIGCONT (`pause`, `resume`).
The server runs with one fix to moto's signature check (LAUNCHER, below).

`FaultProxy` sits between ferry and the server and makes the store misbehave on request: answers
503 SlowDown or 500 InternalError to new connections, resets them, or cuts every open connection
(mid-request): the faults a real store and network produce."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

REGION = "us-east-1"

# moto_server, with one fix: moto 5.2 checks a request's signature against the query string as
# werkzeug decoded it ("prefix=wh/"), while SigV4 signs it as sent, percent-encoded
# ("prefix=wh%2F"), so that no correct client (boto3 included) passes once a value holds a '/'.
# The fix hands moto's signature check the query as it arrived (werkzeug's RAW_URI); every other
# part of the server is moto's own.
LAUNCHER = r"""
import sys
from urllib.parse import urlsplit, urlunsplit
import moto.core.authorization as authorization
import moto.core.responses as responses

_setup = responses.BaseResponse.setup_class
def setup_class(self, request, full_url, headers, use_raw_body=False):
    _setup(self, request, full_url, headers, use_raw_body)
    raw = getattr(request, "environ", {}).get("RAW_URI") if self.is_werkzeug_request else None
    self._raw_query = urlsplit(raw).query if raw else None
responses.BaseResponse.setup_class = setup_class

_authenticate = authorization.ActionAuthenticatorMixin._authenticate_and_authorize_action
def authenticate(self, iam_request_cls, *args, **kwargs):
    raw = getattr(self, "_raw_query", None)
    if raw is None:
        return _authenticate(self, iam_request_cls, *args, **kwargs)
    uri, p = self.uri, urlsplit(self.uri)
    self.uri = urlunsplit((p.scheme, p.netloc, p.path, raw, p.fragment))
    try:
        return _authenticate(self, iam_request_cls, *args, **kwargs)
    finally:
        self.uri = uri
authorization.ActionAuthenticatorMixin._authenticate_and_authorize_action = authenticate

from moto.server import main
main(sys.argv[1:])
"""
NO_AUTH_CALLS = 6  # create_user, create_access_key, put_user_policy, for each of two users


def available():
    try:
        import boto3  # noqa: F401
        import moto  # noqa: F401
    except ImportError:
        return False
    return True


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class S3Server:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="ferry_s3_")
        self.port = free_port()
        self.proc = None
        self.keys = {}  # user -> (access key id, secret)

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        env = dict(os.environ)
        env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(NO_AUTH_CALLS)
        env["AWS_EC2_METADATA_DISABLED"] = "true"
        log = open(os.path.join(self.dir, "moto.log"), "w")
        # What moto_server runs (with the fix above), started by this interpreter so that the PID
        # is the server's.
        self.proc = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.dir)
        log.close()
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto_server exited {self.proc.returncode}:\n{self.log()}")
            try:  # a TCP connect only: an HTTP request would use up one of the unauthenticated calls
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError(f"moto_server did not listen within 60 s:\n{self.log()}")
        self._create_users()
        return self

    def log(self):
        path = os.path.join(self.dir, "moto.log")
        return open(path).read()[-4000:] if os.path.exists(path) else ""

    def _create_users(self):
        import json
        import boto3
        iam = boto3.client("iam", endpoint_url=self.endpoint, region_name=REGION,
                           aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
        policies = {
            "admin": ["s3:*"],
            "reader": ["s3:ListBucket", "s3:GetObject"],
        }
        for user, actions in policies.items():
            iam.create_user(UserName=user)
            key = iam.create_access_key(UserName=user)["AccessKey"]
            iam.put_user_policy(UserName=user, PolicyName=f"{user}-s3", PolicyDocument=json.dumps({
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}))
            self.keys[user] = (key["AccessKeyId"], key["SecretAccessKey"])

    def env(self, user="admin"):
        """The AWS environment variables of `user` for a ferry run."""
        key_id, secret = self.keys[user]
        return {"AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret,
                "AWS_REGION": REGION, "AWS_EC2_METADATA_DISABLED": "true"}

    def client(self, user="admin"):
        import boto3
        key_id, secret = self.keys[user]
        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id=key_id, aws_secret_access_key=secret)

    def create_bucket(self, bucket):
        self.client().create_bucket(Bucket=bucket)

    def objects(self, bucket, prefix=""):
        """{key: size} of every object under `prefix`."""
        out = {}
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                             Prefix=prefix):
            for o in page.get("Contents", []):
                out[o["Key"]] = o["Size"]
        return out

    def multipart_uploads(self, bucket):
        return self.client().list_multipart_uploads(Bucket=bucket).get("Uploads", [])

    def mirror(self, bucket, folder):
        """Copies every object of `bucket` to <folder>/<bucket>/<key>; returns the folder."""
        c = self.client()
        for key in self.objects(bucket):
            path = os.path.join(folder, bucket, key)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            c.download_file(bucket, key, path)
        return folder

    def pause(self):
        """SIGSTOP: the server keeps its connections and state but answers nothing."""
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            pid = self.proc.pid
            try:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGTERM)
                deadline = time.time() + 10
                while time.time() < deadline and alive(pid):
                    time.sleep(0.05)
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        self.proc = None
        if os.environ.get("FERRY_KEEP_TEST_DIRS"):
            print(f"kept {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


class FaultProxy:
    """A TCP relay on 127.0.0.1 in front of the server. Each new connection is relayed unchanged
    (signatures cover the Host header, which names the proxy, so they still verify), unless a
    fault is queued for it: ("503" | "500", n) answers the connection's first request with that
    status and S3's error document (SlowDown, InternalError) and closes it; ("reset", n) closes it
    before any answer. `cut_all()` closes every relayed connection at once, mid-transfer."""

    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.faults = []  # queued kinds, one per new connection
        self.injected = {"503": 0, "500": 0, "reset": 0, "cut": 0}
        self.live = set()
        self.closing = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def queue(self, kind, n=1):
        with self.lock:
            self.faults += [kind] * n

    def cut_all(self):
        """Closes every relayed connection; returns how many there were."""
        with self.lock:
            socks, self.live = list(self.live), set()
            self.injected["cut"] += len(socks)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        return len(socks)

    def close(self):
        self.closing = True
        self.sock.close()
        self.cut_all()

    def _accept(self):
        while not self.closing:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                fault = self.faults.pop(0) if self.faults else None
                if fault:
                    self.injected[fault] += 1
            threading.Thread(target=self._serve, args=(client, fault), daemon=True).start()

    def _serve(self, client, fault):
        if fault == "reset":
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            client.close()
            return
        if fault in ("503", "500"):
            client.settimeout(10)
            head = b""
            try:
                while b"\r\n\r\n" not in head:
                    chunk = client.recv(65536)
                    if not chunk:
                        break
                    head += chunk
                code, reason, s3code = (("503", "Slow Down", "SlowDown") if fault == "503"
                                        else ("500", "Internal Server Error", "InternalError"))
                body = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{s3code}</Code>"
                        f"<Message>injected by the test</Message></Error>").encode()
                client.sendall(f"HTTP/1.1 {code} {reason}\r\nContent-Type: application/xml\r\n"
                               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                               + body)
            except OSError:
                pass
            client.close()
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream), timeout=30)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        with self.lock:
            self.live.update([client, upstream])

        def pump(src, dst):
            try:
                while True:
                    data = src.recv(65536)
                    if not data:
                        break
                    dst.sendall(data)
            except OSError:
                pass
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        t = threading.Thread(target=pump, args=(upstream, client), daemon=True)
        t.start()
        pump(client, upstream)
        t.join()
        with self.lock:
            self.live.discard(client)
            self.live.discard(upstream)
        client.close()
        upstream.close()


def start_for_module():
    """Starts a server for a test module. Under scripts/test.sh (FERRY_REQUIRE_INTEROP set) a
    missing moto is a failure; elsewhere the module is skipped."""
    if not available():
        msg = "moto and boto3 are not installed in this Python: the S3 tests need them"
        if os.environ.get("FERRY_REQUIRE_INTEROP"):
            raise RuntimeError(msg)
        raise unittest.SkipTest(msg)
    server = S3Server()
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    return server
