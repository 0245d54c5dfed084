#!/usr/bin/env python3
"""A fake router for the node's tests: the node side of the protocol in
docs/node-router-protocol.md, with model directories served as manifests and files,
and faults on purpose.

  fake_router.py --key KEY [--interval SECONDS] [--log FILE]
                 [--model NAME=DIR ...] [faults...]

It binds 127.0.0.1 port 0 and prints the port it got on stdout.

  POST /v0/nodes                  registration: 401 without "Authorization: Bearer KEY",
                                  403 code no_gpu for has_gpu false without allow_cpu
                                  true, else {"node_id": "n-<counter>",
                                  "node_secret": "secret-<counter>",
                                  "heartbeat_interval_s": --interval}
  POST /v0/nodes/{id}/heartbeat   404 code unknown_node for an id it does not know,
                                  else {"ok": true}
  GET  /v0/models                 {"models": [{"name", "format"}]} from --model
  GET  /v0/models/{name}/manifest every file under DIR (names starting with '.'
                                  left out): path, size, sha256, required, url
                                  "/v0/models/NAME/files/PATH"
  GET  /v0/models/{name}/files/{path}
                                  the file; "Range: bytes=N-" or "bytes=N-M" answered
                                  206 with Content-Range, a start past the end 416
  POST /_control/forget           forgets every registered node (a router restart)
Every /v0 request needs the key.

Each request is logged to --log as one JSON line once its status is known:
  {"method", "path", "range", "auth", "body", "status"}
with "range" and "auth" the headers (null when absent) and "body" the request body
parsed as JSON (null when absent or not JSON).

Faults name a file by its PATH in the model directory (every model), or by
NAME/PATH (that model only):
  --optional PATH          listed with "required": false
  --phantom-optional PATH  listed (required false, size 4096, a made-up sha256) but
                           not on disk: its download answers 404
  --cut PATH:N             the first request for it sends N bytes of the body and
                           drops the connection (the headers promise the whole length)
  --corrupt PATH           every byte of the body flipped (same length; the manifest
                           keeps the true sha256)
  --slow PATH:BPS          the body is sent at about BPS bytes a second
Standard library only."""

import argparse
import hashlib
import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHUNK = 16384
PHANTOM_SIZE = 4096
PHANTOM_SHA = "0" * 63 + "1"


def name_count(values, flag):
    out = {}
    for v in values or []:
        name, _, n = v.rpartition(":")
        if not name:
            sys.exit("fake_router: %s %r should be PATH:N" % (flag, v))
        out[name] = int(n)
    return out


def error_body(message, etype, code, param=None):
    return {"error": {"message": message, "type": etype, "param": param, "code": code}}


