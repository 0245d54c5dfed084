#!/usr/bin/env python3
"""Writes a deterministic mixed-text corpus for tokenizer checks: code and English
prose (the Python standard library's sources and docstrings), CJK, emoji (with ZWJ
sequences, skin tones, flags, keycaps), other scripts, long digit and space runs,
unusual whitespace and combining marks.  Output: CORPUS.jsonl (one {"text": ...}
document per line) and CORPUS.txt (the documents joined by newlines).

Usage: make_corpus.py OUT_PREFIX [MIN_BYTES]   (default 1,500,000 bytes)
"""
import json
import os
import random
import sys
import sysconfig

out = sys.argv[1]
min_bytes = int(sys.argv[2]) if len(sys.argv) > 2 else 1_500_000
rng = random.Random(20261121)
docs = []

# Code and prose: stdlib sources, in a fixed order.
stdlib = sysconfig.get_paths()["stdlib"]
for name in ["textwrap.py", "argparse.py", "json/decoder.py", "json/encoder.py", "difflib.py",
             "fractions.py", "statistics.py", "string.py", "shlex.py", "heapq.py", "bisect.py",
             "csv.py", "calendar.py", "pprint.py", "dataclasses.py", "enum.py", "ipaddress.py"]:
    path = os.path.join(stdlib, name)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for i in range(0, len(text), 4000):
            docs.append(text[i:i + 4000])


def pick(ranges, n):
    out = []
    for _ in range(n):
        lo, hi = rng.choice(ranges)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def words(ranges, count, wmin=1, wmax=8):
    return " ".join(pick(ranges, rng.randint(wmin, wmax)) for _ in range(count))


cjk = [(0x4E00, 0x62FF), (0x3041, 0x3096), (0x30A1, 0x30FA), (0xAC00, 0xD7A3)]
scripts = {
    "cyrillic": [(0x0430, 0x044F), (0x0410, 0x042F)],
    "greek": [(0x03B1, 0x03C9), (0x0391, 0x03A9), (0x1F00, 0x1F15)],
    "arabic": [(0x0621, 0x064A)],
    "devanagari": [(0x0905, 0x0939), (0x093E, 0x094C)],
    "thai": [(0x0E01, 0x0E2E), (0x0E30, 0x0E39)],
    "hebrew": [(0x05D0, 0x05EA)],
    "latin-ext": [(0x00C0, 0x00FF), (0x0100, 0x017F)],
}
emoji = ["\U0001F600", "\U0001F680", "\U0001F999", "\u2705", "\U0001F636\u200D\U0001F32B\uFE0F",
         "\U0001F44D\U0001F3FD", "\U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466",
         "\U0001F1EB\U0001F1F7", "\U0001F1EF\U0001F1F5", "1\uFE0F\u20E3", "\u2764\uFE0F",
         "\U0001F9D1\U0001F3FF\u200D\U0001F4BB", "\U0001FAE0", "\U0001F3F3\uFE0F\u200D\U0001F308"]
odd_space = ["\u00A0", "\u180E", "\u2000", "\u2009", "\u200A", "\u2028", "\u2029", "\u202F",
             "\u205F", "\u3000", "\uFEFF", "\u200B", "\r\n", "\t", "\v", "\f", "\x85"]
combining = ["e\u0301", "a\u0308", "n\u0303", "o\u0302\u0323", "\u0915\u093F", "\u1100\u1161\u11A8"]

while sum(len(d.encode("utf-8")) for d in docs) < min_bytes:
    kind = rng.randrange(8)
    if kind == 0:
        docs.append(words(cjk, rng.randint(20, 200), 1, 12))
    elif kind == 1:
        name = rng.choice(sorted(scripts))
        docs.append(words(scripts[name], rng.randint(20, 200)))
    elif kind == 2:
        docs.append(" ".join(rng.choice(emoji) + rng.choice(["", " ", "!", "\n"])
                             for _ in range(rng.randint(10, 80))))
    elif kind == 3:  # long digit runs, numbers with separators
        parts = []
        for _ in range(rng.randint(5, 40)):
            parts.append("".join(rng.choice("0123456789") for _ in range(rng.randint(1, 300))))
            parts.append(rng.choice([" ", ",", ".", "-", " = ", "\n", "1,000,000", "3.14159"]))
        docs.append("".join(parts))
    elif kind == 4:  # whitespace runs and odd spaces between words
        parts = []
        for _ in range(rng.randint(10, 60)):
            parts.append(rng.choice(["word", "Word", "WORD", "x", "it's", "THEY'RE", "we'll",
                                     "I'd", "camelCase", "snake_case", "URL://a.b/c?d=e"]))
            parts.append(rng.choice([" " * rng.randint(1, 200), "\n" * rng.randint(1, 5),
                                     "\t" * rng.randint(1, 8), rng.choice(odd_space),
                                     " \n ", "\n \n", "  \t\n"]))
        docs.append("".join(parts))
    elif kind == 5:  # combining marks and mixed scripts
        docs.append(" ".join(rng.choice(combining) + words(scripts["latin-ext"], 1)
                             for _ in range(rng.randint(10, 60))))
    elif kind == 6:  # punctuation-heavy and symbol runs
        docs.append("".join(rng.choice("!@#$%^&*()_+-=[]{}|;':\",./<>?`~\\ \n")
                            for _ in range(rng.randint(50, 600))))
    else:  # mixtures
        docs.append(words(cjk, 5) + " The model said: \"" + rng.choice(emoji) + "\" at 12:34:56, "
                    + words(scripts["cyrillic"], 4) + "    " + "9" * rng.randint(1, 50) + "\n")

with open(out + ".jsonl", "w", encoding="utf-8") as f:
    for d in docs:
        f.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")
with open(out + ".txt", "w", encoding="utf-8") as f:
    f.write("\n".join(docs))
total = sum(len(d.encode("utf-8")) for d in docs)
print(f"corpus: {len(docs)} documents, {total} bytes -> {out}.jsonl, {out}.txt")
