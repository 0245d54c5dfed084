#!/usr/bin/env python3
"""POST /v1/responses end to end against a node or a router serving the gpt-oss-echo
test model (its answer is the text of the last user message, special tokens and all):
reasoning and answer, one and three function calls, each plain and streamed (the
streamed events in order, numbered, the deltas joined equal to the plain output, the
last event the whole response), mistakes refused with the field named.  On a node,
previous_response_id is a 400.  With --router (a router with its store): GET and DELETE
/v1/responses/{id}, a follow-up with previous_response_id that carries the earlier
turn, another key's 404 (--other-key), store: false kept nowhere.

Usage: responses_api.py BASE_URL MODEL [--key KEY] [--router --other-key KEY]"""
import json
import sys
import urllib.error
import urllib.request

args = sys.argv[1:]
BASE, MODEL = args[0], args[1]
KEY = args[args.index("--key") + 1] if "--key" in args else None
OTHER = args[args.index("--other-key") + 1] if "--other-key" in args else None
ROUTER = "--router" in args
SPECIALS = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>"]
failures = checks = 0


def check(cond, what):
    global failures, checks
    checks += 1
    if not cond:
        failures += 1
        print(f"FAIL: {what}", file=sys.stderr)
    return cond


def request(method, path, body=None, key=None):
    """(status, raw text)"""
    headers = {"Content-Type": "application/json"}
    key = key or KEY
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BASE + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def create(what, body):
    status, raw = request("POST", "/v1/responses", body)
    if not check(status == 200, f"{what}: HTTP {status}: {raw[:400]}"):
        return None
    for s in SPECIALS:
        check(s not in raw, f"{what}: {s} in {raw[:400]}")
    return json.loads(raw)


def stream(what, body):
    """The events of a streamed response, checked in order; the last one's response."""
    status, raw = request("POST", "/v1/responses", dict(body, stream=True))
    if not check(status == 200, f"{what} (stream): HTTP {status}: {raw[:400]}"):
        return None, []
    events = []
    for block in raw.split("\n\n"):
        lines = [l for l in block.split("\n") if l and not l.startswith(":")]
        if not lines:
            continue
        ev = [l[7:] for l in lines if l.startswith("event: ")]
        data = [l[6:] for l in lines if l.startswith("data: ")]
        if not check(len(ev) == 1 and len(data) == 1, f"{what}: an SSE block {block[:200]}"):
            continue
        j = json.loads(data[0])
        check(j["type"] == ev[0], f"{what}: event {ev[0]} holds type {j['type']}")
        events.append(j)
    check([e["sequence_number"] for e in events] == list(range(len(events))),
          f"{what}: sequence numbers {[e['sequence_number'] for e in events]}")
    types = [e["type"] for e in events]
    check(types[:2] == ["response.created", "response.in_progress"], f"{what}: starts {types[:2]}")
    check(types[-1] == "response.completed", f"{what}: ends {types[-1:]}")
    for s in SPECIALS:
        check(s not in raw, f"{what}: {s} in the stream")
    # the deltas joined, item by item, equal the final items
    final = events[-1]["response"] if events else None
    joined = {}
    for e in events:
        if e["type"] in ("response.reasoning_text.delta", "response.output_text.delta",
                         "response.function_call_arguments.delta"):
            joined[e["output_index"]] = joined.get(e["output_index"], "") + e["delta"]
    for i, item in enumerate(final["output"] if final else []):
        text = (item.get("arguments") if item["type"] == "function_call" else item["content"][0]["text"])
        check(joined.get(i, "") == text, f"{what}: item {i} deltas {joined.get(i)!r} != {text!r}")
    return final, types


def texts(resp):
    """[(type, text or name(arguments))] of the output items."""
    out = []
    for item in resp["output"]:
        if item["type"] == "function_call":
            out.append(("function_call", f"{item['name']}({item['arguments']})"))
        else:
            out.append((item["type"], item["content"][0]["text"]))
    return out


