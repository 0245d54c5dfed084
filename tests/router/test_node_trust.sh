#!/usr/bin/env bash
# Who a node is, end to end on loopback (docs/security.md): a real router and node,
# and a fake node (a Python server that logs every request it gets) played by someone
# who stole a node key.  Checks: the router's database and data directory are private
# (0600, 0700); node ids are random; a node's URL must be the address it registers
# from (no 169.254.169.254, no other host: the router would POST users' chats there);
# a stolen key's second node is refused while the key's node is online, and the fake
# node never gets a user request; a heartbeat from another key for a node changes
# nothing (404, the node still ready and serving); a client that bypasses the router
# gets 401 from the node, the router's chats reach it; a registration over 64 KiB is
# refused (413), a key registering too often is refused (429); a silent node is
# removed after --node-expire.
# Usage: test_node_trust.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_node_trust.sh PATH_TO_LLMR}
command -v curl >/dev/null || { echo "curl is missing: run make deps" >&2; exit 1; }
command -v python3 >/dev/null || { echo "SKIP: python3 is needed for the fake node"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-trust-XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
source "$(dirname "$0")/../cli/check_lib.sh"

admin=llmr-test-admin-key-trust-0123456789
call() { # METHOD PATH [KEY] [DATA]: prints the HTTP status, the body in $tmp/body
  local method=$1 path=$2 key=${3:-} data=${4:-}
  local args=(-s -o "$tmp/body" -w '%{http_code}' -X "$method" "http://127.0.0.1:$rport$path")
  [[ -n $key ]] && args+=(-H "Authorization: Bearer $key")
  [[ -n $data ]] && args+=(-H 'Content-Type: application/json' --data-binary "$data")
  curl "${args[@]}"
}
field() { python3 -c 'import json,sys; print(eval("json.load(open(sys.argv[1]))" + sys.argv[2]))' "$tmp/body" "$1" 2>/dev/null; }

# --- the fake node: logs each request's method and path, answers every one 200
cat >"$tmp/fake_node.py" <<'PY'
import http.server, json, sys
log = open(sys.argv[1], "a", buffering=1)
class H(http.server.BaseHTTPRequestHandler):
    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        log.write("%s %s\n" % (self.command, self.path))
        body = json.dumps({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "CAPTURED"}, "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = answer
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
python3 "$tmp/fake_node.py" "$tmp/fake.log" >"$tmp/fake.port" &
pids+=($!)
: >"$tmp/fake.log"
for _ in $(seq 100); do [[ -s $tmp/fake.port ]] && break; sleep 0.05; done
fport=$(head -1 "$tmp/fake.port")

# --- the router: nodes offline after 1 s without a heartbeat, removed after 3 s
LLMR_DATA_DIR="$tmp/router" LLMR_ADMIN_KEY=$admin "$LLMR" router --port 0 --node-offline 1 --node-expire 3 \
  >"$tmp/router.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do grep -q "listening on" "$tmp/router.log" && break; sleep 0.05; done
rport=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$tmp/router.log" | grep -o '[0-9]*$')
[[ -n $rport ]] || { cat "$tmp/router.log"; fail "the router did not start"; finish_checks "node trust"; }

# --- the router's files are its own
[[ $(stat -c %a "$tmp/router/router.db") == 600 ]] || fail "router.db is mode $(stat -c %a "$tmp/router/router.db"), wanted 600"
[[ $(stat -c %a "$tmp/router") == 700 ]] || fail "the data directory is mode $(stat -c %a "$tmp/router"), wanted 700"
expect 1 "a bad --node-url-allow" -- "$LLMR" router --port 0 --node-url-allow 10.0.0.0/99
expect 2 "a bad --node-expire" -- "$LLMR" router --port 0 --node-expire soon

# --- keys: k1 for the real node (stolen later), k2 for another node
[[ $(call POST /v0/keys "$admin" '{"name": "node one", "scopes": "node"}') == 201 ]] || fail "key one"
k1=$(field '["secret"]')
[[ $(call POST /v0/keys "$admin" '{"name": "node two", "scopes": "node"}') == 201 ]] || fail "key two"
k2=$(field '["secret"]')
[[ $(call POST /v0/keys "$admin" '{"name": "user", "scopes": "inference"}') == 201 ]] || fail "an inference key"
user=$(field '["secret"]')

# --- a node's URL is the address it registers from
reg() { # KEY URL [NAME]
  call POST /v0/nodes "$1" "{\"name\": \"${3:-fake}\", \"url\": \"$2\", \"has_gpu\": true}"
}
[[ $(reg "$k2" http://169.254.169.254/latest) == 403 ]] || fail "a metadata address as a node URL: 403, got $(cat "$tmp/body")"
has "$(cat "$tmp/body")" node_url_refused "the 403 says the URL is refused"
[[ $(reg "$k2" http://192.0.2.7:8081) == 403 ]] || fail "another host's URL: 403"
[[ $(reg "$k2" "http://user@127.0.0.1:$fport") == 403 ]] || fail "a URL with a user name: 403"
[[ $(reg "$k2" "http://127.0.0.1:$fport") == 200 ]] || fail "the fake node's own URL: 200, got $(cat "$tmp/body")"
id2=$(field '["node_id"]')
[[ $id2 =~ ^n-[0-9a-f]{16}$ ]] || fail "a node id is n- and 16 random hex digits, got $id2"
secret2=$(field '["node_secret"]')
[[ $secret2 =~ ^[0-9a-f]{64}$ ]] || fail "the registration answer has a 64-hex node_secret, got $secret2"
[[ $(reg "$k2" "http://127.0.0.1:$fport") == 200 ]] || fail "the same key and URL again (a restart): 200"
id2b=$(field '["node_id"]')
[[ $id2b != "$id2" && $id2b =~ ^n-[0-9a-f]{16}$ ]] || fail "a new registration gets a new random id: $id2 then $id2b"
[[ $(call POST "/v0/nodes/$id2/heartbeat" "$k2" '{"models": []}') == 404 ]] || fail "the replaced id is gone"

# --- bounds: the size of a registration, how often a key registers
python3 -c 'import json; print(json.dumps({"url": "http://127.0.0.1:1", "has_gpu": True, "pad": "x" * 70000}))' >"$tmp/big.json"
code=$(curl -s -o "$tmp/body" -w '%{http_code}' -H "Authorization: Bearer $k2" -H 'Content-Type: application/json' \
  --data-binary @"$tmp/big.json" "http://127.0.0.1:$rport/v0/nodes")
[[ $code == 413 ]] || fail "a 70 KB registration: 413, got $code"
n=0 code=
for i in $(seq 14); do
  code=$(reg "$k2" "http://127.0.0.1:$fport")
  [[ $code == 200 ]] && n=$((n + 1))
  [[ $code == 429 ]] && break
done
[[ $code == 429 ]] || fail "a key registering 16 times in a minute is refused (429), got $code"
[[ $n -ge 8 ]] || fail "the first registrations of the minute pass ($n did)"

# --- a silent node is removed (k2's fake node never sent a heartbeat)
gone=
for _ in $(seq 60); do
  [[ $(call GET /v0/nodes "$admin") == 200 ]] || break
  [[ $(field '["nodes"].__len__()') == 0 ]] && { gone=1; break; }
  sleep 0.1
done
[[ -n $gone ]] || fail "the silent node is removed after --node-expire: $(head -c 300 "$tmp/body")"
grep -q "removed: no heartbeat" "$tmp/router.log" || fail "the router logs the removal"

# --- the real node with k1, and a model ready on it
"$LLMR" model synth --preset loopback --out "$tmp/src/loop" >/dev/null || fail "synth"
[[ $(call POST /v0/models "$admin" "{\"path\": \"$tmp/src/loop\", \"format\": \"safetensors\"}") == 201 ]] ||
  fail "register loop: $(cat "$tmp/body")"
LLMR_DATA_DIR="$tmp/node" LLMR_PORT=0 "$LLMR" node --router "http://127.0.0.1:$rport" --node-key "$k1" \
  --allow-cpu --heartbeat 0.2 >"$tmp/node.log" 2>&1 &
pids+=($!)
chat='{"model": "loop", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}'
ready=
for _ in $(seq 200); do
  [[ $(call POST /v1/chat/completions "$user" "$chat") == 200 ]] && { ready=1; break; }
  sleep 0.1
done
[[ -n $ready ]] || fail "loop never answered through the router: $(cat "$tmp/body")"
call GET /v0/nodes "$admin" >/dev/null
id1=$(field '["nodes"][0]["id"]')
nport=$(cat "$tmp/node/run/http.port")

# --- the stolen key: another node is refused while k1's is online; chats never reach it
[[ $(reg "$k1" "http://127.0.0.1:$fport") == 409 ]] || fail "a second node for k1 while its node is online: 409, got $(cat "$tmp/body")"
has "$(cat "$tmp/body")" node_key_in_use "the 409 says the key holds a node"
# had it been let in, the thief's node would now say it has loop ready
fid=$(field '["node_id"]')
[[ -n $fid && $fid != None ]] &&
  call POST "/v0/nodes/$fid/heartbeat" "$k1" '{"in_flight": 0, "models": [{"name": "loop", "state": "ready"}]}' >/dev/null
[[ $(reg "$k1" "http://192.0.2.7:$fport") == 403 ]] || fail "k1 with another host's URL: 403"
# a spoofed heartbeat from k2: the node stays as it was (ready, online)
[[ $(call POST "/v0/nodes/$id1/heartbeat" "$k2" '{"in_flight": 0, "models": [{"name": "loop", "state": "failed", "reason": "spoofed"}]}') == 404 ]] ||
  fail "a heartbeat for another key's node: 404, got $(cat "$tmp/body")"
[[ $(call GET /v0/models/loop "$admin") == 200 ]] || fail "get loop"
has "$(cat "$tmp/body")" '"ready":true' "loop stays ready after the spoofed heartbeat"
[[ $(cat "$tmp/body") == *spoofed* ]] && fail "the spoofed heartbeat's reason reached the router"
ok=0
for i in $(seq 10); do
  code=$(call POST /v1/chat/completions "$user" "$chat")
  [[ $code == 200 && $(cat "$tmp/body") != *CAPTURED* ]] && ok=$((ok + 1))
done
[[ $ok == 10 ]] || fail "10 of 10 chats answered by the real node after the attack, got $ok"
[[ -s $tmp/fake.log ]] && fail "the fake node got requests: $(head -5 "$tmp/fake.log")"

# --- a node with a key of its own that claims loop ready but does not hold its files:
# challenged, it cannot answer, and gets no request
[[ $(call POST /v0/keys "$admin" '{"name": "node four", "scopes": "node"}') == 201 ]] || fail "key four"
k4=$(field '["secret"]')
[[ $(reg "$k4" "http://127.0.0.1:$fport" liar) == 200 ]] || fail "the liar registers: $(cat "$tmp/body")"
id4=$(field '["node_id"]')
liar_beat() { # [PROOFS]
  call POST "/v0/nodes/$id4/heartbeat" "$k4" "{\"in_flight\": 0, \"models\": [{\"name\": \"loop\", \"state\": \"ready\"}]${1:+, \"proofs\": $1}}"
}
[[ $(liar_beat) == 200 ]] || fail "the liar's heartbeat: $(cat "$tmp/body")"
[[ $(field '["challenges"][0]["model"]') == loop ]] || fail "the heartbeat answer challenges the claim: $(cat "$tmp/body")"
nonce=$(field '["challenges"][0]["nonce"]')
[[ $(liar_beat "[{\"model\": \"loop\", \"nonce\": \"$nonce\", \"sha256\": \"$(printf '0%.0s' $(seq 64))\"}]") == 200 ]] ||
  fail "the liar's wrong proof"
grep -q "failed the proof for model loop" "$tmp/router.log" || fail "the router logs the failed proof"
ok=0
for i in $(seq 10); do
  liar_beat >/dev/null # online, still claiming loop ready
  code=$(call POST /v1/chat/completions "$user" "$chat")
  [[ $code == 200 && $(cat "$tmp/body") != *CAPTURED* ]] && ok=$((ok + 1))
done
[[ $ok == 10 ]] || fail "10 of 10 chats answered by the real node, none by the node that failed its proof, got $ok"
[[ -s $tmp/fake.log ]] && fail "the node that failed its proof got requests: $(head -5 "$tmp/fake.log")"
call GET /v0/nodes "$admin" >/dev/null
grep -q "proved it holds model loop" "$tmp/router.log" || fail "the real node proved it holds loop"

# --- the node answers /v1 only to its router
code=$(curl -s -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$chat" \
  "http://127.0.0.1:$nport/v1/chat/completions")
[[ $code == 401 ]] || fail "a chat that bypasses the router: 401 from the node, got $code"
for key in "$k1" "$user" "$admin"; do
  code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $key" "http://127.0.0.1:$nport/v1/models")
  [[ $code == 401 ]] || fail "the node refuses a router key as its credential (401), got $code"
done

# --- the store keeps only the nodes the router knows: the replaced, expired and removed
# ones are gone from router.db
rows() { python3 -c 'import sqlite3,sys; print(" ".join(r[0] for r in sqlite3.connect(sys.argv[1]).execute("select id from nodes order by id")))' "$tmp/router/router.db" 2>&1; }
want=$(printf '%s\n' "$id1" "$id4" | sort | tr '\n' ' ')
[[ "$(rows) " == "$want" ]] || fail "router.db holds the two nodes the router knows ($want), got: $(rows)"
[[ $(call DELETE "/v0/nodes/$id1" "$admin") == 200 ]] || fail "remove the node"
# (the node, still running, registers again at its next heartbeat, under a new id)
[[ $(rows) != *"$id1"* ]] || fail "a removed node is gone from router.db, got: $(rows)"

# --- a node bound to every address registers the address it reaches the router from
[[ $(call POST /v0/keys "$admin" '{"name": "node three", "scopes": "node"}') == 201 ]] || fail "key three"
k3=$(field '["secret"]')
LLMR_DATA_DIR="$tmp/node3" "$LLMR" node --host 0.0.0.0 --port 0 --router "http://127.0.0.1:$rport" --node-key "$k3" \
  --allow-cpu --node-name three >"$tmp/node3.log" 2>&1 &
pids+=($!)
url3=
for _ in $(seq 100); do
  call GET /v0/nodes "$admin" >/dev/null
  url3=$(python3 -c 'import json,sys; print(" ".join(n["url"] for n in json.load(open(sys.argv[1]))["nodes"] if n["name"] == "three"))' "$tmp/body" 2>/dev/null)
  [[ -n $url3 ]] && break
  sleep 0.1
done
[[ $url3 =~ ^http://127\.0\.0\.1:[0-9]+$ ]] || fail "a node on 0.0.0.0 registers http://127.0.0.1:PORT, got \"$url3\": $(tail -3 "$tmp/node3.log")"

[[ $failures -gt 0 ]] && { echo "--- router log"; tail -30 "$tmp/router.log"; echo "--- node log"; tail -20 "$tmp/node.log"; }
finish_checks "node trust"
