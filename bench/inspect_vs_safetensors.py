#!/usr/bin/env python3
"""Benchmark: checking a model directory by its headers.  `llmr inspect` against the
reference safetensors reader (Python `safetensors.safe_open`, as transformers uses it)
on the same snapshot, in one run: in-process time of the work, and whole-process time
of a command that does it.

The peer reads config.json and the index, opens every shard and reads each tensor's
dtype and shape.  llmr does that and more: it checks every header rule, the index
against the shards, the config's fields, and every tensor's dtype and shape against
what the config implies.

Usage: inspect_vs_safetensors.py LLMR_BINARY SNAPSHOT_DIR [RUNS]
       inspect_vs_safetensors.py --peer SNAPSHOT_DIR   (the peer alone, once)
Needs python3 with safetensors and numpy.  Prints a table, then the figures as JSON.
"""
import json
import os
import statistics
import subprocess
import sys
import time

from safetensors import safe_open


def peer_read(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        json.load(f)
    with open(os.path.join(model_dir, "model.safetensors.index.json")) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    tensors = 0
    for shard in shards:
        with safe_open(os.path.join(model_dir, shard), framework="numpy") as f:
            for key in f.keys():
                s = f.get_slice(key)
                s.get_shape()
                s.get_dtype()
                tensors += 1
    return tensors


def median_ms(fn, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times), max(times)


def main():
    if sys.argv[1] == "--peer":  # the peer as a whole command, for its process timing
        peer_read(sys.argv[2])
        return
    llmr, model_dir = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    peer_read(model_dir)  # warm the page cache for both
    n = peer_read(model_dir)
    peer_in = median_ms(lambda: peer_read(model_dir), runs)
    out = subprocess.run([llmr, "bench", "inspect", model_dir, "--runs", str(runs)],
                         check=True, capture_output=True, text=True).stdout
    ours = json.loads(out)
    llmr_in = (ours["median_ms"], ours["min_ms"], ours["max_ms"])
    devnull = subprocess.DEVNULL
    llmr_proc = median_ms(lambda: subprocess.run([llmr, "inspect", model_dir], check=True,
                                                 stdout=devnull), runs)
    peer_cmd = [sys.executable, os.path.abspath(__file__), "--peer", model_dir]
    peer_proc = median_ms(lambda: subprocess.run(peer_cmd, check=True, stdout=devnull), runs)

    print("snapshot %s: %d tensors, %.2f GB; %d runs each, medians (min-max) in ms"
          % (model_dir, n, ours["model_bytes"] / 1e9, runs))
    print("%-28s %-24s %-24s %s" % ("measure", "llmr inspect", "safetensors (Python)", "peer/llmr"))
    for label, a, b in (("work, in process", llmr_in, peer_in),
                        ("whole command", llmr_proc, peer_proc)):
        print("%-28s %-24s %-24s %.1fx" % (label, "%.2f (%.2f-%.2f)" % a, "%.2f (%.2f-%.2f)" % b,
                                           b[0] / a[0]))
    print(json.dumps({"tensors": n, "bytes": ours["model_bytes"], "runs": runs,
                      "llmr_in_process_ms": llmr_in[0], "peer_in_process_ms": peer_in[0],
                      "llmr_process_ms": llmr_proc[0], "peer_process_ms": peer_proc[0]}))


if __name__ == "__main__":
    main()
