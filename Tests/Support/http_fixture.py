#!/usr/bin/env python3
"""A local HTTP(S) server for the HTTP client's tests (python3 standard library only).

Listens on 127.0.0.1 on a free port and prints that port as the first line of stdout. Exits when
stdin closes, so it cannot outlive the test process that started it. With --cert and --key it
serves HTTPS.

Every route counts its requests under the query parameter `t` (a token unique to one test);
GET /count?t=TOKEN answers with that count.

  GET  /bytes/N              N bytes (byte i is i % 251), with Content-Length
  GET  /status/CODE          that status, body "status CODE"
  GET  /flaky/N              503 for the first N requests of the token, then 200 "recovered"
  GET  /slow-headers/SECONDS sleeps, then 200 "slow"
  GET  /stall/N              announces 2N bytes, sends N, then stalls for a minute
  GET  /truncated/N          announces 2N bytes, sends N, then closes the connection
  GET  /huge-length          announces 10^12 bytes, sends 10, closes
  GET  /etag                 ETag "v1"; 304 when If-None-Match is "v1"
  GET  /redirect/N           302 to /redirect/N-1; /redirect/0 answers 200 "arrived"
  GET  /redirect-to?url=U    302 to U
  GET  /headers              200 with repeated and padded headers
  POST /echo                 the request body back; X-Echo-Method and X-Echo-Test-Header headers
  POST /redirect-to?url=U    307 to U (a POST must not follow it)

With --root DIR it is also a list server, honest or hostile (HostileListLogTests):

  GET  /list/PATH            DIR/PATH with a strong ETag (its SHA-256) and 304 for it, unless
                             DIR/behaviour.json maps PATH to a misbehaviour, read on every
                             request: {"status": N}, {"etag": "raw value"},
                             {"refuseConditional": N} (N for any If-None-Match),
                             {"truncate": N} (announce the file, send N bytes, close),
                             {"endless": true} (no length, zero bytes until 16 MB, or N bytes
                             for {"endless": N}, or the client leaves), {"trickle": SECONDS} (one byte every SECONDS),
                             {"redirect": "PATH2"} (302 to /list/PATH2),
                             {"ignoreRange": true} (a whole 200 whatever the Range header).
                             A request with "Range: bytes=N-" gets 206 and the bytes from N on
                             (416 from the end of the file on), as nginx answers; the hostile
                             bodies are then made of those bytes.
  GET  /list-requests        every /list/ request so far, one "PATH If-None-Match" per line;
                             with ?range=1, "PATH If-None-Match Range" ("-" for a header absent)
"""
import argparse
import collections
import hashlib
import json
import os
import re
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