class State:
    def __init__(self, args):
        self.args = args
        self.models = {}  # name -> directory (in the order given)
        for m in args.model or []:
            name, eq, d = m.partition("=")
            if not eq or not name or not os.path.isdir(d):
                sys.exit("fake_router: --model %r should be NAME=DIR with DIR a directory" % m)
            self.models[name] = os.path.realpath(d)
        self.optional = set(args.optional or [])
        self.phantom = list(args.phantom_optional or [])
        self.corrupt = set(args.corrupt or [])
        self.cut = name_count(args.cut, "--cut")
        self.slow = name_count(args.slow, "--slow")
        self.lock = threading.Lock()
        self.nodes = {}  # node_id -> registration body
        self.counter = 0
        self.digests = {}  # (path, mtime, size) -> sha256
        self.log = open(args.log, "a", buffering=1) if args.log else None

    def write_log(self, entry):
        if self.log:
            with self.lock:
                self.log.write(json.dumps(entry) + "\n")

    def take_once(self, table, keys):
        with self.lock:
            for k in keys:
                if k in table:
                    return table.pop(k)
        return None

    def lookup(self, table, keys):
        for k in keys:
            if k in table:
                return table[k]
        return None

    def sha256(self, full):
        st = os.stat(full)
        key = (full, st.st_mtime_ns, st.st_size)
        with self.lock:
            if key in self.digests:
                return self.digests[key]
        h = hashlib.sha256()
        with open(full, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        with self.lock:
            self.digests[key] = h.hexdigest()
        return self.digests[key]

    def phantoms(self, name):
        """The phantom paths of one model."""
        out = []
        for p in self.phantom:
            first, slash, rest = p.partition("/")
            if slash and first in self.models:
                if first == name:
                    out.append(rest)
            else:
                out.append(p)
        return out

    def manifest(self, name):
        root = self.models[name]
        files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = sorted(x for x in dirs if not x.startswith("."))
            for n in sorted(names):
                if n.startswith("."):
                    continue
                full = os.path.join(d, n)
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                keys = (rel, name + "/" + rel)
                files.append({
                    "path": rel,
                    "size": os.path.getsize(full),
                    "sha256": self.sha256(full),
                    "required": not any(k in self.optional for k in keys),
                    "url": "/v0/models/%s/files/%s" % (name, rel),
                })
        for rel in self.phantoms(name):
            files.append({"path": rel, "size": PHANTOM_SIZE, "sha256": PHANTOM_SHA,
                          "required": False,
                          "url": "/v0/models/%s/files/%s" % (name, rel)})
        return {"name": name, "format": self.args.format, "files": files}


class Handler(BaseHTTPRequestHandler):
    server_version = "fake-router/1"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: the --log file says what happened
        pass

    # ---- plumbing ------------------------------------------------------------------

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n > 0 else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def log_request_line(self, body, status):
        self.server.state.write_log({
            "method": self.command,
            "path": self.path.split("?", 1)[0],
            "range": self.headers.get("Range"),
            "auth": self.headers.get("Authorization"),
            "body": body,
            "status": status,
        })

    def send_json(self, code, obj, body=None):
        self.log_request_line(body, code)
        data = (json.dumps(obj) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorized(self):
        key = self.server.state.args.key
        return key is None or self.headers.get("Authorization") == "Bearer " + key

    def unauthorized(self, body=None):
        self.send_json(401, error_body("a node must send \"Authorization: Bearer NODE_KEY\" "
                                       "with the router's node key", "authentication_error",
                                       "invalid_node_key"), body)

    # ---- POST ----------------------------------------------------------------------

    def do_POST(self):
        st = self.server.state
        path = self.path.split("?", 1)[0]
        body = self.read_body()
        if path == "/_control/forget":
            with st.lock:
                n = len(st.nodes)
                st.nodes.clear()
            return self.send_json(200, {"ok": True, "forgot": n}, body)
        if not path.startswith("/v0/"):
            return self.send_json(404, error_body("unknown path " + path, "invalid_request_error",
                                                  "not_found"), body)
        if not self.authorized():
            return self.unauthorized(body)
        if path == "/v0/nodes":
            if not isinstance(body, dict) or not isinstance(body.get("url"), str):
                return self.send_json(400, error_body("the registration must be a JSON object "
                                                      "with at least \"url\"",
                                                      "invalid_request_error", "invalid_json"),
                                      body)
            if body.get("has_gpu") is not True and body.get("allow_cpu") is not True:
                return self.send_json(403, error_body(
                    "this node has no GPU and did not say allow_cpu: true (start it with "
                    "--allow-cpu to serve on the CPU)", "permission_error", "no_gpu",
                    "has_gpu"), body)
            with st.lock:
                st.counter += 1
                node_id = "n-%d" % st.counter
                st.nodes[node_id] = body
            return self.send_json(200, {"node_id": node_id,
                                        "node_secret": "secret-%d" % st.counter,
                                        "heartbeat_interval_s": st.args.interval}, body)
        parts = path.split("/")  # '', 'v0', 'nodes', ID, 'heartbeat'
        if len(parts) == 5 and parts[2] == "nodes" and parts[4] == "heartbeat":
            with st.lock:
                known = parts[3] in st.nodes
            if not known:
                return self.send_json(404, error_body("no node %s: register again" % parts[3],
                                                      "invalid_request_error", "unknown_node"),
                                      body)
            return self.send_json(200, {"ok": True}, body)
        return self.send_json(404, error_body("unknown path " + path, "invalid_request_error",
                                              "not_found"), body)

    # ---- GET -----------------------------------------------------------------------

    def do_GET(self):
        st = self.server.state
        path = self.path.split("?", 1)[0]
        if not path.startswith("/v0/"):
            return self.send_json(404, error_body("unknown path " + path, "invalid_request_error",
                                                  "not_found"))
        if not self.authorized():
            return self.unauthorized()
        if path == "/v0/models":
            return self.send_json(200, {"models": [{"name": n, "format": st.args.format}
                                                   for n in st.models]})
        prefix = "/v0/models/"
        rest = path[len(prefix):]
        name, _, tail = rest.partition("/")
        if not path.startswith(prefix) or name not in st.models:
            return self.send_json(404, error_body("no model named %r" % name,
                                                  "invalid_request_error", "model_not_found"))
        if tail == "manifest":
            return self.send_json(200, st.manifest(name))
        if not tail.startswith("files/"):
            return self.send_json(404, error_body("unknown path " + path, "invalid_request_error",
                                                  "not_found"))
        self.serve_file(name, tail[len("files/"):])

    def serve_file(self, name, rel):
        st = self.server.state
        root = st.models[name]
        keys = (rel, name + "/" + rel)
        full = os.path.realpath(os.path.join(root, rel))
        if rel in st.phantoms(name) or not full.startswith(root + os.sep) \
                or not os.path.isfile(full):
            return self.send_json(404, error_body("model %s has no file %s" % (name, rel),
                                                  "invalid_request_error", "not_found"))
        with open(full, "rb") as f:
            data = f.read()
        if any(k in st.corrupt for k in keys):
            data = bytes(b ^ 0xFF for b in data)
        size = len(data)
        start, end, code = 0, size - 1, 200
        rng = self.headers.get("Range")
        if rng:
            spec = rng.strip()
            a, _, b = spec[len("bytes="):].partition("-")
            if not spec.startswith("bytes=") or "," in spec or not a.isdigit() \
                    or (b and not b.isdigit()):
                return self.send_json(400, error_body("bad Range " + rng,
                                                      "invalid_request_error", "bad_range"))
            start = int(a)
            if b:
                end = min(int(b), size - 1)
            if start >= size:
                self.log_request_line(None, 416)
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % size)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            code = 206
        body = data[start:end + 1]
        cut = st.take_once(st.cut, keys)
        rate = st.lookup(st.slow, keys)
        self.log_request_line(None, code)
        self.send_response(code)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        if code == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
        self.end_headers()
        limit = len(body) if cut is None else min(len(body), cut)
        chunk = CHUNK if not rate else max(1, min(CHUNK, rate // 20))
        began = time.monotonic()
        try:
            for off in range(0, limit, chunk):
                piece = body[off:min(off + chunk, limit)]
                self.wfile.write(piece)
                if rate:
                    self.wfile.flush()
                    ahead = (off + len(piece)) / rate - (time.monotonic() - began)
                    if ahead > 0:
                        time.sleep(ahead)
            self.wfile.flush()
            if cut is not None:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--key", help="the node key (default: none asked)")
    ap.add_argument("--interval", type=float, default=5.0,
                    help="heartbeat_interval_s given to the nodes")
    ap.add_argument("--format", default="safetensors")
    ap.add_argument("--log")
    ap.add_argument("--model", action="append", metavar="NAME=DIR")
    ap.add_argument("--optional", action="append", metavar="PATH")
    ap.add_argument("--phantom-optional", action="append", metavar="PATH")
    ap.add_argument("--cut", action="append", metavar="PATH:N")
    ap.add_argument("--corrupt", action="append", metavar="PATH")
    ap.add_argument("--slow", action="append", metavar="PATH:BPS")
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
