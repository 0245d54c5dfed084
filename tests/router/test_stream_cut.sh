#!/usr/bin/env bash
# A node that dies in the middle of a stream, with a real router and node on loopback:
# the router ends each client's stream the way its API ends a failed one, never with a
# bare end.  A chat completion stream gets an error event (code node_failed) and then
# [DONE]; a Responses API stream gets `event: response.failed` (the response's own id,
# status "failed", error code node_failed, the next sequence number) and no [DONE].
# Usage: test_stream_cut.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_stream_cut.sh PATH_TO_LLMR}
command -v curl >/dev/null || { echo "curl is missing: run make deps" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-cut-XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
source "$(dirname "$0")/../cli/check_lib.sh"
unset LLMR_ROUTER LLMR_API_KEY LLMR_ADMIN_KEY

admin=llmr-test-admin-key-cut-0123456789
call() { # METHOD PATH DATA: prints the HTTP status, the body in $tmp/body
  curl -s -o "$tmp/body" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $admin" \
    -H 'Content-Type: application/json' ${3:+--data-binary "$3"} "http://127.0.0.1:$rport$2"
}
"$LLMR" model synth --preset loopback --out "$tmp/src/loop" >/dev/null || fail "synth"
LLMR_DATA_DIR="$tmp/router" LLMR_ADMIN_KEY=$admin "$LLMR" router --port 0 >"$tmp/router.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do grep -q "listening on" "$tmp/router.log" && break; sleep 0.05; done
rport=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$tmp/router.log" | grep -o '[0-9]*$')
[[ -n $rport ]] || { cat "$tmp/router.log"; fail "the router did not start"; finish_checks "stream cut"; }
[[ $(call POST /v0/keys '{"name": "n", "scopes": "node"}') == 201 ]] || fail "a node key"
nodekey=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret"])' "$tmp/body")
[[ $(call POST /v0/models "{\"path\": \"$tmp/src/loop\", \"format\": \"safetensors\"}") == 201 ]] || fail "register"
LLMR_DATA_DIR="$tmp/node" LLMR_PORT=0 "$LLMR" node --router "http://127.0.0.1:$rport" --node-key "$nodekey" \
  --allow-cpu --heartbeat 0.3 --engine-options '{"token_delay_us": 50000}' >"$tmp/node.log" 2>&1 &
npid=$!
pids+=($npid)
ready=
for _ in $(seq 300); do # until a node answers for loop (synced, loaded, proven)
  [[ $(call POST /v1/completions '{"model": "loop", "prompt": "hi", "max_tokens": 1}') == 200 ]] && { ready=1; break; }
  sleep 0.1
done
[[ -n $ready ]] || { fail "loop never answered: $(cat "$tmp/body")"; finish_checks "stream cut"; }

# two long streams (10 s at 50 ms a token), then the node dies
curl -sN -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
  --data-binary '{"model": "loop", "input": "hi", "max_output_tokens": 200, "stream": true}' \
  "http://127.0.0.1:$rport/v1/responses" >"$tmp/resp.sse" &
r1=$!
curl -sN -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
  --data-binary '{"model": "loop", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 200, "stream": true}' \
  "http://127.0.0.1:$rport/v1/chat/completions" >"$tmp/chat.sse" &
r2=$!
sleep 1
kill -9 "$npid"
wait "$r1" "$r2"

python3 - "$tmp/resp.sse" <<'PY' || fail "the cut Responses stream ends with response.failed: $(tail -c 600 "$tmp/resp.sse")"
import json, sys
text = open(sys.argv[1]).read()
events = []
for block in text.strip().split("\n\n"):
    lines = block.split("\n")
    kind = [l[7:] for l in lines if l.startswith("event: ")]
    data = [l[6:] for l in lines if l.startswith("data: ")]
    events.append((kind[0] if kind else None, data[0] if data else None))
assert "[DONE]" not in text, "no [DONE] in a Responses stream"
assert events[0][0] == "response.created", events[0]
created = json.loads(events[0][1])["response"]["id"]
deltas = [e for e in events if e[0] == "response.output_text.delta"]
assert len(deltas) >= 3, "the stream ran before the cut: %d deltas" % len(deltas)
kind, data = events[-1]
assert kind == "response.failed", events[-1]
last = json.loads(data)
assert last["type"] == "response.failed", last
r = last["response"]
assert r["id"] == created and r["status"] == "failed", r
assert r["error"]["code"] == "node_failed" and "mid-stream" in r["error"]["message"], r
seqs = [json.loads(d)["sequence_number"] for k, d in events[:-1]]
assert last["sequence_number"] == max(seqs) + 1, (last["sequence_number"], max(seqs))
PY
grep -q '"code":"node_failed"' "$tmp/chat.sse" || fail "the cut chat stream has an error event: $(tail -c 300 "$tmp/chat.sse")"
has "$(tail -c 20 "$tmp/chat.sse")" "data: [DONE]" "the chat stream's error event is followed by [DONE]"
finish_checks "stream cut"
