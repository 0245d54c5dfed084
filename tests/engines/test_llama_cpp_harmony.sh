#!/usr/bin/env bash
# A GGUF gpt-oss (the llama.cpp engine's tiny test model, with gpt-oss's chat template
# beside it as a Hugging Face snapshot has it) answers as a harmony model, the same way
# through a router (`llmr serve`, the model pulled with --format gguf) and on a node
# directly: reasoning_effort is checked (400 naming it); a greedy chat's message carries no harmony special-token text; the same
# request streamed joins to the plain answer's content and reasoning; and the router's
# answer equals the node's.  (The tiny model's random weights write ordinary tokens,
# so where its words land is the parser's choice, and its answer does not change with
# reasoning_effort; the echo model's tests cover the channels and the effort's place
# in the system message.)
# Usage: test_llama_cpp_harmony.sh PATH_TO_LLMR MODELS_DIR (make_tiny_gguf.sh's OUT) TEMPLATE_DIR
set -u
LLMR=${1:?usage: test_llama_cpp_harmony.sh PATH_TO_LLMR MODELS_DIR TEMPLATE_DIR}
LLMR=$(cd "$(dirname "$LLMR")" && pwd)/$(basename "$LLMR")
models=${2:?}
template_dir=${3:?}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-gguf-harmony-XXXXXX")
serve_pid= node_pid=
cleanup() {
  for p in $serve_pid $node_pid; do { kill -9 "$p"; wait "$p"; } 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/../cli/check_lib.sh"
[[ -f $template_dir/chat_template.jinja ]] || { echo "FAIL: no chat_template.jinja in $template_dir" >&2; exit 1; }
unset LLMR_ROUTER LLMR_API_KEY LLMR_ADMIN_KEY
admin=llmr-test-admin-key-gguf-harmony-0123456789

mkdir -p "$tmp/src"
cp -r "$models/tiny" "$tmp/src/hgguf"
cp "$template_dir/chat_template.jinja" "$tmp/src/hgguf/"

# --- the router: serve, and the model pulled from its directory
LLMR_DATA_DIR="$tmp/serve-data" LLMR_ADMIN_KEY=$admin "$LLMR" serve --port 0 >"$tmp/serve.log" 2>&1 &
serve_pid=$!
port=
for _ in $(seq 300); do
  port=$(grep -o 'the OpenAI API at http://127.0.0.1:[0-9]*' "$tmp/serve.log" | grep -o '[0-9]*$')
  [[ -n $port ]] && break
  kill -0 "$serve_pid" 2>/dev/null || break
  sleep 0.05
done
[[ -n $port ]] || { cat "$tmp/serve.log"; fail "serve did not start"; finish_checks "gguf harmony"; }
router=http://127.0.0.1:$port
expect 0 "pull the GGUF gpt-oss" -- env LLMR_API_KEY=$admin "$LLMR" pull "$tmp/src/hgguf" --format gguf \
  --router "$router" --timeout 120
has "$out" "hgguf is ready" "pull says the model is ready"

# --- the node alone, serving the same directory
mkdir -p "$tmp/node-data/models"
cp -r "$tmp/src/hgguf" "$tmp/node-data/models/hgguf"
LLMR_DATA_DIR="$tmp/node-data" "$LLMR" node --host 127.0.0.1 --port 0 >"$tmp/node.log" 2>&1 &
node_pid=$!
nport=
for _ in $(seq 200); do
  nport=$(cat "$tmp/node-data/run/http.port" 2>/dev/null)
  [[ $nport =~ ^[0-9]+$ ]] && break
  nport=
  sleep 0.05
done
[[ -n $nport ]] || { cat "$tmp/node.log"; fail "the node wrote no port"; finish_checks "gguf harmony"; }
node=http://127.0.0.1:$nport

# post BASE BODY: the answer in $body, its status in $code
post() {
  code=$(curl -sS -o "$tmp/body" -w '%{http_code}' --max-time 120 -H "Authorization: Bearer $admin" \
    -H 'Content-Type: application/json' "$1/v1/chat/completions" --data-binary "$2")
  body=$(cat "$tmp/body")
}
# fields FILE: the message's content, reasoning and tool calls, the finish reason, the
# usage, one JSON line (a plain answer), or the same joined from a stream's chunks
fields() {
  python3 - "$1" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
if text.lstrip().startswith("{"):
    c = json.loads(text)["choices"][0]
    m = c["message"]
    out = {"content": m.get("content") or "", "reasoning": m.get("reasoning_content") or "",
           "tools": m.get("tool_calls") or [], "finish": c["finish_reason"]}
else:
    out = {"content": "", "reasoning": "", "tools": [], "finish": None}
    for line in text.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ch = json.loads(line[6:])
        for c in ch.get("choices", []):
            d = c.get("delta", {})
            out["content"] += d.get("content") or ""
            out["reasoning"] += d.get("reasoning_content") or ""
            out["tools"] += d.get("tool_calls") or []
            out["finish"] = c.get("finish_reason") or out["finish"]
print(json.dumps(out, sort_keys=True))
PY
}
special='<\|(channel|message|start|end|return|call|constrain)\|>'
chat='{"model":"hgguf","messages":[{"role":"user","content":"What is the weather?"}],"max_tokens":24,"temperature":0,"reasoning_effort":"low"}'
stream='{"model":"hgguf","messages":[{"role":"user","content":"What is the weather?"}],"max_tokens":24,"temperature":0,"reasoning_effort":"low","stream":true}'
declare -A plain
for where in router node; do
  base=$router
  [[ $where == node ]] && base=$node
  post "$base" '{"model":"hgguf","messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"banana"}'
  [[ $code == 400 ]] || fail "$where: reasoning_effort banana: HTTP $code, wanted 400: $body"
  has "$body" '"param":"reasoning_effort"' "$where: the 400 names reasoning_effort"
  post "$base" "$chat"
  [[ $code == 200 ]] || fail "$where: greedy chat: HTTP $code: $body"
  if grep -Eq "$special" "$tmp/body"; then fail "$where: harmony special-token text in the answer: $body"; fi
  plain[$where]=$(fields "$tmp/body")
  curl -sSN --max-time 120 -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
    "$base/v1/chat/completions" --data-binary "$stream" >"$tmp/stream"
  [[ $(grep '^data:' "$tmp/stream" | tail -1) == "data: [DONE]" ]] || fail "$where: the stream does not end with [DONE]"
  if grep -Eq "$special" "$tmp/stream"; then fail "$where: harmony special-token text in the stream"; fi
  joined=$(fields "$tmp/stream")
  [[ $joined == "${plain[$where]}" ]] || fail "$where: the stream joined differs from the plain answer: $joined / ${plain[$where]}"
done
[[ ${plain[router]} == "${plain[node]}" ]] ||
  fail "the router's answer differs from the node's: ${plain[router]} / ${plain[node]}"
has "${plain[node]}" '"finish": "length"' "the greedy chat runs to max_tokens"

finish_checks "gguf harmony"
