#!/usr/bin/env python3
"""Does batching change answers on the GPU?  N greedy completions (prompts of random
token ids of different lengths) sent to a running node one at a time, then all at once;
reports how many of the concurrent answers equal their solo run, and where the first
that differs parts.  Exit 0 always when every request succeeded (the count is the
result: on the GPU a sum's order may depend on the batch), 1 when a request failed.

Usage: check_batch_equal.py URL MODEL [--n 64] [--new 48] [--seed 3]
"""
import argparse
import json
import random
import sys
import threading
import urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("url")
ap.add_argument("model")
ap.add_argument("--n", type=int, default=64)
ap.add_argument("--new", type=int, default=48)
ap.add_argument("--seed", type=int, default=3)
args = ap.parse_args()

rng = random.Random(args.seed)
prompts = [[rng.randrange(0, 199998) for _ in range(rng.randrange(8, 700))] for _ in range(args.n)]


def complete(ids):
    body = json.dumps({"model": args.model, "prompt": ids, "max_tokens": args.new,
                       "temperature": 0, "logprobs": 0}).encode()
    req = urllib.request.Request(args.url.rstrip("/") + "/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        out = json.load(r)
    ch = out["choices"][0]
    lp = ch.get("logprobs") or {}
    return lp.get("tokens") or ch["text"]


try:
    solo = [complete(p) for p in prompts]
except Exception as e:  # noqa: BLE001 - any failure is the report
    print(f"RESULT batch-equal FAIL: a solo request failed: {e}")
    sys.exit(1)
together = [None] * args.n
errors = []


def worker(i):
    try:
        together[i] = complete(prompts[i])
    except Exception as e:  # noqa: BLE001
        errors.append(f"request {i}: {e}")


threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
if errors:
    print(f"RESULT batch-equal FAIL: {len(errors)} concurrent requests failed: {errors[0]}")
    sys.exit(1)
same = sum(1 for a, b in zip(solo, together) if a == b)
for i, (a, b) in enumerate(zip(solo, together)):
    if a != b:
        k = next((j for j in range(min(len(a), len(b))) if a[j] != b[j]), min(len(a), len(b)))
        print(f"request {i} ({len(prompts[i])} prompt tokens) parts at token {k} of {args.new}")
print(f"RESULT batch-equal: {same} of {args.n} concurrent greedy continuations "
      f"({args.new} tokens) equal their solo run")
