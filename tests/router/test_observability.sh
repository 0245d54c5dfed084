#!/usr/bin/env bash
# Observability end to end, with a router (JSON log lines) and a node (text log lines)
# as real processes on loopback: one request id follows a request through the
# router's access line, the node's, the request log (GET /v0/requests) and the
# x-request-id header, whether the client gave it or not (and an invalid one is
# replaced); 4xx answers are in the request log; every line of the JSON log parses;
# /metrics of router and node parse as Prometheus text and carry the documented
# names; a non-streamed request whose client goes away stops generating (the node
# counts it cancelled) and is logged as 499, through the router and at the node.
# Usage: test_observability.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_observability.sh PATH_TO_LLMR}
command -v curl >/dev/null || { echo "curl is missing: run make deps" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-obs-XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; [[ -n ${KEEP_TMP:-} ]] || rm -rf "$tmp"; }
trap cleanup EXIT
source "$here/../cli/check_lib.sh"

admin=llmr-test-admin-key-0123456789
# call METHOD URL [KEY] [DATA] [HEADER]: prints the status; body in $tmp/body, headers in $tmp/head
call() {
  local method=$1 url=$2 key=${3:-} data=${4:-} header=${5:-}
  local args=(-s -o "$tmp/body" -D "$tmp/head" -w '%{http_code}' -X "$method" "$url")
  [[ -n $key ]] && args+=(-H "Authorization: Bearer $key")
  [[ -n $data ]] && args+=(-H 'Content-Type: application/json' --data-binary "$data")
  [[ -n $header ]] && args+=(-H "$header")
  curl "${args[@]}"
}
# the x-request-id header of the last answer
answer_id() { tr -d '\r' <"$tmp/head" | awk -F': ' 'tolower($1) == "x-request-id" { print $2 }'; }
json() { python3 -c "import json,sys; d=json.load(open('$tmp/body')); print($1)" 2>/dev/null; }
# request_row ID: the request log's entry with that request id (JSON), or nothing
request_row() {
  call GET "$router/v0/requests?limit=200" "$admin" >/dev/null
  python3 -c '
import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["requests"] if r.get("request_id") == sys.argv[2]]
print(json.dumps(rows[0]) if len(rows) == 1 else "")' "$tmp/body" "$1"
}
# wait_for FILE PATTERN: up to 5 s for a line matching PATTERN (grep -E)
wait_for() { for _ in $(seq 100); do grep -qE -- "$2" "$1" && return 0; sleep 0.05; done; return 1; }

# --- a router with JSON log lines, and a node with text ones
LLMR_DATA_DIR="$tmp/router" LLMR_ADMIN_KEY=$admin "$LLMR" router --port 0 --log-format json \
  >"$tmp/router.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do grep -q "listening on" "$tmp/router.log" && break; sleep 0.05; done
rport=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$tmp/router.log" | grep -o '[0-9]*$' | head -1)
[[ -n $rport ]] || { cat "$tmp/router.log"; fail "the router did not start"; finish_checks observability; }
router=http://127.0.0.1:$rport
[[ $(call POST "$router/v0/keys" "$admin" '{"name": "n", "scopes": "node"}') == 201 ]] || fail "node key"
nodekey=$(json 'd["secret"]')
[[ $(call POST "$router/v0/keys" "$admin" '{"name": "i", "scopes": "inference"}') == 201 ]] || fail "inference key"
infkey=$(json 'd["secret"]')
"$LLMR" model synth --preset loopback --out "$tmp/src/loop" >/dev/null 2>&1 || fail "synth"
[[ $(call POST "$router/v0/models" "$admin" "{\"path\": \"$tmp/src/loop\", \"format\": \"safetensors\"}") == 201 ]] ||
  fail "register: $(cat "$tmp/body")"
# 10 ms a token: a long answer takes long enough to walk away from.  The node's own key
# lets its own clients in (a node behind a router answers /v1 only to it otherwise).
nodeown=llmr-test-node-own-key-0123456789
LLMR_DATA_DIR="$tmp/node" LLMR_PORT=0 "$LLMR" node --router "$router" --node-key "$nodekey" --api-key "$nodeown" \
  --allow-cpu --heartbeat 0.3 --engine-options '{"token_delay_us": 10000}' >"$tmp/node.log" 2>&1 &
pids+=($!)
ready=
for _ in $(seq 300); do
  call GET "$router/v1/models" "$infkey" >/dev/null
  python3 -c 'import json,sys; sys.exit(0 if any(m["id"] == "loop" and m.get("ready", True) for m in json.load(open(sys.argv[1]))["data"]) else 1)' \
    "$tmp/body" 2>/dev/null && { ready=1; break; }
  sleep 0.1