WEATHER = {"type": "function", "name": "get_weather", "description": "The weather",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


def both(what, body, expected):
    plain = create(what, body)
    if plain:
        check(plain["object"] == "response" and plain["id"].startswith("resp_"), f"{what}: id {plain['id']}")
        check(plain["status"] == "completed", f"{what}: status {plain['status']}")
        check(texts(plain) == expected, f"{what}: output {texts(plain)} != {expected}")
        u = plain["usage"]
        check(u["total_tokens"] == u["input_tokens"] + u["output_tokens"] and u["output_tokens"] > 0,
              f"{what}: usage {u}")
    final, _ = stream(what, body)
    if final:
        check(texts(final) == expected, f"{what} (stream): output {texts(final)} != {expected}")
    return plain


def body(text, **extra):
    b = {"model": MODEL, "input": text}
    b.update(extra)
    return b


REASONED = ("<|channel|>analysis<|message|>User greets; reply politely.<|end|>"
            "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?<|return|>")
r1 = both("reasoning and answer", body(REASONED, metadata={"run": "e2e"}),
          [("reasoning", "User greets; reply politely."), ("message", "Hello! How can I help?")])
if r1:
    check(r1["metadata"] == {"run": "e2e"}, f"metadata echoed: {r1['metadata']}")
    check(r1["usage"]["output_tokens_details"]["reasoning_tokens"] > 0, f"reasoning tokens: {r1['usage']}")

ONE = ("<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
       "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>")
r2 = both("one call", body(ONE, tools=[WEATHER]),
          [("reasoning", "Need weather."), ("function_call", 'get_weather({"city":"Paris"})')])
# calls in one turn: each but the last ends with <|end|>, the last with <|call|>
THREE = "<|start|>assistant".join(f"<|channel|>commentary to=functions.get_weather <|constrain|>json"
                                  f"<|message|>{{\"city\":\"{c}\"}}" + ("<|call|>" if c == "Oslo" else "<|end|>")
                                  for c in ["Paris", "Rome", "Oslo"])
both("three calls", body(THREE, tools=[WEATHER]),
     [("function_call", f'get_weather({{"city":"{c}"}})') for c in ["Paris", "Rome", "Oslo"]])

# instructions, a conversation of items, a tool round trip: the echo says the last user
# message, so the answer shows which message the prompt ended with
conv = [{"role": "user", "content": "weather?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"role": "user", "content": [{"type": "input_text", "text": "<|channel|>final<|message|>Sunny.<|return|>"}]}]
both("items", body(conv, tools=[WEATHER], instructions="Be brief.", reasoning={"effort": "high"}),
     [("message", "Sunny.")])

# max_output_tokens: incomplete
cut = create("cut short", body("<|channel|>final<|message|>one two three four five six<|return|>",
                               max_output_tokens=5))
if cut:
    check(cut["status"] == "incomplete" and cut["incomplete_details"] == {"reason": "max_output_tokens"},
          f"cut short: {cut['status']} {cut['incomplete_details']}")

# mistakes
for what, b, param in [
        ("no input", {"model": MODEL}, "input"),
        ("a bad item", body([{"type": "function_call", "name": "f", "arguments": "{}"}]), "input[0].call_id"),
        ("a bad tool", body("x", tools=[{"type": "web_search"}]), "tools[0].type"),
        ("a bad effort", body("x", reasoning={"effort": "banana"}), "reasoning.effort"),
        ("a bad max_output_tokens", body("x", max_output_tokens=-1), "max_output_tokens")]:
    status, raw = request("POST", "/v1/responses", b)
    j = json.loads(raw) if raw.startswith("{") else {}
    check(status == 400 and j.get("error", {}).get("param") == param,
          f"{what}: expected 400 naming {param}, got {status} {raw[:300]}")

if not ROUTER:
    status, raw = request("POST", "/v1/responses", body("x", previous_response_id="resp_x"))
    check(status == 400 and "previous_response_id" in raw, f"previous_response_id on a node: {status} {raw[:300]}")
else:
    if r1:
        status, raw = request("GET", f"/v1/responses/{r1['id']}")
        check(status == 200 and json.loads(raw)["output"] == r1["output"], f"GET a stored response: {status} {raw[:300]}")
        if OTHER:
            status, raw = request("GET", f"/v1/responses/{r1['id']}", key=OTHER)
            check(status == 404, f"GET with another key: {status} {raw[:200]}")
            status, raw = request("POST", "/v1/responses", body("x", previous_response_id=r1["id"]), key=OTHER)
            check(status == 404, f"previous_response_id with another key: {status} {raw[:200]}")
        # a follow-up carries the earlier turn: more input tokens than the same input alone
        alone = create("alone", body("<|channel|>final<|message|>again<|return|>", store=False))
        follow = create("follow-up", body("<|channel|>final<|message|>again<|return|>", previous_response_id=r1["id"]))
        if alone and follow:
            check(texts(follow) == [("message", "again")], f"follow-up output {texts(follow)}")
            check(follow.get("previous_response_id") == r1["id"],
                  f"the follow-up echoes previous_response_id: {follow.get('previous_response_id')}")
            check(alone.get("previous_response_id") is None, "a response without one echoes null")
            check(follow["usage"]["input_tokens"] > alone["usage"]["input_tokens"] + 5,
                  f"follow-up input tokens {follow['usage']['input_tokens']} vs alone {alone['usage']['input_tokens']}")
            status, _ = request("GET", f"/v1/responses/{alone['id']}")
            check(status == 404, f"store: false is not kept: GET gave {status}")
            # a chain of two follow-ups
            again = create("second follow-up", body("<|channel|>final<|message|>more<|return|>",
                                                    previous_response_id=follow["id"]))
            if again:
                check(again["usage"]["input_tokens"] > follow["usage"]["input_tokens"], "a chain grows")
        final, _ = stream("streamed follow-up", body("<|channel|>final<|message|>streamed<|return|>",
                                                    previous_response_id=r1["id"]))
        if final:
            status, raw = request("GET", f"/v1/responses/{final['id']}")
            check(status == 200, f"a streamed response is stored: {status} {raw[:200]}")
        status, raw = request("DELETE", f"/v1/responses/{r1['id']}")
        check(status == 200 and json.loads(raw) == {"id": r1["id"], "object": "response", "deleted": True},
              f"DELETE: {status} {raw[:200]}")
        status, _ = request("GET", f"/v1/responses/{r1['id']}")
        check(status == 404, f"GET after DELETE: {status}")
        status, raw = request("POST", "/v1/responses", body("x", previous_response_id=r1["id"]))
        check(status == 404 and "previous_response_id" in raw, f"a deleted previous_response_id: {status} {raw[:200]}")

print(f"responses_api.py: {checks - failures}/{checks} checks passed" + (" (router)" if ROUTER else ""))
sys.exit(1 if failures else 0)
