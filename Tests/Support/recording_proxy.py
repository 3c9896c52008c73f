#!/usr/bin/env python3
"""A recording HTTP proxy for tests (python3 standard library only): forwards every request to
TARGET (http://127.0.0.1:PORT) and appends each request's method, path and body to RECORD, so a
test can check what a client sent (PlacesUploadTests: no place ever leaves with `tracer report`).

Prints its port as the first line of stdout and exits when stdin closes.

  recording_proxy.py TARGET RECORD
"""
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

target, record = sys.argv[1], sys.argv[2]
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        pass

    def forward(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with lock, open(record, "ab") as out:
            out.write(("%s %s %d\n" % (self.command, self.path, len(body))).encode() + body + b"\n")
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection", "content-length")}
        request = urllib.request.Request(target + self.path, data=body if self.command != "GET" else None,
                                         headers=headers, method=self.command)
        try:
            response = urllib.request.urlopen(request, timeout=30)
            status, reply_headers, payload = response.status, response.headers.items(), response.read()
        except urllib.error.HTTPError as error:
            status, reply_headers, payload = error.code, error.headers.items(), error.read()
        self.send_response(status)
        for key, value in reply_headers:
            if key.lower() not in ("transfer-encoding", "connection", "content-length", "date", "server"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = forward


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
