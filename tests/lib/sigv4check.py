"""A catalog endpoint that demands AWS SigV4 signatures, as Glue's and S3 Tables' Iceberg REST
endpoints do: a proxy on 127.0.0.1 (a free port, a thread of the test process) in front of a REST
catalog server. Each request's signature is computed again by botocore (AWS's own Python SDK,
written by nobody here) from the request as it arrived — the headers its Authorization names,
the body, the X-Amz-Date — with the known secret, and compared; a request without a valid
signature, with another access key, or signed for another region or service gets 403 (as AWS
answers) and is not forwarded.

    with SigV4Check(upstream, key_id, secret, region="us-east-1", service="glue") as check:
        ... point the client at check.url ...
    check.verified, check.refused  # counts; check.problems: why each refusal
"""
import http.client
import http.server
import re
import threading
import urllib.parse

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

AUTH = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                  r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$")


class SigV4Check:
    def __init__(self, upstream, key_id, secret, region, service):
        self.upstream = urllib.parse.urlsplit(upstream)
        self.key_id, self.secret = key_id, secret
        self.region, self.service = region, service
        self.verified = 0
        self.refused = 0
        self.problems = []
        self.lock = threading.Lock()
        check = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle_any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                problem = check.problem(self.command, self.path, self.headers, body)
                with check.lock:
                    if problem:
                        check.refused += 1
                        check.problems.append(f"{self.command} {self.path}: {problem}")
                    else:
                        check.verified += 1
                if problem:
                    out = (b'{"error": {"message": "signature refused: ' +
                           problem.replace('"', "'").encode() +
                           b'", "type": "ForbiddenException", "code": 403}}')
                    self.send_response(403)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                    return
                conn = http.client.HTTPConnection(check.upstream.hostname, check.upstream.port,
                                                  timeout=60)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("authorization", "host", "connection")}
                conn.request(self.command, self.path, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = handle_any

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def problem(self, method, path, headers, body):
        """None when the request carries a valid signature of ours, else why not."""
        m = AUTH.match(headers.get("Authorization") or "")
        if not m:
            return "no AWS4-HMAC-SHA256 Authorization header"
        key_id, day, region, service, signed, signature = m.groups()
        if key_id != self.key_id:
            return f"unknown access key {key_id}"
        if (region, service) != (self.region, self.service):
            return f"signed for {region}/{service}, not {self.region}/{self.service}"
        amz_date = headers.get("X-Amz-Date") or ""
        if not amz_date.startswith(day):
            return "X-Amz-Date does not match the credential's day"
        names = signed.split(";")
        if "host" not in names or "x-amz-date" not in names:
            return f"host and x-amz-date are not both signed ({signed})"
        req = AWSRequest(method=method, url=f"http://{headers.get('Host')}{path}", data=body,
                         headers={n: headers.get(n) for n in names if headers.get(n) is not None})
        req.context["timestamp"] = amz_date
        auth = SigV4Auth(Credentials(self.key_id, self.secret), service, region)
        # As AWS verifies: exactly the headers the request says it signed (botocore's own
        # signing leaves some out, User-Agent among them; a verifier takes the list as given).
        auth.headers_to_sign = lambda request: request.headers
        canonical = auth.canonical_request(req)
        expected = auth.signature(auth.string_to_sign(req, canonical), req)
        if expected != signature:
            return "the signature does not match the request"
        return None

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
