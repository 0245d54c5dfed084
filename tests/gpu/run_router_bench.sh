#!/usr/bin/env bash
# `llmr bench router` on the GPU machine's CPU cores (the router needs no GPU; the
# machine is simply the one with the most cores we have): the acceptance run (500
# streams through a router and 2 loopback nodes for 60 s), then a run with one node
# SIGKILLed mid-way.  Each run's JSON and its table go to OUT; the tables come last.
#
# Usage: tests/gpu/run_router_bench.sh BUNDLE OUT [DURATION_S]
#   BUNDLE: what `make gpu-bundle` assembled (dist/gpu); OUT: a folder for the results.
set -uo pipefail
bundle=$(cd "${1:?usage: run_router_bench.sh BUNDLE OUT [DURATION_S]}" && pwd)
out=${2:?usage: run_router_bench.sh BUNDLE OUT [DURATION_S]}
duration=${3:-60}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LLMR_PLUGIN_DIRS="$bundle/plugins/engines"
llmr="$bundle/bin/llmr"
echo "cpus: $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
"$llmr" bench router --concurrency 500 --duration "$duration" --nodes 2 --json >"$out/plain.json" 2>"$out/plain.err"
plain=$?
half=$(python3 -c "print($duration / 2)")
"$llmr" bench router --concurrency 500 --duration "$duration" --nodes 2 --kill-node-after "$half" --json \
  >"$out/kill.json" 2>"$out/kill.err"
kill=$?
echo "== 500 streams, ${duration} s (exit $plain)"
grep -v '^bench router:' "$out/plain.err" | tail -14
echo "== 500 streams, ${duration} s, a node killed at ${half} s (exit $kill)"
grep -v '^bench router:' "$out/kill.err" | tail -20
