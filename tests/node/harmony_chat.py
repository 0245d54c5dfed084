#!/usr/bin/env python3
"""Chat completions of a harmony model, checked against what OpenAI returns: a node or a
router serving the gpt-oss-echo test model, whose answer is the text of the last user
message (special tokens and all), so each case writes the harmony output it wants the
model to give: reasoning and answer, one and three tool calls, the model's known slips,
tool_choice, parallel_tool_calls, include_reasoning, logprobs; each plain and streamed,
the streamed pieces joined equal to the plain answer, and no special token's text
anywhere.  With --render (a router), the prompts of a tool round trip as the chat
template renders them (POST /v0/models/{name}/render).

Usage: harmony_chat.py BASE_URL MODEL [--key KEY] [--render]"""
import json
import sys
import urllib.error
import urllib.request

args = sys.argv[1:]
BASE, MODEL = args[0], args[1]
KEY = args[args.index("--key") + 1] if "--key" in args else None
RENDER = "--render" in args
SPECIALS = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>",
            "<|call|>"]
failures = 0
checks = 0


def fail(what):
    global failures
    failures += 1
    print(f"FAIL: {what}", file=sys.stderr)


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        fail(what)
    return cond


def request(path, body):
    """(status, raw text)"""
    headers = {"Content-Type": "application/json"}
    if KEY:
        headers["Authorization"] = f"Bearer {KEY}"
    req = urllib.request.Request(BASE + path, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def no_specials(what, j):
    """No special token's text in an answer or chunk j; logprobs, which list every token
    the model wrote (its special tokens spelled), aside."""
    j = json.loads(json.dumps(j))
    for c in j.get("choices", []):
        c.pop("logprobs", None)
    text = json.dumps(j, ensure_ascii=False)
    for s in SPECIALS:
        check(s not in text, f"{what}: {s} in {text[:600]}")


def body_of(content, **extra):
    body = {"model": MODEL, "messages": [{"role": "user", "content": content}]}
    body.update(extra)
    return body


def plain(what, content, **extra):
    """The message and finish_reason of a plain answer, or (None, None, None)."""
    status, raw = request("/v1/chat/completions", body_of(content, **extra))
    if not check(status == 200, f"{what}: HTTP {status}: {raw[:400]}"):
        return None, None, None
    j = json.loads(raw)
    no_specials(what, j)
    return j["choices"][0]["message"], j["choices"][0]["finish_reason"], j


def streamed(what, content, **extra):
    """The deltas of a streamed answer joined into a message, its finish_reason, and the
    chunks; None when it failed."""
    status, raw = request("/v1/chat/completions", body_of(content, stream=True, **extra))
    if not check(status == 200, f"{what} (stream): HTTP {status}: {raw[:400]}"):
        return None, None, []
    chunks = [json.loads(line[6:]) for line in raw.split("\n")
              if line.startswith("data: {")]
    for c in chunks:
        no_specials(f"{what} (stream)", c)
    check(raw.rstrip().endswith("data: [DONE]"), f"{what} (stream): no [DONE] at the end")
    msg = {"role": None, "content": None}
    calls, finish = {}, None
    for i, c in enumerate(chunks):
        if not c["choices"]:
            continue  # the usage chunk
        ch = c["choices"][0]
        d = ch["delta"]
        if ch["finish_reason"] is None:
            check(d, f"{what} (stream): an empty delta in chunk {i}: {c}")
        else:
            check(finish is None, f"{what} (stream): two finish reasons")
            finish = ch["finish_reason"]
        if "role" in d:
            check(msg["role"] is None and i == 0, f"{what} (stream): role in chunk {i}")
            msg["role"] = d["role"]
        for key in ("content", "reasoning_content", "reasoning"):
            if d.get(key) is not None:
                msg[key] = (msg.get(key) or "") + d[key]
        for tc in d.get("tool_calls", []):
            k = tc["index"]
            if k not in calls:
                check("id" in tc and tc.get("type") == "function" and "name" in tc["function"],
                      f"{what} (stream): a call's first piece lacks id, type or name: {tc}")
                calls[k] = {"id": tc.get("id"), "type": tc.get("type"),
                            "function": {"name": tc["function"].get("name"), "arguments": ""}}
            else:
                check("id" not in tc and "name" not in tc["function"],
                      f"{what} (stream): a later piece repeats id or name: {tc}")
            calls[k]["function"]["arguments"] += tc["function"].get("arguments", "")
    if calls:
        check(sorted(calls) == list(range(len(calls))), f"{what} (stream): indexes {sorted(calls)}")
        msg["tool_calls"] = [calls[k] for k in sorted(calls)]
    check(msg["role"] == "assistant", f"{what} (stream): no role in the first chunk")
    return msg, finish, chunks


def same_answer(what, a, b):
    """Plain a and streamed b hold the same fields (call ids aside)."""
    for key in ("reasoning_content", "reasoning"):
        check(a.get(key) == b.get(key), f"{what}: {key}: plain {a.get(key)!r}, streamed {b.get(key)!r}")
    check((a.get("content") or None) == (b.get("content") or None),
          f"{what}: content: plain {a.get('content')!r}, streamed {b.get('content')!r}")
    ca = [(c["type"], c["function"]["name"], c["function"]["arguments"]) for c in a.get("tool_calls", [])]
    cb = [(c["type"], c["function"]["name"], c["function"]["arguments"]) for c in b.get("tool_calls", [])]
    check(ca == cb, f"{what}: tool calls: plain {ca}, streamed {cb}")


def expect(what, content, reasoning=None, answer=None, calls=(), finish="stop", **extra):
    """Plain and streamed: the fields wanted, and the same both ways."""
    msg, fin, _ = plain(what, content, **extra)
    smsg, sfin, _ = streamed(what, content, **extra)
    if msg is None or smsg is None:
        return
    check(fin == finish and sfin == finish, f"{what}: finish_reason {fin}/{sfin}, wanted {finish}")
    check(msg.get("reasoning_content") == reasoning and msg.get("reasoning") == reasoning,
          f"{what}: reasoning {msg.get('reasoning_content')!r}/{msg.get('reasoning')!r}, wanted {reasoning!r}")
    check(msg["content"] == answer, f"{what}: content {msg['content']!r}, wanted {answer!r}")
    got = [(c["function"]["name"], c["function"]["arguments"]) for c in msg.get("tool_calls", [])]
    check(got == list(calls), f"{what}: calls {got}, wanted {list(calls)}")
    ids = [c["id"] for c in msg.get("tool_calls", [])]
    check(all(i.startswith("call_") and len(i) > 10 for i in ids) and len(set(ids)) == len(ids),
          f"{what}: call ids {ids}")
    check(all(c["type"] == "function" for c in msg.get("tool_calls", [])), f"{what}: call types")
    if not calls:
        check("tool_calls" not in msg, f"{what}: tool_calls without calls: {msg}")
    same_answer(what, msg, smsg)


def tool(name):
    return {"type": "function", "function": {"name": name, "description": f"the {name} tool",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


WEATHER = [tool("get_weather")]
ABW = [tool("a"), tool("b"), tool("get_weather")]
REASON_FINAL = ("<|channel|>analysis<|message|>User greets; reply politely.<|end|>"
                "<|start|>assistant<|channel|>final<|message|>Hello! How can I help you today?")
ONE_CALL = ("<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant"
            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
            "{\"city\":\"Paris\"}<|call|>")
THREE_CALLS = ("<|channel|>commentary to=functions.a <|constrain|>json<|message|>{\"x\":1}<|end|>"
               "<|start|>assistant<|channel|>commentary to=functions.b<|message|>{}<|end|>"
               "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
               "<|message|>{\"city\":\"Oslo\"}<|call|>")

# ---- the echo model itself --------------------------------------------------------------
msg, fin, _ = plain("plain echo", "Hello there, <b>friend</b>! 3 < 4, the final word.")
if msg:
    check(msg["content"] == "Hello there, <b>friend</b>! 3 < 4, the final word.", f"plain echo: {msg}")
    check(fin == "stop" and "reasoning_content" not in msg, f"plain echo: {fin} {msg}")

# ---- reasoning and answer; calls ------------------------------------------------------------
expect("reasoning + final", REASON_FINAL, reasoning="User greets; reply politely.",
       answer="Hello! How can I help you today?")
expect("one call", ONE_CALL, reasoning="Need the weather.",
       calls=[("get_weather", "{\"city\":\"Paris\"}")], finish="tool_calls", tools=WEATHER)
expect("three calls", THREE_CALLS,
       calls=[("a", "{\"x\":1}"), ("b", "{}"), ("get_weather", "{\"city\":\"Oslo\"}")],
       finish="tool_calls", tools=ABW)

# ---- the model's slips ---------------------------------------------------------------------
expect("channel names as plain text", "analysis<|message|>Thinking.<|end|><|start|>assistantfinal"
       "<|message|>Done.", reasoning="Thinking.", answer="Done.")
expect("the recipient before the channel", " to=functions.get_weather<|channel|>commentary json"
       "<|message|>{\"city\":\"Rome\"}<|call|>", calls=[("get_weather", "{\"city\":\"Rome\"}")],
       finish="tool_calls", tools=WEATHER)
expect("a missing <|call|>", "<|channel|>commentary to=functions.get_weather <|constrain|>json"
       "<|message|>{\"city\":\"Lima\"}", calls=[("get_weather", "{\"city\":\"Lima\"}")],
       finish="tool_calls", tools=WEATHER)
expect("<|channel|> glued to the tool's name", "<|channel|>commentary to=functions.get_weather"
       "<|channel|>commentary <|constrain|>json<|message|>{\"city\":\"Kyiv\"}<|call|>",
       calls=[("get_weather", "{\"city\":\"Kyiv\"}")], finish="tool_calls", tools=WEATHER)
expect("<|constrain|> glued to the tool's name", "<|channel|>commentary to=functions.get_weather"
       "<|constrain|>json<|message|>{}<|call|>", calls=[("get_weather", "{}")],
       finish="tool_calls", tools=WEATHER)
expect("a repeated <|start|>assistant", "<|start|>assistant<|channel|>final<|message|>Hi.<|return|>",
       answer="Hi.")
expect("reasoning spelled in the answer's text stays out of content",
       "<|channel|>analysis<|message|>secret plan<|end|><|start|>assistant<|channel|>final<|message|>ok",
       reasoning="secret plan", answer="ok")

# ---- tool_choice, parallel_tool_calls, include_reasoning -----------------------------------
expect("tool_choice none: a call is text", ONE_CALL, reasoning="Need the weather.",
       answer="{\"city\":\"Paris\"}", tools=WEATHER, tool_choice="none")
expect("no tools: a call is text", ONE_CALL, reasoning="Need the weather.", answer="{\"city\":\"Paris\"}")
expect("tool_choice required", ONE_CALL, reasoning="Need the weather.",
       calls=[("get_weather", "{\"city\":\"Paris\"}")], finish="tool_calls", tools=ABW,
       tool_choice="required")
expect("tool_choice a function", ONE_CALL, reasoning="Need the weather.",
       calls=[("get_weather", "{\"city\":\"Paris\"}")], finish="tool_calls", tools=ABW,
       tool_choice={"type": "function", "function": {"name": "get_weather"}})
expect("parallel_tool_calls false", THREE_CALLS, calls=[("a", "{\"x\":1}")], finish="tool_calls",
       tools=ABW, parallel_tool_calls=False)
expect("include_reasoning false", REASON_FINAL, answer="Hello! How can I help you today?",
       include_reasoning=False)

# the tools offered: all (auto, required), one (a function), none (none): fewer prompt tokens
tokens = {}
for name, extra in [("auto", {}), ("required", {"tool_choice": "required"}),
                    ("function", {"tool_choice": {"type": "function", "function": {"name": "b"}}}),
                    ("none", {"tool_choice": "none"})]:
    _, _, j = plain(f"prompt of tool_choice {name}", "hi", tools=ABW, **extra)
    tokens[name] = j["usage"]["prompt_tokens"] if j else 0
check(tokens["auto"] == tokens["required"] > tokens["function"] > tokens["none"] > 0,
      f"prompt tokens by tool_choice: {tokens}")

status, raw = request("/v1/chat/completions", body_of("hi", tools=WEATHER, tool_choice={
    "type": "function", "function": {"name": "get_time"}}))
check(status == 400 and "get_time" in raw and "tool_choice.function.name" in raw,
      f"an unknown function in tool_choice: {status} {raw[:300]}")
status, raw = request("/v1/chat/completions", body_of("hi", tool_choice="required"))
check(status == 400 and "tool_choice" in raw, f"required without tools: {status} {raw[:300]}")

# ---- logprobs: one entry per token, plain and streamed ------------------------------------
_, _, j = plain("logprobs", REASON_FINAL, logprobs=True)
if j:
    check(len(j["choices"][0]["logprobs"]["content"]) == j["usage"]["completion_tokens"],
          f"logprobs: {len(j['choices'][0]['logprobs']['content'])} entries for "
          f"{j['usage']['completion_tokens']} tokens")
_, _, chunks = streamed("logprobs", REASON_FINAL, logprobs=True, stream_options={"include_usage": True})
if chunks:
    n = sum(len((c["choices"][0].get("logprobs") or {}).get("content") or [])
            for c in chunks if c["choices"])
    usage = [c["usage"] for c in chunks if c.get("usage")]
    check(usage and n == usage[0]["completion_tokens"], f"streamed logprobs: {n} entries, usage {usage}")

# ---- input: a tool round trip reaches the template ----------------------------------------
ROUND_TRIP = [
    {"role": "user", "content": "What is the weather in Paris and in Oslo?"},
    {"role": "assistant", "content": None, "reasoning_content": "Need both.", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
        {"id": "call_2", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "call_2", "content": "{\"temp\":5}"},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\":20}"},
]
status, raw = request("/v1/chat/completions", {"model": MODEL, "messages": ROUND_TRIP, "tools": WEATHER})
check(status == 200, f"a tool round trip: HTTP {status}: {raw[:400]}")

if RENDER:
    status, raw = request(f"/v0/models/{MODEL}/render", {"messages": ROUND_TRIP, "tools": WEATHER,
                                                         "reasoning_effort": "low"})
    if check(status == 200, f"render the round trip: HTTP {status}: {raw[:400]}"):
        prompt = json.loads(raw)["prompt"]
        want = ("<|start|>user<|message|>What is the weather in Paris and in Oslo?<|end|>"
                "<|start|>assistant<|channel|>analysis<|message|>Need both.<|end|>"
                "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
                "{\"city\": \"Paris\"}<|call|>"
                "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"
                "\"{\\\"temp\\\":20}\"<|end|>"
                "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
                "{\"city\": \"Oslo\"}<|call|>"
                "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"
                "\"{\\\"temp\\\":5}\"<|end|><|start|>assistant")
        check(prompt.endswith(want), f"the round trip renders as harmony:\n  got  {prompt[-700:]!r}\n  want {want!r}")
        check("Reasoning: low" in prompt, "reasoning_effort low reaches the system message")
        check("type get_weather = " in prompt, "the tool is offered")
    status, raw = request(f"/v0/models/{MODEL}/render", {"messages": ROUND_TRIP[:1], "tools": ABW,
                                                         "tool_choice": "none"})
    check(status == 200 and "namespace functions" not in raw, f"tool_choice none offers no tools: {raw[:300]}")
    status, raw = request(f"/v0/models/{MODEL}/render", {"messages": ROUND_TRIP[:1], "tools": ABW,
                                                         "tool_choice": {"type": "function",
                                                                         "function": {"name": "b"}}})
    check(status == 200 and "type b = " in raw and "type a = " not in raw,
          f"a named function is the only one offered: {raw[:300]}")

if failures:
    print(f"{failures} harmony chat checks failed", file=sys.stderr)
    sys.exit(1)
print(f"harmony chat{' (with renders)' if RENDER else ''}: all {checks} checks passed")
