#!/usr/bin/env bash
# `llmr node` end to end with real processes: a node on a temporary data directory
# with a loopback model (the loopback plugin is found beside the binary), status,
# generate, load/unload, reload by command and by SIGHUP, a second node refused,
# a stop by SIGTERM that leaves no worker behind, an unload that cancels a load in
# progress, and the errors when no node runs.
# Usage: test_node.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_node.sh PATH_TO_LLMR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-node-XXXXXX")
node_pid=
cleanup() { [[ -n $node_pid ]] && kill -9 "$node_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"
export LLMR_DATA_DIR="$tmp/data"
export LLMR_PORT=0 # the HTTP API on any free port: tests run side by side

expect 1 "status without a node" -- "$LLMR" node status
has "$err" "no node answers on" "status names the socket"
expect 2 "generate without a model" -- "$LLMR" node generate
expect 2 "unknown subcommand" -- "$LLMR" node frobnicate

expect 0 "synth loopback" -- "$LLMR" model synth --preset loopback --out "$tmp/data/models/loop"
"$LLMR" node >"$tmp/node.log" 2>&1 &
node_pid=$!
for _ in $(seq 100); do [[ -S "$tmp/data/run/node.sock" ]] && break; sleep 0.05; done
[[ -S "$tmp/data/run/node.sock" ]] || fail "the node made no control socket: $(cat "$tmp/node.log")"
[[ $(stat -c %a "$tmp/data/run") == 700 ]] || fail "the control directory is not private"

expect 0 "status" -- "$LLMR" node status
has "$out" "loopback" "status lists the plugin"
has "$out" "loop " "status lists the model"
expect 0 "status --json" -- "$LLMR" node status --json
has "$out" '"state": "idle"' "the model is not loaded before its first request"

expect 0 "metrics" -- "$LLMR" node metrics
has "$out" "llmr_memory_threshold_ratio 0.9" "metrics has the threshold"
has "$out" 'llmr_model_ready{model="loop"} 0' "metrics has the model"
has "$out" 'llmr_memory_alerts_total{resource="ram"}' "metrics has the memory alerts"

expect 0 "generate ids" -- "$LLMR" node generate loop --prompt-ids 5,6 --max-tokens 7 --json
[[ $(grep -c '"event":"token"' <<<"$out") -eq 6 ]] || fail "six token events before the end: $out"
has "$out" '"finish":"length"' "ends by length"
has "$out" '"completion_tokens":7' "counts seven tokens"
expect 0 "generate text" -- "$LLMR" node generate loop --prompt "hello" --max-tokens 5
expect 1 "generate unknown model" -- "$LLMR" node generate nope --prompt-ids 1
has "$err" 'no model named "nope"' "unknown model named"
has "$err" "NOT_FOUND" "with its status"
expect 0 "unload" -- "$LLMR" node unload loop
expect 0 "load" -- "$LLMR" node load loop
# this node's own worker (other tests run loop models side by side)
pid1=$(pgrep -P "$node_pid" -f "engine-worker --fd 3 --name loop" | head -1)
[[ -n $pid1 ]] || fail "no worker process after load"

expect 0 "reload-plugins" -- "$LLMR" node reload-plugins
has "$out" '"result": "unchanged"' "an unchanged plugin keeps its worker"
kill -HUP "$node_pid"
for _ in $(seq 100); do grep -q "SIGHUP: reloading" "$tmp/node.log" && break; sleep 0.05; done
has "$(cat "$tmp/node.log")" "SIGHUP: reloading engine plugins" "SIGHUP reloads"
kill -0 "$node_pid" 2>/dev/null || fail "the node died on SIGHUP"

expect 1 "a second node on the same data directory" -- "$LLMR" node
has "$err$out" "another node is running" "second node refused"

kill -TERM "$node_pid"
for _ in $(seq 100); do kill -0 "$node_pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$node_pid" 2>/dev/null && fail "the node did not stop on SIGTERM"
wait "$node_pid"; rc=$?
[[ $rc -eq 0 ]] || fail "the node exited $rc on SIGTERM"
node_pid=
[[ -n $pid1 ]] && kill -0 "$pid1" 2>/dev/null && { ps -o pid,ppid,stat,cmd -p "$pid1"; fail "worker $pid1 outlived the node"; }
[[ -e "$tmp/data/run/node.sock" ]] && fail "the control socket was left behind"

# --- an unload while the model loads cancels the load: its worker goes at once, the
# request that waited for it is answered, nothing counts as a failed load, and the next
# request loads it again
"$LLMR" node --engine-options '{"load_delay_ms": 4000}' >"$tmp/node2.log" 2>&1 &
node_pid=$!
for _ in $(seq 100); do [[ -S "$tmp/data/run/node.sock" ]] && break; sleep 0.05; done
"$LLMR" node generate loop --prompt-ids 5,6 --max-tokens 3 >"$tmp/gen.out" 2>"$tmp/gen.err" &
gen_pid=$!
loading() { "$LLMR" node status --json 2>/dev/null | grep -q '"state": "loading"'; }
for _ in $(seq 100); do loading && break; sleep 0.05; done
loading || fail "the model is loading after a request: $("$LLMR" node status 2>&1)"
t0=$(date +%s%3N)
expect 0 "unload during the load" -- "$LLMR" node unload loop
wait "$gen_pid"; gen_rc=$?
waited=$(( $(date +%s%3N) - t0 ))
[[ $gen_rc -ne 0 ]] || fail "the request that waited for the cancelled load fails"
has "$(cat "$tmp/gen.err")" "unloaded (llmr stop) while it loaded" "the waiting request says the load was cancelled"
(( waited < 2500 )) || fail "the waiting request is answered at once, not after the load ($waited ms)"
expect 0 "status after the cancelled load" -- "$LLMR" node status --json
has "$out" '"state": "idle"' "the model is idle after its load was cancelled"
has "$(cat "$tmp/node2.log")" "load cancelled (unloaded while it loaded)" "the log says the load was cancelled"
if grep -q "loading failed" "$tmp/node2.log"; then fail "a cancelled load is not a failed load"; fi
expect 0 "generate after the cancelled load" -- "$LLMR" node generate loop --prompt-ids 5,6 --max-tokens 3 --json
has "$out" '"completion_tokens":3' "the next request loads the model again"
kill -TERM "$node_pid"
wait "$node_pid" 2>/dev/null
node_pid=

[[ $failures -gt 0 ]] && { echo "--- node log"; cat "$tmp/node.log" "$tmp/node2.log" 2>/dev/null; }
finish_checks node