counts = collections.Counter()
counts_lock = threading.Lock()
list_root = None
list_requests = []
ENDLESS_LIMIT = 16 << 20


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        pass

    def parse(self):
        parsed = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(parsed.query)
        token = query.get("t", [""])[0]
        return parsed.path.strip("/").split("/"), query, token

    def count(self, token):
        with counts_lock:
            counts[token] += 1
            return counts[token]

    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        parts, query, token = self.parse()
        route = parts[0]
        if route == "count":
            with counts_lock:
                value = counts[token]
            return self.reply(200, str(value).encode())
        if route == "list-requests":
            with_range = query.get("range") == ["1"]
            with counts_lock:
                lines = "".join(
                    "%s %s%s\n" % (path, condition, " " + byte_range if with_range else "")
                    for path, condition, byte_range in list_requests
                )
            return self.reply(200, lines.encode("latin-1", "replace"))
        if route == "list" and list_root:
            return self.serve_list("/".join(parts[1:]))
        seen = self.count(token)
        if route == "bytes":
            size = int(parts[1])
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.send_header("X-Fixture", "bytes")
            self.end_headers()
            chunk = bytes(i % 251 for i in range(251 * 64))
            remaining = size
            while remaining > 0:
                piece = chunk[: min(len(chunk), remaining)]
                self.wfile.write(piece)
                remaining -= len(piece)
        elif route == "status":
            code = int(parts[1])
            self.reply(code, b"status %d" % code)
        elif route == "flaky":
            if seen <= int(parts[1]):
                self.reply(503, b"try later")
            else:
                self.reply(200, b"recovered")
        elif route == "slow-headers":
            time.sleep(float(parts[1]))
            self.reply(200, b"slow")
        elif route in ("stall", "truncated"):
            size = int(parts[1])
            self.send_response(200)
            self.send_header("Content-Length", str(2 * size))
            self.end_headers()
            self.wfile.write(bytes(size))
            self.wfile.flush()
            if route == "stall":
                time.sleep(60)
            self.close_connection = True
        elif route == "huge-length":
            self.send_response(200)
            self.send_header("Content-Length", str(10**12))
            self.end_headers()
            self.wfile.write(bytes(10))
            self.close_connection = True
        elif route == "etag":
            if self.headers.get("If-None-Match") == '"v1"':
                self.send_response(304)
                self.send_header("ETag", '"v1"')
                self.end_headers()
            else:
                self.reply(200, b"version 1", [("ETag", '"v1"')])
        elif route == "redirect":
            hops = int(parts[1])
            if hops == 0:
                self.reply(200, b"arrived")
            else:
                self.reply(302, b"", [("Location", "/redirect/%d?t=%s" % (hops - 1, token))])
        elif route == "redirect-to":
            self.reply(302, b"", [("Location", query["url"][0])])
        elif route == "headers":
            self.reply(200, b"headers", [("X-Repeated", "one"), ("X-Repeated", "two"), ("X-Padded", "  padded\t"), ("x-MiXeD", "Case")])
        else:
            self.reply(404, b"no such route")

    def serve_list(self, path):
        condition = self.headers.get("If-None-Match")
        byte_range = self.headers.get("Range")
        with counts_lock:
            list_requests.append(
                (path, condition if condition is not None else "-", byte_range if byte_range is not None else "-")
            )
        try:
            with open(os.path.join(list_root, "behaviour.json")) as file:
                behaviour = json.load(file).get(path, {})
        except FileNotFoundError:
            behaviour = {}
        if "status" in behaviour:
            return self.reply(behaviour["status"], b"status %d" % behaviour["status"])
        if "redirect" in behaviour:
            return self.reply(302, b"", [("Location", "/list/" + behaviour["redirect"])])
        if condition is not None and "refuseConditional" in behaviour:
            return self.reply(behaviour["refuseConditional"], b"refused")
        try:
            with open(os.path.join(list_root, path), "rb") as file:
                body = file.read()
        except (FileNotFoundError, IsADirectoryError):
            return self.reply(404, b"not found")
        etag = behaviour.get("etag", '"%s"' % hashlib.sha256(body).hexdigest())
        # A hostile body is sent whatever the request's condition.
        hostile = any(name in behaviour for name in ("endless", "truncate", "trickle"))
        if condition == etag and not hostile:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.end_headers()
            return
        if behaviour.get("endless"):
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            zeros = bytes(64 << 10)
            try:
                limit = behaviour["endless"]
                limit = ENDLESS_LIMIT if limit is True else int(limit)
                for _ in range(max(1, limit // len(zeros))):
                    self.wfile.write(zeros)
            except OSError:
                pass
            return
        status = 200
        content_range = None
        ranged = re.fullmatch(r"bytes=(\d+)-", byte_range.strip()) if byte_range is not None else None
        if ranged and not behaviour.get("ignoreRange"):
            start = int(ranged.group(1))
            if start >= len(body):
                return self.reply(416, b"", [("Content-Range", "bytes */%d" % len(body))])
            status = 206
            content_range = "bytes %d-%d/%d" % (start, len(body) - 1, len(body))
            body = body[start:]
        self.send_response(status)
        self.send_header("ETag", etag)
        if content_range:
            self.send_header("Content-Range", content_range)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if "truncate" in behaviour:
            self.wfile.write(body[: behaviour["truncate"]])
            self.close_connection = True
        elif "trickle" in behaviour:
            try:
                for position in range(len(body)):
                    self.wfile.write(body[position : position + 1])
                    self.wfile.flush()
                    time.sleep(behaviour["trickle"])
            except OSError:
                pass
            self.close_connection = True
        else:
            self.wfile.write(body)

    def do_POST(self):
        parts, query, token = self.parse()
        self.count(token)
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if parts[0] == "echo":
            self.reply(200, body, [("X-Echo-Method", "POST"), ("X-Echo-Test-Header", self.headers.get("X-Test", ""))])
        elif parts[0] == "redirect-to":
            self.reply(307, b"", [("Location", query.get("url", ["/echo"])[0])])
        else:
            self.reply(404, b"no such route")


def exit_when_stdin_closes():
    sys.stdin.buffer.read()
    os._exit(0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--root")
    arguments = parser.parse_args()
    global list_root
    list_root = arguments.root
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if arguments.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(arguments.cert, arguments.key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
