#!/usr/bin/env bash
# HTTPS end to end on loopback (docs/security.md, "TLS"): a router and a node that each
# present a certificate of a private CA (made here with openssl), and trust that CA for
# the other's (--tls-cert, --tls-key, --tls-ca).  Checks: the router answers HTTPS only
# (plain HTTP to its port gets no answer); a client without the CA is refused by its
# own certificate check; the node registers over HTTPS, fetches the model's files from
# the router over HTTPS, and answers the router's proxied chats over HTTPS (plain and
# streamed); llmr's own commands reach an HTTPS router with LLMR_TLS_CA; a certificate
# without its key, or a key that is not one, stops the start with a clear message.
# `llmr serve` with the certificate: HTTPS only on its port (no answer to plain HTTP,
# a client without the CA refused), a model pulled into it and a chat answered over
# HTTPS; its node's loopback listener refuses any key but the node's.
# Usage: test_tls.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_tls.sh PATH_TO_LLMR}
command -v curl >/dev/null || { echo "curl is missing: run make deps" >&2; exit 1; }
command -v openssl >/dev/null || { echo "openssl is missing: run make deps" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-tls-XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
source "$(dirname "$0")/../cli/check_lib.sh"
unset LLMR_ROUTER LLMR_API_KEY LLMR_TLS_CA LLMR_TLS_CERT LLMR_TLS_KEY

# --- a private CA and a certificate for this machine's loopback names
(
  cd "$tmp" &&
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "/CN=llmr test CA" &&
    openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj "/CN=localhost" &&
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >san.ext &&
    openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 -extfile san.ext
) >"$tmp/openssl.log" 2>&1 || { cat "$tmp/openssl.log"; fail "openssl made no certificates"; finish_checks tls; }

admin=llmr-test-admin-key-tls-0123456789
tls=(--tls-cert "$tmp/srv.pem" --tls-key "$tmp/srv.key" --tls-ca "$tmp/ca.pem")

# --- bad settings stop the start, saying why
expect 1 "a certificate without its key" -- env LLMR_DATA_DIR="$tmp/bad" "$LLMR" router --port 0 --tls-cert "$tmp/srv.pem"
has "$err" "tls_key" "a certificate without a key names the missing setting"
expect 1 "a key that is not a key" -- env LLMR_DATA_DIR="$tmp/bad" "$LLMR" router --port 0 --tls-cert "$tmp/srv.pem" --tls-key "$tmp/ca.pem"
has "$err" "TLS" "a bad key says the TLS setup failed"

# --- the router, HTTPS only
LLMR_DATA_DIR="$tmp/router" LLMR_ADMIN_KEY=$admin "$LLMR" router --port 0 "${tls[@]}" >"$tmp/router.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do grep -q "listening on" "$tmp/router.log" && break; sleep 0.05; done
rport=$(grep -o 'listening on https://127.0.0.1:[0-9]*' "$tmp/router.log" | grep -o '[0-9]*$')
[[ -n $rport ]] || { cat "$tmp/router.log"; fail "the router did not say it listens on https://"; finish_checks tls; }
R=https://localhost:$rport
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$tmp/ca.pem" "$R/health")
[[ $code == 200 ]] || fail "GET /health over HTTPS with the CA: 200, got $code"
curl -s -m 5 -o /dev/null "http://127.0.0.1:$rport/health" && fail "plain HTTP to the HTTPS port is answered"
curl -s -m 5 -o /dev/null "$R/health"
[[ $? == 60 ]] || fail "a client without the CA fails its certificate check (curl exit 60)"

# --- a node key, then the node: HTTPS of its own, the router over HTTPS
k=$(curl -s --cacert "$tmp/ca.pem" -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
  --data-binary '{"name": "node", "scopes": ["node"]}' "$R/v0/keys" | python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])')
[[ -n $k ]] || fail "a node key"
LLMR_DATA_DIR="$tmp/node" "$LLMR" node --port 0 --router "$R" --node-key "$k" --allow-cpu --heartbeat 1 "${tls[@]}" \
  >"$tmp/node.log" 2>&1 &
pids+=($!)

# --- a model pulled through the HTTPS router by llmr itself (LLMR_TLS_CA)
"$LLMR" model synth --preset loopback --out "$tmp/src/loop" >/dev/null 2>&1 || fail "synth loopback"
export LLMR_ROUTER=$R LLMR_API_KEY=$admin
expect 1 "pull without the CA" -- "$LLMR" pull "$tmp/src/loop" --name loop --timeout 5
has "$err" "certificate" "without the CA, llmr says the certificate was not trusted"
expect 0 "pull with the CA" -- env LLMR_TLS_CA="$tmp/ca.pem" "$LLMR" pull "$tmp/src/loop" --name loop --timeout 60
[[ -s $tmp/node/models/loop/model.safetensors ]] || fail "the node fetched the model over HTTPS"
grep -q 'registered with the router' "$tmp/node.log" || grep -qi 'registered' "$tmp/node.log" || fail "the node registered over HTTPS: $(tail -5 "$tmp/node.log")"
nport=$(cat "$tmp/node/run/http.port" 2>/dev/null)
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$tmp/ca.pem" "https://127.0.0.1:$nport/health")
[[ $code == 200 ]] || fail "the node answers HTTPS itself: got $code"

