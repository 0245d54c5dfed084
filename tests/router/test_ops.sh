#!/usr/bin/env bash
# Operators' controls, with real processes on loopback: the data directory (0700) and the
# store (0600) are private; --no-auth answers only requests
# addressed to a loopback name (DNS rebinding) and refuses writes from another web
# origin; per-key limits (requests per minute, requests at once, tokens per minute:
# 429 rate_limit_exceeded with Retry-After, the router's default and a key's own, set
# with POST /v0/keys, PATCH /v0/keys/ID and `llmr keys`); the audit log of admin
# actions (GET /v0/audit, `llmr audit`, the store, the log); a graceful stop on SIGTERM (a short
# stream finishes, a long one past --shutdown-grace ends with an error event before
# [DONE], never a bare [DONE]; one waiting in the queue gets 503 server_shutting_down at
# once); a client that leaves while queued is dropped before any node sees it (499);
# max_tokens null is max_tokens absent.
# Usage: test_ops.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_ops.sh PATH_TO_LLMR}
command -v curl >/dev/null || { echo "curl is missing: run make deps" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-ops-XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
source "$(dirname "$0")/../cli/check_lib.sh"
unset LLMR_ROUTER LLMR_API_KEY LLMR_ADMIN_KEY LLMR_CORS_ORIGINS

admin=llmr-test-admin-key-0123456789
# call METHOD PATH [KEY] [DATA] [CURL ARGS...]: prints the HTTP status, the body in $tmp/body,
# the headers in $tmp/headers
call() {
  local method=$1 path=$2 key=${3:-} data=${4:-}
  shift 4 2>/dev/null || shift $#
  local args=(-s -D "$tmp/headers" -o "$tmp/body" -w '%{http_code}' -X "$method" "http://127.0.0.1:$rport$path")
  [[ -n $key ]] && args+=(-H "Authorization: Bearer $key")
  [[ -n $data ]] && args+=(-H 'Content-Type: application/json' --data-binary "$data")
  curl "${args[@]}" "$@"
}
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($1)" "$tmp/body"; }
# start_router NAME ARGS...: a router on DATA_DIR $tmp/NAME; sets rport and rpid
start_router() {
  local name=$1
  shift
  LLMR_DATA_DIR="$tmp/$name" LLMR_ADMIN_KEY=$admin "$LLMR" router --port 0 "$@" >"$tmp/$name.log" 2>&1 &
  rpid=$!
  pids+=($rpid)
  rport=
  for _ in $(seq 200); do
    rport=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$tmp/$name.log" | grep -o '[0-9]*$')
    [[ -n $rport ]] && break
    sleep 0.05
  done
  [[ -n $rport ]] || { cat "$tmp/$name.log"; fail "the router $name did not start"; finish_checks ops; }
}
# start_node NAME NODEKEY: a node of the router on rport, its engine slow (50 ms a token),
# 7 tokens for a request without max_tokens; sets npid
nodeown=llmr-ops-test-node-own-key-0123456789 # the node's own key, for calls straight to it
start_node() {
  LLMR_DATA_DIR="$tmp/$1" LLMR_PORT=0 "$LLMR" node --router "http://127.0.0.1:$rport" --node-key "$2" --api-key "$nodeown" \
    --allow-cpu --heartbeat 0.3 --engine-options '{"token_delay_us": 50000}' --default-max-tokens 7 \
    --shutdown-grace 2 >"$tmp/$1.log" 2>&1 &
  npid=$!
  pids+=($npid)
}
# wait_ready KEY: until the model loop is ready
wait_ready() {
  for _ in $(seq 200); do
    call GET /v1/models "$1" >/dev/null
    grep -q '"id":"loop"' "$tmp/body" && return 0
    sleep 0.1
  done
  fail "loop never became ready: $(cat "$tmp/body")"
  return 1
}
key_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$tmp/body" "$1"; }
chat='{"model": "loop", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}'

"$LLMR" model synth --preset loopback --out "$tmp/src/loop" >/dev/null || fail "synth"

# --- the data directory and the store are private: a new directory 0700, router.db 0600
# (and put back to 0600 when it was open to others; an open directory is warned of)
mkdir -p "$tmp/open" && chmod 755 "$tmp/open" && touch "$tmp/open/router.db" && chmod 644 "$tmp/open/router.db"

# --- --no-auth: loopback names only, no cross-origin writes
start_router open --no-auth
[[ $(stat -c %a "$tmp/open/router.db") == 600 ]] || fail "an existing router.db open to others is made 0600"
has "$(cat "$tmp/open.log")" "is open to other users (mode 755)" "an open data directory is warned of"
[[ $(call GET /v0/keys "" "" -H "Host: localhost:$rport") == 200 ]] || fail "no-auth, Host localhost:PORT: 200: $(cat "$tmp/body")"
[[ $(call GET /v0/keys "" "" -H "Host: [::1]:$rport") == 200 ]] || fail "no-auth, Host [::1]:PORT: 200"
[[ $(call GET /v0/keys "" "" -H "Host: attacker.example:$rport") == 403 ]] || fail "no-auth, a foreign Host: 403"
has "$(cat "$tmp/body")" '"code":"forbidden_host"' "the foreign Host's 403 says why"
[[ $(call GET /v0/keys "" "" -H "Host: localhost:1") == 403 ]] || fail "no-auth, another port in Host: 403"
[[ $(call POST /v0/keys "" '{"name": "x", "scopes": "admin"}' -H 'Origin: http://attacker.example') == 403 ]] ||
  fail "no-auth, a cross-origin POST: 403"
has "$(cat "$tmp/body")" '"code":"cross_origin_write"' "the cross-origin 403 says why"
[[ $(call POST /v0/keys "" '{"name": "y", "scopes": "admin"}' -H 'Content-Type: text/plain' -H 'Origin: null') == 403 ]] ||
  fail "no-auth, a POST from an opaque origin: 403"
[[ $(call GET /v0/keys) == 200 ]] || fail "list keys"
[[ $(json 'len([k for k in d["keys"] if k["name"] in ("x", "y")])') == 0 ]] || fail "the refused POSTs made no key"
[[ $(call POST /v0/keys "" '{"name": "z", "scopes": "inference"}' -H "Origin: http://127.0.0.1:$rport") == 201 ]] ||
  fail "no-auth, a same-origin POST: 201: $(cat "$tmp/body")"
[[ $(call POST /v0/keys "" '{"name": "w", "scopes": "inference"}') == 201 ]] || fail "no-auth, a POST with no Origin: 201"
[[ $(call GET /v0/keys "" "" -H 'Origin: http://attacker.example') == 200 ]] || fail "no-auth, a cross-origin read is no write: 200"
kill -9 "$rpid"

# --- limits, audit, shutdown: a router with keys and a node
start_router main --key-rpm 1000 --shutdown-grace 2 --node-max-outstanding 2
[[ $(stat -c %a "$tmp/main") == 700 ]] || fail "a new data directory has mode 700, not $(stat -c %a "$tmp/main")"
for f in router.db router.db-wal router.db-shm; do
  [[ ! -e $tmp/main/$f || $(stat -c %a "$tmp/main/$f") == 600 ]] || fail "$f has mode 600, not $(stat -c %a "$tmp/main/$f")"
done
[[ $(call POST /v0/keys "$admin" '{"name": "n", "scopes": "node"}') == 201 ]] || fail "create a node key"
nodekey=$(key_of secret)
[[ $(call POST /v0/models "$admin" "{\"path\": \"$tmp/src/loop\", \"format\": \"safetensors\"}") == 201 ]] ||
  fail "register: $(cat "$tmp/body")"
start_node node "$nodekey"
wait_ready "$admin"

# requests per minute: a key's own limit, 429 past it with Retry-After
[[ $(call POST /v0/keys "$admin" '{"name": "rpm", "scopes": "inference", "limits": {"requests_per_minute": 2}}') == 201 ]] ||
  fail "create a key with limits: $(cat "$tmp/body")"
rpmkey=$(key_of secret) rpmid=$(key_of id)
[[ $(call POST /v1/chat/completions "$rpmkey" "$chat") == 200 ]] || fail "rpm 1: $(cat "$tmp/body")"
[[ $(call POST /v1/chat/completions "$rpmkey" "$chat") == 200 ]] || fail "rpm 2: $(cat "$tmp/body")"
[[ $(call POST /v1/chat/completions "$rpmkey" "$chat") == 429 ]] || fail "rpm 3: 429, got $(cat "$tmp/body")"
has "$(cat "$tmp/body")" '"code":"rate_limit_exceeded"' "the 429 is rate_limit_exceeded"
ra=$(grep -i '^retry-after:' "$tmp/headers" | tr -dc 0-9)
[[ -n $ra && $ra -ge 1 && $ra -le 60 ]] || fail "the 429 has Retry-After within the minute: $(cat "$tmp/headers")"
[[ $(call GET /v0/keys "$admin") == 200 ]] || fail "list keys"
[[ $(json "[k['limits'] for k in d['keys'] if k['id'] == '$rpmid'][0]['requests_per_minute']") == 2 ]] ||
  fail "the key's limits are listed: $(cat "$tmp/body")"
# an update lifts it (0: no limit)
[[ $(call PATCH "/v0/keys/$rpmid" "$admin" '{"limits": {"requests_per_minute": 0}}') == 200 ]] ||
  fail "PATCH a key's limits: $(cat "$tmp/body")"
[[ $(call POST /v1/chat/completions "$rpmkey" "$chat") == 200 ]] || fail "no limit after the update: $(cat "$tmp/body")"
[[ $(call PATCH "/v0/keys/$rpmid" "$admin" '{"limits": {"requests_per_minute": -1}}') == 400 ]] || fail "a negative limit: 400"
[[ $(call PATCH "/v0/keys/$rpmid" "$admin" '{"limits": {"rpm": 3}}') == 400 ]] || fail "an unknown limit: 400"
[[ $(call PATCH "/v0/keys/key_nope" "$admin" '{"limits": {"tokens_per_minute": 3}}') == 404 ]] || fail "PATCH an unknown key: 404"
[[ $(call PATCH "/v0/keys/$rpmid" "$rpmkey" '{"limits": {"requests_per_minute": 0}}') == 403 ]] || fail "PATCH needs admin"

# the router's default (--key-rpm 1000) for a key with none of its own, and the CLI
[[ $(call POST /v0/keys "$admin" '{"name": "conc", "scopes": "inference"}') == 201 ]] || fail "create conc"
conckey=$(key_of secret)
expect 0 "keys limits" -- env LLMR_ROUTER="http://127.0.0.1:$rport" LLMR_API_KEY=$admin "$LLMR" keys limits conc --concurrent 1
has "$out" "concurrent 1" "keys limits prints the key's limits"
has "$out" "rpm default" "keys limits shows the limits not given as the default"
expect 2 "keys limits without a limit" -- env LLMR_ROUTER="http://127.0.0.1:$rport" LLMR_API_KEY=$admin "$LLMR" keys limits conc
expect 2 "keys limits with a bad count" -- env LLMR_ROUTER="http://127.0.0.1:$rport" LLMR_API_KEY=$admin "$LLMR" keys limits conc --rpm x
# requests at once: a stream holds the one slot, a second request gets 429
curl -sN -H "Authorization: Bearer $conckey" -H 'Content-Type: application/json' \
  --data-binary '{"model": "loop", "prompt": "hi", "max_tokens": 30, "stream": true}' \
  "http://127.0.0.1:$rport/v1/completions" >"$tmp/held" &
held=$!
sleep 0.5
[[ $(call POST /v1/chat/completions "$conckey" "$chat") == 429 ]] || fail "a second request at once: 429, got $(cat "$tmp/body")"
has "$(cat "$tmp/body")" 'concurrent requests' "the 429 names the limit reached"
grep -qi '^retry-after: 1' "$tmp/headers" || fail "the concurrency 429 has Retry-After: $(cat "$tmp/headers")"
wait "$held"
[[ $(call POST /v1/chat/completions "$conckey" "$chat") == 200 ]] || fail "after the stream, a request: 200"
# tokens per minute: counted when a request ends
expect 0 "keys create with limits" -- env LLMR_ROUTER="http://127.0.0.1:$rport" LLMR_API_KEY=$admin "$LLMR" keys create tpm --tpm 5 --json
tpmkey=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["secret"])' "$out")
[[ $(call POST /v1/chat/completions "$tpmkey" "$chat") == 200 ]] || fail "tpm 1: $(cat "$tmp/body")"
[[ $(call POST /v1/chat/completions "$tpmkey" "$chat") == 429 ]] || fail "past the tokens per minute: 429"
has "$(cat "$tmp/body")" 'tokens per minute' "the 429 names the tokens limit"