done
[[ -n $ready ]] || { fail "loop never became ready: $(cat "$tmp/body")"; finish_checks observability; }
node=http://127.0.0.1:$(cat "$tmp/node/run/http.port")
chat='{"model": "loop", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}'

# follow ID STATUS WHAT: the id in the router's JSON access line, the node's text access
# line, and the request log with that status
follow() {
  local id=$1 status=$2 what=$3
  wait_for "$tmp/router.log" "\"component\":\"access\",\"request_id\":\"$id\"" ||
    fail "$what: no router access line with request_id $id"
  python3 - "$tmp/router.log" "$id" "$status" <<'PY' || fail "$what: the router's access line"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
acc = [l for l in lines if l.get("component") == "access" and l.get("request_id") == sys.argv[2]]
assert len(acc) == 1, acc
a = acc[0]
for k in ("time", "level", "service", "method", "path", "status", "prompt_tokens", "completion_tokens",
          "ttft_ms", "duration_ms"):
    assert k in a, (k, a)
assert a["service"] == "router" and a["method"] == "POST" and a["path"] == "/v1/chat/completions", a
assert a["status"] == int(sys.argv[3]), a
assert a["status"] == 400 or a["model"] == "loop", a
PY
  if [[ $status != 4* ]]; then
    wait_for "$tmp/node.log" "access \[req=$id\] node POST /v1/chat/completions $status model=loop" ||
      fail "$what: no node access line for $id with $status: $(grep access "$tmp/node.log" | tail -3)"
  fi
  local row=$(request_row "$id")
  [[ -n $row ]] || { fail "$what: no request log entry with request_id $id"; return; }
  has "$row" "\"status\": $status" "$what: the request log's status"
}

# --- a request id the client gives
[[ $(call POST "$router/v1/chat/completions" "$infkey" "$chat" 'x-request-id: client-id.42') == 200 ]] ||
  fail "a chat with an id: $(cat "$tmp/body")"
[[ $(answer_id) == client-id.42 ]] || fail "the answer's x-request-id is the client's: $(cat "$tmp/head")"
follow client-id.42 200 "a client-given id"
row=$(request_row client-id.42)
has "$row" '"node": "' "the request log names the node"
has "$row" '"completion_tokens": 4' "the request log has the usage"
grep "req=client-id.42" "$tmp/node.log" | grep -qE "id=chatcmpl-[A-Za-z0-9]+" ||
  fail "the node's access line ties the request id to the chatcmpl id"
cid=$(json 'd["id"]')
grep "req=client-id.42" "$tmp/node.log" | grep -q "id=$cid" || fail "the node's access line has the answer's id $cid"

# --- an id the router makes
[[ $(call POST "$router/v1/chat/completions" "$infkey" "$chat") == 200 ]] || fail "a chat without an id"
gen=$(answer_id)
[[ $gen =~ ^[0-9a-f]{32}$ ]] || fail "a generated id is 32 hex digits: \"$gen\""
follow "$gen" 200 "a generated id"
# an invalid one (a space, too long) is replaced by a new one
[[ $(call POST "$router/v1/chat/completions" "$infkey" "$chat" 'x-request-id: has space') == 200 ]] ||
  fail "a chat with an invalid id"
[[ $(answer_id) =~ ^[0-9a-f]{32}$ ]] || fail "an id with a space is replaced: $(answer_id)"
long=$(printf 'x%.0s' $(seq 65))
[[ $(call POST "$router/v1/chat/completions" "$infkey" "$chat" "x-request-id: $long") == 200 ]] ||
  fail "a chat with a long id"
[[ $(answer_id) =~ ^[0-9a-f]{32}$ ]] || fail "a 65-character id is replaced: $(answer_id)"
# the node answers with the id too, its own clients' included
[[ $(call GET "$node/health" "" "" 'x-request-id: node-side') == 200 ]] || fail "node health"
[[ $(answer_id) == node-side ]] || fail "the node's x-request-id: $(cat "$tmp/head")"

# --- 4xx answers are in the request log, each with its id
[[ $(call POST "$router/v1/chat/completions" "$infkey" '{"model": "loop"' 'x-request-id: bad-json-1') == 400 ]] ||
  fail "bad JSON: 400"
