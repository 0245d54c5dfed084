#!/usr/bin/env bash
# `llmr bench router`, tiny (docs/router.md, "Load benchmark"): a router and two nodes
# started by the bench, 20 streamed requests in flight through the router; the counts
# of the JSON report make sense (every request ok, a router-added latency for each,
# the node's time to first byte at least the engine's token delay, so the bench's
# --engine-options reached the engine; the router process's peak threads and memory).  Slow streams pass the router as they come
# (their first bytes are not held until the end).  100 streams in flight hold far fewer
# router threads than 100 (a running stream costs no thread).  Then one node is SIGKILLed mid-run: every
# stream in flight finishes or ends with an error event and [DONE] (some do end so),
# every request started after the kill succeeds.  Also: usage errors, and a node that
# refuses engine options that are not a JSON object.
# Usage: test_bench_router.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_bench_router.sh PATH_TO_LLMR}
command -v python3 >/dev/null || { echo "python3 is missing: run make deps" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-bench-router-test-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/../cli/check_lib.sh"
export TMPDIR=$tmp # the bench's own scratch directories (kept on failure) land here

# field FILE PYTHON-EXPRESSION-ON-r: prints the value
field() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>&1; }
show_logs() { for f in "$tmp"/llmr-bench-router-*/*.log; do [[ -f $f ]] && { echo "--- $f"; tail -20 "$f"; }; done; }

# --- a run without a kill
"$LLMR" bench router --concurrency 20 --duration 2 --nodes 2 --tokens 8 --token-delay-us 1000 --json \
  >"$tmp/plain.json" 2>"$tmp/plain.err"
code=$?
[[ $code -eq 0 ]] || { fail "a plain run: exit $code: $(tail -20 "$tmp/plain.err")"; show_logs; }
[[ $(field "$tmp/plain.json" 'r["requests"] > 20') == True ]] || fail "a plain run completes requests: $(cat "$tmp/plain.json")"
[[ $(field "$tmp/plain.json" 'r["ok"] == r["requests"] and r["errors"] == {}') == True ]] ||
  fail "a plain run has no errors: $(cat "$tmp/plain.json")"
[[ $(field "$tmp/plain.json" 'r["tokens"] == 8 * r["ok"]') == True ]] || fail "8 tokens per request: $(cat "$tmp/plain.json")"
[[ $(field "$tmp/plain.json" 'r["router_added_us"]["n"] == r["ok"]') == True ]] ||
  fail "every request has a router-added latency (the router's header): $(cat "$tmp/plain.json")"
[[ $(field "$tmp/plain.json" 'r["node_ttfb_us"]["p50"] >= 1000') == True ]] ||
  fail "the node's TTFB holds the token delay (--engine-options reached the engine): $(cat "$tmp/plain.json")"
[[ $(field "$tmp/plain.json" 'r["passed"] and "goal_met" in r') == True ]] || fail "a plain run passes: $(cat "$tmp/plain.json")"
[[ $(field "$tmp/plain.json" 'r["router_process"]["threads_peak"] > 1 and r["router_process"]["rss_peak_kib"] > 1000') == True ]] ||
  fail "the report has the router process's peak threads and memory: $(cat "$tmp/plain.json")"
has "$(cat "$tmp/plain.err")" "router-added" "the table is printed on stderr with --json"
has "$(cat "$tmp/plain.err")" "threads at peak" "the table has the router's threads"
has "$(cat "$tmp/plain.err")" "done," "progress is shown"

# --- the router streams: with 8 tokens 150 ms apart, a router that held the answer
# until its end would add over a second to the time to first byte
"$LLMR" bench router --concurrency 2 --duration 2 --nodes 1 --tokens 8 --token-delay-us 150000 --json \
  >"$tmp/slow.json" 2>"$tmp/slow.err"
code=$?
[[ $code -eq 0 ]] || { fail "a run of slow streams: exit $code: $(tail -20 "$tmp/slow.err")"; show_logs; }
[[ $(field "$tmp/slow.json" 'r["ok"] > 0 and r["router_added_us"]["max"] < 500000') == True ]] ||
  fail "the first bytes pass the router as the node sends them: $(cat "$tmp/slow.json")"

# --- a running stream costs the router no thread (its transfer runs on the router's
# transfer loop): 100 streams of a second each, and far fewer threads than streams
"$LLMR" bench router --concurrency 100 --duration 2 --nodes 1 --tokens 40 --token-delay-us 25000 --json \
  >"$tmp/threads.json" 2>"$tmp/threads.err"
code=$?
[[ $code -eq 0 ]] || { fail "a run of 100 streams: exit $code: $(tail -20 "$tmp/threads.err")"; show_logs; }
[[ $(field "$tmp/threads.json" 'r["ok"] > 100 and 1 < r["router_process"]["threads_peak"] < 50') == True ]] ||
  fail "100 streams run on far fewer router threads: $(cat "$tmp/threads.json")"

# --- a node killed mid-run: streams of 100 ms, so that the kill finds most of those on
# the node past their first byte (before it, the router retries them elsewhere), even
# on a slow machine or under sanitizers
"$LLMR" bench router --concurrency 20 --duration 3 --nodes 2 --tokens 40 --token-delay-us 2500 \
  --kill-node-after 1.5 --json >"$tmp/kill.json" 2>"$tmp/kill.err"
code=$?
[[ $code -eq 0 ]] || { fail "a run with a kill: exit $code: $(tail -20 "$tmp/kill.err")"; show_logs; }
k='r["kill"]'
[[ $(field "$tmp/kill.json" "$k[\"in_flight\"] > 0") == True ]] || fail "streams were in flight at the kill: $(cat "$tmp/kill.json")"
[[ $(field "$tmp/kill.json" "$k[\"in_flight_outcomes\"][\"error_event\"] > 0") == True ]] ||
  fail "the streams on the killed node end with an error event: $(cat "$tmp/kill.json")"
[[ $(field "$tmp/kill.json" "$k[\"in_flight_outcomes\"][\"error_event\"] + $k[\"in_flight_outcomes\"][\"ok\"] == $k[\"in_flight\"]") == True ]] ||
  fail "no stream in flight hung or was cut: $(cat "$tmp/kill.json")"
[[ $(field "$tmp/kill.json" "$k[\"after_requests\"] > 0 and $k[\"after_ok\"] == $k[\"after_requests\"]") == True ]] ||
  fail "every request after the kill succeeds: $(cat "$tmp/kill.json")"
[[ $(field "$tmp/kill.json" 'set(r["errors"]) <= {"error_event"} and r["passed"]') == True ]] ||
  fail "the only errors are the error events: $(cat "$tmp/kill.json")"
has "$(cat "$tmp/kill.err")" "node 1 killed" "the kill is announced"
[[ -z $(ls -d "$tmp"/llmr-bench-router-* 2>/dev/null) ]] || fail "passing runs leave no scratch directory"

# --- usage errors, and engine options that are not an object
expect 2 "--kill-node-after needs two nodes" -- "$LLMR" bench router --nodes 1 --kill-node-after 1
has "$err" "--nodes 2" "the error says why"
expect 2 "--kill-node-after within the duration" -- "$LLMR" bench router --duration 2 --kill-node-after 3
expect 2 "a bad number" -- "$LLMR" bench router --concurrency many
expect 1 "engine options that are an array" -- "$LLMR" node --data-dir "$tmp/n" --port 0 --no-http --engine-options '[1]'
has "$err" "must be a JSON object" "the node says the engine options must be an object"
expect 1 "engine options that are not JSON" -- env LLMR_ENGINE_OPTIONS='{max_batch' "$LLMR" node --data-dir "$tmp/n" --port 0 --no-http
has "$err" "must be a JSON object" "LLMR_ENGINE_OPTIONS is checked too"

finish_checks "bench router"
