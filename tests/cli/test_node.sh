#!/usr/bin/env bash
# `llmr node` end to end with real processes: a node on a temporary data directory
# with a loopback model (the loopback plugin is found beside the binary), status,
# generate, load/unload, reload by command and by SIGHUP, a second node refused,
# a stop by SIGTERM that leaves no worker behind, and the errors when no node runs.
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

[[ $failures -gt 0 ]] && { echo "--- node log"; cat "$tmp/node.log"; }
finish_checks node