# --- max_tokens null is max_tokens absent (the default), never "to the end of the context"
[[ $(call POST /v1/completions "$admin" '{"model": "loop", "prompt": "hi", "max_tokens": null}') == 200 ]] ||
  fail "max_tokens null: 200: $(cat "$tmp/body")"
null_tokens=$(json 'd["usage"]["completion_tokens"]')
[[ $(call POST /v1/completions "$admin" '{"model": "loop", "prompt": "hi"}') == 200 ]] || fail "max_tokens absent: 200"
absent_tokens=$(json 'd["usage"]["completion_tokens"]')
[[ $null_tokens == 7 && $absent_tokens == 7 ]] ||
  fail "max_tokens null and absent give the node's default (7 tokens): got $null_tokens and $absent_tokens"

# --- the body limit is the router's: a chat it takes (6 MiB) is not refused by the node
# for its rendered prompt beside its messages (the loop model's context refuses it: 400)
python3 -c 'import json; print(json.dumps({"model": "loop", "max_tokens": 1, "messages": [{"role": "user", "content": "a" * (6 << 20)}]}))' >"$tmp/big.json"
code=$(curl -s -o "$tmp/body" -w '%{http_code}' -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
  --data-binary @"$tmp/big.json" "http://127.0.0.1:$rport/v1/chat/completions")
