#!/usr/bin/env bash
# The llama.cpp engine on a GPU machine, in one command: the synthetic gpt-oss-20b
# (`llmr model synth`), its GGUF conversion by llama.cpp's own converter (MXFP4
# experts kept as MXFP4, the other weights bf16 as in the snapshot), a short greedy
# run of the GGUF through the llama-cpp-cuda plugin, the logits of llama.cpp against
# llmr's engine on the same weights (20b, and the 2-layer preset on the GPU and on
# llama.cpp's CPU backend), then `llmr bench engine` on the
# GGUF (llama.cpp) and on the safetensors (llmr's gpt-oss engine), same model, same
# machine, same call.  Logs go to OUT; a summary table comes last.
#
# The first loads on the bundle's llama.cpp (the prebuilt libraries) are timed: on a GPU
# with no machine code of its own in them (Hopper) the driver compiles their PTX then,
# and caches it; where the driver cannot (older than CUDA 13.1), the plugin refuses the
# GPU, and that is reported.  With SOURCE_PLUGINS=DIR (a plugin directory from
# tests/gpu/build_llama_cpp_source.sh), llama.cpp built from source is benchmarked in
# the same run beside the prebuilt one, or runs the checks where the prebuilt one cannot.
#
# Usage: tests/gpu/run_llama_cpp_cuda.sh BUNDLE OUT
#   BUNDLE: what scripts/gpu-bundle-llama.sh assembled (dist/llama).
#   Environment: MODELS (default /tmp/llmr-models); BENCH_ARGS adds arguments to
#   every `llmr bench engine` run (default "--runs 3"); SOURCE_PLUGINS (above).
set -uo pipefail
bundle=$(cd "${1:?usage: run_llama_cpp_cuda.sh BUNDLE OUT}" && pwd)
out=${2:?usage: run_llama_cpp_cuda.sh BUNDLE OUT}
mkdir -p "$out"
models=${MODELS:-/tmp/llmr-models}
mkdir -p "$models"
# llama.cpp's CUDA backend links the CUDA runtime and cuBLAS: the machine's toolkit
# (or the Python wheels') provide them.
cuda_libs=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /opt /usr/lib -name 'libcublas.so.13*' \
              -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)
cudart_libs=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /opt /usr/lib -name 'libcudart.so.13*' \
              -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)
export LD_LIBRARY_PATH="$bundle/lib:$cuda_libs:$cudart_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LLMR_PLUGIN_DIRS="$bundle/plugins/engines"
export PYTHONUNBUFFERED=1
llmr="$bundle/bin/llmr"
summary=()
note() { summary+=("$1"); echo "== $1"; }
note "cuBLAS from: ${cuda_libs:-not found}; CUDA runtime from: ${cudart_libs:-not found}"

if [[ ! -f "$bundle/data/gpt-oss/tokenizer.json" && -f "$bundle/data/gpt-oss/tokenizer.json.gz" ]]; then
  gunzip -k "$bundle/data/gpt-oss/tokenizer.json.gz"
fi

# synth PRESET NAME SEED: the snapshot; convert NAME: its GGUF in NAME-gguf/.
synth() {
  local t0=$SECONDS
  if [[ ! -f "$models/$2/config.json" ]]; then
    "$llmr" model synth --preset "$1" --seed "$3" --out "$models/$2" \
      --tokenizer-from "$bundle/data/gpt-oss" >"$out/synth-$2.log" 2>&1 \
      || { note "synth $2: FAILED (synth-$2.log)"; tail -5 "$out/synth-$2.log"; return 1; }
  fi
  note "synth $1: $((SECONDS - t0)) s, $(du -sh "$models/$2" | cut -f1)"
}
convert() {
  local t0=$SECONDS
  mkdir -p "$models/$1-gguf"
  if [[ ! -f "$models/$1-gguf/model.gguf" ]]; then
    python3 "$bundle/llama.cpp/convert_hf_to_gguf.py" "$models/$1" --outtype bf16 \
      --outfile "$models/$1-gguf/model.gguf" >"$out/convert-$1.log" 2>&1
    note "convert_hf_to_gguf $1 (bf16 + MXFP4 experts): rc $?, $((SECONDS - t0)) s, $(du -sh "$models/$1-gguf/model.gguf" | cut -f1)"
    grep -c "quantization MXFP4" "$out/convert-$1.log" | sed 's/^/  expert tensors repacked as MXFP4: /'
  fi
}
# compare NAME [OPTIONS_JSON]: the same function?  Logits of all 64 positions of one
# input from llama.cpp (the GGUF; OPTIONS_JSON are its load options) and from llmr's
# gpt-oss engine (the safetensors): relative L2 at position 0 (no attention across
# tokens yet), median and max over positions, and top-1 agreement.
compare() {
  local name=$1 opts=${2:-'{}'} tag
  tag=$name$([[ $opts == '{}' ]] || echo -cpu)
  "$llmr" logits "$models/$name-gguf" --ids "$ids" --all "$out/logits-llama-cpp-$tag.f32" \
    --options "$opts" >/dev/null 2>"$out/logits-llama-cpp-$tag.err"
  local rc1=$?
  [[ -f "$out/logits-llmr-$name.f32" ]] || "$llmr" logits "$models/$name" --ids "$ids" \
    --all "$out/logits-llmr-$name.f32" >/dev/null 2>"$out/logits-llmr-$name.err"
  python3 - "$out/logits-llama-cpp-$tag.f32" "$out/logits-llmr-$name.f32" 64 \
    >"$out/logits-compare-$tag.log" 2>&1 <<'PY'
import sys
import numpy as np
a = np.fromfile(sys.argv[1], dtype=np.float32); b = np.fromfile(sys.argv[2], dtype=np.float32)
n = int(sys.argv[3])
a = a.reshape(n, -1); b = b.reshape(n, -1)
v = min(a.shape[1], b.shape[1]); a = a[:, :v].astype(np.float64); b = b[:, :v].astype(np.float64)
rel = np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1)
top1 = (a.argmax(1) == b.argmax(1)).mean()
print(f"relative L2 at position 0 {rel[0]:.2e}, median {np.median(rel):.2e}, max {rel.max():.2e}; "
      f"top-1 agreement {100*top1:.1f}% (vocab {v})")
