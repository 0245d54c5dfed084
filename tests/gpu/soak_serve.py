#!/usr/bin/env python3
"""Soak: many streams against a running node for a while, with clients that go away.

N workers each send streamed /v1/completions (prompts of random token ids, 32 to 512
long, 32 to 512 new tokens, greedy), one after another, until the time is up.  About a
fifth of the requests are abandoned: the client closes the connection after a random
number of tokens (the node cancels them).  At the end: every request that was not
abandoned must have ended well (its stream closed with [DONE]), the node's /metrics
must show the KV cache back to 0 positions in use, and the GPU's memory in use
(nvidia-smi, when there is one) must be where it was after the first minute, give or
take 16 MiB (the CUDA runtime loads a kernel's code on its first launch, which a rare
step shape may bring late).  Prints a summary; exit 1 when any of that fails.

Usage: soak_serve.py URL MODEL [--streams 128] [--seconds 300] [--seed 1] [--vocab 199998]
"""
import argparse
import http.client
import json
import random
import subprocess
import sys
import threading
import time
import urllib.parse

ap = argparse.ArgumentParser()
ap.add_argument("url")
ap.add_argument("model")
ap.add_argument("--streams", type=int, default=128)
ap.add_argument("--seconds", type=float, default=300)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--vocab", type=int, default=199998)  # ids below gpt-oss's special tokens
args = ap.parse_args()
u = urllib.parse.urlparse(args.url)
lock = threading.Lock()
stats = {"ok": 0, "abandoned": 0, "failed": 0, "tokens": 0}
failures = []
deadline = time.time() + args.seconds


def gpu_used_mib():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout.split()
        return int(out[0]) if out else None
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def metric(name):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    c.request("GET", "/metrics")
    body = c.getresponse().read().decode()
    c.close()
    total, seen = 0, False
    for line in body.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
            seen = True
    return total if seen else None


def one(rng):
    n_prompt, n_new = rng.randint(32, 512), rng.randint(32, 512)
    abandon_at = rng.randint(1, n_new) if rng.random() < 0.2 else None
    body = json.dumps({"model": args.model, "prompt": [rng.randrange(0, args.vocab) for _ in range(n_prompt)],
                       "max_tokens": n_new, "temperature": 0, "stream": True})
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    try:
        c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            return "failed", f"HTTP {r.status}: {r.read()[:200]!r}", 0
        got, done = 0, False
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            ev = json.loads(data)
            if "error" in ev:
                return "failed", f"error event: {data[:200]}", got
            for ch in ev.get("choices", []):
                if ch.get("text"):
                    got += 1
            if abandon_at and got >= abandon_at:
                c.sock.close()  # the client goes away mid-stream
                return "abandoned", None, got
        if not done:
            return "failed", f"the stream ended without [DONE] after {got} tokens", got
        return "ok", None, got
    except (OSError, http.client.HTTPException, json.JSONDecodeError) as e:
        return "failed", f"{type(e).__name__}: {e}", 0
    finally:
        c.close()


def worker(i):
    rng = random.Random(args.seed * 100003 + i)
    while time.time() < deadline:
        kind, why, got = one(rng)
        with lock:
            stats[kind] += 1
            stats["tokens"] += got
            if why and len(failures) < 10:
                failures.append(why)


threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.streams)]
t0 = time.time()
for t in threads:
    t.start()
time.sleep(min(60, args.seconds / 3))
vram_early = gpu_used_mib()
for t in threads:
    t.join()
elapsed = time.time() - t0
used = None
for _ in range(100):  # the health check carries the figure: up to 10 s
    used = metric("llmr_kv_cache_used_tokens")
    if used == 0:
        break
    time.sleep(0.1)
vram_end = gpu_used_mib()
print(f"soak: {args.streams} streams for {elapsed:.0f} s: {stats['ok']} requests ended well, "
      f"{stats['abandoned']} abandoned by their clients, {stats['failed']} failed; "
      f"{stats['tokens']} tokens ({stats['tokens'] / elapsed:.0f}/s)")
print(f"KV cache in use at the end: {used} positions; GPU memory used after the first minute "
      f"{vram_early} MiB, at the end {vram_end} MiB")
for f in failures:
    print("  failure:", f)
ok = stats["failed"] == 0 and used == 0 and (vram_early is None or
                                              (vram_end is not None and abs(vram_end - vram_early) <= 16))
print(f"RESULT soak {'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
