#!/usr/bin/env bash
# README.md and README.ja.md, its Japanese translation, kept in step: each links the
# other at the top, both show `make run` and `make test`, and they have the same
# sections, bullets, table rows, code blocks and link targets (a change to one that
# the other lacks fails here).
# Usage: test_readme.sh SOURCE_DIR
set -u
SRC=${1:?usage: test_readme.sh SOURCE_DIR}
python3 - "$SRC/README.md" "$SRC/README.ja.md" <<'PY'
import re
import sys

en, ja = (open(p, encoding="utf-8").read() for p in sys.argv[1:3])
failures = []


def code_lines(lines):
    inside, out = False, []
    for l in lines:
        if l.startswith("```"):
            inside = not inside
        elif inside:
            out.append(l)
    return out


def shape(text):
    lines = text.splitlines()
    fence = [l for l in lines if l.startswith("```")]
    return {
        "sections": len([l for l in lines if l.startswith("#")]),
        "bullets": len([l for l in lines if l.startswith("- ")]),
        "table rows": len([l for l in lines if l.startswith("|")]),
        "code fences": fence,
        "link targets": sorted(set(re.findall(r"\]\(([^)]+)\)", text)) - {"README.md", "README.ja.md"}),
        # the command lines of the code blocks, their comments aside
        "code": [re.sub(r"\s*#.*$", "", l) for l in code_lines(lines)],
    }


a, b = shape(en), shape(ja)
for key in a:
    if a[key] != b[key]:
        failures.append(f"{key} differ: README.md {a[key]} / README.ja.md {b[key]}")
if "(README.ja.md)" not in en.split("\n\n", 2)[1]:
    failures.append("README.md does not link README.ja.md at its top")
if "(README.md)" not in ja.split("\n\n", 2)[1]:
    failures.append("README.ja.md does not link README.md at its top")
for text, name in ((en, "README.md"), (ja, "README.ja.md")):
    for cmd in ("make run", "make test"):
        if cmd not in text:
            failures.append(f"{name} does not show {cmd}")
for f in failures:
    print("FAIL:", f, file=sys.stderr)
if failures:
    sys.exit(1)
print("README.md and README.ja.md are in step")
PY
