#!/usr/bin/env bash
# The device checks of the foundation, tokenizer, engine-layer and gpt-oss CPU-path
# work, in one command on a GPU machine; logs go to OUT and a summary comes last.
#   probe      llmr-gpu-probe: which code ran, a kernel against the host, copy bandwidth
#   nemotron   a small random NemotronH saved by transformers: validation accepts it and
#              names the tensor when one is missing or misshaped
#   inspect    `llmr inspect` of a 13.8 GB gpt-oss-20b snapshot (sparse zero files)
#              beside Python safetensors; the whole command must take under a second
#   tokenizer  a 1.5 MB mixed corpus against Hugging Face tokenizers (gpt-oss and the
#              two SentencePiece-style tokenizers), then encode speed beside tiktoken
#              and tokenizers on one thread
#   watchdog   a plugin that takes GPU memory and hangs is killed; the memory comes back
#   ipc        the worker hop's cost per token (`llmr bench ipc`)
#   synth      the time to write the full-size gpt-oss-20b snapshot with random weights
#   cpuref     the gpt-oss CPU path against transformers in fp32 (tiny and 20b-2l,
#              300 positions, greedy 64 tokens)
#
# Usage: tests/gpu/run_foundation_checks.sh BUNDLE OUT [STEP...]
#   BUNDLE: what `make gpu-bundle` assembled (dist/gpu); STEPs default to all, in the
#   order above.  MODELS (default /tmp/llmr-models) holds the synthetic snapshots.
set -uo pipefail
bundle=$(cd "${1:?usage: run_foundation_checks.sh BUNDLE OUT [STEP...]}" && pwd)
out=${2:?usage: run_foundation_checks.sh BUNDLE OUT [STEP...]}
shift 2
steps=${*:-probe nemotron inspect tokenizer watchdog ipc synth cpuref}
mkdir -p "$out"
out=$(cd "$out" && pwd)
models=${MODELS:-/tmp/llmr-models}
work=$(mktemp -d)
mkdir -p "$models"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LLMR_PLUGIN_DIRS="$bundle/plugins/engines"
export PYTHONUNBUFFERED=1
llmr="$bundle/bin/llmr"
tests="$bundle/tests"
data="$bundle/data"
summary=()

note() { summary+=("$1"); echo "== $1"; }
# run NAME CMD...: the command's output to OUT/NAME.log and the terminal; "ok" or the exit code
run() {
  local name=$1; shift
  local t0=$SECONDS
  "$@" 2>&1 | tee "$out/$name.log"
  local rc=${PIPESTATUS[0]}
  if [[ $rc -eq 0 ]]; then status="ok, $((SECONDS - t0)) s"; else status="FAILED (exit $rc, see $name.log)"; fi
}

for step in $steps; do
  case $step in
    probe)
      run probe "$bundle/bin/llmr-gpu-probe"
      note "probe: $status; $(grep -iE 'ran|differ|GB/s' "$out/probe.log" | tr -s ' ' | paste -sd';' | cut -c1-200)"
      ;;
    nemotron)
      run nemotron python3 "$tests/check_nemotron_h.py" "$llmr" "$work/nemotron"
      note "nemotron validation: $status"
      ;;
    inspect)
      snap="$models/20b-zeros"
      if [[ ! -f "$snap/config.json" ]]; then
        "$llmr" model synth --preset gpt-oss-20b --fill zeros --out "$snap" \
          --tokenizer-from "$data/gpt-oss" >"$out/synth-20b-zeros.log" 2>&1 \
          || { note "inspect: synth FAILED (see synth-20b-zeros.log)"; continue; }
      fi
      run inspect python3 "$tests/inspect_vs_safetensors.py" "$llmr" "$snap" 30
      note "inspect 13.8 GB: $status; $(grep -E '^whole command' "$out/inspect.log" | tr -s ' ')"
      ;;
    tokenizer)
      python3 "$tests/make_corpus.py" "$work/corpus" >"$out/corpus.log" 2>&1
      for t in gpt-oss:gpt-oss/tokenizer.json spm-llama2:spm_llama2.json spm-metaspace:spm_metaspace.json; do
        run "tokenizer-${t%%:*}" python3 "$tests/check_tokenizer.py" "$llmr" "$data/${t#*:}" \
          "$work/corpus.jsonl" "${t%%:*}"
        note "tokenizer ${t%%:*} against tokenizers: $status; $(tail -1 "$out/tokenizer-${t%%:*}.log")"
      done
      run tokenizer-bench python3 "$tests/tokenizer_vs_peers.py" "$llmr" "$data/gpt-oss/tokenizer.json" \
        "$data/o200k_base.tiktoken" "$work/corpus.txt" 7
      note "tokenizer speed: $status (table in tokenizer-bench.log)"
      ;;
    watchdog)
      run watchdog bash "$tests/check_watchdog_vram.sh" "$bundle" 8192
      note "watchdog VRAM: $status; $(grep -E 'TIMEOUT to memory back|after \(nvidia' "$out/watchdog.log" | tr -s ' ' | paste -sd';')"
      ;;
    ipc)
      run ipc "$llmr" bench ipc --plugin-dirs "$bundle/plugins/engines"
      note "bench ipc: $status; $(grep -m1 "cost of the hop" "$out/ipc.log")"
      ;;
    synth)
      rm -rf "$work/g20"
      run synth-20b "$llmr" model synth --preset gpt-oss-20b --seed 3 --out "$work/g20" \
        --tokenizer-from "$data/gpt-oss"
      note "synth gpt-oss-20b (random weights): $status; $(du -sb --apparent-size "$work/g20" | awk '{printf "%.1f GB", $1/1e9}')"
      rm -rf "$work/g20"
      ;;
    cpuref)
      for m in gpt-oss-tiny:tiny:1 gpt-oss-20b-2l:l2:2; do
        IFS=: read -r preset name seed <<<"$m"
        if [[ ! -f "$models/$name/config.json" ]]; then
          "$llmr" model synth --preset "$preset" --seed "$seed" --out "$models/$name" \
            --tokenizer-from "$data/gpt-oss" >"$out/synth-$name.log" 2>&1 \
            || { note "cpuref $name: synth FAILED"; continue; }
        fi
        run "cpuref-$name" python3 "$tests/check_gpt_oss.py" "$llmr" "$models/$name" \
          --tolerance fp32 --options '{"cpu":1}'
        note "cpuref $name: $status; $(grep '^RESULT' "$out/cpuref-$name.log" || echo 'no result')"
      done
      ;;
    *) note "unknown step $step" ;;
  esac
done
rm -rf "$work"
echo
echo "==== summary ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null))"
printf '%s\n' "${summary[@]}"
