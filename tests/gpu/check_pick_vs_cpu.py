#!/usr/bin/env python3
"""Does the GPU's pick give what the CPU sampler gives?  Greedy completions with
repetition, presence and frequency penalties and with top_logprobs (prompts of random
token ids), sent all at once to a running node; --save keeps the answers, --compare
checks them against a saved run (e.g. a node with {"host_sampler":1}: the CPU sampler
over the same logits; both nodes with {"batch_invariant":1} so that the batch changes
no logit): the same tokens, the same top_logprobs alternatives, their values within
1e-3.  Also checks that the penalties change some answers against the same prompts
without them.  Prints a RESULT line; exit 1 when a request failed or, with --compare,
an answer differs.

Usage: check_pick_vs_cpu.py URL MODEL (--save FILE | --compare FILE) [--n 24] [--new 40]
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
    {"frequency_penalty": 0.8, "presence_penalty": 0.5, "top": 3},
    {"repetition_penalty": 0.9, "frequency_penalty": -0.5, "presence_penalty": 1.5},
    {"top": 5},  # no penalty: the baseline the others must differ from somewhere
]
jobs = []
for i in range(args.n):
    # prompts that repeat a few ids, so that penalties have something to act on
    pool = [rng.randrange(0, 199998) for _ in range(12)]
    ids = [rng.choice(pool) for _ in range(rng.randrange(20, 300))]
    jobs.append({"prompt": ids, **SETTINGS[i % len(SETTINGS)]})


def complete(job):
    body = {k: v for k, v in job.items() if k != "top"}
    body.update(model=args.model, max_tokens=args.new, temperature=0, logprobs=job.get("top", 0))
    req = urllib.request.Request(args.url.rstrip("/") + "/v1/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        out = json.load(r)
    lp = out["choices"][0].get("logprobs") or {}
    return {"tokens": lp.get("tokens"), "logprobs": lp.get("token_logprobs"),
            "top": lp.get("top_logprobs") if job.get("top") else None}


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
    print(f"RESULT pick vs cpu: {len(errors)} of {len(jobs)} requests failed")
    sys.exit(1)

# the same prompt without penalties: does each penalty setting change some answer?
changed = 0
base = [complete({"prompt": j["prompt"]}) for j in jobs if any(k.endswith("penalty") for k in j)]
tops = sum(1 for r in results if r["top"])
pen = [r for r, j in zip(results, jobs) if any(k.endswith("penalty") for k in j)]
changed = sum(a["tokens"] != b["tokens"] for a, b in zip(pen, base))

if args.save:
    with open(args.save, "w") as f:
        json.dump(results, f)
    print(f"RESULT pick vs cpu: {len(jobs)} answers saved; {changed} of {len(pen)} with penalties "
          f"differ from the same prompt without them")
    sys.exit(0)
with open(args.compare) as f:
    other = json.load(f)
def same_top(a, b):
    """The same alternatives at every position, their logprobs within 1e-3."""
    if a is None or b is None:
        return a == b
    return len(a) == len(b) and all(
        set(x) == set(y) and all(abs(x[k] - y[k]) < 1e-3 for k in x) for x, y in zip(a, b))


same = sum(a["tokens"] == b["tokens"] and same_top(a["top"], b["top"]) for a, b in zip(results, other))
worst = 0.0
for a, b in zip(results, other):
    if a["tokens"] == b["tokens"]:
        worst = max([worst] + [abs(x - y) for x, y in zip(a["logprobs"], b["logprobs"])])
print(f"RESULT pick vs cpu: {same} of {len(jobs)} greedy answers equal the saved run, tokens and "
      f"top_logprobs ({tops} with top_logprobs; largest logprob difference {worst:.2e}); "
      f"{changed} of {len(pen)} with penalties differ from the same prompt without them")
sys.exit(0 if same == len(jobs) and changed > 0 and tops > 0 else 1)
