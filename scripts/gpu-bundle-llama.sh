#!/usr/bin/env bash
# Collects what a GPU machine needs to compare the llama.cpp engine with llmr's own
# gpt-oss engine (tests/gpu/run_llama_cpp_cuda.sh) into OUT (default dist/llama),
# small enough to carry: llmr and the shared libraries it uses, the gpt-oss and
# llama-cpp-cuda plugins (llama.cpp's libraries in the latter's lib/), llama.cpp's
# converter with its gguf-py (from the pinned source the build unpacked), gpt-oss's
# tokenizer (gzipped) and the run script; and OUT.tar.xz of it all (about 33 MB: the
# CUDA backend alone is 46 MB unpacked), to carry where the folder is too big.
# Usage: scripts/gpu-bundle-llama.sh BUILD_DIR [OUT]
set -euo pipefail
build=${1:?usage: gpu-bundle-llama.sh BUILD_DIR [OUT]}
out=${2:-dist/llama}
root=$(cd "$(dirname "$0")/.." && pwd)
[[ -d "$build/engines/llama-cpp-cuda" ]] || {
  echo "gpu-bundle-llama: no llama-cpp-cuda plugin in $build (built without nvcc, or llama.cpp's CUDA variant failed)" >&2
  exit 1
}
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/tests" "$out/plugins/engines" "$out/data/gpt-oss" "$out/llama.cpp"
cp "$build/llmr" "$out/bin/"
ldd "$build/llmr" | awk '/=> \// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*|libcuda.so*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
cp -r "$build/engines/gpt-oss" "$build/engines/llama-cpp-cuda" "$out/plugins/engines/"
src="$build/llama.cpp/src"
cp "$src/convert_hf_to_gguf.py" "$out/llama.cpp/"
cp -r "$src/conversion" "$src/gguf-py" "$out/llama.cpp/"
find "$out/llama.cpp" -name '__pycache__' -prune -exec rm -rf {} +
gzip -9 -c "$build/data/gpt-oss/tokenizer.json" >"$out/data/gpt-oss/tokenizer.json.gz"
cp "$build/data/gpt-oss/tokenizer_config.json" "$out/data/gpt-oss/"
cp "$root/tests/gpu/run_llama_cpp_cuda.sh" "$out/tests/"
tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -T0 -6 >"$out.tar.xz"
echo "gpu-bundle-llama: $(du -sh "$out" | cut -f1) in $out, $(du -sh "$out.tar.xz" | cut -f1) in $out.tar.xz"
