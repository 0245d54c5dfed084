#!/usr/bin/env bash
# `llmr run MODEL` against `llmr serve`: tests/cli/run_chat.py drives the terminal chat
# through a pseudo-terminal with the gpt-oss-echo test model (two turns, the reasoning
# shown apart from the answer, history with the up arrow, /bye, Ctrl-D) and checks the
# conversation each turn sends and the one-shot form against a stand-in server; here,
# the errors: no server at the URL (which URL, and `llmr serve`), an unknown model (the
# names there are), no key and a wrong key (401); and the demo model `llmr serve`
# registers answering `llmr run gpt-oss-tiny-demo PROMPT`.  Skipped (77) without
# gpt-oss's tokenizer.json and chat_template.jinja (make puts both beside the binary).
# Usage: test_run_chat.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_run_chat.sh PATH_TO_LLMR}
LLMR=$(cd "$(dirname "$LLMR")" && pwd)/$(basename "$LLMR")
command -v python3 >/dev/null 2>&1 || { echo "FAIL: python3 is not installed: run 'make deps'" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-run-chat-XXXXXX")
serve_pid=
cleanup() {
  [[ -n $serve_pid ]] && { kill -9 "$serve_pid"; wait "$serve_pid"; } 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"
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
export LLMR_GPT_OSS_TOKENIZER_DIR=$from

expect 0 "run --help" -- "$LLMR" run --help
has "$out" "usage: llmr run MODEL [PROMPT]" "run --help gives the chat's form"
has "$out" "usage: llmr run DIR" "run --help still gives the directory's form"
has "$out" "--reasoning" "run --help says where the one-shot form's reasoning goes"
has "$out" "/bye" "run --help names /bye"

# no server at the URL: which URL, and how to start one
free_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
expect 1 "run with no server" -- "$LLMR" run echo "hi" --router "http://127.0.0.1:$free_port"
has "$err" "no router answers at http://127.0.0.1:$free_port" "run with no server names the URL"
has "$err" "llmr serve" "run with no server says how to start one"
expect 1 "run with no server, interactive" -- env LLMR_ROUTER="127.0.0.1:$free_port" "$LLMR" run echo </dev/null
has "$err" "no router answers at http://127.0.0.1:$free_port" "LLMR_ROUTER is the default URL"
expect 2 "run without a model" -- "$LLMR" run
has "$err" "llmr list" "run without a model says where the names are"

# serve, with the echo model pulled
"$LLMR" model synth --preset gpt-oss-echo --out "$tmp/echo" --tokenizer-from "$from" >/dev/null 2>&1 ||
  fail "synth gpt-oss-echo"
"$LLMR" serve --port 0 >"$tmp/serve.log" 2>&1 &
serve_pid=$!
port=
for _ in $(seq 300); do
  port=$(grep -o 'the OpenAI API at http://127.0.0.1:[0-9]*' "$tmp/serve.log" | grep -o '[0-9]*$')
  [[ -n $port ]] && break
  kill -0 "$serve_pid" 2>/dev/null || break
  sleep 0.05
done
[[ -n $port ]] || { cat "$tmp/serve.log"; fail "serve did not start"; finish_checks "run chat"; }
url=http://127.0.0.1:$port
expect 0 "pull the echo model" -- "$LLMR" pull "$tmp/echo" --router "$url" --timeout 60

# the chat through a pseudo-terminal (the key: serve's key file, found by itself)
python3 "$(dirname "$0")/run_chat.py" "$LLMR" "$url" echo || {
  fail "run_chat.py"
  echo "--- serve log"; tail -20 "$tmp/serve.log"
}

# an unknown model: the names there are
expect 1 "run of an unknown model" -- "$LLMR" run nope "hi" --router "$url"
has "$err" "no model \"nope\" at $url" "an unknown model is named with the URL"
has "$err" "echo" "an unknown model's error lists the models there are"
# keys: none (a data directory with no key file), a wrong one
expect 1 "run without a key" -- env LLMR_DATA_DIR="$tmp/elsewhere" "$LLMR" run echo "hi" --router "$url"
has "$err" "wants an API key (401)" "run without a key says one is needed"
has "$err" "--api-key" "run without a key says how to give one"
expect 1 "run with a wrong key" -- "$LLMR" run echo "hi" --router "$url" --api-key llmr-wrong-key-0123456789
has "$err" "refused the key from --api-key (401" "run with a wrong key says so"

# the demo model serve registered: once "tokenizer.json: cannot open", now a chat
expect 0 "run gpt-oss-tiny-demo PROMPT" -- env LLMR_ROUTER="$url" "$LLMR" run gpt-oss-tiny-demo "hi" --max-tokens 4
[[ -n $out ]] || fail "the demo model answers run's prompt: stderr $err"
finish_checks "run chat"
