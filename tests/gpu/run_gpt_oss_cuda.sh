#!/usr/bin/env bash
# The gpt-oss CUDA path on a GPU machine, in one command: the kernel check against the
# CPU reference, the end-to-end checks against transformers (tiny, 20b-2l and 120b-2l,
# bf16 tolerance), compute-sanitizer memcheck and racecheck on the tiny preset, and
# `llmr bench engine` on a full-size synthetic gpt-oss-20b beside transformers on the
# same weights.  Logs go to OUT; a summary table comes last.
#
# Usage: tests/gpu/run_gpt_oss_cuda.sh BUNDLE OUT [STEP...]
#   BUNDLE: what `make gpu-bundle` assembled (dist/gpu); OUT: a folder for the logs.
#   STEPs (default: all, in this order): kernels e2e sanitize bench peer
#   (and, asked for by name: `profile`, Nsight Compute's time per kernel over a 64-token
#   prompt and 3 decode steps of the 20b preset; `serve`, `llmr bench serve` against a
#   node serving the 20b preset, many users at once; `serve120`, the same and `llmr bench
#   engine` for full-size gpt-oss-120b (`--fill sparse`: the experts' blocks zeros, the
#   rest random), SERVE120_ARGS replacing the bench's arguments (default 64 streams, 512
#   sharegpt-like requests); `batch`, how many of 64 concurrent
#   greedy continuations equal their solo run, tests/gpu/check_batch_equal.py; `sampling`,
#   the GPU's pick (penalties, top_logprobs) against the CPU sampler's,
#   tests/gpu/check_pick_vs_cpu.py; `soak`, 128
#   streams for 5 minutes with clients that go away, tests/gpu/soak_serve.py)
#   Environment: MODELS (default /tmp/llmr-models) holds the synthetic snapshots;
#   BENCH_ARGS adds arguments to `llmr bench engine`, PEER_ARGS to the peer script,
#   SERVE_ARGS to `llmr bench serve`; SERVE_OPTIONS are the node's engine options
#   (default {"ignore_eos":1}); SERVE_TAG names the serve step's logs (default serve);
#   SOAK_ARGS adds arguments to soak_serve.py; BATCH_OPTIONS are the engine options of the
#   batch step's node (default {}), BATCH_TAG names its logs (default batch); the e2e
#   step checks E2E_MODELS (default: tiny l2 l120) with the engine options E2E_OPTIONS
#   (e.g. {"kv_dtype":"fp8"}), its logs tagged E2E_TAG.
set -uo pipefail
E2E_TAG=${E2E_TAG:-}
bundle=$(cd "${1:?usage: run_gpt_oss_cuda.sh BUNDLE OUT [STEP...]}" && pwd)
out=${2:?usage: run_gpt_oss_cuda.sh BUNDLE OUT [STEP...]}
shift 2
steps=${*:-kernels e2e sanitize bench peer}
mkdir -p "$out"
models=${MODELS:-/tmp/llmr-models}
mkdir -p "$models"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LLMR_PLUGIN_DIRS="$bundle/plugins/engines"
export PYTHONUNBUFFERED=1
llmr="$bundle/bin/llmr"
summary=()

note() { summary+=("$1"); echo "== $1"; }

# start_node TAG MODEL_SUBDIR NAME OPTIONS: a node serving $models/MODEL_SUBDIR as NAME
# (logs in TAG-node.log), run under $NODE_WRAP when set (e.g. compute-sanitizer); sets
# node (its pid) and url.
start_node() {
  local data port=
  data=$(mktemp -d /tmp/llmr-node-XXXXXX)
  mkdir -p "$data/models"
  ln -s "$models/$2" "$data/models/$3"
  # shellcheck disable=SC2086
  LLMR_DATA_DIR="$data" ${NODE_WRAP:-} "$llmr" node --host 127.0.0.1 --port 0 --engine-options "$4" \
    >"$out/$1-node.log" 2>&1 &
  node=$!
  for _ in $(seq 1200); do
    port=$(cat "$data/run/http.port" 2>/dev/null)
    [[ $port =~ ^[0-9]+$ ]] && break
    port=
    sleep 0.1
  done
  if [[ -z $port ]]; then
    note "$1: the node wrote no port ($1-node.log)"
    kill "$node" 2>/dev/null
    return 1
  fi
  url="http://127.0.0.1:$port"
}

stop_node() { kill "$node" 2>/dev/null; wait "$node" 2>/dev/null; }

