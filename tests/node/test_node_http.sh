#!/usr/bin/env bash
# The node's HTTP API against bad input, with curl: a node on a temporary data
# directory with the loopback model, serving HTTP on a free port.  Each bad request
# (malformed JSON, wrong types, unknown model, values out of range, a body over the
# limit, invalid UTF-8, missing or empty messages, unknown path, wrong method) must get
# its 4xx and an OpenAI error object, and the node must keep serving: a valid request
# after them succeeds, /health and /metrics answer, a stream ends with [DONE], and a
# client that goes away in the middle of a stream does not hurt the node.
# Usage: test_node_http.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_node_http.sh PATH_TO_LLMR}
command -v curl >/dev/null 2>&1 || { echo "FAIL: curl is not installed: run 'make deps'" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-node-http-XXXXXX")
node_pid=
cleanup() { [[ -n $node_pid ]] && kill -9 "$node_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
source "$(dirname "$0")/../cli/check_lib.sh"
export LLMR_DATA_DIR="$tmp/data"

abort() { # a failure after which nothing else can be checked
  fail "$*"
  echo "--- node log"; cat "$tmp/node.log"
  finish_checks "node HTTP"
}

expect 0 "synth loopback" -- "$LLMR" model synth --preset loopback --out "$tmp/data/models/loop"
# the same model with a chat template that raises: its errors name the request's field
cp -r "$tmp/data/models/loop" "$tmp/data/models/loopraise"
printf '%s' "{{ raise_exception('only user turns here') }}" >"$tmp/data/models/loopraise/chat_template.jinja"
"$LLMR" node --host 127.0.0.1 --port 0 >"$tmp/node.log" 2>&1 &
node_pid=$!
port=
for _ in $(seq 200); do # 10 s
  kill -0 "$node_pid" 2>/dev/null || abort "the node exited before serving HTTP"
  port=$(cat "$tmp/data/run/http.port" 2>/dev/null)
  [[ $port =~ ^[0-9]+$ ]] && break
  port=
  sleep 0.05
done
[[ -n $port ]] || abort "the node wrote no run/http.port within 10 s"
has "$(cat "$tmp/node.log")" "listening on http://127.0.0.1:$port" "the node logs where it listens"
base="http://127.0.0.1:$port"
health=
for _ in $(seq 100); do # 10 s
  health=$(curl -s -o /dev/null -w '%{http_code}' "$base/health")
  [[ $health == 200 ]] && break
  sleep 0.1
done
[[ $health == 200 ]] || abort "GET /health did not answer 200 within 10 s (last: $health)"

# req METHOD PATH [CURL ARGS...]: sets $code (HTTP status), $ctype and $body.
req() {
  local method=$1 path=$2; shift 2
  local meta
  rm -f "$tmp/body"
  meta=$(curl -sS --max-time 30 -o "$tmp/body" -w '%{http_code} %{content_type}' -X "$method" "$@" \
         "$base$path" 2>"$tmp/curl.err")
  code=${meta%% *}
  ctype=${meta#* }
  body=$(cat "$tmp/body" 2>/dev/null)
}
# json_str BODY KEY: the first string value of "KEY" in BODY (the error object has
# one each of message, type, param and code), or nothing when absent or not a string.
json_str() {
  local re="\"$2\"[[:space:]]*:[[:space:]]*\"(([^\"\\\\]|\\\\.)*)\""
  [[ $1 =~ $re ]] && printf '%s' "${BASH_REMATCH[1]}"
}
post_json() { req POST "$1" -H 'Content-Type: application/json' "${@:2}"; }

# bad WHAT STATUS CODE PARAM METHOD PATH [CURL ARGS...]: the request gets STATUS and an
# error object with a message (and CODE, PARAM where not empty); the node lives on.
bad() {
  local what=$1 want=$2 want_code=$3 want_param=$4; shift 4
  req "$@"
  [[ $code == "$want" ]] || fail "$what: HTTP $code, wanted $want; body: ${body:0:300}; curl: $(cat "$tmp/curl.err")"
  [[ $ctype == application/json* ]] || fail "$what: Content-Type \"$ctype\", wanted application/json"
  has "$body" '"error"' "$what: an error object"
  [[ -n $(json_str "$body" message) ]] || fail "$what: no error.message in: ${body:0:300}"
  [[ -n $(json_str "$body" type) ]] || fail "$what: no error.type in: ${body:0:300}"
  [[ -z $want_code || $(json_str "$body" code) == "$want_code" ]] ||
    fail "$what: error.code \"$(json_str "$body" code)\", wanted \"$want_code\"; body: ${body:0:300}"
  [[ -z $want_param || $(json_str "$body" param) == "$want_param" ]] ||
    fail "$what: error.param \"$(json_str "$body" param)\", wanted \"$want_param\"; body: ${body:0:300}"
  kill -0 "$node_pid" 2>/dev/null || abort "the node died after: $what"
}

chat=/v1/chat/completions
msgs='"messages":[{"role":"user","content":"hi"}]'

# ---- bad requests ---------------------------------------------------------------------
bad "malformed JSON" 400 invalid_json "" POST $chat -H 'Content-Type: application/json' \
  --data-binary '{"model":"loop", "messages": [{"role":"user","content":"hi"}'
bad "malformed JSON (completions)" 400 invalid_json "" POST /v1/completions \
  -H 'Content-Type: application/json' --data-binary '{"model":"loop","prompt":"hi",}'
bad "an empty body" 400 "" "" POST $chat -H 'Content-Type: application/json' --data-binary ''
bad "a body that is not an object" 400 "" "" POST $chat -H 'Content-Type: application/json' \
  --data-binary '["loop"]'
bad "temperature a string" 400 invalid_type temperature POST $chat -H 'Content-Type: application/json' \
  --data-binary "{\"model\":\"loop\",$msgs,\"temperature\":\"hot\"}"
bad "max_tokens a string (completions)" 400 invalid_type max_tokens POST /v1/completions \
  -H 'Content-Type: application/json' --data-binary '{"model":"loop","prompt":"hi","max_tokens":"8"}'
bad "unknown model" 404 model_not_found "" POST $chat -H 'Content-Type: application/json' \
  --data-binary "{\"model\":\"no-such-model\",$msgs}"
bad "unknown model (completions)" 404 model_not_found "" POST /v1/completions \
  -H 'Content-Type: application/json' --data-binary '{"model":"no-such-model","prompt":"hi"}'
bad "negative max_tokens" 400 invalid_value max_tokens POST $chat -H 'Content-Type: application/json' \
  --data-binary "{\"model\":\"loop\",$msgs,\"max_tokens\":-1}"

# 34 MB: over the 32 MiB limit (docs/node.md).  The node may answer before reading it all, so curl's
# own exit status is not checked, only the answer.
{ printf '{"model":"loop","messages":[{"role":"user","content":"'
  head -c 34000000 /dev/zero | tr '\0' 'a'
  printf '"}]}'; } >"$tmp/big.json"
bad "a 34 MB body" 413 request_too_large "" POST $chat -H 'Content-Type: application/json' \
  --data-binary @"$tmp/big.json"

printf '{"model":"loop","messages":[{"role":"user","content":"bad \xff\xfe bytes \xc3"}]}' >"$tmp/utf8.json"
bad "invalid UTF-8 in a string" 400 "" "" POST $chat -H 'Content-Type: application/json' \
  --data-binary @"$tmp/utf8.json"
printf '{"model":"loop","prompt":"\xed\xa0\x80 a surrogate"}' >"$tmp/utf8b.json"
bad "invalid UTF-8 (an encoded surrogate, completions)" 400 "" "" POST /v1/completions \
  -H 'Content-Type: application/json' --data-binary @"$tmp/utf8b.json"

bad "missing messages" 400 "" messages POST $chat -H 'Content-Type: application/json' \
  --data-binary '{"model":"loop"}'
bad "empty messages" 400 "" messages POST $chat -H 'Content-Type: application/json' \
  --data-binary '{"model":"loop","messages":[]}'
bad "unknown path" 404 "" "" GET /v1/nothing-here
bad "unknown path (POST)" 404 "" "" POST /v2/chat/completions -H 'Content-Type: application/json' \
  --data-binary "{\"model\":\"loop\",$msgs}"
bad "GET on chat completions" 405 "" "" GET $chat
bad "GET on completions" 405 "" "" GET /v1/completions
bad "DELETE on models" 405 "" "" DELETE /v1/models

# ---- the node still serves -------------------------------------------------------------
kill -0 "$node_pid" 2>/dev/null || abort "the node is gone after the bad requests"
post_json $chat --data-binary "{\"model\":\"loop\",$msgs,\"max_tokens\":4,\"temperature\":0}"
[[ $code == 200 ]] || fail "a valid chat request after the bad ones: HTTP $code; body: ${body:0:300}"
has "$body" '"chat.completion"' "the chat response's object"
has "$body" '"assistant"' "the chat response's role"
[[ $(json_str "$body" finish_reason) == length ]] || fail "finish_reason length after 4 tokens: $body"
post_json /v1/completions --data-binary '{"model":"loop","prompt":"hi","max_tokens":4}'
[[ $code == 200 ]] || fail "a valid completions request: HTTP $code; body: ${body:0:300}"
has "$body" '"text_completion"' "the completion response's object"

bad "a chat whose template raises" 400 template_error messages POST "$chat" \
  -H 'Content-Type: application/json' --data-binary "{\"model\":\"loopraise\",$msgs}"
has "$body" "only user turns here" "the chat's 400 carries the template's message"
bad "a response whose template raises" 400 template_error input POST /v1/responses \
  -H 'Content-Type: application/json' --data-binary '{"model":"loopraise","input":"hi"}'
has "$body" "only user turns here" "the response's 400 carries the template's message"

req GET /health
[[ $code == 200 ]] || fail "/health: HTTP $code"
[[ $(json_str "$body" status) == ok ]] || fail "/health says status ok: $body"
req GET /v1/models
[[ $code == 200 ]] || fail "/v1/models: HTTP $code"
has "$body" '"loop"' "/v1/models lists the model"
req GET /metrics
[[ $code == 200 ]] || fail "/metrics: HTTP $code"
[[ $ctype == text/plain* ]] || fail "/metrics Content-Type \"$ctype\", wanted text/plain"
has "$body" "llmr_http_requests_total" "/metrics counts requests"

# ---- streaming -----------------------------------------------------------------------
curl -sS -N --max-time 30 -H 'Content-Type: application/json' \
  --data-binary "{\"model\":\"loop\",$msgs,\"max_tokens\":6,\"stream\":true}" "$base$chat" >"$tmp/stream" 2>"$tmp/curl.err" ||
  fail "the streamed request failed: $(cat "$tmp/curl.err")"
stream=$(cat "$tmp/stream")
has "$stream" 'data: {' "the stream has data events"
has "$stream" '"chat.completion.chunk"' "the stream has chunks"
has "$stream" '"finish_reason":"length"' "the stream ends by length"
[[ $(grep -v '^$' "$tmp/stream" | tail -1) == 'data: [DONE]' ]] || fail "the stream ends with data: [DONE]: $stream"
# Every line is a data: line, but for one SSE comment: the usage, asked for or not
# (docs/node.md).
bad_lines=$(grep -v '^$' "$tmp/stream" | grep -v '^: {"usage":{"prompt_tokens":[0-9]*,"completion_tokens":[0-9]*}}$' | grep -cv '^data: ')
[[ $bad_lines -eq 0 ]] || fail "$bad_lines stream lines are neither data: lines nor the usage comment: $stream"
[[ $(grep -c '^: {"usage"' "$tmp/stream") -eq 1 ]] || fail "the stream carries its usage as one comment: $stream"

# A client that goes away in the middle of a long stream: curl writes into head, which
# closes the pipe after the first chunk, and curl then quits with the connection.  The
# request must end (nothing left in flight), counted as cancelled unless the whole
# stream was already generated, and the node must carry on serving.
metric() { awk -v m="$1" '$1 == m { print $2 }' <<<"$body"; }
req GET /metrics
cancelled0=$(metric llmr_http_cancelled_total)
tokens0=$(metric llmr_http_completion_tokens_total)
[[ -n $cancelled0 && -n $tokens0 ]] ||
  fail "/metrics has llmr_http_cancelled_total and llmr_http_completion_tokens_total: $body"
curl -sS -N --max-time 60 -H 'Content-Type: application/json' \
  --data-binary "{\"model\":\"loop\",$msgs,\"max_tokens\":4000,\"stream\":true}" "$base$chat" \
  2>/dev/null | head -c 64 >"$tmp/long"
has "$(cat "$tmp/long")" "data: {" "the long stream's first chunk"
kill -0 "$node_pid" 2>/dev/null || abort "the node died when a streaming client went away"
in_flight=
for _ in $(seq 100); do # 10 s
  req GET /metrics
  in_flight=$(metric llmr_http_in_flight)
  [[ $in_flight == 0 ]] && break
  sleep 0.1
done
[[ $in_flight == 0 ]] || fail "the abandoned stream is still in flight after 10 s: llmr_http_in_flight $in_flight"
cancelled1=$(metric llmr_http_cancelled_total)
tokens1=$(metric llmr_http_completion_tokens_total)
if [[ -n $cancelled0 && -n $tokens0 ]]; then
  if (( cancelled1 > cancelled0 )); then
    echo "note: the abandoned stream was cancelled after $((tokens1 - tokens0)) of 4000 tokens"
  elif (( tokens1 - tokens0 >= 4000 )); then
    echo "note: the long stream was generated whole before its client went away (nothing to cancel)"
  else
    fail "the abandoned stream ended after $((tokens1 - tokens0)) of 4000 tokens but is not counted in llmr_http_cancelled_total"
  fi
fi
post_json $chat --data-binary "{\"model\":\"loop\",$msgs,\"max_tokens\":4}"
[[ $code == 200 ]] || fail "a request after a client went away: HTTP $code; body: ${body:0:300}"

# ---- a clean stop --------------------------------------------------------------------
kill -TERM "$node_pid"
for _ in $(seq 200); do kill -0 "$node_pid" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$node_pid" 2>/dev/null; then
  fail "the node did not stop on SIGTERM"
else
  wait "$node_pid"; rc=$?
  [[ $rc -eq 0 ]] || fail "the node exited $rc on SIGTERM"
  node_pid=
fi

[[ $failures -gt 0 ]] && { echo "--- node log"; cat "$tmp/node.log"; }
finish_checks "node HTTP"
