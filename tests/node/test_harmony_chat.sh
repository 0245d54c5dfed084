#!/usr/bin/env bash
# Chat completions of a harmony model end to end: `llmr model synth --preset
# gpt-oss-echo` (gpt-oss's tokenizer and chat template, run by the loopback engine,
# answering with the last user message) served by a node alone, then by a router and a
# node (the router renders; the answer passes through it unchanged), and
# tests/node/harmony_chat.py asking each for what gpt-oss writes (with the router, the
# renders of a tool round trip too); tests/node/responses_api.py does the same through
# POST /v1/responses.  Skipped (77) without gpt-oss's tokenizer.json and
# chat_template.jinja (make puts both beside the binary, under data/gpt-oss).
# Usage: test_harmony_chat.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_harmony_chat.sh PATH_TO_LLMR}
command -v python3 >/dev/null 2>&1 || { echo "FAIL: python3 is not installed: run 'make deps'" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-harmony-XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
source "$(dirname "$0")/../cli/check_lib.sh"
export LLMR_DATA_DIR="$tmp/data"
unset LLMR_ROUTER LLMR_API_KEY LLMR_ADMIN_KEY

bin=$(dirname "$LLMR")
from=
for d in "${LLMR_GPT_OSS_TOKENIZER_DIR:-}" "$bin/data/gpt-oss" "$bin/../data/gpt-oss" \
  "${LLMR_SHARED_DIR:-/nonexistent}/models/gpt-oss-20b"; do
  if [[ -n $d && -f $d/tokenizer.json && -f $d/chat_template.jinja ]]; then
    from=$d
    break
  fi
done
if [[ -z $from ]]; then
  echo "skipped: no gpt-oss tokenizer.json and chat_template.jinja here (make puts them in data/gpt-oss)"
  exit 77
fi

# Without them the preset says which flag gives them.
mkdir -p "$tmp/empty"
expect 1 "echo preset without a template" -- "$LLMR" model synth --preset gpt-oss-echo \
  --out "$tmp/no" --tokenizer-from "$tmp/empty"
has "$err" "tokenizer.json" "the error names the missing file"
expect 0 "synth gpt-oss-echo" -- "$LLMR" model synth --preset gpt-oss-echo \
  --out "$tmp/data/models/echo" --tokenizer-from "$from"

# --- a node alone
"$LLMR" node --host 127.0.0.1 --port 0 >"$tmp/node.log" 2>&1 &
node_pid=$!
pids+=("$node_pid")
port=
for _ in $(seq 200); do # 10 s
  kill -0 "$node_pid" 2>/dev/null || break
  port=$(cat "$tmp/data/run/http.port" 2>/dev/null)
  [[ $port =~ ^[0-9]+$ ]] && break
  port=
  sleep 0.05
done
if [[ -z $port ]]; then
  fail "the node did not serve HTTP within 10 s"
  cat "$tmp/node.log"
  finish_checks "harmony chat"
fi
python3 "$(dirname "$0")/harmony_chat.py" "http://127.0.0.1:$port" echo || {
  fail "harmony_chat.py on a node"
  echo "--- node log"; tail -20 "$tmp/node.log"
}
python3 "$(dirname "$0")/responses_api.py" "http://127.0.0.1:$port" echo || {
  fail "responses_api.py on a node"
  echo "--- node log"; tail -20 "$tmp/node.log"
}
kill "$node_pid"

# --- a router and a node: the echo model registered with the router, synced by the node
admin=llmr-test-admin-key-harmony-0123456789
LLMR_DATA_DIR="$tmp/router" LLMR_ADMIN_KEY=$admin "$LLMR" router --port 0 >"$tmp/router.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do grep -q "listening on" "$tmp/router.log" && break; sleep 0.05; done
rport=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$tmp/router.log" | grep -o '[0-9]*$')
[[ -n $rport ]] || { cat "$tmp/router.log"; fail "the router did not start"; finish_checks "harmony chat"; }
api() { # METHOD PATH DATA: the body in $tmp/body, the status printed
  curl -s -o "$tmp/body" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $admin" \
    -H 'Content-Type: application/json' --data-binary "$3" "http://127.0.0.1:$rport$2"
}
[[ $(api POST /v0/keys '{"name": "n", "scopes": "node"}') == 201 ]] || fail "a node key: $(cat "$tmp/body")"
nodekey=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret"])' "$tmp/body")
[[ $(api POST /v0/models "{\"path\": \"$tmp/data/models/echo\", \"format\": \"safetensors\"}") == 201 ]] ||
  fail "register the echo model: $(cat "$tmp/body")"
LLMR_DATA_DIR="$tmp/node2" LLMR_PORT=0 "$LLMR" node --router "http://127.0.0.1:$rport" --node-key "$nodekey" \
  --allow-cpu --heartbeat 0.3 >"$tmp/node2.log" 2>&1 &
pids+=($!)
ready=
for _ in $(seq 600); do # 60 s
  api GET /v1/models '' >/dev/null
  python3 -c 'import json,sys; sys.exit(0 if any(m["id"] == "echo" for m in json.load(open(sys.argv[1]))["data"]) else 1)' \
    "$tmp/body" 2>/dev/null && { ready=1; break; }
  sleep 0.1
done
if [[ -n $ready ]]; then
  python3 "$(dirname "$0")/harmony_chat.py" "http://127.0.0.1:$rport" echo --key "$admin" --render || {
    fail "harmony_chat.py through the router"
    echo "--- router log"; tail -20 "$tmp/router.log"; echo "--- node log"; tail -20 "$tmp/node2.log"
  }
  # the Responses API through the router, with its store; another key sees none of them
  [[ $(api POST /v0/keys '{"name": "other", "scopes": "inference"}') == 201 ]] || fail "an inference key: $(cat "$tmp/body")"
  other=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret"])' "$tmp/body")
  python3 "$(dirname "$0")/responses_api.py" "http://127.0.0.1:$rport" echo --key "$admin" --router \
    --other-key "$other" || {
    fail "responses_api.py through the router"
    echo "--- router log"; tail -20 "$tmp/router.log"; echo "--- node log"; tail -20 "$tmp/node2.log"
  }
else
  fail "the echo model is not ready through the router within 60 s: $(cat "$tmp/body")"
  tail -20 "$tmp/node2.log"
fi
finish_checks "harmony chat"
