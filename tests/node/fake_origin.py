#!/usr/bin/env python3
"""A file server for the model sync tests: serves a directory over HTTP on loopback
with Range support, and breaks on purpose where told to.

  fake_origin.py --dir DIR [--log FILE] [--manifest FILE] [faults...]

GET /files/PATH and GET /origin/PATH both serve DIR/PATH (two prefixes, so a test can
tell a "router" fetch from an "origin" fetch in the log); GET /manifest serves the
--manifest file.  `Range: bytes=N-` and `bytes=N-M` are answered 206 with
Content-Range, a start past the end 416.  It binds port 0 and prints the port it got
on stdout.  Each request is logged to --log as one line:
  GET /files/PATH range=bytes=N- auth=Bearer KEY      ("-" for an absent header)

Faults name a file by its PATH under DIR (both prefixes), or by the whole request path
when the name starts with '/' ("/origin/config.json": that prefix only):
  --cut NAME:N        the first request for NAME sends N bytes of the body and drops
                      the connection (the headers promise the whole length)
  --stall NAME:N      the first request sends N bytes, then nothing for --stall-seconds
  --corrupt NAME      every byte of the body is flipped (same length)
  --missing NAME      404
  --ignore-range NAME answers 200 with the whole file to a Range request
  --fail5xx NAME:K    the first K requests for NAME answer 503
  --status NAME:CODE  every request for NAME answers CODE (an error page)
Standard library only."""

import argparse
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PREFIXES = ("/files/", "/origin/")
CHUNK = 16384


def name_count(values):
    out = {}
    for v in values or []:
        name, _, n = v.rpartition(":")
        if not name:
            sys.exit("fake_origin: %r should be NAME:N" % v)
        out[name] = int(n)
    return out


class State:
    def __init__(self, args):
        self.args = args
        self.root = os.path.realpath(args.dir)
        self.cut = name_count(args.cut)
        self.stall = name_count(args.stall)
        self.fail5xx = name_count(args.fail5xx)
        self.status = name_count(args.status)
        self.corrupt = set(args.corrupt or [])
        self.missing = set(args.missing or [])
        self.ignore_range = set(args.ignore_range or [])
        self.lock = threading.Lock()
        self.log = open(args.log, "a", buffering=1) if args.log else None

    def write_log(self, line):
        if self.log:
            with self.lock:
                self.log.write(line + "\n")

    def take_once(self, table, keys):
        """The count of the first key in table, removing it (a fault that fires once)."""
        with self.lock:
            for k in keys:
                if k in table:
                    return table.pop(k)
        return None

    def take_fail(self, keys):
        with self.lock:
            for k in keys:
                if self.fail5xx.get(k, 0) > 0:
                    self.fail5xx[k] -= 1
                    return True
        return False


def matches(names, keys):
    return any(k in names for k in keys)


class Handler(BaseHTTPRequestHandler):
    server_version = "fake-origin/1"

    def log_message(self, fmt, *args):  # quiet: the --log file says what happened
        pass

    def do_GET(self):
        st = self.server.state
        path = self.path.split("?", 1)[0]
        st.write_log("GET %s range=%s auth=%s" % (
            path, self.headers.get("Range", "-"),
            self.headers.get("Authorization", "-")))
        if path == "/manifest":
            if not st.args.manifest:
                return self.plain(404, "no manifest\n")
            with open(st.args.manifest, "rb") as f:
                return self.send_bytes(200, f.read(), "application/json")
        rel = None
        for p in PREFIXES:
            if path.startswith(p):
                rel = path[len(p):]
        if rel is None:
            return self.plain(404, "unknown path\n")
        keys = (path, rel)
        full = os.path.realpath(os.path.join(st.root, rel))
        if not full.startswith(st.root + os.sep) or matches(st.missing, keys) \
                or not os.path.isfile(full):
            return self.plain(404, "no such file\n")
        for k in keys:
            if k in st.status:
                return self.plain(st.status[k], "refused on purpose\n")
        if st.take_fail(keys):
            return self.plain(503, "try again later\n")
        with open(full, "rb") as f:
            data = f.read()
        if matches(st.corrupt, keys):
            data = bytes(b ^ 0xFF for b in data)

        size = len(data)
        start, end = 0, size - 1
        code = 200
        rng = self.headers.get("Range")
        if rng and not matches(st.ignore_range, keys):
            spec = rng.strip()
            if not spec.startswith("bytes=") or "," in spec:
                return self.plain(400, "bad range\n")
            a, _, b = spec[len("bytes="):].partition("-")
            start = int(a)
            if b:
                end = min(int(b), size - 1)
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % size)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            code = 206
        body = data[start:end + 1]
        self.send_response(code)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        if code == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
        self.end_headers()

        cut = st.take_once(st.cut, keys)
        stall = st.take_once(st.stall, keys)
        limit = len(body)
        if cut is not None:
            limit = min(limit, cut)
        if stall is not None:
            limit = min(limit, stall)
        try:
            for off in range(0, limit, CHUNK):
                self.wfile.write(body[off:min(off + CHUNK, limit)])
            self.wfile.flush()
            if stall is not None:
                time.sleep(st.args.stall_seconds)
            if cut is not None or stall is not None:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def plain(self, code, text):
        self.send_bytes(code, text.encode(), "text/plain")

    def send_bytes(self, code, data, ctype):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--log")
    ap.add_argument("--manifest")
    ap.add_argument("--cut", action="append")
    ap.add_argument("--stall", action="append")
    ap.add_argument("--stall-seconds", type=float, default=10.0)
    ap.add_argument("--corrupt", action="append")
    ap.add_argument("--missing", action="append")
    ap.add_argument("--ignore-range", action="append")
    ap.add_argument("--fail5xx", action="append")
    ap.add_argument("--status", action="append")
    args = ap.parse_args()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.state = State(args)
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
