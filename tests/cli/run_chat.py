#!/usr/bin/env python3
"""`llmr run MODEL` driven through a pseudo-terminal, as a person types it.

Against a running server (BASE_URL) serving MODEL, the gpt-oss-echo test model (its
answer is the text of the last user message, so each line typed says what the model
reasons and answers): two turns, each answer's reasoning shown dim after "Thinking:"
and apart from the answer; the up arrow recalling an earlier line, edited with the left
arrow and Backspace before it is sent; Ctrl-C on a line; /bye leaving with status 0;
Ctrl-D leaving too.

Then against a stand-in server run here, which records what it is sent: the second
turn sends the whole conversation (the first question and answer, without the
reasoning), /clear starts over, Ctrl-C stops an answer (and the turn leaves no trace),
and the one-shot form `llmr run MODEL PROMPT` prints
the answer alone, reasoning only on stderr with --reasoning.

Usage: run_chat.py LLMR BASE_URL MODEL"""
import fcntl
import http.server
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import threading
import time

LLMR, BASE, MODEL = sys.argv[1], sys.argv[2], sys.argv[3]
failures = 0


def fail(what):
    global failures
    failures += 1
    print(f"FAIL: {what}", file=sys.stderr)


def check(cond, what):
    if not cond:
        fail(what)
    return cond


def harmony(reasoning, answer):
    """What the echo model is asked to write: reasoning, then the answer."""
    return (f"<|channel|>analysis<|message|>{reasoning}<|end|><|start|>assistant"
            f"<|channel|>final<|message|>{answer}")


class Term:
    """llmr run in a pseudo-terminal: send keys, wait for text."""

    def __init__(self, args, env, columns=None):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                if columns:
                    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
                os.execve(LLMR, [LLMR] + args, env)
            finally:
                os._exit(127)
        self.seen = b""  # everything the terminal showed
        self.mark = 0    # where the next expect looks from

    def send(self, keys):
        os.write(self.fd, keys.encode() if isinstance(keys, str) else keys)

    def expect(self, text, timeout=30):
        """Waits until text shows after the mark; returns what showed up to it (and
        moves the mark past it), or None after failing."""
        want = text.encode()
        end = time.time() + timeout
        while True:
            at = self.seen.find(want, self.mark)
            if at >= 0:
                got = self.seen[self.mark:at + len(want)]
                self.mark = at + len(want)
                return got.decode(errors="replace")
            left = end - time.time()
            if left <= 0:
                fail(f"no {text!r} within {timeout} s; the terminal showed after the mark: "
                     f"{self.seen[self.mark:][-1500:]!r}")
                return None
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    fail(f"the program ended before showing {text!r}: {self.seen[self.mark:][-1500:]!r}")
                    return None
                self.seen += data

    def wait_exit(self, timeout=15):
        end = time.time() + timeout
        while time.time() < end:
            try:
                r, _, _ = select.select([self.fd], [], [], 0.1)
                if r:
                    self.seen += os.read(self.fd, 65536)
            except OSError:
                pass
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
        os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)
        os.close(self.fd)
        return None


env = dict(os.environ, TERM="xterm")
DIM, RESET = "\x1b[2m", "\x1b[0m"

# ---- against the server: two turns, history, /bye --------------------------------------
t = Term(["run", MODEL, "--router", BASE], env)
banner = t.expect(">>> ")
if banner is not None:
    check(f"Chatting with {MODEL}" in banner, f"a banner names the model: {banner!r}")
    t.send(harmony("think one", "answer one") + "\r")
    # the line as typed (redrawn at each key) ends with "answer one" too: the answer is
    # what follows "Thinking:"
    if t.expect(DIM + "Thinking: think one") is not None:
        shown = t.expect("answer one")
        if shown is not None:
            check(RESET in shown, f"the dim ends after the reasoning: {shown!r}")
            check("\n" in shown, f"the answer starts on a line of its own: {shown!r}")
            check("<|" not in shown and "|>" not in shown, f"no special token is shown: {shown!r}")
    t.expect(">>> ")
    t.send(harmony("think two", "answer two") + "\r")
    if t.expect(DIM + "Thinking: think two") is not None:
        shown = t.expect("answer two")
        check(shown is not None and "answer one" not in shown, f"the second answer is its own: {shown!r}")
    t.expect(">>> ")
    # up: the last line; up again: the one before, then edited: the left arrow moves
    # before its last "e", Backspace drops the "n", "E" is typed: "answer oEe"
    t.send("\x1b[A")
    check(t.expect("answer two") is not None, "up recalls the last line")
    t.send("\x1b[A")
    check(t.expect("answer one") is not None, "up again recalls the line before")
    t.send("\x1b[D\x7fE\r")
    if t.expect(DIM + "Thinking: think one") is not None:
        check(t.expect("answer oEe") is not None, "the recalled line, edited, is sent")
    t.expect(">>> ")
    # Ctrl-C on a line drops it, and the chat goes on
    t.send("half a line\x03")
    t.expect("(/bye or Ctrl-D leaves)")
    t.expect(">>> ")
    t.send("/?\r")
    t.expect("/clear")
    t.expect(">>> ")
    t.send("/bye\r")
    check(t.wait_exit() == 0, "/bye leaves with status 0")