[[ $code == 400 ]] || fail "a 6 MiB chat through the router reaches the node's context check (400), got $code: $(head -c 300 "$tmp/body")"
has "$(cat "$tmp/body")" "context" "the 6 MiB chat is refused for the context, not the body's size"

# --- a client that leaves while its request waits for a node: dropped at once, never sent
# to the node, logged as 499 (two long streams hold the node's two slots)
for i in 1 2; do
  curl -sN -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
    --data-binary '{"model": "loop", "prompt": "hi", "max_tokens": 40, "stream": true}' \
    "http://127.0.0.1:$rport/v1/completions" >"$tmp/hold$i" &
  pids+=($!)
done
sleep 0.4
curl -s -m 0.6 -o /dev/null -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
  -H 'x-request-id: gone-while-queued' --data-binary '{"model": "loop", "prompt": "hi", "max_tokens": 3}' \
  "http://127.0.0.1:$rport/v1/completions"
[[ $? == 28 ]] || fail "the queued client timed out (curl exit 28) while both slots were held"
sleep 3 # the holders end (40 tokens at 50 ms): the slots free
row=
for _ in $(seq 40); do
  call GET "/v0/requests?limit=50" "$admin" >/dev/null
  row=$(python3 -c 'import json,sys; r=[x for x in json.load(open(sys.argv[1]))["requests"] if x.get("request_id") == "gone-while-queued"]; print("%d %d %s" % (r[0]["status"], r[0]["duration_ms"], r[0].get("node") or "-") if r else "")' "$tmp/body")
  [[ -n $row ]] && break
  sleep 0.1
