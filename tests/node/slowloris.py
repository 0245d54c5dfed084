#!/usr/bin/env python3
"""Slowloris against a running node: COUNT connections that send a request's headers a
byte at a time, never finishing them.  Meanwhile a normal chat must be answered within
1 s, the node's thread count (/proc/PID/status) must stay at most MAX_THREADS, and every
trickling connection must still be open before HEADER_TIMEOUT and closed by the node
within HEADER_TIMEOUT + 2 s of opening.  Prints what it measured; exit 1 on a failure.
Usage: slowloris.py PORT PID COUNT HEADER_TIMEOUT MAX_THREADS"""
import errno
import http.client
import json
import resource
import socket
import sys
import time

port, pid, count, header_timeout, max_threads = (int(a) for a in sys.argv[1:6])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
want = min(hard, count + 256) if hard != resource.RLIM_INFINITY else count + 256
if soft < want:
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
failures = []


def threads():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return -1


def chat_seconds():
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    body = json.dumps({"model": "loop", "max_tokens": 4,
                       "messages": [{"role": "user", "content": "hi"}]})
    c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    took = time.monotonic() - t0
    if r.status != 200 or b"choices" not in data:
        failures.append(f"the normal chat got HTTP {r.status}: {data[:200]!r}")
    return took


def closed(s):
    """True when the node closed s (end of file or a reset)."""
    try:
        return s.recv(1, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


idle_threads = threads()
start = time.monotonic()
socks = []
for i in range(count):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.setblocking(False)
    s.send(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    socks.append(s)
opened = time.monotonic()
print(f"opened {count} trickling connections in {opened - start:.2f} s; "
      f"node threads idle: {idle_threads}")

most_threads = threads()
chats = []
shut = 0
round_no = 0
checked_open = False
while time.monotonic() - opened < header_timeout + 2:
    round_no += 1
    for s in socks:  # one byte each
        if s.fileno() < 0:
            continue
        try:
            s.send(b"a")
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            pass
    most_threads = max(most_threads, threads())
    if len(chats) < 5:
        chats.append(chat_seconds())
    elapsed = time.monotonic() - opened
    if not checked_open and elapsed > header_timeout / 2:
        checked_open = True
        early = sum(1 for s in socks if closed(s))
        if early:
            failures.append(f"{early} trickling connections were closed after {elapsed:.1f} s, "
                            f"before the header deadline ({header_timeout} s)")
        print(f"after {elapsed:.1f} s all {count - early} trickling connections are open")
    time.sleep(0.25)

still_open = sum(1 for s in socks if not closed(s))
if still_open:
    failures.append(f"{still_open} of {count} trickling connections are still open "
                    f"{header_timeout + 2} s after opening (header deadline {header_timeout} s)")
if not checked_open:
    failures.append("no check before the deadline")
slowest = max(chats) if chats else 99
print(f"normal chats while trickling: {len(chats)}, slowest {slowest * 1000:.0f} ms")
print(f"node threads at most: {most_threads} (bound {max_threads})")
print(f"trickling connections closed by the header deadline: {count - still_open} of {count}")
if slowest > 1.0:
    failures.append(f"a normal chat took {slowest:.2f} s while {count} connections trickled")
if most_threads > max_threads:
    failures.append(f"the node ran {most_threads} threads, more than {max_threads}")
for s in socks:
    s.close()
for f in failures:
    print("FAIL: " + f, file=sys.stderr)
sys.exit(1 if failures else 0)
