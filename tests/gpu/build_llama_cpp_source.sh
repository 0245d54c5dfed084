#!/usr/bin/env bash
# On a GPU machine without a package registry: builds llama.cpp from the pinned source
# that scripts/gpu-bundle-llama.sh packed (BUNDLE/llama.cpp/source.tar.xz), with the
# same script and flags as `LLMR_LLAMA_CPP=source make` (scripts/llama-cpp.sh), then the
# llama-cpp-cuda plugin against it (the plugin's sources compiled directly: the machine
# may lack llmr's own build dependencies), into OUT/plugins/engines/llama-cpp-cuda.  Run
# from a checkout of the same commit as the bundle.  With LLMR_PLUGIN_DIRS=OUT/plugins/engines
# llmr runs GGUF models on this build instead of the prebuilt libraries, for a comparison
# of the two in one run (tests/gpu/run_llama_cpp_cuda.sh with SOURCE_PLUGINS).
#
# Usage: tests/gpu/build_llama_cpp_source.sh BUNDLE OUT
# Environment: LLMR_LLAMA_CUDA_ARCHS (default 90a-real), JOBS (default nproc).
set -euo pipefail
bundle=$(cd "${1:?usage: build_llama_cpp_source.sh BUNDLE OUT}" && pwd)
out=${2:?usage: build_llama_cpp_source.sh BUNDLE OUT}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
commit=$(sed -n 's/^commit=//p' "$root/scripts/llama-cpp.sh")
export LLMR_CACHE_DIR=$out/cache LLMR_LLAMA_CPP=source LLMR_LLAMA_CUDA=ON
src=$LLMR_CACHE_DIR/llama.cpp/${commit:0:12}/src
mkdir -p "$src"
xz -dc "$bundle/llama.cpp/source.tar.xz" | tar -xf - -C "$src"
start=$SECONDS
bash "$root/scripts/llama-cpp.sh" "$out/build"
echo "build_llama_cpp_source: llama.cpp built from source in $((SECONDS - start)) s"

variant=$out/build/llama.cpp/cuda
read -r version ggml_commit <"$variant/release"
plugin=$out/plugins/engines/llama-cpp-cuda
rm -rf "$plugin"
mkdir -p "$plugin/lib"
cp -P "$variant"/lib/lib*.so* "$plugin/lib/"
cc -std=gnu11 -O2 -g -fPIC -shared -fvisibility=hidden -pthread \
  -I"$root/include" -I"$root/engines/llama_cpp" -isystem "$variant/include" \
  -DLLMR_PLUGIN_ID='"llama-cpp-cuda"' -DLLMR_PLUGIN_VERSION='"0.1.0"' -DLLMR_LC_CUDA=1 \
  -DLLMR_LC_GGML_VERSION="\"$version\"" -DLLMR_LC_GGML_COMMIT="\"$ggml_commit\"" \
  -DLLMR_LC_GPU_TARGETS="\"$(cat "$variant/gpu_targets")\"" -DLLMR_LC_PTX_DRIVER="$(cat "$variant/ptx_driver")" \
  "$root"/engines/llama_cpp/*.c -o "$plugin/libllmr_engine_llama_cpp_cuda.so" \
  -L"$variant/lib" -lllama -lggml -lggml-base -lm -ldl '-Wl,-rpath,$ORIGIN/lib'
targets=$(sed 's/\([^ ]*\)/"\1"/g; s/ /, /g' "$variant/gpu_targets")
abi=$(sed -n 's/^#define LLMR_ENGINE_ABI_MAJOR \([0-9]*\)/\1/p' "$root/include/llmr/engine.h").$(sed -n 's/^#define LLMR_ENGINE_ABI_MINOR \([0-9]*\)/\1/p' "$root/include/llmr/engine.h")
cat >"$plugin/manifest.json" <<JSON
{
  "id": "llama-cpp-cuda",
  "version": "0.1.0",
  "abi_version": "$abi",
  "runtimes": ["llama_cpp"],
  "formats": ["gguf"],
  "architectures": ["*"],
  "gpu_targets": [$targets],
  "library": "libllmr_engine_llama_cpp_cuda.so",
  "priority": 0,
  "description": "GGUF models on llama.cpp built from the pinned source (comparison build)"
}
JSON
echo "build_llama_cpp_source: plugin in $plugin (ggml $version, commit $ggml_commit, $(cat "$variant/gpu_targets"))"
