#!/usr/bin/env bash
# Chat completions of a harmony model end to end: `llmr model synth --preset
# gpt-oss-echo` (gpt-oss's tokenizer and chat template, run by the loopback engine,
# answering with the last user message) served by a node, and tests/node/harmony_chat.py
# asking it for what gpt-oss writes.  Skipped (77) without gpt-oss's tokenizer.json and
# chat_template.jinja (make puts both beside the binary, under data/gpt-oss).
# Usage: test_harmony_chat.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_harmony_chat.sh PATH_TO_LLMR}
command -v python3 >/dev/null 2>&1 || { echo "FAIL: python3 is not installed: run 'make deps'" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-harmony-XXXXXX")
node_pid=
cleanup() { [[ -n $node_pid ]] && kill -9 "$node_pid" 2>/dev/null; rm -rf "$tmp"; }
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

"$LLMR" node --host 127.0.0.1 --port 0 >"$tmp/node.log" 2>&1 &
node_pid=$!
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
  fail "harmony_chat.py"
  echo "--- node log"; tail -20 "$tmp/node.log"
}
finish_checks "harmony chat"
