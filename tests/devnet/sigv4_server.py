#!/usr/bin/python3
"""A minimal path-style object server that checks every request's AWS SigV4
signature with botocore (the AWS SDK's own signer, Debian's python3-botocore),
for tests/devnet/test_devnet_store_s3.c: s3rver checks only the form of the
Authorization header, this checks the signature libcurl computed.

usage: sigv4_server.py PORT ROOT KEY_ID SECRET REGION
Serves GET, HEAD and PUT of ROOT/<bucket>/<key> on 127.0.0.1:PORT. A request
without a valid signature gets 403 (SignatureDoesNotMatch, or
InvalidAccessKeyId); it prints "ready" once listening and one line per request:
"METHOD PATH STATUS".
"""
import http.server
import os
import re
import sys
import tempfile

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

PORT, ROOT, KEY_ID, SECRET, REGION = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
AUTH_RE = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/s3/aws4_request, "
                     r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$")


def check(handler):
    """None when the signature is right, else the S3 error code."""
    m = AUTH_RE.match(handler.headers.get("Authorization", ""))
    if not m:
        return "AccessDenied"
    key_id, day, region, signed, signature = m.groups()
    if key_id != KEY_ID:
        return "InvalidAccessKeyId"
    amz_date = handler.headers.get("X-Amz-Date", "")
    if region != REGION or not amz_date.startswith(day):
        return "SignatureDoesNotMatch"
    headers = {name: handler.headers.get(name, "") for name in signed.split(";")}
    url = "http://%s%s" % (handler.headers.get("Host", ""), handler.path)
    req = AWSRequest(method=handler.command, url=url, headers=headers, data=b"")
    auth = S3SigV4Auth(Credentials(KEY_ID, SECRET), "s3", REGION)
    req.context["timestamp"] = amz_date
    canonical = auth.canonical_request(req)
    expected = auth.signature(auth.string_to_sign(req, canonical), req)
    return None if expected == signature else "SignatureDoesNotMatch"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, body=b"", length=None):
        print("%s %s %d" % (self.command, self.path, status), flush=True)
        self.send_response(status)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def local_path(self):
        rel = os.path.normpath(self.path.split("?", 1)[0]).lstrip("/")
        return None if rel.startswith("..") or not rel else os.path.join(ROOT, rel)

    def handle_any(self):
        body = b""
        if self.command == "PUT":
            n = int(self.headers.get("Content-Length", "0"))
            while len(body) < n:
                chunk = self.rfile.read(min(1 << 20, n - len(body)))
                if not chunk:
                    break
                body += chunk
        err = check(self)
        if err:
            return self.reply(403, ("<Error><Code>%s</Code></Error>" % err).encode())
        path = self.local_path()
        if path is None:
            return self.reply(400)
        if self.command == "PUT":
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
            with os.fdopen(fd, "wb") as f:
                f.write(body)
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, path)
            return self.reply(200)
        if not os.path.isfile(path):
            return self.reply(404, b"<Error><Code>NoSuchKey</Code></Error>")
        with open(path, "rb") as f:
            data = f.read()
        return self.reply(200, data)

    do_GET = do_HEAD = do_PUT = handle_any


server = http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
print("ready", flush=True)
server.serve_forever()
