#!/usr/bin/env bash
# The dashboard over HTTP, with real processes on loopback: GET / redirects to
# /dashboard; /dashboard serves the files this build embedded (each byte for byte,
# with its content type, the security headers and an ETag), or, in a build without
# the app, says so with a 404 and how to build it; unknown files are 404 and paths
# that climb out are refused, never reaching the API.  Then /v0/events: 401 without a
# key, 403 for an inference key, a stream of snapshots for the admin key (the first at
# once, more at the interval asked for), whose stats and request list show a chat sent
# through /v1 to a node; and a router with streams open stops at once.
#
# Which build this is comes from DASHBOARD_DIR, the directory the build embeds: files
# in it mean they were embedded, and each must be served as it is there; no files mean
# the 404 that says the dashboard was not built.
# Usage: test_dashboard_http.sh PATH_TO_LLMR DASHBOARD_DIR
set -u
LLMR=${1:?usage: test_dashboard_http.sh PATH_TO_LLMR DASHBOARD_DIR}
DASH=${2:?usage: test_dashboard_http.sh PATH_TO_LLMR DASHBOARD_DIR}
command -v curl >/dev/null || { echo "curl is missing: run make deps" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is missing: run make deps" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-dashboard-XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
source "$here/../cli/check_lib.sh"

admin=llmr-test-admin-key-0123456789
# call METHOD PATH [KEY] [DATA] [CURL ARGS...]: prints the HTTP status; the body is in
# $tmp/body, the headers in $tmp/headers
call() {
  local method=$1 path=$2 key=${3:-} data=${4:-}
  shift $(($# < 4 ? $# : 4))
  local args=(-s --path-as-is -o "$tmp/body" -D "$tmp/headers" -w '%{http_code}' -X "$method" "$@")
  [[ $method == HEAD ]] && args=(-s --path-as-is -I -o "$tmp/headers" -w '%{http_code}' "$@")
  [[ -n $key ]] && args+=(-H "Authorization: Bearer $key")
  [[ -n $data ]] && args+=(-H 'Content-Type: application/json' --data-binary "$data")
  : >"$tmp/body"
  curl "${args[@]}" "http://127.0.0.1:$rport$path"
}
# header NAME: the value of a header of the last call (without the CR)
header() { grep -i "^$1:" "$tmp/headers" | head -1 | sed -e 's/^[^:]*: *//' -e 's/\r$//'; }

# --- the router
LLMR_DATA_DIR="$tmp/router" LLMR_ADMIN_KEY=$admin "$LLMR" router --port 0 >"$tmp/router.log" 2>&1 &
router_pid=$!
pids+=($router_pid)
for _ in $(seq 200); do grep -q "listening on" "$tmp/router.log" && break; sleep 0.05; done
rport=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$tmp/router.log" | grep -o '[0-9]*$')
[[ -n $rport ]] || { cat "$tmp/router.log"; fail "the router did not start"; finish_checks dashboard; }

# --- the redirect and the security headers (no key needed)
[[ $(call GET /) == 302 ]] || fail "GET / is a redirect: $(cat "$tmp/headers")"
[[ $(header Location) == /dashboard ]] || fail "GET / goes to /dashboard: $(header Location)"
csp="default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'"

# --- which build: the files the build embedded
files=()
if [[ -d $DASH ]]; then
  while IFS= read -r f; do files+=("${f#"$DASH"/}"); done < <(find "$DASH" -type f ! -path '*/.*' | sort)
fi
type_of() { # the content type the router must send for a file name
  case "${1##*.}" in
    html) echo "text/html; charset=utf-8" ;; js) echo "text/javascript; charset=utf-8" ;;
    css) echo "text/css; charset=utf-8" ;; svg) echo "image/svg+xml" ;; png) echo "image/png" ;;
    ico) echo "image/x-icon" ;; json) echo "application/json" ;; woff2) echo "font/woff2" ;;
    *) echo "" ;;
  esac
}
if [[ -f $DASH/index.html ]]; then
  echo "this build embeds the dashboard (${#files[@]} files)"
  for path in /dashboard /dashboard/ /dashboard/index.html; do
    [[ $(call GET $path) == 200 ]] || fail "GET $path: 200"
    cmp -s "$tmp/body" "$DASH/index.html" || fail "GET $path is index.html byte for byte"
    [[ $(header Content-Type) == "text/html; charset=utf-8" ]] || fail "$path is text/html: $(header Content-Type)"
    [[ $(header Content-Security-Policy) == "$csp" ]] || fail "$path has the CSP: $(header Content-Security-Policy)"
    [[ $(header X-Content-Type-Options) == nosniff ]] || fail "$path has nosniff"
    [[ $(header Referrer-Policy) == no-referrer ]] || fail "$path has no-referrer"
    [[ $(header Cache-Control) == no-cache ]] || fail "$path is revalidated: $(header Cache-Control)"
  done
  for f in "${files[@]}"; do
    [[ $(call GET "/dashboard/$f") == 200 ]] || { fail "GET /dashboard/$f: 200"; continue; }
    cmp -s "$tmp/body" "$DASH/$f" || fail "/dashboard/$f is the file byte for byte"
    want=$(type_of "$f")
    [[ -z $want || $(header Content-Type) == "$want" ]] || fail "/dashboard/$f is $want: $(header Content-Type)"
    [[ $(header Content-Security-Policy) == "$csp" ]] || fail "/dashboard/$f has the CSP"
  done
  call GET /dashboard/index.html >/dev/null
  etag=$(header ETag)
  [[ $etag =~ ^\"[0-9a-f]{16}\"$ ]] || fail "index.html has an ETag: $etag"
  [[ $(call GET /dashboard/index.html "" "" -H "If-None-Match: $etag") == 304 ]] || fail "a known ETag: 304"
  [[ ! -s $tmp/body ]] || fail "a 304 has no body"
  [[ $(call GET /dashboard/index.html "" "" -H 'If-None-Match: "0000000000000000"') == 200 ]] ||
    fail "another ETag: 200"
  [[ $(call HEAD /dashboard) == 200 ]] || fail "HEAD /dashboard: 200"
  [[ $(header Content-Length) == $(wc -c <"$DASH/index.html") ]] || fail "HEAD has the length: $(header Content-Length)"
elif [[ ${#files[@]} -eq 0 ]]; then
  echo "this build has no dashboard: nothing in $DASH"
  for path in /dashboard /dashboard/ /dashboard/app.js; do
    [[ $(call GET $path) == 404 ]] || fail "GET $path without the app: 404"
    [[ $(header Content-Type) == text/html* || $(header Content-Type) == text/plain* ]] ||
      fail "the not-built answer is text: $(header Content-Type)"
    has "$(cat "$tmp/body")" "not built" "the 404 says the dashboard was not built"
    has "$(cat "$tmp/body")" "make" "the 404 says make builds it"
    has "$(cat "$tmp/body")" "npm" "the 404 says it needs npm"
    has "$(cat "$tmp/body")" "LLMR_DASHBOARD=OFF" "the 404 names LLMR_DASHBOARD=OFF"
  done
else
  echo "this build embeds ${#files[@]} files without an index.html"
  [[ $(call GET /dashboard) == 404 ]] || fail "GET /dashboard without an index.html: 404"
fi
[[ $(call GET /dashboard/no-such-file.js) == 404 ]] || fail "an unknown file: 404"
[[ $(call GET /dashboard/img/no/such.png) == 404 ]] || fail "an unknown file in a folder: 404"
[[ $(call POST /dashboard "" '{}') == 405 ]] || fail "POST /dashboard: 405"
[[ $(header Allow) == "GET, HEAD" ]] || fail "the 405 says GET, HEAD: $(header Allow)"
[[ $(call GET /dashboardx "$admin") == 404 ]] || fail "/dashboardx is not the dashboard: 404"

# --- paths that climb out never reach the API, even with the admin key
for path in /dashboard/../v0/keys /dashboard/%2e%2e/v0/keys /dashboard/%2e%2e/x /dashboard/..%2f..%2fv0%2fkeys \
  /dashboard//v0/keys /dashboard/..%5cv0%5ckeys /dashboard/a/../../v0/keys /dashboard/%00/x; do
  code=$(call GET "$path" "$admin")
  [[ $code == 400 || $code == 404 ]] || fail "GET $path: 400 or 404, got $code"
  [[ $(cat "$tmp/body") != *'"keys"'* && $(cat "$tmp/body") != *bootstrap* ]] || fail "GET $path listed the keys"
done
[[ $(call GET /dashboard/../v0/keys "$admin") == 400 ]] || fail "a path with .. is 400"
[[ $(call GET /dashboard/%2e%2e/x) == 400 ]] || fail "an encoded .. is 400"

# --- /v0/events: scopes
[[ $(call POST /v0/keys "$admin" '{"name": "i", "scopes": "inference"}') == 201 ]] || fail "create an inference key"
infkey=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret"])' "$tmp/body")
[[ $(call POST /v0/keys "$admin" '{"name": "n", "scopes": "node"}') == 201 ]] || fail "create a node key"
nodekey=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret"])' "$tmp/body")
[[ $(call GET /v0/events "" "" --max-time 5) == 401 ]] || fail "/v0/events without a key: 401"
[[ $(call GET /v0/events "$infkey" "" --max-time 5) == 403 ]] || fail "/v0/events with an inference key: 403"
[[ $(call GET /v0/events "$nodekey" "" --max-time 5) == 403 ]] || fail "/v0/events with a node key: 403"
[[ $(call POST /v0/events "$admin" '{}' --max-time 5) == 405 ]] || fail "POST /v0/events: 405"
[[ $(call GET '/v0/events?interval_ms=soon' "$admin" "" --max-time 5) == 400 ]] || fail "a bad interval: 400"

# events URL_QUERY SECONDS FILE: the stream as the admin sees it for SECONDS
events() {
  curl -sN --max-time "$2" -D "$3.headers" -H "Authorization: Bearer $admin" \
    "http://127.0.0.1:$rport/v0/events$1" >"$3"
  [[ $? == 28 ]] || fail "the events stream ran until curl's time limit ($2 s)"
}
events "" 2 "$tmp/ev1"
grep -q '^HTTP/1.1 200' "$tmp/ev1.headers" || fail "/v0/events with the admin key: 200: $(head -1 "$tmp/ev1.headers")"
grep -qi '^Content-Type: text/event-stream' "$tmp/ev1.headers" || fail "/v0/events is text/event-stream"
n=$(python3 "$here/sse_snapshots.py" "$tmp/ev1" 1 "$tmp/snap1.json") || fail "a first snapshot within 2 s: $n"
[[ $(head -n 1 "$tmp/ev1") == "event: snapshot" ]] || fail "the stream starts with event: snapshot"
[[ ${n:-0} -le 3 ]] || fail "the default interval is 1 s: $n snapshots in 2 s"
events "?interval_ms=200" 1.5 "$tmp/ev2"
n=$(python3 "$here/sse_snapshots.py" "$tmp/ev2" 3) || fail "at least 3 snapshots in 1.5 s at interval_ms=200: $n"
events "?interval_ms=1" 1 "$tmp/ev3"
n=$(python3 "$here/sse_snapshots.py" "$tmp/ev3" 1) || fail "interval_ms=1"
[[ ${n:-99} -le 7 ]] || fail "interval_ms=1 is kept to 200 ms: $n snapshots in 1 s"

# --- a node, a model, a chat: the snapshot shows them
"$LLMR" model synth --preset loopback --out "$tmp/src/loop" >/dev/null || fail "synth"
[[ $(call POST /v0/models "$admin" "{\"path\": \"$tmp/src/loop\", \"format\": \"safetensors\"}") == 201 ]] ||
  fail "register: $(cat "$tmp/body")"
LLMR_DATA_DIR="$tmp/node" LLMR_PORT=0 "$LLMR" node --router "http://127.0.0.1:$rport" --node-key "$nodekey" \
  --allow-cpu --heartbeat 0.3 >"$tmp/node.log" 2>&1 &
pids+=($!)
ready=
for _ in $(seq 300); do
  call GET /v1/models "$infkey" >/dev/null
  python3 -c 'import json,sys; sys.exit(0 if any(m["id"] == "loop" for m in json.load(open(sys.argv[1]))["data"]) else 1)' \
    "$tmp/body" 2>/dev/null && { ready=1; break; }
  sleep 0.1
done
[[ -n $ready ]] || fail "loop never became ready: $(cat "$tmp/body")"
[[ $(call POST /v1/chat/completions "$infkey" '{"model": "loop", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}') == 200 ]] ||
  fail "chat through the router: $(cat "$tmp/body")"
events "?interval_ms=200" 1 "$tmp/ev4"
n=$(python3 "$here/sse_snapshots.py" "$tmp/ev4" 2 "$tmp/snap.json") || fail "snapshots after the chat: $n"
call GET /v0/nodes "$admin" >/dev/null && cp "$tmp/body" "$tmp/nodes.json"
call GET /v0/models "$admin" >/dev/null && cp "$tmp/body" "$tmp/models.json"
call GET /v0/models/loop "$admin" >/dev/null && cp "$tmp/body" "$tmp/loop.json"
call GET '/v0/requests?limit=50' "$admin" >/dev/null && cp "$tmp/body" "$tmp/requests.json"
python3 - "$tmp" <<'EOF' || fail "the snapshot after the chat"
import json, sys, time
d = sys.argv[1]
snap = json.load(open(f"{d}/snap.json"))
st, bad = snap["stats"], []
def check(ok, what):
    if not ok:
        bad.append(what)
check(abs(snap["time_ms"] - time.time() * 1000) < 60000, f"time_ms is the clock: {snap['time_ms']}")
check(st["window_s"] == 10, f"window_s: {st['window_s']}")
check(st["requests"] >= 1, f"stats.requests >= 1: {st}")
check(st["completion_tokens"] >= 8, f"stats.completion_tokens >= 8: {st}")
check(abs(st["tokens_per_s"] - st["completion_tokens"] / 10) < 1e-9, f"tokens_per_s: {st}")
check(isinstance(st["ttft_ms_p50"], (int, float)) and st["ttft_ms_p50"] >= 0, f"ttft_ms_p50: {st}")
check(isinstance(st["duration_ms_p50"], (int, float)) and st["duration_ms_p50"] > 0, f"duration_ms_p50: {st}")
check(st["ttft_ms_p90"] >= st["ttft_ms_p50"], f"p90 >= p50: {st}")
check(st["errors"] == 0, f"no errors: {st}")
check(isinstance(st["in_flight"], int), f"in_flight: {st}")
reqs = snap["requests"]
check(reqs and reqs[0]["model"] == "loop", f"requests[0].model is loop: {reqs[:1]}")
check(reqs and reqs[0]["endpoint"] == "/v1/chat/completions" and reqs[0]["status"] == 200, f"requests[0]: {reqs[:1]}")
# the same objects as the /v0 endpoints give (fetched just after: only clocks may differ)
log = json.load(open(f"{d}/requests.json"))["requests"]
check(reqs == log[:len(reqs)], f"requests are GET /v0/requests' entries: {reqs[:1]} vs {log[:1]}")
nodes = json.load(open(f"{d}/nodes.json"))["nodes"]
check([n["id"] for n in snap["nodes"]] == [n["id"] for n in nodes], "nodes are GET /v0/nodes' nodes")
check(all(set(a) == set(b) for a, b in zip(snap["nodes"], nodes)), "the nodes have GET /v0/nodes' fields")
check(len(nodes) == 1 and snap["nodes"][0]["online"], f"one node, online: {snap['nodes']}")
models = json.load(open(f"{d}/models.json"))["models"]
check([{k: v for k, v in m.items() if k != "nodes"} for m in snap["models"]] == models,
      f"models are GET /v0/models' models: {snap['models']} vs {models}")
loop = json.load(open(f"{d}/loop.json"))
mine = [m for m in snap["models"] if m["name"] == "loop"]
check(len(mine) == 1 and [set(n) for n in mine[0]["nodes"]] == [set(n) for n in loop["nodes"]],
      f"a model's nodes are GET /v0/models/NAME's: {mine} vs {loop['nodes']}")
check(len(mine) == 1 and [(n["node"], n["node_name"], n["state"]) for n in mine[0]["nodes"]] ==
      [(n["node"], n["node_name"], n["state"]) for n in loop["nodes"]], "the same node states")
check(len(mine) == 1 and mine[0]["nodes"] and mine[0]["nodes"][0]["state"] == "ready", f"loop is ready: {mine}")
if bad:
    sys.exit("\n".join(bad))
EOF

# --- the router stops at once with streams open (each waits 10 s between snapshots)
for i in 1 2; do
  curl -sN --max-time 20 -H "Authorization: Bearer $admin" "http://127.0.0.1:$rport/v0/events?interval_ms=10000" \
    >"$tmp/open$i" 2>/dev/null &
  pids+=($!)
done
for _ in $(seq 100); do [[ -s $tmp/open1 && -s $tmp/open2 ]] && break; sleep 0.05; done
start=$(date +%s%N)
kill -TERM "$router_pid"
stopped=
for _ in $(seq 60); do kill -0 "$router_pid" 2>/dev/null || { stopped=1; break; }; sleep 0.05; done
[[ -n $stopped ]] || fail "the router did not stop within 3 s with event streams open"
wait "$router_pid"
rc=$?
[[ $rc == 0 ]] || fail "the router exits 0 on SIGTERM: $rc"
echo "the router stopped in $((($(date +%s%N) - start) / 1000000)) ms with 2 streams open"

[[ $failures -gt 0 ]] && { echo "--- router log"; tail -30 "$tmp/router.log"; echo "--- node log"; tail -30 "$tmp/node.log"; }
finish_checks dashboard