t = Term(["run", MODEL, "--router", BASE], env)
if t.expect(">>> ") is not None:
    t.send("\x04")
    check(t.wait_exit() == 0, "Ctrl-D on an empty line leaves with status 0")


# ---- a stand-in server: what each turn sends ---------------------------------------------
bodies = []


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        bodies.append(req)
        n = len(bodies)
        slow = req["messages"][-1]["content"] == "slow"  # reasons, then waits 10 s
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        try:
            for delta in ({"role": "assistant", "reasoning_content": f"why {n}"}, {"content": f"reply {n}"}):
                chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
                if slow:
                    time.sleep(10)
            end = {"object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
        except OSError:
            pass  # the client went away (Ctrl-C)


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=srv.serve_forever, daemon=True).start()
fake = f"http://127.0.0.1:{srv.server_address[1]}"
fenv = dict(env, LLMR_ROUTER=fake, LLMR_API_KEY="k")

t = Term(["run", "m", "--system", "be brief"], fenv)
if t.expect(">>> ") is not None:
    t.send("first\r")
    t.expect("reply 1")
    t.expect(">>> ")
    t.send("second\r")
    t.expect("reply 2")
    t.expect(">>> ")
    t.send("/clear\r")
    t.expect("(a new conversation)")
    t.expect(">>> ")
    t.send("third\r")
    t.expect("reply 3")
    t.expect(">>> ")
    # Ctrl-C while an answer comes stops it at once; the turn leaves no trace
    t.send("slow\r")
    t.expect("why 4")
    began = time.time()
    t.send("\x03")
    t.expect("(stopped)")
    t.expect(">>> ")
    check(time.time() - began < 5, f"Ctrl-C stops the answer within 5 s: {time.time() - began:.1f} s")
    t.send("after\r")
    t.expect("reply 5")
    t.expect(">>> ")
    t.send("/bye\r")
    check(t.wait_exit() == 0, "/bye after five turns")
want = [
    [{"role": "system", "content": "be brief"}, {"role": "user", "content": "first"}],
    [{"role": "system", "content": "be brief"}, {"role": "user", "content": "first"},
     {"role": "assistant", "content": "reply 1"}, {"role": "user", "content": "second"}],
    [{"role": "system", "content": "be brief"}, {"role": "user", "content": "third"}],
    [{"role": "system", "content": "be brief"}, {"role": "user", "content": "third"},
     {"role": "assistant", "content": "reply 3"}, {"role": "user", "content": "slow"}],
    [{"role": "system", "content": "be brief"}, {"role": "user", "content": "third"},
     {"role": "assistant", "content": "reply 3"}, {"role": "user", "content": "after"}],
]
check(len(bodies) == 5, f"five requests: {bodies}")
for i, (b, w) in enumerate(zip(bodies, want)):
    check(b.get("messages") == w, f"turn {i + 1} sends {w}: {b.get('messages')}")
    check(b.get("stream") is True and b.get("model") == "m", f"turn {i + 1} streams model m: {b}")

# a line longer than the terminal is wide: 4 + 100 columns on a 40-column terminal take
# three rows; Ctrl-A goes up two rows to the line's start, and the redraw starts there
t = Term(["run", "m"], fenv, columns=40)
if t.expect(">>> ") is not None:
    t.send("y" * 100)
    t.expect("y" * 100)
    t.send("\x01")
    check(t.expect("\x1b[2A\r>>> " + "y" * 100 + "\x1b[J\x1b[2A\r\x1b[4C", timeout=10) is not None,
          "a wrapped line is redrawn from its first row, the cursor put back at its start")
    t.send("\x03/bye\r")
    check(t.wait_exit() == 0, "/bye after a long line")

# the one-shot form: the answer alone on stdout; reasoning on stderr only when asked
r = subprocess.run([LLMR, "run", "m", "a question"], env=fenv, capture_output=True, text=True, timeout=30)
check(r.returncode == 0 and r.stdout == "reply 6\n", f"one shot prints the answer alone: {r}")
check("why" not in r.stderr, f"one shot leaves the reasoning out: {r.stderr!r}")
r = subprocess.run([LLMR, "run", "m", "--reasoning", "--prompt", "q"], env=fenv, capture_output=True, text=True,
                   timeout=30)
check(r.returncode == 0 and r.stdout == "reply 7\n", f"one shot with --reasoning: {r}")
check("why 7" in r.stderr, f"--reasoning writes the reasoning to stderr: {r.stderr!r}")
check(bodies[-1]["messages"] == [{"role": "user", "content": "q"}], f"one shot sends the prompt alone: {bodies[-1]}")
srv.shutdown()

if failures:
    print(f"{failures} run_chat checks failed", file=sys.stderr)
    sys.exit(1)
print("all run_chat checks passed")
