#!/usr/bin/env bash
# The router end to end with real processes on loopback: a router, a node that
# registers with it, a loopback model registered from a local directory, synced by the
# node and served through the router (plain and streamed); registration errors (a
# missing tokenizer.json named, a duplicate 409, a template that does not compile, a
# link out of the directory or to nothing named by its path in the directory and with
# no other path of the machine, which goes to the log);
# chat templates kept at registration and rendered by the router (the render endpoint,
# a chat whose prompt is the router's render); a shard that goes missing after
# registration (the model never becomes ready, the router names the shard); keys and
# scopes (401, 403), absurd names and traversal (400), a body over the limit (413).
# Usage: test_router_e2e.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_router_e2e.sh PATH_TO_LLMR}
command -v curl >/dev/null || { echo "curl is missing: run make deps" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-router-XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
source "$(dirname "$0")/../cli/check_lib.sh"

admin=llmr-test-admin-key-0123456789
# status BODY-FILE METHOD PATH [KEY] [DATA]: prints the HTTP status, the body in $tmp/body
call() {
  local method=$1 path=$2 key=${3:-} data=${4:-}
  local args=(-s -o "$tmp/body" -w '%{http_code}' -X "$method" "http://127.0.0.1:$rport$path")
  [[ -n $key ]] && args+=(-H "Authorization: Bearer $key")
  [[ -n $data ]] && args+=(-H 'Content-Type: application/json' --data-binary "$data")
  curl "${args[@]}"
}
wait_port() { # FILE: the port a process wrote
  for _ in $(seq 200); do [[ -s $1 ]] && { cat "$1"; return 0; }; sleep 0.05; done
  return 1
}

# --- the router
LLMR_DATA_DIR="$tmp/router" LLMR_ADMIN_KEY=$admin "$LLMR" router --port 0 --responses-retention 1 >"$tmp/router.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do grep -q "listening on" "$tmp/router.log" && break; sleep 0.05; done
rport=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$tmp/router.log" | grep -o '[0-9]*$')
[[ -n $rport ]] || { cat "$tmp/router.log"; fail "the router did not start"; finish_checks router; }

# --- keys and scopes
[[ $(call GET /v0/models) == 401 ]] || fail "no key: 401"
[[ $(call GET /v0/models llmr-wrong-key-xxxxxxxx) == 401 ]] || fail "a wrong key: 401"
[[ $(call POST /v0/keys "$admin" '{"name": "n", "scopes": "node"}') == 201 ]] || fail "create a node key: $(cat "$tmp/body")"
nodekey=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret"])' "$tmp/body")
[[ $(call POST /v0/keys "$admin" '{"name": "i", "scopes": "inference"}') == 201 ]] || fail "create an inference key"
infkey=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret"])' "$tmp/body")
[[ $(call POST /v0/models "$infkey" '{"path": "/x", "format": "safetensors"}') == 403 ]] || fail "wrong scope: 403"
[[ $(call POST /v0/keys "$admin" '{"scopes": "root"}') == 400 ]] || fail "an unknown scope: 400"

# --- registration
"$LLMR" model synth --preset loopback --out "$tmp/src/loop" >/dev/null || fail "synth"
cp -r "$tmp/src/loop" "$tmp/src/notok" && rm "$tmp/src/notok/tokenizer.json"
[[ $(call POST /v0/models "$admin" "{\"path\": \"$tmp/src/notok\", \"format\": \"safetensors\"}") == 400 ]] ||
  fail "a missing tokenizer.json: 400"
has "$(cat "$tmp/body")" "tokenizer.json" "the 400 names tokenizer.json"
[[ $(call POST /v0/models "$admin" "{\"path\": \"$tmp/src/loop\", \"format\": \"safetensors\", \"name\": \"../etc\"}") == 400 ]] ||
  fail "an absurd name: 400"
[[ $(call POST /v0/models "$admin" "{\"path\": \"$tmp/src/loop\", \"format\": \"safetensors\"}") == 201 ]] ||
  fail "register: $(cat "$tmp/body")"
[[ $(call POST /v0/models "$admin" "{\"path\": \"$tmp/src/loop\", \"format\": \"safetensors\"}") == 409 ]] ||
  fail "a duplicate: 409"
# a refused directory's errors name its files by their path in it, and say what is
# wrong, but name no other file of this machine (where a link leads goes to the log)
mkdir -p "$tmp/elsewhere" && printf 'not for clients\n' >"$tmp/elsewhere/shadow"
cp -r "$tmp/src/loop" "$tmp/src/linkout" && ln -s "$tmp/elsewhere/shadow" "$tmp/src/linkout/notes.txt"
[[ $(call POST /v0/models "$admin" "{\"path\": \"$tmp/src/linkout\", \"format\": \"safetensors\"}") == 400 ]] ||
  fail "a link out of the directory: 400, got $(cat "$tmp/body")"
has "$(cat "$tmp/body")" "notes.txt is a symbolic link that leaves the directory" "a link out is named"
[[ $(cat "$tmp/body") != *"$tmp"* ]] || fail "a link out: the answer names paths of the machine: $(cat "$tmp/body")"
grep -q "notes.txt: refused: a symbolic link out of the directory, to $(cd "$tmp/elsewhere" && pwd -P)/shadow" "$tmp/router.log" ||
  fail "a link out: the router's log names where it leads"
rm "$tmp/src/linkout/notes.txt" && mkdir -p "$tmp/src/linkout/sub" && ln -s missing.json "$tmp/src/linkout/sub/gone.json"
[[ $(call POST /v0/models "$admin" "{\"path\": \"$tmp/src/linkout\", \"format\": \"safetensors\"}") == 400 ]] ||
  fail "a link to nothing: 400, got $(cat "$tmp/body")"
has "$(cat "$tmp/body")" "sub/gone.json is a symbolic link to nothing" "a link to nothing is named"
[[ $(cat "$tmp/body") != *"$tmp"* ]] || fail "a link to nothing: the answer names paths of the machine: $(cat "$tmp/body")"
# chat templates: kept at registration, rendered by the router
[[ $(call GET /v0/models/loop "$admin") == 200 ]] || fail "get loop"
has "$(cat "$tmp/body")" '"chat_template_origin":"default"' "loop (no template of its own) renders with the default"
[[ $(call POST /v0/models "$admin" "{\"path\": \"$tmp/src/loop\", \"format\": \"safetensors\", \"name\": \"loopq\", \"chat_template\": \"{{ 'Q' }}\"}") == 201 ]] ||
  fail "register with a template: $(cat "$tmp/body")"
has "$(cat "$tmp/body")" '"chat_template_origin":"registration"' "the registration's template is kept"
[[ $(call POST /v0/models "$admin" "{\"path\": \"$tmp/src/loop\", \"format\": \"safetensors\", \"name\": \"loopbad\", \"chat_template\": \"{% for %}\"}") == 400 ]] ||
  fail "a template that does not compile: 400"
has "$(cat "$tmp/body")" "does not compile" "the 400 says the template does not compile"
[[ $(call GET /v0/models/loopbad "$admin") == 404 ]] || fail "the refused registration left nothing"
# A template given at registration is rendered by the router, which must know the special
# tokens to keep request text as text: a gguf model without tokenizer.json is refused
# (it would be rendered unguarded), with it accepted.
mkdir -p "$tmp/src/ggufnotok"
head -c 2000 /dev/urandom >"$tmp/src/ggufnotok/model.gguf"
[[ $(call POST /v0/models "$admin" "{\"path\": \"$tmp/src/ggufnotok\", \"format\": \"gguf\", \"name\": \"gnotok\", \"chat_template\": \"{{ 'Q' }}\"}") == 400 ]] ||
  fail "a registration template without special tokens: 400 ($(cat "$tmp/body"))"
has "$(cat "$tmp/body")" "needs the model's special tokens" "the 400 says why"
cp -r "$tmp/src/ggufnotok" "$tmp/src/gguftok" && cp "$tmp/src/loop/tokenizer.json" "$tmp/src/gguftok/"
[[ $(call POST /v0/models "$admin" "{\"path\": \"$tmp/src/gguftok\", \"format\": \"gguf\", \"name\": \"gtok\", \"chat_template\": \"{{ 'Q' }}\"}") == 201 ]] ||
  fail "a registration template with tokenizer.json beside a gguf: 201 ($(cat "$tmp/body"))"
[[ $(call POST /v0/models "$admin" "{\"path\": \"$tmp/src/loop\", \"format\": \"safetensors\", \"name\": \"loopraise\", \"chat_template\": \"{{ raise_exception('only user turns here') }}\"}") == 201 ]] ||
  fail "register a raising template: $(cat "$tmp/body")"
[[ $(call POST /v0/models/loop/render "$infkey" '{"messages": [{"role": "user", "content": "hi"}]}') == 200 ]] ||
  fail "render loop: $(cat "$tmp/body")"
has "$(cat "$tmp/body")" '<|im_start|>user\nhi<|im_end|>' "the default template renders ChatML"
[[ $(call POST /v0/models/loopq/render "$infkey" '{"messages": [{"role": "user", "content": "hi"}]}') == 200 ]] ||
  fail "render loopq"
has "$(cat "$tmp/body")" '"prompt":"Q"' "the registration's template renders"
[[ $(call POST /v0/models/loopraise/render "$infkey" '{"messages": [{"role": "user", "content": "hi"}]}') == 400 ]] ||
  fail "a raising template: 400"
has "$(cat "$tmp/body")" "only user turns here" "the template's own message comes back"
[[ $(call POST /v0/models/loop/render "$infkey" '{"messages": "hi"}') == 400 ]] || fail "render a bad request: 400"
[[ $(call POST /v0/models/loop/render "$nodekey" '{"messages": []}') == 403 ]] || fail "render needs inference scope"

[[ $(call GET /v0/models/loop/files/../../etc/passwd "$nodekey") == 404 ]] ||
  [[ $(call GET /v0/models/loop/files/..%2F..%2Fetc%2Fpasswd "$nodekey") != 200 ]] ||
  fail "path traversal is not served"
[[ $(call GET '/v0/models/a%20b' "$admin") == 400 ]] || fail "an absurd name in a path: 400"
head -c $((9 << 20)) /dev/zero | tr '\0' 'a' >"$tmp/big"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $admin" \
  -H 'Content-Type: application/json' --data-binary @"$tmp/big" "http://127.0.0.1:$rport/v0/models")
[[ $code == 413 ]] || fail "a body over the limit: 413, got $code"

# a file swapped for a link to a secret after registration is not served (it is no
# longer what the manifest says)
cp -r "$tmp/src/loop" "$tmp/src/swap"
[[ $(call POST /v0/models "$admin" "{\"path\": \"$tmp/src/swap\", \"format\": \"safetensors\"}") == 201 ]] ||
  fail "register swap: $(cat "$tmp/body")"
[[ $(call GET /v0/models/swap/files/config.json "$nodekey") == 200 ]] || fail "swap's config.json is served"
printf 'TOPSECRET %s' "$(head -c 200 /dev/urandom | base64 -w0)" >"$tmp/secret"
rm "$tmp/src/swap/config.json" && ln -s "$tmp/secret" "$tmp/src/swap/config.json"
[[ $(call GET /v0/models/swap/files/config.json "$nodekey") == 409 ]] ||
  fail "a file swapped for a link after registration: 409, got $(head -c 200 "$tmp/body")"
! grep -q TOPSECRET "$tmp/body" || fail "the secret was served"
has "$(cat "$tmp/body")" "changed on disk" "the 409 says the file changed"

# a sharded-looking model whose weights go missing after registration
cp -r "$tmp/src/loop" "$tmp/src/gone"
[[ $(call POST /v0/models "$admin" "{\"path\": \"$tmp/src/gone\", \"format\": \"safetensors\"}") == 201 ]] ||
  fail "register gone: $(cat "$tmp/body")"
rm "$tmp/src/gone/model.safetensors"

# --- a node
LLMR_DATA_DIR="$tmp/node" LLMR_PORT=0 "$LLMR" node --router "http://127.0.0.1:$rport" --node-key "$nodekey" \
  --allow-cpu --heartbeat 0.3 >"$tmp/node.log" 2>&1 &
pids+=($!)
ready=
for _ in $(seq 200); do
  call GET /v1/models "$infkey" >/dev/null
  python3 -c 'import json,sys; sys.exit(0 if any(m["id"] == "loop" for m in json.load(open(sys.argv[1]))["data"]) else 1)' \
    "$tmp/body" 2>/dev/null && { ready=1; break; }
  sleep 0.1
done
[[ -n $ready ]] || fail "loop never became ready: $(cat "$tmp/body")"

[[ $(call POST /v1/chat/completions "$infkey" '{"model": "loop", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}') == 200 ]] ||
  fail "chat through the router: $(cat "$tmp/body")"
content=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"])' "$tmp/body" 2>/dev/null)
[[ -n $content ]] || fail "the chat answer has no content: $(cat "$tmp/body")"
curl -sN -H "Authorization: Bearer $infkey" -H 'Content-Type: application/json' \
  --data-binary '{"model": "loop", "prompt": "hi", "max_tokens": 5, "stream": true}' \
  "http://127.0.0.1:$rport/v1/completions" >"$tmp/stream"
[[ $(grep -c '^data: {' "$tmp/stream") -ge 5 ]] || fail "a streamed completion: $(head -c 400 "$tmp/stream")"
has "$(tail -c 40 "$tmp/stream")" "data: [DONE]" "the stream ends with [DONE]"
# the request log holds the chat's usage (written within a second)
sleep 0.5
logged=$(python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(c.execute("select prompt_tokens, completion_tokens, status from requests where endpoint = ? order by id limit 1", ("/v1/chat/completions",)).fetchone())' "$tmp/router/router.db" 2>&1)
[[ $logged =~ ^\(([1-9][0-9]*),\ 8,\ 200\)$ ]] || fail "the request log has the chat's usage: $logged"
[[ $(call GET '/v0/requests?limit=500' "$admin") == 200 ]] || fail "read the request log: $(cat "$tmp/body")"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["requests"]; sys.exit(0 if any(x["endpoint"] == "/v1/chat/completions" and x["status"] == 200 and x["completion_tokens"] == 8 and x["node"] for x in r) else 1)' "$tmp/body" ||
  fail "GET /v0/requests shows the chat: $(head -c 600 "$tmp/body")"
# The streamed completion above asked for no usage: the log has its tokens all the same
# (from the node's closing comment), and the client saw that only as a comment.
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["requests"]; sys.exit(0 if any(x["endpoint"] == "/v1/completions" and x["status"] == 200 and x["completion_tokens"] == 5 for x in r) else 1)' "$tmp/body" ||
  fail "GET /v0/requests shows the streamed completion's 5 tokens: $(head -c 600 "$tmp/body")"
[[ $(grep -c '^: {"usage":{"prompt_tokens":[0-9]*,"completion_tokens":5}}' "$tmp/stream") == 1 ]] ||
  fail "the stream carries its usage as one SSE comment: $(tail -c 300 "$tmp/stream")"
[[ $(call GET '/v0/requests?limit=0' "$admin") == 400 ]] || fail "a limit of 0: 400"
[[ $(call GET /v0/requests "$infkey") == 403 ]] || fail "the request log needs the admin scope"
# the router renders: loopq's prompt is its template's one character, one token
for _ in $(seq 100); do
  call GET /v1/models "$infkey" >/dev/null
  grep -q '"loopq"' "$tmp/body" && python3 -c 'import json,sys; sys.exit(0 if any(m["id"] == "loopq" and m.get("ready", True) for m in json.load(open(sys.argv[1]))["data"]) else 1)' "$tmp/body" 2>/dev/null && break
  sleep 0.1
done
[[ $(call POST /v1/chat/completions "$infkey" '{"model": "loopq", "messages": [{"role": "user", "content": "a longer question"}], "max_tokens": 3}') == 200 ]] ||
  fail "chat with loopq: $(cat "$tmp/body")"
has "$(cat "$tmp/body")" '"prompt_tokens":1,' "the node got the router's render (one token)"
[[ $(call POST /v1/chat/completions "$infkey" '{"model": "loopraise", "messages": [{"role": "user", "content": "hi"}]}') == 400 ]] ||
  fail "a chat whose template raises: 400"
has "$(cat "$tmp/body")" "only user turns here" "the chat's 400 carries the template's message"
# --responses-retention 1: a stored response two hours old goes when the next is stored; one
# half an hour old stays
python3 - "$tmp/router/router.db" <<'PY'
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], timeout=10)
now = int(time.time() * 1000)
for rid, age_h in (("resp_old", 2), ("resp_recent", 0.5)):
    c.execute("INSERT INTO responses (id, key_id, created_ms, input, response, bytes) VALUES (?, '', ?, '[]', '{}', 4)",
              (rid, now - int(age_h * 3600 * 1000)))
