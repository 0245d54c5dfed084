#!/usr/bin/env bash
# Where scripts/llama-cpp.sh takes llama.cpp from, per machine: the prebuilt CUDA
# library where the GPU can run it; none where it cannot (Hopper under a driver older
# than CUDA 13.1's, any GPU under a driver older than CUDA 13's), since a build from
# source is never done unasked; a build from source for this machine's GPU when asked
# (LLMR_LLAMA_CPP=source); none without nvcc.  A fake nvidia-smi plays the GPU (one that
# fails plays a machine without one, whatever this machine has).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0 passed=0
printf '#!/bin/sh\necho "Cuda compilation tools, release 13.0, V13.0.88"\n' >"$tmp/nvcc"
chmod +x "$tmp/nvcc"

# expect CASE CC CUDA WANT [ENV...]: with a GPU of compute capability CC under a driver
# for CUDA CUDA ("" for no nvidia-smi), --which says WANT for cuda.
expect() {
  local name=$1 cc=$2 cuda=$3 want=$4 bin=$tmp/$1
  shift 4
  mkdir -p "$bin"
  if [[ -n $cc ]]; then
    printf '#!/bin/sh\ncase "$*" in *compute_cap*) echo %s;; *) echo "| Driver Version: 580.159.04   CUDA Version: %s |";; esac\n' \
      "$cc" "$cuda" >"$bin/nvidia-smi"
  else
    printf '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver" >&2\nexit 9\n' >"$bin/nvidia-smi"
  fi
  chmod +x "$bin/nvidia-smi"
  local got
  got=$(env PATH="$bin:/usr/bin:/bin" NVCC="$tmp/nvcc" "$@" "$root/scripts/llama-cpp.sh" --which 2>&1 | grep '^cuda:')
  if [[ "$got" == "cuda: $want"* ]]; then
    passed=$((passed + 1))
  else
    echo "FAIL $name: expected 'cuda: $want...', got '$got'"
    failed=$((failed + 1))
  fi
}

expect hopper-cuda-13.0 9.0 13.0 "none (this machine's GPU (compute capability 9.0, driver for CUDA 13.0) cannot run"
expect hopper-cuda-13.1 9.0 13.1 "prebuilt"
expect a100-cuda-13.0 8.0 13.0 "none (this machine's GPU (compute capability 8.0"
expect rtx3090-cuda-13.0 8.6 13.0 "prebuilt"
expect rtx4090-cuda-12.9 8.9 12.9 "none (this machine's GPU (compute capability 8.9, driver for CUDA 12.9)"
expect rtx4090-cuda-13.0 8.9 13.0 "prebuilt"
expect blackwell-cuda-13.0 12.0 13.0 "prebuilt"
expect no-gpu "" "" "prebuilt"
expect asked-for-prebuilt 9.0 13.0 "prebuilt" LLMR_LLAMA_CUDA_PREBUILT_ANYWAY=1
expect asked-for-source-on-hopper 9.0 13.0 "source, for 90a-real" LLMR_LLAMA_CPP=source
expect asked-for-source-on-a100 8.0 13.0 "source, for 80-real" LLMR_LLAMA_CPP=source
expect asked-for-archs 9.0 13.0 "source, for 90-real" LLMR_LLAMA_CPP=source LLMR_LLAMA_CUDA_ARCHS=90-real
expect asked-for-source-no-gpu "" "" "source, for 90a-real" LLMR_LLAMA_CPP=source
expect asked-for-none 9.0 13.0 "none (LLMR_LLAMA_CUDA=OFF" LLMR_LLAMA_CUDA=OFF
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
