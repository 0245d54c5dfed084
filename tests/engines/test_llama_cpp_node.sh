#!/usr/bin/env bash
# A node serving a GGUF model through the llama.cpp plugin, over its OpenAI API: the
# model is listed ready, a chat completion answers with tokens and usage, a stream
# comes as several chunks and ends with [DONE], a stream whose client goes away is
# cancelled and the node serves the next request, and a request to a GGUF that
# llama.cpp refuses gets an error with llama.cpp's reason, and one without the
# tokenizer.json the node needs gets an error that says so.
# Usage: test_llama_cpp_node.sh PATH_TO_LLMR MODELS_DIR (make_tiny_gguf.sh's OUT)
set -u
LLMR=${1:?usage: test_llama_cpp_node.sh PATH_TO_LLMR MODELS_DIR}
models=${2:?}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-llama-node-XXXXXX")
node_pid=
cleanup() { [[ -n $node_pid ]] && kill -9 "$node_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
source "$(dirname "$0")/../cli/check_lib.sh"
export LLMR_DATA_DIR="$tmp/data"
abort() {
  fail "$*"
  echo "--- node log"; grep -v "setting token" "$tmp/node.log"
  finish_checks "llama.cpp node"
}

mkdir -p "$tmp/data/models"
cp -r "$models/tiny" "$tmp/data/models/tiny-gguf"
cp -r "$models/bad-wrong-shape" "$tmp/data/models/broken-gguf"
mkdir -p "$tmp/data/models/bare-gguf"
cp "$models/tiny/model.gguf" "$tmp/data/models/bare-gguf/"
# llmr run on a bare .gguf: the engine writes the text, no tokenizer.json needed.
expect 0 "llmr run on a GGUF without tokenizer.json" -- \
  "$LLMR" run "$tmp/data/models/bare-gguf" --prompt-ids 1,2,3 --max-tokens 5 --temperature 0 --json
[[ $(grep -c '"index"' <<<"$out") == 5 ]] || fail "llmr run --json: wanted 5 token lines, got: $out"
has "$out" '"end":"length"' "llmr run ends on its length"

"$LLMR" node --host 127.0.0.1 --port 0 >"$tmp/node.log" 2>&1 &
node_pid=$!
port=
for _ in $(seq 200); do
  kill -0 "$node_pid" 2>/dev/null || abort "the node exited before serving HTTP"
  port=$(cat "$tmp/data/run/http.port" 2>/dev/null)
  [[ $port =~ ^[0-9]+$ ]] && break
  port=
  sleep 0.05
done
[[ -n $port ]] || abort "the node wrote no run/http.port within 10 s"
base="http://127.0.0.1:$port"

chat='{"model":"tiny-gguf","messages":[{"role":"user","content":"Hello"}],"max_tokens":8,"temperature":0}'
body=$(curl -sS --max-time 60 "$base/v1/chat/completions" -H 'Content-Type: application/json' -d "$chat")
has "$body" '"finish_reason":"length"' "chat completion"
has "$body" '"completion_tokens":8' "chat completion usage"
has "$body" '"object":"chat.completion"' "chat completion object"
again=$(curl -sS --max-time 60 "$base/v1/chat/completions" -H 'Content-Type: application/json' -d "$chat")
[[ "$(sed 's/"id":"[^"]*"//; s/"created":[0-9]*//' <<<"$body")" == "$(sed 's/"id":"[^"]*"//; s/"created":[0-9]*//' <<<"$again")" ]] ||
  fail "greedy chat twice: different answers: $body / $again"

stream='{"model":"tiny-gguf","messages":[{"role":"user","content":"Hello"}],"max_tokens":6,"temperature":0,"stream":true}'
curl -sSN --max-time 60 "$base/v1/chat/completions" -H 'Content-Type: application/json' -d "$stream" >"$tmp/stream"
chunks=$(grep -c '"content":' "$tmp/stream")
(( chunks >= 6 )) || fail "stream: $chunks content chunks, wanted at least 6: $(head -c 600 "$tmp/stream")"
[[ $(grep '^data:' "$tmp/stream" | tail -1) == "data: [DONE]" ]] || fail "stream: does not end with data: [DONE]"

# A client that leaves a long stream: the request is cancelled, the node goes on.
long='{"model":"tiny-gguf","messages":[{"role":"user","content":"Hello"}],"max_tokens":1900,"stream":true}'
curl -sSN --max-time 1 "$base/v1/chat/completions" -H 'Content-Type: application/json' -d "$long" >/dev/null 2>&1
body=$(curl -sS --max-time 60 "$base/v1/chat/completions" -H 'Content-Type: application/json' -d "$chat")
has "$body" '"completion_tokens":8' "a request after a cancelled stream"
completions=$(curl -sS --max-time 60 "$base/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model":"tiny-gguf","prompt":"Once upon a time","max_tokens":4,"temperature":0}')
has "$completions" '"completion_tokens":4' "completions"

models_body=$(curl -sS --max-time 10 "$base/v1/models")
has "$models_body" '"id":"tiny-gguf"' "/v1/models lists the GGUF model"
# The broken model fails at its load, the first request: the error gives the reason.
broken=$(curl -sS --max-time 60 "$base/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"broken-gguf","messages":[{"role":"user","content":"Hello"}],"max_tokens":4}')
has "$broken" '"error"' "a request to a GGUF llama.cpp refuses"
has "$broken" "has wrong shape" "the error gives llama.cpp's reason"
# A GGUF without the tokenizer.json the node tokenizes with: the error says what to add.
bare=$(curl -sS --max-time 60 "$base/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"bare-gguf","messages":[{"role":"user","content":"Hello"}],"max_tokens":4}')
has "$bare" "tokenizer.json of the same model" "a GGUF without tokenizer.json"
kill "$node_pid"; wait "$node_pid" 2>/dev/null; node_pid=
has "$(cat "$tmp/node.log")" "loaded by llama-cpp" "the node log names the plugin"
finish_checks "llama.cpp node"
