#!/usr/bin/env bash
# Collects what a GPU machine needs to run llmr's GPU checks into OUT (default
# dist/gpu), and OUT.tar.xz of it to carry where the folder is too big: the llmr
# binary, llmr-gpu-probe, the engine plugins (but llama.cpp's), the shared
# libraries they use that a bare CUDA machine may lack, the GPU test and benchmark
# scripts, and their data.  Run binaries from there with
# LD_LIBRARY_PATH=OUT/lib.
# Usage: scripts/gpu-bundle.sh BUILD_DIR [OUT]
set -euo pipefail
build=${1:?usage: gpu-bundle.sh BUILD_DIR [OUT]}
out=${2:-dist/gpu}
root=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/tests"
cp "$build/llmr" "$out/bin/"
if [[ -x "$build/tools/gpu_probe/llmr-gpu-probe" ]]; then
  cp "$build/tools/gpu_probe/llmr-gpu-probe" "$out/bin/"
else
  echo "gpu-bundle: no llmr-gpu-probe in $build (built without nvcc?)" >&2
fi
if [[ -x "$build/tests/gpt-oss-kernel-check" ]]; then
  cp "$build/tests/gpt-oss-kernel-check" "$out/bin/"
fi
for tool in gpt-oss-decode-kernel-bench gpt-oss-step-kernel-bench; do
  if [[ -x "$build/tests/$tool" ]]; then cp "$build/tests/$tool" "$out/bin/"; fi
done
# Libraries outside glibc and the CUDA driver: the GPU machine has those.
for bin in "$out"/bin/*; do
  ldd "$bin" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*|libcuda.so*) ;;
      *) cp -L "$lib" "$out/lib/" ;;
    esac
  done
done
cp "$root"/tests/gpu/* "$root"/bench/*.py "$out/tests/"
# Engine plugins: the installed ones (plugins/engines) but llama.cpp's, which travel in
# their own bundle (scripts/gpu-bundle-llama.sh: the CUDA one alone is 51 MB), and the
# GPU test plugin.
mkdir -p "$out/plugins/engines"
for plugin in "$build"/engines/*/; do
  case "$(basename "$plugin")" in llama-cpp*) ;; *) cp -r "$plugin" "$out/plugins/engines/" ;; esac
done
if [[ -d "$build/tests/plugins/vram_hang" ]]; then cp -r "$build/tests/plugins/vram_hang" "$out/plugins/"; fi
# Tokenizer files for the comparisons: the SentencePiece-style ones the tests make,
# gpt-oss's real one (when the shared data directory is there), o200k_base for tiktoken.
mkdir -p "$out/data"
if [[ -d "$build/data/gpt-oss" ]]; then cp -r "$build/data/gpt-oss" "$out/data/gpt-oss"; fi
LLMR_WRITE_TOKENIZERS="$out/data" "$build/tests/test_tokenizer_spm" >/dev/null
shared="$root/../shared/models/gpt-oss-20b/tokenizer.json"
if [[ ! -f "$out/data/gpt-oss/tokenizer.json" && -f "$shared" ]]; then
  mkdir -p "$out/data/gpt-oss" && cp "$shared" "$out/data/gpt-oss/tokenizer.json"
fi
"$root/scripts/fetch-bench-data.sh" "$build/bench-data" && cp "$build/bench-data/o200k_base.tiktoken" "$out/data/"
tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -T0 -6 >"$out.tar.xz"
echo "gpu-bundle: $(du -sh "$out" | cut -f1) in $out ($(ls "$out/bin" | tr '\n' ' ')), $(du -sh "$out.tar.xz" | cut -f1) in $out.tar.xz"

