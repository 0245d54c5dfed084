#!/usr/bin/env python3
"""Chat completions of a harmony model, checked against what OpenAI returns: a node (or a
router) serving the gpt-oss-echo test model, whose answer is the text of the last user
message, so each case below writes the harmony output it wants the model to give.

Usage: harmony_chat.py BASE_URL MODEL"""
import json
import sys
import urllib.error
import urllib.request

BASE, MODEL = sys.argv[1], sys.argv[2]
failures = 0


def fail(what):
    global failures
    failures += 1
    print(f"FAIL: {what}", file=sys.stderr)


def check(cond, what):
    if not cond:
        fail(what)
    return cond


def post(path, body):
    """(status, parsed JSON or None, raw text)"""
    req = urllib.request.Request(BASE + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            raw = r.read().decode()
            status = r.status
    except urllib.error.HTTPError as e:
        raw = e.read().decode()
        status = e.code
    try:
        return status, json.loads(raw), raw
    except ValueError:
        return status, None, raw


def chat(content, **extra):
    body = {"model": MODEL, "messages": [{"role": "user", "content": content}]}
    body.update(extra)
    return post("/v1/chat/completions", body)


# ---- the echo model itself --------------------------------------------------------------

status, j, raw = chat("Hello there, <b>friend</b>! 3 < 4.")
if check(status == 200, f"plain echo: HTTP {status}: {raw[:300]}"):
    msg = j["choices"][0]["message"]
    check(msg["content"] == "Hello there, <b>friend</b>! 3 < 4.", f"plain echo: {msg}")
    check(j["choices"][0]["finish_reason"] == "stop", f"plain echo finish: {j['choices'][0]}")

if failures:
    print(f"{failures} harmony chat checks failed", file=sys.stderr)
    sys.exit(1)
print("harmony chat: all checks passed")