# --- chats through the router, to the node over HTTPS
chat='{"model": "loop", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}'
code=$(curl -s -o "$tmp/chat.json" -w '%{http_code}' --cacert "$tmp/ca.pem" -H "Authorization: Bearer $admin" \
  -H 'Content-Type: application/json' --data-binary "$chat" "$R/v1/chat/completions")
[[ $code == 200 ]] && grep -q '"choices"' "$tmp/chat.json" || fail "a chat over HTTPS both ways: $code $(head -c 300 "$tmp/chat.json")"
curl -s -N --cacert "$tmp/ca.pem" -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
  --data-binary "${chat%\}}, \"stream\": true}" "$R/v1/chat/completions" >"$tmp/stream.txt"
grep -q '^data: \[DONE\]' "$tmp/stream.txt" || fail "a streamed chat over HTTPS ends with [DONE]: $(tail -c 300 "$tmp/stream.txt")"
expect 0 "list" -- env LLMR_TLS_CA="$tmp/ca.pem" "$LLMR" list
grep -Eq '^loop +safetensors .* ready on 1/1 node' <<<"$out" || fail "list over HTTPS: $out"

# --- llmr serve with the certificate: its router speaks HTTPS only, its node stays plain
# HTTP on loopback and reaches the router at a loopback listener that takes its key only
expect 1 "serve with a certificate but no key" -- env LLMR_DATA_DIR="$tmp/bad" "$LLMR" serve --port 0 --tls-cert "$tmp/srv.pem"
has "$err" "tls_key" "serve: a certificate without a key names the missing setting"
LLMR_DATA_DIR="$tmp/serve" LLMR_ADMIN_KEY=$admin "$LLMR" serve --port 0 --tls-cert "$tmp/srv.pem" \
  --tls-key "$tmp/srv.key" >"$tmp/serve.log" 2>&1 &
serve_pid=$!
pids+=($serve_pid)
sport=
for _ in $(seq 300); do
  sport=$(grep -o 'the OpenAI API at https://127.0.0.1:[0-9]*' "$tmp/serve.log" | grep -o '[0-9]*$')
  [[ -n $sport ]] && break
  kill -0 "$serve_pid" 2>/dev/null || break
  sleep 0.05
done
[[ -n $sport ]] || { cat "$tmp/serve.log"; fail "serve did not say it serves https://"; finish_checks tls; }
S=https://localhost:$sport
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$tmp/ca.pem" "$S/health")
[[ $code == 200 ]] || fail "serve: GET /health over HTTPS with the CA: 200, got $code"
curl -s -m 5 -o /dev/null "http://127.0.0.1:$sport/health" && fail "serve: plain HTTP to the HTTPS port is answered"
curl -s -m 5 -o /dev/null "$S/health"
[[ $? == 60 ]] || fail "serve: a client without the CA fails its certificate check (curl exit 60)"
inner=$(grep -o 'the node reaches the router at http://127.0.0.1:[0-9]*' "$tmp/serve.log" | grep -o 'http.*')
[[ -n $inner ]] || fail "serve prints where its node reaches the router: $(cat "$tmp/serve.log")"
code=$(curl -s -o "$tmp/inner.json" -w '%{http_code}' -H "Authorization: Bearer $admin" "$inner/v0/models")
[[ $code == 403 ]] && grep -q local_node_only "$tmp/inner.json" ||
  fail "the node's loopback listener refuses any key but the node's: got $code $(head -c 200 "$tmp/inner.json")"
expect 0 "pull into serve with the CA" -- env LLMR_ROUTER="$S" LLMR_TLS_CA="$tmp/ca.pem" "$LLMR" pull "$tmp/src/loop" --name loop --timeout 60
code=$(curl -s -o "$tmp/chat.json" -w '%{http_code}' --cacert "$tmp/ca.pem" -H "Authorization: Bearer $admin" \
  -H 'Content-Type: application/json' --data-binary "$chat" "$S/v1/chat/completions")
[[ $code == 200 ]] && grep -q '"choices"' "$tmp/chat.json" || fail "serve: a chat over HTTPS: $code $(head -c 300 "$tmp/chat.json")"
curl -s -m 5 -o /dev/null -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
  --data-binary "$chat" "$S/v1/chat/completions"
[[ $? == 60 ]] || fail "serve: a chat without the CA fails its certificate check (curl exit 60)"
kill -TERM "$serve_pid"
for _ in $(seq 100); do kill -0 "$serve_pid" 2>/dev/null || break; sleep 0.1; done
wait "$serve_pid"
[[ $? == 0 ]] || fail "serve with TLS exits 0 on SIGTERM"

finish_checks tls
