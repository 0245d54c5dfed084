#!/usr/bin/env bash
# On a GPU machine: a plugin that takes GPU memory and hangs in a kernel (the
# vram-hang test plugin) is killed by the node's watchdog, the client gets TIMEOUT,
# the GPU memory comes back, and the next request succeeds.  Readings from
# nvidia-smi and from the node's own NVML monitor (`llmr node status --json`).
# Usage: check_watchdog_vram.sh BUNDLE_DIR [VRAM_MIB]   (BUNDLE_DIR from make gpu-bundle;
# VRAM_MIB: what the plugin takes, default 8192)
set -u
B=$(cd "${1:?usage: check_watchdog_vram.sh BUNDLE_DIR [VRAM_MIB]}" && pwd)
export LLMR_VRAM_HANG_MIB=${2:-8192}
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
LLMR="$B/bin/llmr"
T=$(mktemp -d)
export LLMR_DATA_DIR="$T/data" LLMR_LOG_LEVEL=info
node=
cleanup() { [[ -n $node ]] && kill -9 "$node" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
failures=0
check() { if eval "$2"; then echo "ok    $1"; else echo "FAIL  $1"; failures=$((failures + 1)); fi; }
smi_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | tr -d ' '; }
smi_pid() { nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | awk -F', *' -v p="$1" '$1==p {print $2}'; }
nvml_used() { "$LLMR" node status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["resources"]["gpus"][0]["used_bytes"]//(1<<20))'; }
now() { date +%s.%N; }

"$LLMR" model synth --preset loopback --out "$T/data/models/loop" 2>/dev/null
base=$(smi_used)
"$LLMR" node --plugin-dirs "$B/plugins/vram_hang" --request-timeout 5 --cancel-grace 3 >"$T/node.log" 2>&1 &
node=$!
for _ in $(seq 200); do [[ -S "$T/data/run/node.sock" ]] && break; sleep 0.05; done
t0=$(now); "$LLMR" node load loop; t1=$(now)
sleep 1
pid=$("$LLMR" node status --json | python3 -c 'import json,sys; print([m for m in json.load(sys.stdin)["models"] if m["name"]=="loop"][0]["worker"]["pid"])')
loaded=$(smi_used); worker_mib=$(smi_pid "$pid"); nvml_loaded=$(nvml_used)
g0=$(now)
"$LLMR" node generate loop --prompt-ids 1 --max-tokens 50 --json >"$T/gen.out" 2>"$T/gen.err"; rc=$?
g1=$(now)
# wait for the memory to come back
back=""
for _ in $(seq 400); do
  u=$(smi_used)
  if (( u <= base + 64 )); then back=$(now); break; fi
  sleep 0.025
done
after=$(smi_used); nvml_after=$(nvml_used)
kill -0 "$pid" 2>/dev/null && alive=yes || alive=no
n0=$(now); "$LLMR" node generate loop --prompt-ids 1 --max-tokens 1 --json >"$T/next.out" 2>&1; rc2=$?; n1=$(now)
kill -TERM "$node"; wait "$node"; node=

echo
check "the stuck request ended with TIMEOUT" 'grep -q "\"status\":\"TIMEOUT\"" "$T/gen.out"'
check "after one token" '[[ $(grep -c "\"event\":\"token\"" "$T/gen.out") -eq 1 ]]'
check "generate exited 1" '[[ $rc -eq 1 ]]'
check "the worker process is gone" '[[ $alive == no ]]'
check "GPU memory back to the baseline (nvidia-smi, within 64 MiB)" '[[ -n $back ]]'
check "the next request succeeded" '[[ $rc2 -eq 0 ]] && grep -q "\"status\":\"OK\"" "$T/next.out"'
echo
printf '%-52s %s\n' "GPU memory before the model (nvidia-smi)" "$base MiB"
printf '%-52s %s\n' "with the model loaded (nvidia-smi / node's NVML)" "$loaded MiB / $nvml_loaded MiB"
printf '%-52s %s\n' "held by the worker process $pid (nvidia-smi)" "${worker_mib:-?} MiB"
printf '%-52s %s\n' "load of the model" "$(python3 -c "print(f'{($t1-$t0):.2f} s')")"
printf '%-52s %s\n' "request start to TIMEOUT (timeout 5 s + grace 3 s)" "$(python3 -c "print(f'{($g1-$g0):.2f} s')")"
[[ -n $back ]] && printf '%-52s %s\n' "TIMEOUT to memory back" "$(python3 -c "print(f'{($back-$g1)*1000:.0f} ms')")"
printf '%-52s %s\n' "after (nvidia-smi / node's NVML)" "$after MiB / $nvml_after MiB"
printf '%-52s %s\n' "next request, model loaded again" "$(python3 -c "print(f'{($n1-$n0):.2f} s')")"
echo "--- node log (last lines)"; tail -8 "$T/node.log"
exit $((failures > 0))