done
read -r st dur node_of <<<"$row"
[[ $st == 499 ]] || fail "the request log has the gone client's request as 499, got \"$row\""
[[ -n $dur && $dur -lt 1500 ]] || fail "the gone client's request left the queue at once (0.6 s and a tick), not when a slot freed: ${dur} ms"
[[ $node_of == - ]] || fail "the gone client's request was given to no node, got $node_of"
if grep -q 'gone-while-queued' "$tmp/node.log"; then fail "a request whose client left in the queue reached the node"; fi

# --- the audit log: key create and revoke, model register and delete, with who and the result
[[ $(call POST /v0/keys "$admin" '{"name": "doomed", "scopes": "inference"}') == 201 ]] || fail "create doomed"
doomed=$(key_of id)
[[ $(call DELETE "/v0/keys/$doomed" "$admin") == 200 ]] || fail "revoke doomed"
[[ $(call POST /v0/models "$admin" "{\"path\": \"$tmp/src/loop\", \"format\": \"safetensors\", \"name\": \"loop2\"}") == 201 ]] ||
  fail "register loop2"
[[ $(call DELETE /v0/models/loop2 "$admin") == 200 ]] || fail "delete loop2"
[[ $(call DELETE /v0/models/loop2 "$admin") == 404 ]] || fail "delete loop2 again: 404"
[[ $(call GET /v0/audit "$rpmkey") == 403 ]] || fail "the audit log needs admin"
[[ $(call GET /v0/audit "$admin") == 200 ]] || fail "GET /v0/audit: $(cat "$tmp/body")"
[[ $(call GET /v0/keys "$admin") == 200 ]] && adminid=$(json "[k['id'] for k in d['keys'] if 'admin' in k['scopes']][0]")
call GET /v0/audit "$admin" >/dev/null
audit() { # METHOD PATH STATUS [TARGET]: one row like that, by the admin key
  python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["audit"]; m,p,s,k=sys.argv[2:6]; t=sys.argv[6] if len(sys.argv) > 6 else None
sys.exit(0 if any(r["method"] == m and r["path"] == p and r["status"] == int(s) and r["key_id"] == k and (t is None or r["target"] == t) and r["time_ms"] > 0 for r in a) else 1)' "$tmp/body" "$@"
}
audit POST /v0/keys 201 "$adminid" "$doomed" || fail "the audit log has the key's creation: $(head -c 800 "$tmp/body")"
audit DELETE "/v0/keys/$doomed" 200 "$adminid" || fail "the audit log has the revocation"
audit POST /v0/models 201 "$adminid" loop2 || fail "the audit log has the registration"
audit DELETE /v0/models/loop2 200 "$adminid" || fail "the audit log has the deletion"
audit DELETE /v0/models/loop2 404 "$adminid" || fail "the audit log has the refused deletion"
audit PATCH "/v0/keys/$rpmid" 200 "$adminid" || fail "the audit log has the limits' change"
[[ $(json 'len([r for r in d["audit"] if r["path"].endswith("/heartbeat") or r["path"].startswith("/v1/")])') == 0 ]] ||
  fail "heartbeats and /v1 are not admin actions"
