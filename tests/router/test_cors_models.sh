#!/usr/bin/env bash
# CORS and GET /v1/models/{id} on a router and a node, real processes on loopback: a
# router with --cors-origins naming one origin and a node (registered with it, serving
# the loopback model) with --cors-origins '*'.  A preflight from an allowed origin is
# answered 204 without a key, with Allow-Origin, Vary, Allow-Methods, Allow-Headers
# (Authorization, Content-Type, the SDK's headers) and Max-Age; answers to that origin
# carry Allow-Origin; a preflight from another origin gets no CORS header; a router
# without the option sends none (off by default); a bad list stops the start.
# GET /v1/models/{id} answers as OpenAI (object "model", id, created, owned_by) on both;
# an unknown id, one with '/' included, is a 404 model_not_found; it needs a key.
# Usage: test_cors_models.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_cors_models.sh PATH_TO_LLMR}
command -v curl >/dev/null || { echo "curl is missing: run make deps" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-cors-XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do { kill -9 "$p"; wait "$p"; } 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
source "$(dirname "$0")/../cli/check_lib.sh"
unset LLMR_ROUTER LLMR_API_KEY LLMR_ADMIN_KEY LLMR_CORS_ORIGINS

admin=llmr-test-admin-key-cors-0123456789
app=http://app.test:3000
# call METHOD URL [KEY] [HEADER...]: prints the HTTP status; the body in $tmp/body, the
# headers in $tmp/headers
call() {
  local method=$1 url=$2 key=${3:-}
  shift 3 2>/dev/null || shift $#
  local args=(-s -D "$tmp/headers" -o "$tmp/body" -w '%{http_code}' -X "$method" "$url")
  [[ -n $key ]] && args+=(-H "Authorization: Bearer $key")
  for h in "$@"; do args+=(-H "$h"); done
  curl "${args[@]}"
}
header() { grep -i "^$1:" "$tmp/headers" | head -1 | sed 's/^[^:]*: *//' | tr -d '\r'; }
no_cors() { # WHAT: no Access-Control-* header in the last answer
  ! grep -qi '^access-control-' "$tmp/headers" || fail "$1: no CORS header: $(cat "$tmp/headers")"
}
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($1)" "$tmp/body"; }
# start_router DATA LOG [ARGS...]: sets rport
start_router() {
  local data=$1 log=$2
  shift 2
  LLMR_DATA_DIR=$data LLMR_ADMIN_KEY=$admin "$LLMR" router --port 0 "$@" >"$log" 2>&1 &
  pids+=($!)
  rport=
  for _ in $(seq 200); do
    rport=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$')
    [[ -n $rport ]] && break
    sleep 0.05
  done
  [[ -n $rport ]] || { cat "$log"; fail "the router did not start"; finish_checks cors; }
}

# --- a bad list stops the start
LLMR_DATA_DIR="$tmp/bad" timeout 20 "$LLMR" router --port 0 --cors-origins 'app.test/x' >"$tmp/bad.log" 2>&1
rc=$?
[[ $rc == 1 ]] || fail "a bad --cors-origins stops the router (exit $rc)"
has "$(cat "$tmp/bad.log")" '"app.test/x" is not an origin' "the refusal names the bad origin"

# --- off by default
start_router "$tmp/plain" "$tmp/plain.log"
plain=http://127.0.0.1:$rport
[[ $(call OPTIONS "$plain/v1/chat/completions" "" "Origin: $app" "Access-Control-Request-Method: POST") != 204 ]] ||
  fail "without --cors-origins a preflight is not answered 204"
no_cors "a preflight to a router without --cors-origins"
[[ $(call GET "$plain/v1/models" "$admin" "Origin: $app") == 200 ]] || fail "models without CORS"
no_cors "an answer of a router without --cors-origins"

# --- a router with one origin, a node with any
start_router "$tmp/router" "$tmp/router.log" --cors-origins "$app, https://other.test"
base=http://127.0.0.1:$rport
"$LLMR" model synth --preset loopback --out "$tmp/src/loop" >/dev/null 2>&1 || fail "synth"
[[ $(curl -s -o "$tmp/body" -w '%{http_code}' -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
  --data-binary "{\"path\": \"$tmp/src/loop\", \"format\": \"safetensors\"}" "$base/v0/models") == 201 ]] ||
  fail "register loop: $(cat "$tmp/body")"
# a model no engine runs: registered, never ready
cp -r "$tmp/src/loop" "$tmp/src/odd"
sed -i 's/llmr_loopback/mystery_arch/; s/LlmrLoopback/Mystery/' "$tmp/src/odd/config.json"
[[ $(curl -s -o "$tmp/body" -w '%{http_code}' -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
  --data-binary "{\"path\": \"$tmp/src/odd\", \"format\": \"safetensors\"}" "$base/v0/models") == 201 ]] ||
  fail "register odd: $(cat "$tmp/body")"
[[ $(call GET "$base/v1/models/loop" "$admin") == 404 ]] || fail "a model no node has ready yet: 404"
has "$(cat "$tmp/body")" "registered but no node has it ready" "the 404 says the model is registered but not ready"
# the node's own key: a node behind a router answers /v1 only to it, or with that key
nodeown=llmr-test-node-own-key-0123456789
LLMR_DATA_DIR="$tmp/node" LLMR_PORT=0 LLMR_ADMIN_KEY= "$LLMR" node --router "$base" --node-key "$admin" \
  --api-key "$nodeown" --allow-cpu --heartbeat 0.3 --cors-origins '*' >"$tmp/node.log" 2>&1 &
pids+=($!)
ready=
for _ in $(seq 300); do
  call GET "$base/v1/models" "$admin" >/dev/null
  python3 -c 'import json,sys; sys.exit(0 if any(m["id"] == "loop" for m in json.load(open(sys.argv[1]))["data"]) else 1)' \
    "$tmp/body" 2>/dev/null && { ready=1; break; }
  sleep 0.1
done
[[ -n $ready ]] || { fail "loop never became ready: $(cat "$tmp/body") $(tail -5 "$tmp/node.log")"; finish_checks cors; }
node=http://127.0.0.1:$(cat "$tmp/node/run/http.port")
for _ in $(seq 300); do # the node has taken odd up, and cannot run it
  call GET "$node/v1/models" "$nodeown" >/dev/null
  python3 -c 'import json,sys; sys.exit(0 if any(m["id"] == "odd" for m in json.load(open(sys.argv[1]))["not_ready"]) else 1)' \
    "$tmp/body" 2>/dev/null && break
  sleep 0.1
done
[[ $(call GET "$node/v1/models/odd" "$nodeown") == 404 ]] || fail "the node: a model it cannot run: 404"
[[ $(json 'd["error"]["code"]') == model_not_found ]] || fail "the node: odd: model_not_found"
has "$(cat "$tmp/body")" "on this node but not ready" "the node's 404 says the model is there but not ready"
has "$(cat "$tmp/body")" "mystery_arch" "the node's 404 gives the reason"

# preflights on the router
[[ $(call OPTIONS "$base/v1/chat/completions" "" "Origin: $app" "Access-Control-Request-Method: POST" \
  "Access-Control-Request-Headers: authorization,content-type,x-stainless-retry-count") == 204 ]] ||
  fail "an allowed preflight is answered 204 without a key: $(cat "$tmp/headers")"
[[ $(header Access-Control-Allow-Origin) == "$app" ]] || fail "the allowed preflight's Allow-Origin is the origin"
[[ $(header Vary) == Origin ]] || fail "the allowed preflight varies on Origin"
for h in Authorization Content-Type X-Stainless-Retry-Count X-Stainless-OS; do
  has "$(header Access-Control-Allow-Headers)" "$h" "the preflight allows the header $h"
done
has "$(header Access-Control-Allow-Methods)" POST "the preflight allows POST"
[[ $(header Access-Control-Max-Age) =~ ^[0-9]+$ ]] || fail "the preflight has a Max-Age"
[[ $(call OPTIONS "$base/v0/keys" "" "Origin: https://other.test" "Access-Control-Request-Method: GET") == 204 ]] ||
  fail "the list's second origin is allowed"
[[ $(header Access-Control-Allow-Origin) == https://other.test ]] || fail "the second origin's Allow-Origin"
[[ $(call OPTIONS "$base/v1/chat/completions" "" "Origin: http://evil.test" "Access-Control-Request-Method: POST") != 204 ]] ||
  fail "a preflight from another origin is not answered 204"
no_cors "a preflight from an origin not allowed"
# answers
[[ $(call GET "$base/v1/models" "$admin" "Origin: $app") == 200 ]] || fail "models from the allowed origin"
[[ $(header Access-Control-Allow-Origin) == "$app" ]] || fail "an answer to the allowed origin has Allow-Origin"
[[ $(call POST "$base/v1/chat/completions" "$admin" "Origin: $app" 'Content-Type: application/json') == 400 ]] ||
  fail "a bad chat from the allowed origin"
[[ $(header Access-Control-Allow-Origin) == "$app" ]] || fail "an error to the allowed origin has Allow-Origin"
[[ $(call GET "$base/v1/models" "" "Origin: $app") == 401 ]] || fail "a request, not a preflight, still needs a key"
[[ $(call GET "$base/v1/models" "$admin" "Origin: http://evil.test") == 200 ]] || fail "models from another origin"
no_cors "an answer to an origin not allowed"
[[ $(call GET "$base/v1/models" "$admin") == 200 ]] || fail "models with no Origin"
no_cors "an answer to a request with no Origin"

# the node, with '*'
[[ $(call OPTIONS "$node/v1/chat/completions" "" "Origin: http://anything.test:8000" "Access-Control-Request-Method: POST") == 204 ]] ||
  fail "the node answers a preflight 204"
[[ $(header Access-Control-Allow-Origin) == '*' ]] || fail "the node's Allow-Origin is * with --cors-origins '*'"
has "$(header Access-Control-Allow-Headers)" Authorization "the node's preflight allows Authorization"
[[ $(call GET "$node/v1/models" "$nodeown" "Origin: http://anything.test:8000") == 200 ]] || fail "the node's models"
[[ $(header Access-Control-Allow-Origin) == '*' ]] || fail "the node's answer has Allow-Origin *"

# --- GET /v1/models/{id}
for where in router node; do
  [[ $where == router ]] && url=$base key=$admin || url=$node key=$nodeown
  [[ $(call GET "$url/v1/models/loop" "$key") == 200 ]] || fail "$where: GET /v1/models/loop: $(cat "$tmp/body")"
  [[ $(json '"%s %s %s %s" % (d["object"], d["id"], type(d["created"]).__name__, type(d["owned_by"]).__name__)') == "model loop int str" ]] ||
    fail "$where: the model as OpenAI answers it: $(cat "$tmp/body")"
  [[ $(json 'len(d)') == 4 ]] || fail "$where: the model has OpenAI's four fields: $(cat "$tmp/body")"
  [[ $(call GET "$url/v1/models/nope" "$key") == 404 ]] || fail "$where: an unknown model: 404"
  [[ $(json 'd["error"]["code"]') == model_not_found ]] || fail "$where: model_not_found: $(cat "$tmp/body")"
  [[ $(call GET "$url/v1/models/org/nope" "$key") == 404 ]] || fail "$where: an unknown model with a '/': 404"
  [[ $(json 'd["error"]["code"]') == model_not_found ]] || fail "$where: a '/' id: model_not_found: $(cat "$tmp/body")"
  has "$(cat "$tmp/body")" "org/nope" "$where: the 404 names the whole id"
  [[ $(call DELETE "$url/v1/models/loop" "$key") == 405 ]] || fail "$where: DELETE /v1/models/loop: 405"
done
[[ $(call GET "$base/v1/models/loop") == 401 ]] || fail "the router's model needs a key"

finish_checks cors