c.commit()
PY
[[ $(call POST /v1/responses "$infkey" '{"model": "loopq", "input": "hi", "max_output_tokens": 2}') == 200 ]] ||
  fail "a stored response: $(cat "$tmp/body")"
kept=$(python3 -c 'import sqlite3,sys; print(",".join(r[0] for r in sqlite3.connect(sys.argv[1]).execute("SELECT id FROM responses WHERE id IN (?, ?) ORDER BY id", ("resp_old", "resp_recent"))))' "$tmp/router/router.db")
[[ $kept == resp_recent ]] || fail "--responses-retention 1 keeps \"$kept\" of resp_old and resp_recent, wanted resp_recent"
[[ $(call POST /v1/responses "$infkey" '{"model": "loopraise", "input": "hi", "store": false}') == 400 ]] ||
  fail "a response whose template raises: 400"
has "$(cat "$tmp/body")" "only user turns here" "the response's 400 carries the template's message"
has "$(cat "$tmp/body")" '"param":"input"' "the response's 400 names its input, not messages"
[[ $(call POST /v1/chat/completions "$infkey" '{"model": "nope", "messages": [{"role": "user", "content": "hi"}]}') == 404 ]] ||
  fail "an unknown model: 404"
[[ $(call POST /v1/chat/completions "$nodekey" '{"model": "loop", "messages": []}') == 403 ]] ||
  fail "a node key on /v1: 403"

# --- the model whose weights went missing: never ready, the router names the file
for _ in $(seq 100); do
  call GET /v0/models/gone "$admin" >/dev/null
  grep -q 'model.safetensors' "$tmp/body" && grep -q '"failed"' "$tmp/body" && break
  sleep 0.1
done
has "$(cat "$tmp/body")" '"state":"failed"' "gone failed on the node"
has "$(cat "$tmp/body")" 'model.safetensors' "the router names the missing file"
has "$(cat "$tmp/body")" '"ready":false' "gone is not ready"
[[ $(call POST /v1/completions "$infkey" '{"model": "gone", "prompt": "hi"}') == 503 ]] ||
  fail "a model no node has ready: 503"

[[ $failures -gt 0 ]] && { echo "--- router log"; tail -30 "$tmp/router.log"; echo "--- node log"; tail -30 "$tmp/node.log"; }
finish_checks router