synth() { # PRESET NAME SEED [FLAGS...]
  if [[ ! -f "$models/$2/config.json" ]]; then
    local t0=$SECONDS
    "$llmr" model synth --preset "$1" --seed "$3" --out "$models/$2" "${@:4}" \
      --tokenizer-from "$bundle/data/gpt-oss" >"$out/synth-$2.log" 2>&1 \
      || { note "synth $2: FAILED (see synth-$2.log)"; return 1; }
    note "synth $2: $((SECONDS - t0)) s"
  fi
}

for step in $steps; do
  case $step in
    kernels)
      "$bundle/bin/gpt-oss-kernel-check" 2>&1 | tee "$out/kernels.log"
      note "kernels: $(grep '^RESULT' "$out/kernels.log" || echo 'no result (crashed?)')"
      ;;
    e2e)
      synth gpt-oss-tiny tiny 1 && synth gpt-oss-20b-2l l2 2 && synth gpt-oss-120b-2l l120 4
      for m in ${E2E_MODELS:-tiny l2 l120}; do
        python3 "$bundle/tests/check_gpt_oss.py" "$llmr" "$models/$m" --tolerance bf16 \
          ${E2E_OPTIONS:+--options "$E2E_OPTIONS"} 2>&1 | tee "$out/e2e$E2E_TAG-$m.log"
        note "e2e$E2E_TAG $m ${E2E_OPTIONS:-}: $(grep '^RESULT' "$out/e2e$E2E_TAG-$m.log" || echo 'no result')"
      done
      ;;
    sanitize)
      synth gpt-oss-tiny tiny 1
      ids=$(seq 1000 37 12000 | head -200 | paste -sd,)
      for tool in memcheck racecheck; do
        compute-sanitizer --tool "$tool" --error-exitcode 3 "$llmr" logits "$models/tiny" \
          --ids "$ids" --top 3 >"$out/sanitize-$tool-logits.log" 2>&1
        rc1=$?
        compute-sanitizer --tool "$tool" --error-exitcode 3 "$llmr" run "$models/tiny" \
          --prompt-ids "$ids" --temperature 0.7 --max-tokens 40 --json \
          >"$out/sanitize-$tool-run.log" 2>&1
        rc2=$?
        note "compute-sanitizer $tool: logits rc $rc1, run rc $rc2; $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$out"/sanitize-$tool-*.log | tr '\n' ' ')"
        # a batch of several sequences, paged: six requests of different lengths at once
        # to a node whose worker runs under the tool
        NODE_WRAP="compute-sanitizer --tool $tool --target-processes all" \
          start_node "sanitize-$tool-batch" tiny tiny '{}' || continue
        for n in 1 2 3 4 5 6; do
          p=$(seq $((1000 + n)) 53 $((1000 + n * 700)) | head -$((n * 40)) | paste -sd,)
          LD_LIBRARY_PATH= curl -s -m 300 "$url/v1/completions" -H 'Content-Type: application/json' \
            -d "{\"model\":\"tiny\",\"prompt\":[$p],\"max_tokens\":$((n * 9)),\"temperature\":0.7}" \
            >"$out/sanitize-$tool-batch-$n.json" &
        done
        # shellcheck disable=SC2046
        wait $(jobs -p | grep -v "^$node\$") 2>/dev/null
        answered=$(grep -l '"choices"' "$out"/sanitize-$tool-batch-*.json 2>/dev/null | wc -l)
        # SIGINT to the node itself (under the tool; its log names its pid), which stops
        # its worker: both exit and the tool reports them
        pid=$(grep -o 'node running (pid [0-9]*' "$out/sanitize-$tool-batch-node.log" | grep -o '[0-9]*$')
        kill -INT "${pid:-$node}" 2>/dev/null
        for _ in $(seq 120); do kill -0 "$node" 2>/dev/null || break; sleep 0.5; done
        kill -KILL "$node" 2>/dev/null
        wait "$node" 2>/dev/null
        note "compute-sanitizer $tool, 6 requests at once through a node: $answered answered; $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize-$tool-batch-node.log" | tr '\n' ' ')"
      done
      ;;
    bench)
      synth gpt-oss-20b 20b 3 || continue
      # shellcheck disable=SC2086
      "$llmr" bench engine "$models/20b" --json "$out/bench-llmr.json" ${BENCH_ARGS:-} \
        2>&1 | tee "$out/bench-llmr.log"
      note "llmr bench engine: $(tail -1 "$out/bench-llmr.log")"
      ;;
    peer)
      synth gpt-oss-20b 20b 3 || continue
      # shellcheck disable=SC2086
      python3 "$bundle/tests/bench_transformers.py" "$models/20b" ${PEER_ARGS:-} \
        2>&1 | tee "$out/bench-transformers.log"
      note "transformers: $(tail -1 "$out/bench-transformers.log")"
      ;;
    profile)
      synth gpt-oss-20b 20b 3 || continue
      ids=$(seq 1000 37 9000 | head -64 | paste -sd,)
      ncu --clock-control none --target-processes all --metrics gpu__time_duration.sum \
        --print-summary per-kernel "$llmr" run "$models/20b" --prompt-ids "$ids" \
        --max-tokens 3 --temperature 0 >"$out/profile.log" 2>&1
      note "profile: rc $? (profile.log: time per kernel)"
      ;;
    serve)
      synth gpt-oss-20b 20b 3 || continue
      tag=${SERVE_TAG:-serve}
      start_node "$tag" 20b gpt-oss-20b "${SERVE_OPTIONS:-{\"ignore_eos\":1\}}" || continue
      # shellcheck disable=SC2086
      "$llmr" bench serve --url "$url" --model gpt-oss-20b ${SERVE_ARGS:-} \
        --json "$out/$tag.json" >/dev/null 2>"$out/$tag.log"
      rc=$?
      cat "$out/$tag.log"
      note "$tag (bench serve rc $rc):"
      while IFS= read -r line; do summary+=("  $line"); done < <(sed -n '/^streams requests/,$p' "$out/$tag.log")
      stop_node
      ;;
    serve120)
      # gpt-oss-120b on a small disk: the experts' blocks sparse zeros, the rest random
      synth gpt-oss-120b 120b 5 --fill sparse || continue
      note "120b on disk: $(du -sh "$models/120b" | cut -f1) of $(du -sh --apparent-size "$models/120b" | cut -f1)"
      "$llmr" bench engine "$models/120b" --prompts 512 --contexts 0 --runs 2 \
        >"$out/bench120.log" 2>&1
      note "120b bench engine (rc $?):"
      while IFS= read -r line; do summary+=("  $line"); done < <(grep -E 'decode|prefill|TTFT' "$out/bench120.log")
      start_node serve120 120b gpt-oss-120b '{"ignore_eos":1}' || continue
      # shellcheck disable=SC2086
      "$llmr" bench serve --url "$url" --model gpt-oss-120b ${SERVE120_ARGS:---workload sharegpt-like --concurrency 64 --requests 512} \
        --json "$out/serve120.json" >/dev/null 2>"$out/serve120.log"
      rc=$?
      cat "$out/serve120.log"
      note "serve120 (bench serve rc $rc):"
      while IFS= read -r line; do summary+=("  $line"); done < <(sed -n '/^streams requests/,$p' "$out/serve120.log")
      stop_node
      ;;
    soak)
      synth gpt-oss-20b 20b 3 || continue
      start_node soak 20b gpt-oss-20b '{}' || continue
      # shellcheck disable=SC2086
      python3 "$bundle/tests/soak_serve.py" "$url" gpt-oss-20b ${SOAK_ARGS:-} 2>&1 | tee "$out/soak.log"
      note "soak: $(grep '^soak:' "$out/soak.log") $(grep '^KV' "$out/soak.log") $(grep '^RESULT' "$out/soak.log" || echo 'no result')"
      stop_node
      ;;
    sampling)
      # the GPU's pick (penalties, top_logprobs) against the CPU sampler's, same logits
      synth gpt-oss-20b 20b 3 || continue
      start_node pen-gpu 20b gpt-oss-20b '{"batch_invariant":1}' || continue
      python3 "$bundle/tests/check_pick_vs_cpu.py" "$url" gpt-oss-20b --save "$out/pen-gpu.json" \
        2>&1 | tee "$out/pen-gpu.log"
      stop_node
      start_node pen-cpu 20b gpt-oss-20b '{"batch_invariant":1,"host_sampler":1}' || continue
      python3 "$bundle/tests/check_pick_vs_cpu.py" "$url" gpt-oss-20b --compare "$out/pen-gpu.json" \
        2>&1 | tee "$out/pen-cpu.log"
      note "sampling: $(grep '^RESULT' "$out/pen-cpu.log" || echo 'no result')"
      stop_node
      ;;
    batch)
      synth gpt-oss-20b 20b 3 || continue
      tag=${BATCH_TAG:-batch}
      start_node "$tag" 20b gpt-oss-20b "${BATCH_OPTIONS:-{\}}" || continue
      python3 "$bundle/tests/check_batch_equal.py" "$url" gpt-oss-20b 2>&1 | tee "$out/$tag.log"
      note "$tag ${BATCH_OPTIONS:-{\}}: $(grep '^RESULT' "$out/$tag.log" || echo 'no result')"
      stop_node
      ;;
    *) note "unknown step $step" ;;
  esac
done
echo
echo "==== summary ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null))"
printf '%s\n' "${summary[@]}"