grep -q "audit.*DELETE /v0/models/loop2 by $adminid" "$tmp/main.log" || fail "the log has the audit lines"
expect 0 "llmr audit" -- env LLMR_ROUTER="http://127.0.0.1:$rport" LLMR_API_KEY=$admin "$LLMR" audit --limit 50
has "$out" "DELETE /v0/models/loop2" "llmr audit prints the deletion"
has "$out" "POST /v0/keys -> $doomed" "llmr audit prints the key made"
expect 1 "llmr audit with a key that is not an admin's" -- env LLMR_ROUTER="http://127.0.0.1:$rport" LLMR_API_KEY=$rpmkey "$LLMR" audit
expect 2 "llmr audit --limit 0" -- env LLMR_ROUTER="http://127.0.0.1:$rport" LLMR_API_KEY=$admin "$LLMR" audit --limit 0

# --- SIGTERM: a short stream finishes, a long one ends with an error event, never a bare [DONE]
stream() { # KEY MAX_TOKENS OUT
  curl -sN -H "Authorization: Bearer $1" -H 'Content-Type: application/json' \
    --data-binary "{\"model\": \"loop\", \"prompt\": \"hi\", \"max_tokens\": $2, \"stream\": true}" \
    "http://127.0.0.1:$rport/v1/completions" >"$3"
}
stream "$admin" 20 "$tmp/short" & # 1 s: within the 2 s grace
s1=$!
stream "$admin" 200 "$tmp/long" & # 10 s: past it
s2=$!
sleep 0.3
# a third waits in the queue (two at once per node): it is told at once, not left to wait
curl -s -o "$tmp/queued" -w '%{http_code}' -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
  --data-binary '{"model": "loop", "prompt": "hi", "max_tokens": 5, "stream": true}' \
  "http://127.0.0.1:$rport/v1/completions" >"$tmp/queued.code" &
