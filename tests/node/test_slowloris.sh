#!/usr/bin/env bash
# Slow clients against a node's HTTP server (docs/security.md, "Slow clients"): a node
# with the loopback model and a 3 s header deadline gets SLOWLORIS_CONNECTIONS (2000 by
# default) connections that trickle their headers a byte at a time.  A normal chat is
# answered within 1 s meanwhile, the node's threads stay few (its idle count + 8), and
# the header deadline closes every trickling connection (slowloris.py); a body trickled
# past the 2 s body deadline is cut too.  Then a node
# with --max-connections-per-client 3 takes 3 connections from one address and closes
# a 4th at once, and the node ends cleanly on SIGTERM throughout.
# Usage: test_slowloris.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_slowloris.sh PATH_TO_LLMR}
count=${SLOWLORIS_CONNECTIONS:-2000}
command -v curl >/dev/null 2>&1 || { echo "FAIL: curl is not installed: run 'make deps'" >&2; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "FAIL: python3 is not installed" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-slowloris-XXXXXX")
node_pid=
cleanup() { [[ -n $node_pid ]] && kill -9 "$node_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
source "$(dirname "$0")/../cli/check_lib.sh"
# the node and the client each hold a descriptor per connection: the hard limit room for
# both; the node starts at a soft limit of 1024 and raises its own (http_server.c)
ulimit -Hn $((count * 2 + 512)) 2>/dev/null || true
ulimit -Sn "$(ulimit -Hn)" 2>/dev/null

abort() {
  fail "$*"
  echo "--- node log"; cat "$tmp/node.log"
  finish_checks "slowloris"
}

# start_node DATA_DIR ARGS...: starts a node, sets $node_pid and $port once /health is 200.
start_node() {
  export LLMR_DATA_DIR=$1; shift
  (ulimit -Sn 1024 && exec "$LLMR" node --host 127.0.0.1 --port 0 "$@") >"$tmp/node.log" 2>&1 &
  node_pid=$!
  port=
  for _ in $(seq 200); do # 10 s
    kill -0 "$node_pid" 2>/dev/null || abort "the node exited before serving HTTP"
    port=$(cat "$LLMR_DATA_DIR/run/http.port" 2>/dev/null)
    [[ $port =~ ^[0-9]+$ ]] && break
    port=
    sleep 0.05
  done
  [[ -n $port ]] || abort "the node wrote no run/http.port within 10 s"
  local health=
  for _ in $(seq 100); do
    health=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")
    [[ $health == 200 ]] && return
    sleep 0.1
  done
  abort "GET /health did not answer 200 within 10 s (last: $health)"
}
stop_node() {
  kill -TERM "$node_pid"
  local rc=0
  wait "$node_pid" || rc=$?
  node_pid=
  [[ $rc == 0 ]] || fail "the node exited with $rc on SIGTERM; log: $(tail -5 "$tmp/node.log")"
}

for d in a b; do
  expect 0 "synth loopback" -- "$LLMR" model synth --preset loopback --out "$tmp/$d/models/loop"
done

# ---- slowloris ------------------------------------------------------------------------
start_node "$tmp/a" --header-timeout 3 --body-timeout 2 --max-connections $((count + 64))
chat='{"model":"loop","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}'
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -d "$chat" \
  "http://127.0.0.1:$port/v1/chat/completions")
[[ $code == 200 ]] || abort "a chat before the test got HTTP $code"
sleep 0.3
idle=$(awk '/^Threads:/ {print $2}' "/proc/$node_pid/status")
python3 "$(dirname "$0")/slowloris.py" "$port" "$node_pid" "$count" 3 $((idle + 8)) ||
  fail "slowloris (above)"
kill -0 "$node_pid" 2>/dev/null || abort "the node died under slowloris"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$port/health")
[[ $code == 200 ]] || fail "GET /health after slowloris: HTTP $code"
# a body trickled a byte every 0.2 s is cut by the 2 s body deadline
took=$(python3 - "$port" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Content-Length: 1000\r\n\r\n{")
t0 = time.monotonic()
while time.monotonic() - t0 < 8:
    try:
        s.send(b" ")
    except OSError:
        break
    time.sleep(0.2)
    s.setblocking(False)
    try:
        if s.recv(1) == b"":
            break
    except BlockingIOError:
        pass
    except OSError:
        break
    s.setblocking(True)
print(f"{time.monotonic() - t0:.1f}")
PY
)
echo "a trickled body was closed after $took s"
awk -v t="$took" 'BEGIN { exit !(t >= 1.5 && t <= 4) }' ||
  fail "a body trickled past the 2 s body deadline was closed after $took s"
stop_node

# ---- connections per client -----------------------------------------------------------
start_node "$tmp/b" --max-connections-per-client 3
# Three connections are held, each proven accepted by a keep-alive request it got answered
# (a close the node has not yet seen, such as start_node's last /health, can still count
# for a moment: then the three are tried again); a 4th connection is then closed unanswered.
fourth=$(python3 - "$port" <<'PY'
import socket, sys, time
port = int(sys.argv[1])
req = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
def answered(s):
    s.settimeout(5)
    try:
        s.sendall(req)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                return None
            data += chunk
        return data.split(b" ", 2)[1].decode()
    except OSError:
        return None
held = []
for _ in range(50):
    held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
    if all(answered(s) == "200" for s in held):
        break
    for s in held:
        s.close()
    held = []
    time.sleep(0.1)
if not held:
    print("three connections were never all answered")
    sys.exit()
extra = socket.create_connection(("127.0.0.1", port), timeout=5)
print(answered(extra) or "closed")
PY
)
[[ $fourth == closed ]] || fail "a 4th connection from one address: $fourth, wanted it closed"
code=000
for _ in $(seq 20); do # the node notices the closes
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$port/health")
  [[ $code == 200 ]] && break
  sleep 0.1
done
[[ $code == 200 ]] || fail "GET /health once the 3 connections closed: HTTP $code"
bad=$("$LLMR" node --header-timeout 0 2>&1)
has "$bad" "--header-timeout takes a whole number" "a 0 header timeout is refused"
bad=$("$LLMR" router --max-connections-per-client x 2>&1)
has "$bad" "--max-connections-per-client takes a whole number" "the router refuses a bad per-client cap"
stop_node
finish_checks "slowloris"