PY
  note "logits llama.cpp$([[ $opts == '{}' ]] || echo " $opts") vs llmr, $name, 64 positions: rc $rc1: $(tail -1 "$out/logits-compare-$tag.log")"
}

# first_loads NAME: short greedy runs of the GGUF, each a process of its own, timed: the
# first compiles the PTX and fills the driver's cache, the second should find it there;
# if it does not (a cache too small for it), two more with a 4 GiB cache.
first_loads() {
  local i t0 secs=0
  for i in 1 2 3 4; do
    if ((i == 3)); then
      awk -v s="$secs" 'BEGIN { exit !(s > 20) }' || break
      export CUDA_CACHE_MAXSIZE=4294967296
    fi
    t0=$(date +%s.%N)
    "$llmr" run "$models/$1-gguf" --prompt-ids 1000,1037 --max-tokens 4 --temperature 0 --json \
      >"$out/first-load-$i.log" 2>&1
    local rc=$?
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    note "run $i of the $1 GGUF on llama-cpp-cuda (load included${CUDA_CACHE_MAXSIZE:+, CUDA_CACHE_MAXSIZE=$CUDA_CACHE_MAXSIZE}): rc $rc, $secs s"
  done
}

# use_source: llama-cpp-cuda from SOURCE_PLUGINS (waiting up to SOURCE_WAIT seconds for
# a build still running beside this), the other plugins from the bundle.
use_source() {
  local w
  for ((w = 0; w < ${SOURCE_WAIT:-0}; w += 5)); do
    [[ -f $SOURCE_PLUGINS/llama-cpp-cuda/manifest.json ]] && break
    sleep 5
  done
  [[ -f $SOURCE_PLUGINS/llama-cpp-cuda/manifest.json ]] || { note "no source build in $SOURCE_PLUGINS"; return 1; }
  mkdir -p "$out/plugins-source"
  ln -sfn "$bundle/plugins/engines/gpt-oss" "$out/plugins-source/gpt-oss"
  ln -sfn "$SOURCE_PLUGINS/llama-cpp-cuda" "$out/plugins-source/llama-cpp-cuda"
  export LLMR_PLUGIN_DIRS=$out/plugins-source
}
# bench_gguf TAG: llmr bench engine on the 20b GGUF with the llama-cpp-cuda in use.
bench_gguf() {
  # shellcheck disable=SC2086
  "$llmr" bench engine "$models/20b-gguf" --json "$out/bench-$1.json" ${BENCH_ARGS:---runs 3} \
    >"$out/bench-$1.log" 2>&1
  note "llama.cpp $1 (bench engine on the GGUF): rc $?"
  grep -v "setting token\|WARN\|INFO\|DEBUG" "$out/bench-$1.log" | tail -20
}

ids=$(seq 1000 37 9000 | head -64 | paste -sd,)
prebuilt_dirs=$LLMR_PLUGIN_DIRS
primary=prebuilt
synth gpt-oss-20b-2l 2l 2 && convert 2l && first_loads 2l
if ! grep -q '"index"' "$out/first-load-1.log"; then
  note "the prebuilt library does not run here: $(grep -o 'llama.cpp.s CUDA library here.*\|CUDA error.*' "$out/first-load-1.log" | head -1)"
  if [[ -n ${SOURCE_PLUGINS:-} ]] && use_source; then
    primary=source
    note "the checks below run on llama.cpp built from source ($SOURCE_PLUGINS)"
  fi
fi
compare 2l && compare 2l '{"cpu":1}'
synth gpt-oss-20b 20b 3 && convert 20b
"$llmr" inspect "$models/20b-gguf" >"$out/inspect-gguf.json" 2>&1
note "inspect GGUF: $(grep -E '"runtime"|"architecture"' "$out/inspect-gguf.json" | sort -u | tr -d ' \n')"
"$llmr" run "$models/20b-gguf" --prompt-ids "$ids" --max-tokens 16 --temperature 0 --json \
  >"$out/run-gguf.log" 2>"$out/run-gguf.err"
note "run GGUF on llama-cpp-cuda ($primary): rc $?, $(grep -c '"index"' "$out/run-gguf.log") tokens; $(grep -o 'on the GPU\|on the CPU' "$out/run-gguf.err" | sort -u | tr '\n' ' ')"
compare 20b
bench_gguf "$primary"
# shellcheck disable=SC2086
"$llmr" bench engine "$models/20b" --json "$out/bench-llmr.json" ${BENCH_ARGS:---runs 3} \
  >"$out/bench-llmr.log" 2>&1
note "llmr gpt-oss (bench engine on the safetensors): rc $?"
grep -v "WARN\|INFO\|DEBUG" "$out/bench-llmr.log" | tail -20
# Both builds of llama.cpp in this run, when both run here.
if [[ $primary == prebuilt && -n ${SOURCE_PLUGINS:-} ]] && use_source; then
  bench_gguf source
  export LLMR_PLUGIN_DIRS=$prebuilt_dirs
  bench_gguf prebuilt-again
fi

echo
echo "==== summary ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null))"
printf '%s\n' "${summary[@]}"