follow bad-json-1 400 "a 400"
[[ $(call POST "$router/v1/chat/completions" "" "$chat" 'x-request-id: no-key-1') == 401 ]] || fail "no key: 401"
[[ $(answer_id) == no-key-1 ]] || fail "a 401 carries the x-request-id"
row=$(request_row no-key-1)
has "$row" '"status": 401' "a 401 is in the request log"
[[ $(call POST "$router/v1/chat/completions" "$infkey" '{"model": "nope", "messages": [{"role": "user", "content": "x"}]}' 'x-request-id: no-model-1') == 404 ]] ||
  fail "an unknown model: 404"
row=$(request_row no-model-1)
has "$row" '"status": 404' "a 404 is in the request log"
has "$row" '"model": "nope"' "the 404's entry names the model asked for"

# --- a non-streamed request whose client goes away
metric() { awk -v m="$1" '$1 == m { print $2 }' "$tmp/body"; }
call GET "$node/metrics" >/dev/null
cancelled0=$(metric llmr_http_cancelled_total)
tokens0=$(metric llmr_http_completion_tokens_total)
long_chat='{"model": "loop", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3000}'
# gone_client URL ID KEY: a 3000-token answer (30 s), its client gone after 1 s
gone_client() {
  local args=(-s -o /dev/null --max-time 1 -H 'Content-Type: application/json' -H "x-request-id: $2"
              --data-binary "$long_chat" "$1/v1/chat/completions")
  [[ -n $3 ]] && args+=(-H "Authorization: Bearer $3")
  curl "${args[@]}"
  local in_flight=
  for _ in $(seq 200); do # 10 s
    call GET "$node/metrics" >/dev/null
    in_flight=$(metric llmr_http_in_flight)
    [[ $in_flight == 0 ]] && break
    sleep 0.05
  done
  [[ $in_flight == 0 ]] || fail "$2: the request still runs 10 s after its client left"
}
gone_client "$router" gone-router "$infkey"
wait_for "$tmp/node.log" "access \[req=gone-router\] node POST /v1/chat/completions 499 model=loop" ||
  fail "the node logs 499 for the request whose client (the router) left: $(grep gone-router "$tmp/node.log")"
grep "req=gone-router" "$tmp/node.log" | grep -q "went away: cancelling" || fail "the node's log says it cancels"
follow gone-router 499 "a request whose client left the router"
gone_client "$node" gone-node "$nodeown"
wait_for "$tmp/node.log" "access \[req=gone-node\] node POST /v1/chat/completions 499 model=loop" ||
  fail "the node logs 499 for its own client that left"
# a stream through the router, its client gone after 1 s: 499 too
curl -sN -o /dev/null --max-time 1 -H "Authorization: Bearer $infkey" -H 'Content-Type: application/json' \
  -H 'x-request-id: gone-stream' --data-binary "${long_chat%\}}, \"stream\": true}" "$router/v1/chat/completions"
wait_for "$tmp/node.log" "access \[req=gone-stream\] node POST /v1/chat/completions 499 model=loop" ||
  fail "the node logs 499 for the stream whose client left: $(grep gone-stream "$tmp/node.log")"
follow gone-stream 499 "a stream whose client left the router"
call GET "$node/metrics" >/dev/null
cancelled1=$(metric llmr_http_cancelled_total)
tokens1=$(metric llmr_http_completion_tokens_total)
(( cancelled1 >= cancelled0 + 3 )) || fail "the three requests are counted cancelled: $cancelled0 -> $cancelled1"
(( tokens1 - tokens0 < 1500 )) || fail "the engine went on generating: $((tokens1 - tokens0)) tokens for three 1 s requests"
grep -q 'llmr_requests_total{model="loop",status="499"} 3' "$tmp/body" ||
  fail "the node's llmr_requests_total counts the three 499s: $(grep llmr_requests_total "$tmp/body")"

# --- /metrics of router and node: strict Prometheus text with the documented names
[[ $(call GET "$router/metrics") == 200 ]] || fail "the router's /metrics: HTTP $(cat "$tmp/body")"
python3 "$here/prom_parse.py" "$tmp/body" llmr_router_requests_total llmr_router_prompt_tokens_total \
  llmr_router_generation_tokens_total llmr_router_time_to_first_token_seconds \
  llmr_router_e2e_request_latency_seconds llmr_router_num_requests_waiting llmr_router_num_requests_running \
  llmr_router_node_up llmr_router_node_outstanding_requests llmr_router_node_ttft_seconds \
  >"$tmp/out" 2>"$tmp/err" || fail "the router's /metrics: $(cat "$tmp/err")"
grep -qE '^llmr_router_requests_total\{model="loop",node="[^"]+",status="200"\} [0-9]+' "$tmp/body" ||
  fail "the router counts loop's 200s per node: $(grep llmr_router_requests_total "$tmp/body")"