s4=$!
sleep 0.3
kill -TERM "$rpid"
t_term=$(date +%s%N)
wait "$s4"
t_queued=$(( ($(date +%s%N) - t_term) / 1000000 ))
[[ $(cat "$tmp/queued.code") == 503 ]] || fail "the queued stream gets 503 at the stop, got $(cat "$tmp/queued.code"): $(cat "$tmp/queued")"
has "$(cat "$tmp/queued")" '"code":"server_shutting_down"' "the queued stream is told the router is shutting down"
[[ $t_queued -lt 1000 ]] || fail "the queued stream was answered at once, not after ${t_queued} ms"
sleep 0.3
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $admin" "http://127.0.0.1:$rport/health")
[[ $code == 000 ]] || fail "while stopping, a new connection is refused, got $code"
wait "$s1" "$s2"
for _ in $(seq 100); do kill -0 "$rpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$rpid" 2>/dev/null && fail "the router did not stop within the grace"
grep -q '"finish_reason":"length"' "$tmp/short" || fail "the short stream finished: $(tail -c 300 "$tmp/short")"
has "$(tail -c 20 "$tmp/short")" "data: [DONE]" "the short stream ends with [DONE]"
grep -q '"code":"server_shutting_down"' "$tmp/long" || fail "the long stream ends with an error event: $(tail -c 300 "$tmp/long")"
has "$(tail -c 20 "$tmp/long")" "data: [DONE]" "the long stream's error event is followed by [DONE]"
grep -q '"finish_reason":"' "$tmp/long" && fail "the long stream was cut, not finished"
has "$(cat "$tmp/main.log")" "requests still running after 2 s" "the log says the grace ran out"

# --- SIGTERM to a node: a stream past its grace ends with an error event, not a bare [DONE]
nport=$(cat "$tmp/node/run/http.port")
curl -sN -H 'Content-Type: application/json' -H "Authorization: Bearer $nodeown" \
  --data-binary '{"model": "loop", "prompt": "hi", "max_tokens": 200, "stream": true}' \
  "http://127.0.0.1:$nport/v1/completions" >"$tmp/nlong" &
s3=$!
sleep 0.4
kill -TERM "$npid"
wait "$s3"
for _ in $(seq 100); do kill -0 "$npid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$npid" 2>/dev/null && fail "the node did not stop within its grace"
grep -q '"code":"server_shutting_down"' "$tmp/nlong" || fail "the node's cut stream ends with an error event: $(tail -c 300 "$tmp/nlong")"
has "$(tail -c 20 "$tmp/nlong")" "data: [DONE]" "the node's error event is followed by [DONE]"
[[ $(grep -c '^data: {' "$tmp/nlong") -ge 10 ]] || fail "the node's stream went on during the grace: $(grep -c '^data: {' "$tmp/nlong") events"

[[ $failures -gt 0 ]] && { echo "--- router log"; tail -30 "$tmp/main.log"; echo "--- node log"; tail -20 "$tmp/node.log"; }
finish_checks ops
