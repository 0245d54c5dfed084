#!/usr/bin/env bash
# A node and a router end to end with real processes on loopback: `llmr node --router`
# against a fake router (fake_router.py) that serves three copies of the loopback model
# and breaks some of them on purpose.  Checks: (a) the node registers (name, its HTTP
# URL, has_gpu false and allow_cpu true on a machine without a GPU, the node key) and
# sends heartbeats; (b) a node without --allow-cpu is refused with 403 no_gpu, says so in
# its log and keeps running and retrying; (c) the node syncs a model (the files in
# DATA_DIR/models/NAME with the right digests, the sync record) and then lists it in
# /v1/models and answers /v1/completions with it; (d) a download cut in the middle
# resumes with a Range request; (e) heartbeats carry the sync progress, then the model
# ready; (f) a file whose sha256 differs leaves its model failed (heartbeat reason
# naming the file, not in /v1/models) and the node up; (g) an optional file that
# fails is skipped and logged, the model ready without it; (h) after the router
# forgets its nodes, the next heartbeat gets 404 and the node registers again; (i) the
# node answers /v1 only with the secret its router gave it at registration (a client
# that bypasses the router gets 401), and with the secret of its latest registration.
# Usage: test_node_router.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_node_router.sh PATH_TO_LLMR}
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v python3 >/dev/null 2>&1; then
  echo "SKIP: python3 is needed for the fake router (tests/node/fake_router.py)"
  exit 77