grep -qE 'llmr_router_requests_total\{model="loop",node="[^"]+",status="499"\} 2' "$tmp/body" ||
  fail "the router counts the 499: $(grep llmr_router_requests_total "$tmp/body")"
grep -q 'llmr_router_e2e_request_latency_seconds_count{model="loop"}' "$tmp/body" || fail "the router's latency by model"
# a made-up model name (the 404 above) gets no series: a client cannot fill the labels
! grep -q 'model="nope"' "$tmp/body" || fail "the router made a series for an unknown model: $(grep nope "$tmp/body")"
[[ $(call POST "$node/v1/chat/completions" "$nodeown" '{"model": "nope-on-node", "messages": [{"role": "user", "content": "x"}]}') == 404 ]] ||
  fail "an unknown model on the node: 404"
[[ $(call GET "$node/metrics") == 200 ]] || fail "the node's /metrics"
! grep -q 'model="nope-on-node"' "$tmp/body" || fail "the node made a series for an unknown model"
python3 "$here/prom_parse.py" "$tmp/body" llmr_http_requests_total llmr_requests_total llmr_prompt_tokens_total \
  llmr_generation_tokens_total llmr_time_to_first_token_seconds llmr_inter_token_latency_seconds \
  llmr_e2e_request_latency_seconds llmr_num_requests_running llmr_num_requests_waiting \
  llmr_kv_cache_usage_ratio >"$tmp/out" 2>"$tmp/err" || fail "the node's /metrics: $(cat "$tmp/err")"
for m in llmr_time_to_first_token_seconds_count llmr_e2e_request_latency_seconds_count llmr_num_requests_running \
         llmr_num_requests_waiting llmr_generation_tokens_total; do
  grep -q "^$m{model=\"loop\"}" "$tmp/body" || fail "the node's $m has a model label"
done
# the parser is strict: it refuses what the format does not allow
printf '# TYPE x counter\nx_total 1\n' | python3 "$here/prom_parse.py" - >/dev/null 2>&1 &&
  fail "the parser takes a counter not named _total"
printf '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n' |
  python3 "$here/prom_parse.py" - >/dev/null 2>&1 && fail "the parser takes buckets that are not cumulative"
printf '# TYPE g gauge\ng{a="x} 1\n' | python3 "$here/prom_parse.py" - >/dev/null 2>&1 &&
  fail "the parser takes an unterminated label"

# --- every line of the JSON log is a JSON object with time, level and component
python3 - "$tmp/router.log" <<'PY' || fail "the router's JSON log"
import json, sys
n = 0
for line in open(sys.argv[1]):
    if not line.strip():
        continue
    o = json.loads(line)
    assert isinstance(o, dict) and {"time", "level", "component"} <= set(o), line
    n += 1
assert n > 10, n
PY

kill -TERM "${pids[@]}" 2>/dev/null
wait "${pids[@]}" 2>/dev/null

# --- serve with JSON lines: its addresses and the new admin key are log lines too, and a
# setting that is neither text nor json is refused
expect 2 "serve --log-format xml" -- "$LLMR" serve --log-format xml
has "$err" "must be text or json" "a bad --log-format says what it takes"
expect 2 "node --log-format xml" -- "$LLMR" node --log-format xml
env -u LLMR_ADMIN_KEY LLMR_DATA_DIR="$tmp/serve" "$LLMR" serve --port 0 --log-format json >"$tmp/serve.log" 2>&1 &
serve_pid=$!
pids+=($serve_pid)
wait_for "$tmp/serve.log" '"component":"serve","message":"the node at http://127.0.0.1:[0-9]+ ' ||
  wait_for "$tmp/serve.log" '"component":"serve","message":"the node at http://127.0.0.1:[0-9]+ ' ||
  fail "serve logs the node's address as a JSON line: $(head -c 2000 "$tmp/serve.log")"
kill -TERM "$serve_pid" 2>/dev/null
wait "$serve_pid" 2>/dev/null
python3 - "$tmp/serve.log" "$tmp/serve/admin.key" <<'PY' || fail "serve's JSON log: $(head -c 2000 "$tmp/serve.log")"
import json, sys
key = open(sys.argv[2]).read().strip()
assert key and key not in open(sys.argv[1]).read(), "the admin key itself is in the log"
msgs = []
for line in open(sys.argv[1]):
    if line.strip():
        msgs.append(json.loads(line)["message"] if "message" in json.loads(line) else "")
text = "\n".join(msgs)
for want in ("the admin key of this router", "the OpenAI API at", "the router's metrics at", "its metrics at"):
    assert want in text, want
PY
finish_checks observability
