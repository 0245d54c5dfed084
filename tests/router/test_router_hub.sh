#!/usr/bin/env bash
# A model registered from a Hugging Face repository, end to end, against a fake Hub
# (fake_hub.py: the tree API and resolve URLs): the router lists and checks the
# repository through the Hub (a repository without tokenizer.json is a 400 naming it,
# an unknown one a 400 that says so), reads its chat template and special tokens from
# the Hub's files, the node syncs the files (sent on to the Hub by the router's 302)
# and verifies them, and a chat through the router is rendered with the repository's
# template.
# Usage: test_router_hub.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_router_hub.sh PATH_TO_LLMR}
here=$(cd "$(dirname "$0")" && pwd)
for tool in python3 curl; do
  command -v $tool >/dev/null || { echo "SKIP: $tool is needed (make deps installs it)"; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-hub-XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
source "$here/../cli/check_lib.sh"
unset HF_TOKEN

call() { # METHOD PATH [DATA]: prints the HTTP status, the body in $tmp/body
  local args=(-s -o "$tmp/body" -w '%{http_code}' -X "$1" "http://127.0.0.1:$rport$2")
  [[ -n ${3:-} ]] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
  curl "${args[@]}"
}

# --- the repositories and the Hub
"$LLMR" model synth --preset loopback --out "$tmp/repos/loop" >/dev/null || fail "synth"
printf 'H{{ bos_token }}{{ messages[0].content }}' >"$tmp/repos/loop/chat_template.jinja"
printf '{"bos_token": {"content": "<|end|>"}}\n' >"$tmp/repos/loop/tokenizer_config.json"
cp -r "$tmp/repos/loop" "$tmp/repos/notok" && rm "$tmp/repos/notok/tokenizer.json"
python3 "$here/fake_hub.py" --log "$tmp/hub.log" --repo "org/loop=$tmp/repos/loop" \
  --repo "org/notok=$tmp/repos/notok" >"$tmp/hubport" 2>"$tmp/hub.err" &
pids+=($!)
for _ in $(seq 200); do [[ -s $tmp/hubport ]] && break; sleep 0.05; done
hport=$(head -1 "$tmp/hubport")
[[ -n $hport ]] || { cat "$tmp/hub.err"; fail "the fake Hub did not start"; finish_checks hub; }

# --- the router, reading that Hub
HF_ENDPOINT=http://127.0.0.1:$hport LLMR_DATA_DIR="$tmp/router" "$LLMR" router --no-auth --port 0 \
  >"$tmp/router.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do grep -q "listening on" "$tmp/router.log" && break; sleep 0.05; done
rport=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$tmp/router.log" | grep -o '[0-9]*$')
[[ -n $rport ]] || { cat "$tmp/router.log"; fail "the router did not start"; finish_checks hub; }

[[ $(call POST /v0/models '{"repo": "org/notok", "format": "safetensors"}') == 400 ]] ||
  fail "a repository without tokenizer.json: 400"
has "$(cat "$tmp/body")" "tokenizer.json" "the 400 names tokenizer.json"
[[ $(call POST /v0/models '{"repo": "org/nothing", "format": "safetensors"}') == 400 ]] ||
  fail "an unknown repository: 400"
has "$(cat "$tmp/body")" "org/nothing" "the 400 names the repository"
[[ $(call POST /v0/models '{"repo": "org/loop", "format": "safetensors", "name": "hubloop"}') == 201 ]] ||
  fail "register org/loop: $(cat "$tmp/body")"
has "$(cat "$tmp/body")" '"source_kind":"hf"' "the model comes from the Hub"
has "$(cat "$tmp/body")" '"chat_template_origin":"chat_template.jinja"' "the repository's template is kept"
grep -q 'GET /org/loop/resolve/main/chat_template.jinja' "$tmp/hub.log" ||
  fail "the router read the template from the Hub: $(cat "$tmp/hub.log")"
[[ $(call POST /v0/models/hubloop/render '{"messages": [{"role": "user", "content": "hi"}]}') == 200 ]] ||
  fail "render: $(cat "$tmp/body")"
has "$(cat "$tmp/body")" '"prompt":"H<|end|>hi"' "the render uses the Hub's template and bos_token"

# --- a node that syncs it from the Hub (the router answers 302 to the Hub's URL)
LLMR_DATA_DIR="$tmp/node" LLMR_PORT=0 "$LLMR" node --router "http://127.0.0.1:$rport" --allow-cpu \
  --origin-allowlist 127.0.0.1 --heartbeat 0.3 >"$tmp/node.log" 2>&1 &
pids+=($!)
ready=
for _ in $(seq 200); do
  call GET /v0/models/hubloop >/dev/null
  grep -q '"ready":true' "$tmp/body" && { ready=1; break; }
  sleep 0.1
done
[[ -n $ready ]] || fail "hubloop never became ready: $(cat "$tmp/body")"
grep -q 'GET /org/loop/resolve/main/model.safetensors' "$tmp/hub.log" ||
  fail "the node fetched the weights from the Hub: $(cat "$tmp/hub.log")"

[[ $(call POST /v1/chat/completions '{"model": "hubloop", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}') == 200 ]] ||
  fail "chat: $(cat "$tmp/body")"
content=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"])' "$tmp/body" 2>/dev/null)
[[ -n $content ]] || fail "the chat answer has no content: $(cat "$tmp/body")"
# "H", "<|end|>" (special), "hi": what the router rendered, tokenized by the node
prompt_tokens=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"]["prompt_tokens"])' "$tmp/body" 2>/dev/null)
[[ $prompt_tokens -ge 3 && $prompt_tokens -le 4 ]] || fail "the prompt is the Hub template's render: $prompt_tokens tokens"

[[ $failures -gt 0 ]] && { echo "--- router log"; tail -20 "$tmp/router.log"; echo "--- node log"; tail -20 "$tmp/node.log"; }
finish_checks hub
