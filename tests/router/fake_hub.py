#!/usr/bin/env python3
"""A small Hugging Face Hub for the model source tests: serves repositories from
local directories over HTTP on loopback.

  fake_hub.py --repo ORG/NAME[@REV]=DIR ... [--private ORG/NAME] [--token TOKEN]
              [--page-size N] [--lfs-threshold BYTES] [--log FILE]

GET /api/models/ORG/NAME/tree/REV[?recursive=true][&cursor=N] lists the files like
the Hub's tree API: a JSON array of {"type": "file", "oid", "size", "path"} (oid the
git blob sha1), with "lfs": {"oid": SHA256, "size", "pointerSize"} for files larger
than --lfs-threshold (default 1024) or named *.safetensors, *.gguf, *.bin, and
{"type": "directory", ...} entries.  Without recursive=true only the top level is
listed.  With --page-size N the list comes N entries at a time with a
`Link: <URL>; rel="next"` header pointing at the next page.

GET (or HEAD) /ORG/NAME/resolve/REV/PATH serves a file, with `Range: bytes=N-` and
`bytes=N-M` answered 206.

--flaky ORG/NAME:N makes the first N requests for that repository answer 503.

--slow BYTES_PER_S sends the weights (*.safetensors, *.gguf, *.bin) at about that
rate (a sync that takes a while, to stop in the middle).

A repository named with --private answers 401 unless the request has
`Authorization: Bearer TOKEN` with the --token; an unknown repository or revision
answers 404 with {"error": "..."} like the Hub.  REV defaults to main; REV in a URL is
percent-decoded ("refs%2Fpr%2F1").  Binds port 0 and prints the port on stdout.  Each
request is logged to --log as one line:
  GET /api/models/ORG/NAME/tree/main?recursive=true auth=Bearer TOKEN   ("-" without)
Standard library only."""

import argparse
import hashlib
import json
import os
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LFS_SUFFIXES = (".safetensors", ".gguf", ".bin")