fi
command -v curl >/dev/null 2>&1 || { echo "FAIL: curl is not installed: run 'make deps'" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-node-router-XXXXXX")
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$here/../cli/check_lib.sh"
started=$SECONDS

dump() {
  local f
  for f in node_a node_b; do
    [[ -f "$tmp/$f.log" ]] && { echo "--- $f log"; cat "$tmp/$f.log"; }
  done
  for f in r1 r2; do
    [[ -f "$tmp/$f.log" ]] && { echo "--- router $f log (last 40 requests)"; tail -40 "$tmp/$f.log"; }
  done
}
abort() { # a failure after which nothing else can be checked
  fail "$*"
  dump
  finish_checks "node and router"
}

# ---- queries on a router log (one JSON line a request) ----------------------------------
cat >"$tmp/logq.py" <<'EOF'
import json, re, sys
L = []
for line in open(sys.argv[1]):
    try:
        L.append(json.loads(line))
    except ValueError:
        pass  # a line being written
def reqs(method=None, path=None, status=None, after=-1):
    """(index, entry) of the requests matching; path is a regular expression."""
    return [(i, e) for i, e in enumerate(L) if i > after
            and (method is None or e["method"] == method)
            and (path is None or re.fullmatch(path, e["path"]))
            and (status is None or e["status"] == status)]
def heartbeats(status=200, after=-1):
    return [(i, e) for i, e in reqs("POST", r"/v0/nodes/[^/]+/heartbeat", status, after)
            if isinstance(e["body"], dict)]
def model(e, name):
    """The heartbeat's entry for a model, or {}."""
    for m in e["body"].get("models") or []:
        if isinstance(m, dict) and m.get("name") == name:
            return m
    return {}
def first(pairs):
    return pairs[0][0] if pairs else -1
def last(pairs):
    return pairs[-1][0] if pairs else -1
print(eval(sys.argv[2]))
EOF
logq() { python3 "$tmp/logq.py" "$1" "$2" 2>&1; }
# wait_log LOG EXPR SECONDS: until EXPR is True on the log; false when it never was
wait_log() {
  local end=$((SECONDS + $3))
  while ((SECONDS < end)); do
    [[ $(logq "$1" "$2") == True ]] && return 0
    sleep 0.1
  done
  [[ $(logq "$1" "$2") == True ]]
}
# check_log LOG EXPR WHAT
check_log() {
  local got
  got=$(logq "$1" "$2")
  [[ $got == True ]] || fail "$3 (on the router log: $2 -> $got)"
}

# ---- the models the router holds -------------------------------------------------------
expect 0 "synth loopback" -- "$LLMR" model synth --preset loopback --out "$tmp/src"
cp -r "$tmp/src" "$tmp/src_tiny"
# an optional padding file, sent slowly, so that heartbeats catch the sync in progress
head -c 3000000 /dev/urandom >"$tmp/src_tiny/padding.bin"

# start_router NAME ARGS...: sets port_NAME
start_router() {
  local name=$1; shift
  : >"$tmp/$name.log"
  python3 "$here/fake_router.py" --log "$tmp/$name.log" --interval 0.3 "$@" \
    >"$tmp/$name.port" 2>"$tmp/$name.err" &
  pids+=($!)
  for _ in $(seq 200); do [[ -s "$tmp/$name.port" ]] && break; sleep 0.05; done
  local port
  port=$(head -1 "$tmp/$name.port")
  [[ $port =~ ^[0-9]+$ ]] || abort "the fake router $name did not start: $(cat "$tmp/$name.err")"
  printf -v "port_$name" '%s' "$port"
}
# r1: three models.  tiny: model.safetensors cut after 1000 bytes, padding.bin optional
# and slow; ghost: an optional file the router does not have; bad: model.safetensors
# corrupted on the wire.
start_router r1 --key key-one \
  --model tiny="$tmp/src_tiny" --model ghost="$tmp/src" --model bad="$tmp/src" \
  --cut tiny/model.safetensors:1000 --optional tiny/padding.bin --slow tiny/padding.bin:2000000 \
  --phantom-optional ghost/extra/phantom.bin --corrupt bad/model.safetensors
# r2: no models, for the node that will be refused
start_router r2 --key key-two
router1=http://127.0.0.1:$port_r1
router2=http://127.0.0.1:$port_r2

# start_node NAME ARGS...: a node on DATA_DIR $tmp/NAME, log $tmp/node_NAME.log;
# sets pid_NAME
start_node() {
  local name=$1; shift
  LLMR_DATA_DIR="$tmp/$name" "$LLMR" node --host 127.0.0.1 --port 0 --heartbeat 0.3 "$@" \
    >"$tmp/node_$name.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  printf -v "pid_$name" '%s' "$pid"
}
# http_port NAME: waits for the node's run/http.port; sets port
http_port() {
  port=
  for _ in $(seq 200); do # 10 s
    port=$(cat "$tmp/$1/run/http.port" 2>/dev/null)
    [[ $port =~ ^[0-9]+$ ]] && return 0
    port=
    sleep 0.05
  done
  abort "node $1 wrote no run/http.port within 10 s"
}
start_node a --router "$router1" --node-key key-one --allow-cpu
start_node b --router "$router2" --node-key key-two
http_port a
base=http://127.0.0.1:$port
node_url=$base

# req METHOD PATH [CURL ARGS...]: sets $code and $body
req() {
  local method=$1 path=$2; shift 2
  code=$(curl -sS --max-time 30 -o "$tmp/body" -w '%{http_code}' -X "$method" "$@" "$base$path" \
         2>"$tmp/curl.err")
  body=$(cat "$tmp/body" 2>/dev/null)
}
# models_field FIELD: the model ids of /v1/models' FIELD ("data" or "not_ready"), one a line
models_field() {
  python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
for m in d.get(sys.argv[2]) or []:
    print(m.get("id") or m.get("name"))' "$tmp/body" "$1" 2>/dev/null
}

# ---- (a) registration and heartbeats ---------------------------------------------------
wait_log "$tmp/r1.log" 'len(reqs("POST", "/v0/nodes", 200)) >= 1' 10 \
  || abort "node a did not register with the fake router within 10 s"
reg=$(logq "$tmp/r1.log" 'json.dumps(reqs("POST", "/v0/nodes", 200)[0][1])')
has_gpu=$(logq "$tmp/r1.log" 'reqs("POST", "/v0/nodes", 200)[0][1]["body"].get("has_gpu")')
check_log "$tmp/r1.log" 'reqs("POST", "/v0/nodes")[0][1]["auth"] == "Bearer key-one"' \
  "the registration carries the node key"
check_log "$tmp/r1.log" \
  'isinstance(reqs("POST", "/v0/nodes", 200)[0][1]["body"].get("name"), str) and len(reqs("POST", "/v0/nodes", 200)[0][1]["body"]["name"]) > 0' \
  "the registration has a name: $reg"
check_log "$tmp/r1.log" "reqs(\"POST\", \"/v0/nodes\", 200)[0][1][\"body\"].get(\"url\") == \"$node_url\"" \
  "the registration's url is the node's HTTP API ($node_url): $reg"
check_log "$tmp/r1.log" 'reqs("POST", "/v0/nodes", 200)[0][1]["body"].get("allow_cpu") is True' \
  "the registration says allow_cpu true: $reg"
check_log "$tmp/r1.log" 'isinstance(reqs("POST", "/v0/nodes", 200)[0][1]["body"].get("version"), str)' \
  "the registration has the node's version: $reg"
gpu_less=
if [[ $has_gpu == False ]]; then
  gpu_less=1
elif [[ -e /dev/nvidia0 || -e /dev/kfd ]]; then
  echo "note: this machine has a GPU (has_gpu $has_gpu): the GPU-less checks are skipped"
else
  fail "the registration says has_gpu $has_gpu on a machine without a GPU: $reg"
fi
wait_log "$tmp/r1.log" 'len(heartbeats()) >= 2' 10 || fail "node a sent no two heartbeats within 10 s"
check_log "$tmp/r1.log" 'all(e["path"] == "/v0/nodes/n-1/heartbeat" for i, e in heartbeats())' \
  "heartbeats go to the node_id the router gave (n-1)"
check_log "$tmp/r1.log" 'all(e["auth"] == "Bearer key-one" for i, e in reqs("POST", "/v0/nodes/.*"))' \
  "heartbeats carry the node key"
check_log "$tmp/r1.log" \
  'all(isinstance(e["body"].get(k), int) for i, e in heartbeats() for k in ("in_flight", "ram_used", "ram_total", "vram_used", "vram_total")) and all(isinstance(e["body"].get("models"), list) for i, e in heartbeats())' \
  "heartbeats have in_flight, ram_used/total, vram_used/total and models"

# ---- (c), (d), (e), (f), (g): the syncs ---------------------------------------------------
wait_log "$tmp/r1.log" \
  'any(model(e, "tiny").get("state") == "ready" and model(e, "ghost").get("state") == "ready" and model(e, "bad").get("state") == "failed" for i, e in heartbeats())' \
  30 || fail "within 30 s no heartbeat said tiny ready, ghost ready and bad failed: last: $(logq "$tmp/r1.log" 'json.dumps(heartbeats()[-1][1]["body"]) if heartbeats() else None')"
kill -0 "$pid_a" 2>/dev/null || abort "node a died during the syncs"

# (c) tiny, every file in place with its digest, then served
for f in config.json model.safetensors tokenizer.json padding.bin; do
  [[ -f "$tmp/a/models/tiny/$f" ]] || { fail "tiny: $f is not in DATA_DIR/models/tiny"; continue; }
  [[ $(sha256sum <"$tmp/a/models/tiny/$f") == $(sha256sum <"$tmp/src_tiny/$f") ]] \
    || fail "tiny: $f has the wrong sha256"
done
(cd "$tmp/src_tiny" && find . -type f | sort) >"$tmp/want_files"
(cd "$tmp/a/models/tiny" && find . -type f ! -name .llmr-manifest.json | sort) >"$tmp/got_files"
cmp -s "$tmp/want_files" "$tmp/got_files" \
  || fail "tiny: the model directory holds other files than the router's: $(diff "$tmp/want_files" "$tmp/got_files")"
[[ -f "$tmp/a/models/tiny/.llmr-manifest.json" ]] || fail "tiny: no .llmr-manifest.json after the sync"
# (i) the node serves its router: /v1 answers 401 without the router's credential
req GET /v1/models
[[ $code == 401 ]] || fail "GET /v1/models without the router's credential: HTTP $code, wanted 401: $body"
req POST /v1/completions -H 'Content-Type: application/json' -d '{"model": "tiny", "prompt": "hi", "max_tokens": 4}'
[[ $code == 401 ]] || fail "a completion that bypasses the router: HTTP $code, wanted 401: $body"
has "$body" "router" "the 401 says the node serves a router"
req GET /v1/models -H "Authorization: Bearer key-one"
[[ $code == 401 ]] || fail "the router's node key is not a credential on the node: HTTP $code, wanted 401"
req GET /v1/models -H "Authorization: Bearer secret-2"
[[ $code == 401 ]] || fail "another node's secret: HTTP $code, wanted 401"
req GET /health
[[ $code == 200 ]] || fail "GET /health needs no credential: HTTP $code"
secret=(-H "Authorization: Bearer secret-1") # the fake router's answer to the first registration
req GET /v1/models "${secret[@]}"
[[ $code == 200 ]] || fail "GET /v1/models: HTTP $code: $body"
grep -qx tiny < <(models_field data) || fail "tiny synced but not in /v1/models data: $body"
req POST /v1/completions "${secret[@]}" -H 'Content-Type: application/json' \
  -d '{"model": "tiny", "prompt": "hi", "max_tokens": 4}'
[[ $code == 200 ]] || fail "POST /v1/completions with tiny: HTTP $code, wanted 200: $body $(cat "$tmp/curl.err")"
has "$body" '"text_completion"' "the completion of tiny is a text_completion"
log_a=$(cat "$tmp/node_a.log")
has "$log_a" "model tiny: synced and verified" "the node logs the sync of tiny"

# (d) the cut model.safetensors was resumed with a Range request
check_log "$tmp/r1.log" \
  'any(e["range"] and re.fullmatch(r"bytes=[1-9][0-9]*-[0-9]*", e["range"]) and e["status"] == 206 for i, e in reqs("GET", "/v0/models/tiny/files/model.safetensors"))' \
  "no Range request with a non-zero start resumed the cut tiny/model.safetensors: $(logq "$tmp/r1.log" '[e["range"] for i, e in reqs("GET", "/v0/models/tiny/files/model.safetensors")]')"
cmp -s "$tmp/src_tiny/model.safetensors" "$tmp/a/models/tiny/model.safetensors" \
  || fail "the resumed tiny/model.safetensors differs from the router's"
check_log "$tmp/r1.log" 'all(e["auth"] == "Bearer key-one" for i, e in reqs("GET", "/v0/models.*"))' \
  "the model list, manifests and files are asked for with the node key"

# (e) progress while syncing, then ready
check_log "$tmp/r1.log" \
  'any(model(e, "tiny").get("state") == "syncing" and isinstance(model(e, "tiny").get("sync"), dict) and model(e, "tiny")["sync"].get("bytes_total", 0) > 0 for i, e in heartbeats())' \
  "no heartbeat showed tiny syncing with a sync object and bytes_total > 0"
check_log "$tmp/r1.log" \
  'all(k in model(e, "tiny")["sync"] for i, e in heartbeats() if model(e, "tiny").get("sync", {}).get("bytes_total", 0) > 0 for k in ("state", "bytes_done", "files_done", "files_total"))' \
  "the sync progress has state, bytes_done, files_done and files_total"
check_log "$tmp/r1.log" \
  'any(model(e, "tiny").get("sync", {}).get("file") == "padding.bin" and 0 < model(e, "tiny")["sync"].get("bytes_done", 0) < model(e, "tiny")["sync"]["bytes_total"] for i, e in heartbeats())' \
  "no heartbeat named padding.bin as the file being fetched, part way"
check_log "$tmp/r1.log" \
  'first([(i, e) for i, e in heartbeats() if model(e, "tiny").get("state") == "ready"]) > last([(i, e) for i, e in heartbeats() if model(e, "tiny").get("state") == "syncing"]) >= 0' \
  "tiny: a heartbeat after the syncing ones should say ready"

# (f) bad: a sha256 mismatch leaves it failed, the file named; the node stays up
check_log "$tmp/r1.log" \
  'any(model(e, "bad").get("state") == "failed" and "model.safetensors" in str(model(e, "bad").get("reason")) for i, e in heartbeats())' \
  "no heartbeat said bad failed with a reason naming model.safetensors: $(logq "$tmp/r1.log" 'json.dumps([model(e, "bad") for i, e in heartbeats()][-1:])')"
check_log "$tmp/r1.log" \
  'any("sha256" in str(model(e, "bad").get("reason")) for i, e in heartbeats())' \
  "the failure reason of bad says the sha256 differs"
req GET /v1/models "${secret[@]}"
grep -qx bad < <(models_field data) && fail "bad failed its sync but /v1/models lists it as ready: $body"
[[ -e "$tmp/a/models/bad/model.safetensors" ]] && fail "the corrupt bad/model.safetensors was put in place"
grep -q "model bad: .*model.safetensors.*sha256" "$tmp/node_a.log" \
  || fail "the node log does not name model.safetensors and the sha256 mismatch of bad"
kill -0 "$pid_a" 2>/dev/null || abort "node a died after a failed sync"
req GET /health
[[ $code == 200 ]] || fail "GET /health after the failed sync: HTTP $code: $body"

# (g) ghost: the phantom optional file skipped, the model ready
req GET /v1/models "${secret[@]}"
grep -qx ghost < <(models_field data) || fail "ghost is not in /v1/models data: $body"
grep "extra/phantom.bin" "$tmp/node_a.log" | grep -qi "skip" \
  || fail "the node log does not say that the optional extra/phantom.bin was skipped"
[[ -e "$tmp/a/models/ghost/extra/phantom.bin" ]] && fail "the skipped phantom file is in place"
[[ -f "$tmp/a/models/ghost/.llmr-manifest.json" ]] || fail "ghost: no .llmr-manifest.json"
check_log "$tmp/r1.log" 'any(e["status"] == 404 for i, e in reqs("GET", "/v0/models/ghost/files/extra/phantom.bin"))' \
  "the node did not ask for the phantom file (404)"

# ---- (b) a node without --allow-cpu ---------------------------------------------------------
if [[ -n $gpu_less ]]; then
  wait_log "$tmp/r2.log" 'len(reqs("POST", "/v0/nodes", 403)) >= 3' 15 \
    || fail "node b did not try to register three times (refused 403 each) within 15 s: $(logq "$tmp/r2.log" '[e["status"] for i, e in reqs("POST", "/v0/nodes")]')"
  check_log "$tmp/r2.log" \
    'all(e["body"].get("has_gpu") is False and e["body"].get("allow_cpu") is False for i, e in reqs("POST", "/v0/nodes"))' \
    "node b registers with has_gpu false and allow_cpu false"
  check_log "$tmp/r2.log" 'len(reqs("POST", "/v0/nodes", 200)) == 0 and len(heartbeats(None)) == 0' \
    "node b was refused, so it must send no heartbeat"
  kill -0 "$pid_b" 2>/dev/null || fail "node b exited after the refusal (it should keep running and retrying)"
  log_b=$(cat "$tmp/node_b.log")
  grep -q "cannot register" <<<"$log_b" || fail "node b does not log that it cannot register"
  grep "cannot register" <<<"$log_b" | grep -q "403" || fail "node b's refusal log line does not give the 403"
  grep "cannot register" <<<"$log_b" | grep -q "allow_cpu" \
    || fail "node b's refusal log line does not give the router's message (no GPU, allow_cpu)"
fi

# ---- (h) the router forgets its nodes: a 404 heartbeat, then a new registration --------------
curl -sS --max-time 5 -X POST "$router1/_control/forget" >/dev/null || fail "POST /_control/forget"
forgot='first(reqs("POST", "/_control/forget"))'
wait_log "$tmp/r1.log" \
  "len([e for i, e in reqs('POST', '/v0/nodes', 200, $forgot) if e['body'].get('url') == '$node_url']) >= 1 and len(heartbeats(200, last(reqs('POST', '/v0/nodes', 200)))) >= 1" 10 \
  || fail "node a did not register again and send a heartbeat within 10 s of the router forgetting it"
check_log "$tmp/r1.log" "len(heartbeats(404, $forgot)) >= 1" \
  "no heartbeat answered 404 after the router forgot the node"
check_log "$tmp/r1.log" "first(heartbeats(404, $forgot)) < first(reqs('POST', '/v0/nodes', 200, $forgot))" \
  "the node registers again after its heartbeat's 404"
check_log "$tmp/r1.log" "len(heartbeats(404, $forgot)) == 1" \
  "after one 404 the node registers at once, no other heartbeat to the forgotten id"
check_log "$tmp/r1.log" 'len(reqs("POST", "/v0/nodes")) == 2' \
  "two registrations in all for node a: $(logq "$tmp/r1.log" '[e["status"] for i, e in reqs("POST", "/v0/nodes")]')"
check_log "$tmp/r1.log" "all(e['path'] == '/v0/nodes/n-2/heartbeat' for i, e in heartbeats(200, first(reqs('POST', '/v0/nodes', 200, $forgot))))" \
  "heartbeats after the new registration go to the new node_id n-2"
has "$(cat "$tmp/node_a.log")" "registering again" "the node logs that it registers again"
# (i) the new registration's secret opens /v1, the old one no more
req GET /v1/models -H "Authorization: Bearer secret-1"
[[ $code == 401 ]] || fail "the secret of the forgotten registration: HTTP $code, wanted 401"
n2=$(logq "$tmp/r1.log" "len(reqs('POST', '/v0/nodes', 200))")
req GET /v1/models -H "Authorization: Bearer secret-$n2"
[[ $code == 200 ]] || fail "the secret of the new registration (secret-$n2): HTTP $code: $body"

# ---- the end: both nodes stop cleanly on SIGTERM ---------------------------------------------
for n in a b; do
  pid_var=pid_$n
  pid=${!pid_var}
  kill -0 "$pid" 2>/dev/null || { fail "node $n is not running at the end"; continue; }
  kill -TERM "$pid"
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$pid" 2>/dev/null && fail "node $n did not stop within 5 s of SIGTERM"
  wait "$pid" 2>/dev/null
done
echo "took $((SECONDS - started)) s"
[[ $failures -gt 0 ]] && dump
finish_checks "node and router"
