#!/usr/bin/env python3
"""Do the GPU's penalties pick what the CPU sampler picks?  Greedy completions with
repetition, presence and frequency penalties (prompts of random token ids), sent all at
once to a running node; --save keeps the answers, --compare checks them against a saved
run (e.g. a node with {"host_sampler":1}: the CPU sampler over the same logits; both
nodes with {"batch_invariant":1} so that the batch changes no logit).  Also checks that
the penalties change some answers against the same prompts without them.  Prints a
RESULT line; exit 1 when a request failed or, with --compare, an answer differs.

Usage: check_penalties.py URL MODEL (--save FILE | --compare FILE) [--n 24] [--new 40]
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
ap.add_argument("--save")
ap.add_argument("--compare")
ap.add_argument("--n", type=int, default=24)
ap.add_argument("--new", type=int, default=40)
args = ap.parse_args()

rng = random.Random(7)
SETTINGS = [
    {"repetition_penalty": 1.3},
    {"frequency_penalty": 0.8, "presence_penalty": 0.5},
    {"repetition_penalty": 0.9, "frequency_penalty": -0.5, "presence_penalty": 1.5},
    {},  # no penalty: the baseline the others must differ from somewhere
]
jobs = []
for i in range(args.n):
    # prompts that repeat a few ids, so that penalties have something to act on
    pool = [rng.randrange(0, 199998) for _ in range(12)]
    ids = [rng.choice(pool) for _ in range(rng.randrange(20, 300))]
    jobs.append({"prompt": ids, **SETTINGS[i % len(SETTINGS)]})


def complete(job):
    body = dict(job, model=args.model, max_tokens=args.new, temperature=0, logprobs=0)
    req = urllib.request.Request(args.url.rstrip("/") + "/v1/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        out = json.load(r)
    lp = out["choices"][0].get("logprobs") or {}
    return {"tokens": lp.get("tokens"), "logprobs": lp.get("token_logprobs")}


results = [None] * len(jobs)
errors = []


def run(i):
    try:
        results[i] = complete(jobs[i])
    except Exception as e:  # noqa: BLE001 - reported below
        errors.append(f"request {i}: {e}")


threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
for t in threads:
    t.start()
for t in threads:
    t.join()
if errors:
    print("\n".join(errors))
    print(f"RESULT penalties: {len(errors)} of {len(jobs)} requests failed")
    sys.exit(1)

# the same prompt without penalties: does each penalty setting change some answer?
changed = 0
base = [complete({"prompt": j["prompt"]}) for j in jobs if any(k.endswith("penalty") for k in j)]
pen = [r for r, j in zip(results, jobs) if any(k.endswith("penalty") for k in j)]
changed = sum(a["tokens"] != b["tokens"] for a, b in zip(pen, base))

if args.save:
    with open(args.save, "w") as f:
        json.dump(results, f)
    print(f"RESULT penalties: {len(jobs)} answers saved; {changed} of {len(pen)} with penalties "
          f"differ from the same prompt without them")
    sys.exit(0)
with open(args.compare) as f:
    other = json.load(f)
same = sum(a["tokens"] == b["tokens"] for a, b in zip(results, other))
worst = 0.0
for a, b in zip(results, other):
    if a["tokens"] == b["tokens"]:
        worst = max([worst] + [abs(x - y) for x, y in zip(a["logprobs"], b["logprobs"])])
print(f"RESULT penalties: {same} of {len(jobs)} greedy answers equal the saved run "
      f"(largest logprob difference {worst:.2e}); {changed} of {len(pen)} with penalties "
      f"differ from the same prompt without them")
sys.exit(0 if same == len(jobs) and changed > 0 else 1)