def git_blob_sha1(data):
    h = hashlib.sha1()
    h.update(b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


def walk(root):
    """Every file and directory under root, as (relative path, is_dir), sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel = os.path.relpath(dirpath, root)
        for d in dirnames:
            out.append((d if rel == "." else rel + "/" + d, True))
        for f in filenames:
            out.append((f if rel == "." else rel + "/" + f, False))
    out.sort()
    return out


class State:
    def __init__(self, args):
        self.args = args
        self.repos = {}  # (repo, rev) -> directory
        for spec in args.repo or []:
            name, sep, path = spec.partition("=")
            if not sep:
                sys.exit("fake_hub: --repo %r should be ORG/NAME[@REV]=DIR" % spec)
            repo, _, rev = name.partition("@")
            self.repos[(repo, rev or "main")] = os.path.realpath(path)
        self.private = set(args.private or [])
        self.flaky = {}
        for spec in args.flaky or []:
            name, _, n = spec.rpartition(":")
            self.flaky[name] = int(n)
        self.lock = threading.Lock()
        self.log = open(args.log, "a", buffering=1) if args.log else None

    def write_log(self, line):
        if self.log:
            with self.lock:
                self.log.write(line + "\n")

    def known_repo(self, repo):
        return any(r == repo for r, _ in self.repos)

    def entries(self, root, recursive):
        out = []
        for rel, is_dir in walk(root):
            if not recursive and "/" in rel:
                continue
            full = os.path.join(root, rel)
            if is_dir:
                out.append({"type": "directory", "oid": "0" * 40, "size": 0, "path": rel})
                continue
            with open(full, "rb") as f:
                data = f.read()
            e = {"type": "file", "oid": git_blob_sha1(data), "size": len(data), "path": rel}
            if len(data) > self.args.lfs_threshold or rel.endswith(LFS_SUFFIXES):
                e["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                            "pointerSize": 134}
            out.append(e)
        return out


class Handler(BaseHTTPRequestHandler):
    server_version = "fake-hub/1"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: the --log file says what happened
        pass

    def do_HEAD(self):
        self.handle_request(head=True)

    def do_GET(self):
        self.handle_request(head=False)

    def handle_request(self, head):
        st = self.server.state
        st.write_log("%s %s auth=%s" % (self.command, self.path,
                                        self.headers.get("Authorization", "-")))
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        parts = url.path.split("/")
        # /api/models/ORG/NAME/tree/REV  or  /ORG/NAME/resolve/REV/PATH...
        if len(parts) >= 7 and parts[1:3] == ["api", "models"] and parts[5] == "tree":
            repo = parts[3] + "/" + parts[4]
            rev = urllib.parse.unquote(parts[6])
            sub = urllib.parse.unquote("/".join(parts[7:]))
            if not self.allowed(repo):
                return
            root = st.repos.get((repo, rev))
            if root is None:
                return self.not_found(repo)
            return self.tree(root, sub, query, head)
        if len(parts) >= 6 and parts[3] == "resolve":
            repo = parts[1] + "/" + parts[2]
            rev = urllib.parse.unquote(parts[4])
            rel = urllib.parse.unquote("/".join(parts[5:]))
            if not self.allowed(repo):
                return
            root = st.repos.get((repo, rev))
            if root is None:
                return self.not_found(repo)
            full = os.path.realpath(os.path.join(root, rel))
            if not full.startswith(root + os.sep) or not os.path.isfile(full):
                return self.json_error(404, "Entry not found", head)
            return self.file(full, head)
        return self.json_error(404, "Not found", head)

    def allowed(self, repo):
        st = self.server.state
        with st.lock:
            if st.flaky.get(repo, 0) > 0:
                st.flaky[repo] -= 1
                self.json_error(503, "Service Unavailable", self.command == "HEAD")
                return False
        if repo not in st.private:
            return True
        if st.args.token and self.headers.get("Authorization") == "Bearer " + st.args.token:
            return True
        self.json_error(401, "Invalid username or password.", self.command == "HEAD")
        return False

    def not_found(self, repo):
        st = self.server.state
        if st.known_repo(repo):
            return self.json_error(404, "Revision Not Found", self.command == "HEAD")
        return self.json_error(404, "Repository not found", self.command == "HEAD")

    def tree(self, root, sub, query, head):
        st = self.server.state
        recursive = query.get("recursive", ["false"])[0] in ("true", "1", "True")
        entries = st.entries(root, recursive)
        if sub:
            entries = [e for e in entries if e["path"].startswith(sub + "/")]
        start = int(query.get("cursor", ["0"])[0])
        size = st.args.page_size or len(entries) or 1
        page = entries[start:start + size]
        headers = {}
        if start + size < len(entries):
            q = dict((k, v[0]) for k, v in query.items())
            q["cursor"] = str(start + size)
            host = self.headers.get("Host", "127.0.0.1")
            link = "http://%s%s?%s" % (host, urllib.parse.urlsplit(self.path).path,
                                       urllib.parse.urlencode(q))
            headers["Link"] = '<%s>; rel="next"' % link
        self.send_bytes(200, json.dumps(page).encode(), "application/json", head, headers)

    def file(self, full, head):
        with open(full, "rb") as f:
            data = f.read()
        size = len(data)
        start, end, code = 0, size - 1, 200
        rng = self.headers.get("Range")
        if rng:
            spec = rng.strip()
            if not spec.startswith("bytes=") or "," in spec:
                return self.json_error(400, "bad range", head)
            a, _, b = spec[len("bytes="):].partition("-")
            start = int(a)
            if b:
                end = min(int(b), size - 1)
            if start >= size:
                return self.send_bytes(416, b"", "text/plain", head,
                                       {"Content-Range": "bytes */%d" % size})
            code = 206
        headers = {"Accept-Ranges": "bytes", "ETag": '"%s"' % git_blob_sha1(data)}
        if code == 206:
            headers["Content-Range"] = "bytes %d-%d/%d" % (start, end, size)
        slow = self.server.state.args.slow if full.endswith(LFS_SUFFIXES) else 0
        self.send_bytes(code, data[start:end + 1], "application/octet-stream", head, headers, slow)

    def json_error(self, code, message, head):
        body = json.dumps({"error": message}).encode()
        self.send_bytes(code, body, "application/json", head, {})

    def send_bytes(self, code, data, ctype, head, headers, rate=0):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if head:
            return
        if not rate:
            self.wfile.write(data)
            return
        step = max(1, rate // 20)
        try:
            for i in range(0, len(data), step):
                self.wfile.write(data[i:i + step])
                self.wfile.flush()
                time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", action="append")
    ap.add_argument("--private", action="append")
    ap.add_argument("--token")
    ap.add_argument("--flaky", action="append")
    ap.add_argument("--page-size", type=int, default=0)
    ap.add_argument("--lfs-threshold", type=int, default=1024)
    ap.add_argument("--log")
    ap.add_argument("--slow", type=int, default=0)
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
