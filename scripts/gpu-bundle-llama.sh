#!/usr/bin/env bash
# Collects what a GPU machine needs to compare the llama.cpp engine with llmr's own
# gpt-oss engine (tests/gpu/run_llama_cpp_cuda.sh) into OUT (default dist/llama):
# llmr and the shared libraries it uses, the gpt-oss and llama-cpp-cuda plugins
# (llama.cpp's libraries in the latter's lib/), llama.cpp's converter with its gguf-py,
# the pinned source's build files as llama.cpp/source.tar.xz (to build it from source
# there too: tests/gpu/build_llama_cpp_source.sh in a checkout), gpt-oss's tokenizer (gzipped) and the
# scripts; then OUT.tar.xz of it all, and the same cut into OUT.parts/part-NN of
# PART_MB MiB each (default 40) with OUT.parts/SHA256SUMS, for a transfer that limits
# its size (the prebuilt CUDA backend alone is 159 MB, 124 MB packed): on the other
# side, `cat part-* | xz -d | tar -x` after `sha256sum -c SHA256SUMS`.
# Usage: scripts/gpu-bundle-llama.sh BUILD_DIR [OUT]
set -euo pipefail
build=${1:?usage: gpu-bundle-llama.sh BUILD_DIR [OUT]}
out=${2:-dist/llama}
root=$(cd "$(dirname "$0")/.." && pwd)
[[ -d "$build/engines/llama-cpp-cuda" ]] || {
  echo "gpu-bundle-llama: no llama-cpp-cuda plugin in $build (built without nvcc, or the CUDA variant was left out or failed: scripts/llama-cpp.sh --which says why)" >&2
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
# What CMake needs to build libllama and ggml from the pinned source.
(cd "$src" && tar -cf - CMakeLists.txt cmake ggml src include common vendor licenses LICENSE \
   .llmr-source-ok) | xz -T0 -6 >"$out/llama.cpp/source.tar.xz"
gzip -9 -c "$build/data/gpt-oss/tokenizer.json" >"$out/data/gpt-oss/tokenizer.json.gz"
cp "$build/data/gpt-oss/tokenizer_config.json" "$out/data/gpt-oss/"
cp "$root/tests/gpu/run_llama_cpp_cuda.sh" "$out/tests/"
tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -T0 -6 >"$out.tar.xz"
rm -rf "$out.parts"
mkdir -p "$out.parts"
split -b "${PART_MB:-40}M" -d "$out.tar.xz" "$out.parts/part-"
(cd "$out.parts" && sha256sum part-* >SHA256SUMS)
echo "gpu-bundle-llama: $(du -sh "$out" | cut -f1) in $out, $(du -sh "$out.tar.xz" | cut -f1) in $out.tar.xz," \
     "$(ls "$out.parts"/part-* | wc -l) parts in $out.parts"
