#!/usr/bin/env bash
# Keys an operator manages, with real routers on loopback: the key file a first start
# writes (DATA_DIR/admin.key, mode 0600, the printed key); a start that fails on a busy
# port keeps its key in the file and the next start uses it; local commands (`llmr
# list`, `llmr keys`) find the key there with no key given, and say where to put one
# when there is none; `llmr keys create|list|revoke` (the secret shown once and never
# listed, a revoked key gets 401, revoke by id or by name, an ambiguous name refused);
# POST /v0/keys with scopes as an array or a string, an unknown scope a 400 naming it;
# LLMR_ADMIN_KEY set on a later start replaces the admin key (the log says which, the
# old key gets 401, the file holds the new one), set again changes nothing, and a secret
# that is another key's or too short stops the start with the reason.
# Usage: test_keys.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_keys.sh PATH_TO_LLMR}
command -v curl >/dev/null || { echo "curl is missing: run make deps" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-keys-XXXXXX")
pid=
cleanup() { [[ -n $pid ]] && { kill -9 "$pid"; wait "$pid"; } 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
source "$(dirname "$0")/../cli/check_lib.sh"
unset LLMR_ROUTER LLMR_API_KEY LLMR_ADMIN_KEY LLMR_CORS_ORIGINS

# start DATA LOG [ARGS...]: a router in the background on DATA; sets pid, port and
# LLMR_ROUTER (returns 1 when it did not start)
start() {
  local data=$1 log=$2
  shift 2
  LLMR_DATA_DIR=$data "$LLMR" router "$@" >"$log" 2>&1 &
  pid=$!
  port=
  for _ in $(seq 200); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$')
    [[ -n $port ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  [[ -n $port ]] || { fail "the router did not start: $(cat "$log")"; return 1; }
  export LLMR_ROUTER=http://127.0.0.1:$port
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null; pid=; }
# call METHOD PATH [KEY] [DATA]: prints the HTTP status, the body in $tmp/body
call() {
  local args=(-s -o "$tmp/body" -w '%{http_code}' -X "$1" "$LLMR_ROUTER$2")
  [[ -n ${3:-} ]] && args+=(-H "Authorization: Bearer $3")
  [[ -n ${4:-} ]] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
  curl "${args[@]}"
}
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($1)" "$tmp/body"; }

# --- usage
expect 0 "keys --help" -- "$LLMR" keys --help
has "$out" "usage: llmr keys list" "keys --help"
expect 2 "keys without a subcommand" -- "$LLMR" keys
expect 2 "keys create without a name" -- "$LLMR" keys create
expect 2 "keys frobnicate" -- "$LLMR" keys frobnicate

# --- a first start writes the key file
A=$tmp/a
start "$A" "$tmp/a1.log" --port 0 || finish_checks keys
[[ -f $A/admin.key ]] || fail "the first start writes DATA_DIR/admin.key"
[[ $(stat -c %a "$A/admin.key") == 600 ]] || fail "admin.key has mode 600, not $(stat -c %a "$A/admin.key")"
akey=$(cat "$A/admin.key")
has "$(cat "$tmp/a1.log")" "$akey" "the printed admin key is the file's"
has "$(cat "$tmp/a1.log")" "$A/admin.key" "the first start says where the key is kept"
[[ $(call GET /v0/keys "$akey") == 200 ]] || fail "the file's key is the admin key: $(cat "$tmp/body")"
aport=$port

# --- a start that fails on a busy port keeps its key
B=$tmp/b
LLMR_DATA_DIR=$B timeout 20 "$LLMR" router --port "$aport" >"$tmp/b1.log" 2>&1
rc=$?
[[ $rc == 1 ]] || fail "a router on a busy port exits 1, got $rc: $(cat "$tmp/b1.log")"
[[ -f $B/admin.key && $(stat -c %a "$B/admin.key") == 600 ]] || fail "the failed start left its key in admin.key (0600)"
bkey=$(cat "$B/admin.key" 2>/dev/null)
saved=$LLMR_ROUTER apid=$pid
start "$B" "$tmp/b2.log" --port 0
[[ $(grep -c 'admin key of this router' "$tmp/b2.log") == 0 ]] || fail "the start after the failed one made a new key"
has "$(cat "$tmp/b2.log")" "kept in $B/admin.key" "the start after the failed one uses the file's key"
[[ $(call GET /v0/keys "$bkey") == 200 ]] || fail "the failed start's key works: $(cat "$tmp/body")"
stop
pid=$apid LLMR_ROUTER=$saved

# --- local commands find the key in the data directory's key file
export LLMR_DATA_DIR=$A
expect 0 "list with no key given, on this machine" -- "$LLMR" list
has "$out" "no models registered" "list with the key file's key"
expect 0 "keys list with no key given" -- "$LLMR" keys list
has "$out" "bootstrap admin" "keys list shows the admin key"
expect 1 "list with no key file" -- env LLMR_DATA_DIR="$tmp/none" "$LLMR" list
has "$err" "wants a key (401)" "list with no key file says a key is needed"
has "$err" "admin.key" "list with no key file says where the key is kept"
# The key file's key goes only to this machine as libcurl reads the URL: a URL whose
# user info looks like a loopback address (http://127.0.0.1@HOST/) is not this machine's,
# and any user info means no key from the file.  A listener records what it was sent.
python3 - "$tmp/heard" >"$tmp/listener.port" <<'PY' &
import http.server, sys
out = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(out, "a") as f:
            f.write(f"{self.path} auth={self.headers.get('Authorization')}\n")
        self.send_response(401); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
print(srv.server_address[1], flush=True)
srv.serve_forever()
PY
listener=$!
for _ in $(seq 50); do [[ -s $tmp/listener.port ]] && break; sleep 0.1; done
lport=$(cat "$tmp/listener.port")
expect 1 "list at a URL with user info" -- env LLMR_ROUTER="http://127.0.0.1@localhost:$lport" "$LLMR" list
grep -q "^/v0/models" "$tmp/heard" || fail "the listener was not asked: $(cat "$tmp/heard" 2>/dev/null)"
! grep -q "auth=Bearer" "$tmp/heard" || fail "the key file's key went to a URL with user info: $(cat "$tmp/heard")"
kill "$listener" 2>/dev/null
expect 1 "list with a wrong key given" -- "$LLMR" list --api-key llmr-wrong-key-0123456789
has "$err" "refused the key from --api-key" "a key given beats the key file"

# --- llmr keys create, list, revoke
expect 0 "keys create" -- "$LLMR" keys create ci --scopes inference
ci=$(sed -n 's/^secret: *//p' <<<"$out")
ci_id=$(sed -n 's/^id: *//p' <<<"$out")
[[ $ci == llmr-* && $ci_id == key_* ]] || fail "keys create prints the id and the secret: $out"
has "$err" "shown this once" "keys create says the secret is shown once"
[[ $(call GET /v1/models "$ci") == 200 ]] || fail "the new inference key works on /v1"
[[ $(call GET /v0/keys "$ci") == 403 ]] || fail "the new inference key is not an admin key"
expect 0 "keys list" -- "$LLMR" keys list
grep -Eq "^$ci_id +ci +inference +[0-9-]+ [0-9:]+ +[0-9-]+ [0-9:]+" <<<"$out" ||
  fail "keys list shows ci with its scopes, created and last used: $out"
has "$out" "LAST USED" "keys list has a last-used column"
[[ $out != *"$ci"* && $out != *"$akey"* ]] || fail "keys list shows no secret"
expect 0 "keys list --json" -- "$LLMR" keys list --json
[[ $out != *secret* ]] || fail "keys list --json has no secret: $out"
expect 0 "a second key named ci" -- "$LLMR" keys create ci --scopes inference,node --json
ci2=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["secret"])' "$out")
ci2_id=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["id"])' "$out")
has "$out" '"scopes":"inference,node"' "keys create --json gives the scopes"
expect 1 "revoke an ambiguous name" -- "$LLMR" keys revoke ci
has "$err" "2 live keys are named \"ci\"" "an ambiguous name is refused"
has "$err" "$ci_id" "the refusal lists the ids"
expect 0 "revoke by id" -- "$LLMR" keys revoke "$ci_id"
has "$out" "revoked key $ci_id" "revoke by id"
[[ $(call GET /v1/models "$ci") == 401 ]] || fail "a revoked key gets 401"
[[ $(call GET /v1/models "$ci2") == 200 ]] || fail "the other key still works"
expect 0 "revoke by name" -- "$LLMR" keys revoke ci
has "$out" "revoked key $ci2_id" "revoke by name takes the one live key of that name"
[[ $(call GET /v1/models "$ci2") == 401 ]] || fail "the key revoked by name gets 401"
expect 1 "revoke of no such key" -- "$LLMR" keys revoke nosuch
has "$err" "no live key" "revoke of no such key says so"
expect 0 "keys list after the revokes" -- "$LLMR" keys list
[[ $out != *" ci "* ]] || fail "keys list leaves revoked keys out: $out"
expect 0 "keys list --all" -- "$LLMR" keys list --all
[[ $(grep -c ' revoked$' <<<"$out") == 2 ]] || fail "keys list --all shows the two revoked keys: $out"
expect 1 "keys create with an unknown scope" -- "$LLMR" keys create x --scopes inference,root
has "$err" 'Unknown scope "root"' "the refusal names the unknown scope"
expect 1 "keys create with a non-admin key" -- "$LLMR" keys create x --api-key "$ci2"
has "$err" "401" "a revoked key cannot create keys"

# --- POST /v0/keys: scopes as an array or a string
[[ $(call POST /v0/keys "$akey" '{"name": "arr", "scopes": ["inference", "node"]}') == 201 ]] ||
  fail "scopes as an array: $(cat "$tmp/body")"
[[ $(json 'd["scopes"]') == inference,node ]] || fail "the array's scopes: $(cat "$tmp/body")"
arr=$(json 'd["secret"]')
[[ $(call GET /v1/models "$arr") == 200 ]] || fail "the array-scoped key works"
[[ $(call POST /v0/keys "$akey" '{"name": "str", "scopes": "inference"}') == 201 ]] || fail "scopes as a string"
[[ $(call POST /v0/keys "$akey" '{"scopes": ["inference", "root"]}') == 400 ]] || fail "an unknown scope in an array: 400"
[[ $(json 'd["error"]["code"]') == invalid_scope ]] || fail "an unknown scope's code: $(cat "$tmp/body")"
has "$(cat "$tmp/body")" '\"root\"' "the 400 names the unknown scope"
[[ $(call POST /v0/keys "$akey" '{"scopes": "inference,sudo"}') == 400 ]] || fail "an unknown scope in a string: 400"
has "$(cat "$tmp/body")" '\"sudo\"' "the 400 names the unknown scope of a string"
[[ $(call POST /v0/keys "$akey" '{"scopes": []}') == 400 ]] || fail "no scopes: 400"
[[ $(call POST /v0/keys "$akey" '{"scopes": [1]}') == 400 ]] || fail "a scope that is not a string: 400"
[[ $(call POST /v0/keys "$akey" '{"name": 5, "scopes": "inference"}') == 400 ]] || fail "a name that is not a string: 400"
[[ $(call POST /v0/keys "$akey" '{"name": "none"}') == 400 ]] || fail "no scopes at all: 400"
stop

# --- LLMR_ADMIN_KEY on a later start replaces the admin key
new=llmr-test-new-admin-key-0123456789
LLMR_ADMIN_KEY=$new start "$A" "$tmp/a2.log" --port 0
grep -Eq "admin key key_[A-Za-z0-9]+ created from LLMR_ADMIN_KEY; it replaces key_[A-Za-z0-9]+ \(revoked\)" "$tmp/a2.log" ||
  fail "the log says LLMR_ADMIN_KEY replaced the admin key: $(cat "$tmp/a2.log")"
[[ $(call GET /v0/keys "$new") == 200 ]] || fail "LLMR_ADMIN_KEY's key is the admin key"
[[ $(call GET /v0/keys "$akey") == 401 ]] || fail "the replaced admin key gets 401"
[[ $(cat "$A/admin.key") == "$new" ]] || fail "the key file holds the new admin key"
[[ $(stat -c %a "$A/admin.key") == 600 ]] || fail "the rewritten admin.key has mode 600"
[[ $(call GET /v1/models "$arr") == 200 ]] || fail "other keys live on"
expect 0 "list with the replaced key file" -- "$LLMR" list
stop
LLMR_ADMIN_KEY=$new start "$A" "$tmp/a3.log" --port 0
has "$(cat "$tmp/a3.log")" "(LLMR_ADMIN_KEY's)" "the same LLMR_ADMIN_KEY again is the admin key as it is"
[[ $(grep -c 'replaces\|created from' "$tmp/a3.log") == 0 ]] || fail "the same LLMR_ADMIN_KEY again changes nothing"
stop
start "$A" "$tmp/a4.log" --port 0
[[ $(call GET /v0/keys "$new") == 200 ]] || fail "without LLMR_ADMIN_KEY the admin key stays"
[[ $(grep -c 'admin key of this router' "$tmp/a4.log") == 0 ]] || fail "a start without LLMR_ADMIN_KEY made a new key"
stop
LLMR_DATA_DIR=$A LLMR_ADMIN_KEY=$arr timeout 20 "$LLMR" router --port 0 >"$tmp/a5.log" 2>&1
rc=$?
[[ $rc == 1 ]] || fail "LLMR_ADMIN_KEY that is a non-admin key's secret stops the start (exit $rc)"
has "$(cat "$tmp/a5.log")" "not admin" "the start says the secret is a key without the admin scope"
LLMR_DATA_DIR=$A LLMR_ADMIN_KEY=short timeout 20 "$LLMR" router --port 0 >"$tmp/a6.log" 2>&1
rc=$?
[[ $rc == 1 ]] || fail "a too short LLMR_ADMIN_KEY stops the start (exit $rc)"
has "$(cat "$tmp/a6.log")" "LLMR_ADMIN_KEY cannot become the admin key" "the start says why LLMR_ADMIN_KEY was not taken"
[[ $(cat "$A/admin.key") == "$new" ]] || fail "a refused LLMR_ADMIN_KEY leaves the key file alone"

finish_checks keys
