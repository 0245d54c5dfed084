#!/usr/bin/env python3
"""Compares llmr's tokenizer with Hugging Face tokenizers on a corpus: every document
encoded (special tokens recognised; and with the post-processor's additions), decoded
(with and without special tokens, and streamed one id at a time), and the whole corpus
encoded at once.  Prints one line per check and the first mismatches; exits 1 on any.

Usage: check_tokenizer.py LLMR TOKENIZER_JSON CORPUS.jsonl NAME
"""
import json
import os
import subprocess
import sys

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from tokenizers import Tokenizer  # noqa: E402

llmr, tok_path, corpus, name = sys.argv[1:5]
docs = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8")]
hf = Tokenizer.from_file(tok_path)


def run(args, data):
    p = subprocess.run([llmr] + args + ["--tokenizer", tok_path], input=data, capture_output=True)
    if p.returncode != 0:
        sys.exit(f"llmr {' '.join(args)} failed: {p.stderr.decode(errors='replace')[:500]}")
    return p.stdout


def lines_json(b):
    # Split on "\n" only: str.splitlines would also cut at U+2028, U+0085 and others,
    # which JSON strings may hold as they are.
    return [json.loads(x) for x in b.decode("utf-8").split("\n") if x]


failures = 0


def report(label, got, want, texts):
    global failures
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    if len(got) != len(want):
        bad.append(-1)
    status = "ok" if not bad else f"FAILED ({len(bad)} of {len(want)} differ)"
    print(f"{name:14s} {label:34s} {status}")
    for i in bad[:3]:
        if i < 0:
            print(f"   counts differ: {len(got)} vs {len(want)}")
            continue
        g, w = got[i], want[i]
        k = next((j for j in range(min(len(g), len(w))) if g[j] != w[j]), min(len(g), len(w)))
        print(f"   doc {i}: first difference at position {k}: llmr {g[k:k+6]!r} hf {w[k:k+6]!r}")
        print(f"   text: {texts[i][:120]!r}")
    failures += bool(bad)


jsonl = "".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs).encode("utf-8")
ours = lines_json(run(["tokenize", "--jsonl"], jsonl))
theirs = [e.ids for e in hf.encode_batch(docs, add_special_tokens=False)]
report("encode", ours, theirs, docs)
ours_add = lines_json(run(["tokenize", "--jsonl", "--add-special"], jsonl))
theirs_add = [e.ids for e in hf.encode_batch(docs, add_special_tokens=True)]
report("encode + special tokens", ours_add, theirs_add, docs)

ids_lines = "".join(json.dumps(i) + "\n" for i in theirs_add).encode()
for skip in (False, True):
    want = hf.decode_batch(theirs_add, skip_special_tokens=skip)
    flags = ["--skip-special"] if skip else []
    report(f"decode{' skipping specials' if skip else ''}", lines_json(run(["detokenize", "--jsonl"] + flags, ids_lines)), want, docs)
    report(f"streamed decode{' skipping specials' if skip else ''}",
           lines_json(run(["detokenize", "--jsonl", "--stream"] + flags, ids_lines)), want, docs)

whole = "\n".join(docs)
ours_whole = [int(x) for x in run(["tokenize"], whole.encode("utf-8")).split()]
theirs_whole = hf.encode(whole, add_special_tokens=False).ids
report("whole corpus at once", [ours_whole], [theirs_whole], [whole[:200]])
print(f"{name:14s} {len(docs)} documents, {len(whole.encode('utf-8'))} bytes, {len(theirs_whole)} tokens")
sys.exit(1 if failures else 0)
