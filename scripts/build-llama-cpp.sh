#!/usr/bin/env bash
# Builds llama.cpp, pinned, for the llama_cpp engine plugins, and caches the result.
#
# The source is the git bundle that the npm package node-llama-cpp ships
# (llama/gitRelease.bundle), at the commit pinned below; nothing of llama.cpp is kept
# in this repository.  Two builds come out of one source tree:
#   cpu   always: libllama + ggml with the CPU backend
#   cuda  when nvcc is found (and LLMR_LLAMA_CUDA is not OFF): the same plus ggml's
#         CUDA backend, for the GPU architectures of LLMR_LLAMA_CUDA_ARCHS
# Each lands in CACHE/<commit>/<variant>/{lib,include} with a stamp naming the flags it
# was built with; a variant whose stamp matches is not built again.  CACHE is
# $LLMR_CACHE_DIR/llama.cpp (default ~/.cache/llmr/llama.cpp), so a fresh clone on the
# same machine reuses it.  BUILD/llama.cpp is then a link to CACHE/<commit>, which is
# where CMake looks for it.
#
# The first build of the CUDA backend is long (about an hour on 2 cores: ggml's
# CUDA kernels are many); its output goes to CACHE/<commit>/cuda.log and a line of
# progress is printed every minute.
#
# Usage: scripts/build-llama-cpp.sh BUILD_DIR
# Environment: LLMR_CACHE_DIR, LLMR_LLAMA_CUDA=AUTO|ON|OFF (default AUTO),
#   LLMR_LLAMA_CUDA_ARCHS (default 90a-real), NVCC (default: nvcc on PATH or in
#   /usr/local/cuda/bin), JOBS (default: nproc).
set -euo pipefail
build=${1:?usage: build-llama-cpp.sh BUILD_DIR}

# ---- the pin ------------------------------------------------------------------------
package=node-llama-cpp
version=3.22.1
package_sha256=a0d9dd80eacd2ab1cfe71aee57ac8a806487fd70b3d2a38fbec637752d9e5c5f
commit=de3ff815ea7d559ee917f063901b8986f038abc6

cache_root=${LLMR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/llmr}/llama.cpp
cache=$cache_root/${commit:0:12}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
want_cuda=${LLMR_LLAMA_CUDA:-AUTO}
cuda_archs=${LLMR_LLAMA_CUDA_ARCHS:-90a-real}
nvcc=${NVCC:-$(command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; } || true)}

say() { echo "llama.cpp: $*"; }
fail() {
  echo "llama.cpp: $*" >&2
  exit 1
}

# Flags common to both variants.  x86-64: AVX2/FMA/F16C (x86-64-v3), not the build
# machine's own CPU, so a cached build runs on any machine of that level.
common_flags=(
  -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF
  -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF
  -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF
  "-DCMAKE_INSTALL_RPATH=\$ORIGIN" -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON
)
if [[ $(uname -m) == x86_64 ]]; then
  common_flags+=(-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON)
fi
cuda_flags=(-DGGML_CUDA=ON "-DCMAKE_CUDA_COMPILER=$nvcc" "-DCMAKE_CUDA_ARCHITECTURES=$cuda_archs"
            -DGGML_CUDA_NCCL=OFF)

# ---- the source ---------------------------------------------------------------------
fetch_source() {
  [[ -f "$cache/src/.llmr-source-ok" ]] && return 0
  command -v npm >/dev/null 2>&1 || fail "npm not found: it fetches $package@$version (make deps installs it)"
  command -v git >/dev/null 2>&1 || fail "git not found: it unpacks llama.cpp's source bundle (make deps installs it)"
  local tmp
  tmp=$(mktemp -d)
  say "fetching $package@$version (llama.cpp's source, about 36 MB)"
  (cd "$tmp" && npm pack --silent --fetch-retries=2 --fetch-timeout=120000 "$package@$version" \
     >/dev/null 2>"$tmp/npm.log") \
    || { cat "$tmp/npm.log" >&2; rm -rf "$tmp"; fail "npm pack $package@$version failed (no network?)"; }
  echo "$package_sha256  $tmp/$package-$version.tgz" | sha256sum -c --quiet >/dev/null 2>&1 \
    || { rm -rf "$tmp"; fail "$package-$version.tgz: sha256 is not $package_sha256"; }
  tar -xzf "$tmp/$package-$version.tgz" -C "$tmp" package/llama/gitRelease.bundle \
    || { rm -rf "$tmp"; fail "$package@$version has no llama/gitRelease.bundle"; }
  rm -rf "$cache/src"
  mkdir -p "$cache"
  git clone -q --no-checkout "$tmp/package/llama/gitRelease.bundle" "$cache/src" \
    && git -C "$cache/src" -c advice.detachedHead=false checkout -q "$commit" \
    || { rm -rf "$tmp" "$cache/src"; fail "the bundle of $package@$version does not hold commit $commit"; }
  rm -rf "$tmp"
  touch "$cache/src/.llmr-source-ok"
  say "source at $cache/src (commit ${commit:0:12})"
}

# ---- one variant --------------------------------------------------------------------
# build_variant NAME FLAGS...: configure, build libllama, copy the libraries and
# headers to CACHE/NAME; skipped when CACHE/NAME/stamp names the same flags.
build_variant() {
  local name=$1
  shift
  local stamp="$commit ${*}"
  if [[ -f "$cache/$name/stamp" && "$(cat "$cache/$name/stamp")" == "$stamp" ]]; then
    say "$name build cached in $cache/$name"
    return 0
  fi
  local work="$cache/build-$name" log="$cache/$name.log" start=$SECONDS
  say "building the $name variant with $jobs jobs (log: $log)"
  rm -rf "$cache/$name"
  (cmake -S "$cache/src" -B "$work" "$@" && cmake --build "$work" -j "$jobs" --target llama) \
    >"$log" 2>&1 &
  local pid=$! next=$((SECONDS + 60)) now
  while kill -0 "$pid" 2>/dev/null; do
    sleep 2
    if ((SECONDS >= next)); then
      next=$((SECONDS + 60))
      now=$(grep -o '^\[ *[0-9]*%\]' "$log" | tail -1 || true)
      say "$name: ${now:-configuring} after $(((SECONDS - start) / 60)) min"
    fi
  done
  if ! wait "$pid"; then
    tail -30 "$log" >&2
    fail "the $name build failed; the whole log is $log"
  fi
  mkdir -p "$cache/$name/lib" "$cache/$name/include"
  cp -P "$work"/bin/lib*.so* "$cache/$name/lib/"
  cp "$cache/src/include/llama.h" "$cache/src"/ggml/include/*.h "$cache/$name/include/"
  echo "$stamp" >"$cache/$name/stamp"
  say "$name variant built in $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s: $cache/$name"
}

command -v cmake >/dev/null 2>&1 || fail "cmake not found (make deps installs it)"
# One build of the cache at a time: a second (another checkout's make) waits for the
# first and then finds its result.
mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
if ! flock -n 9; then
  say "another build of llama.cpp is running on this machine: waiting for it"
  flock 9
fi
fetch_source
build_variant cpu "${common_flags[@]}"
case "$want_cuda" in
  OFF) say "CUDA variant not built (LLMR_LLAMA_CUDA=OFF)" ;;
  *)
    if [[ -n "$nvcc" ]]; then
      build_variant cuda "${common_flags[@]}" "${cuda_flags[@]}"
    elif [[ "$want_cuda" == ON ]]; then
      fail "LLMR_LLAMA_CUDA=ON but no nvcc was found"
    else
      say "no nvcc found: only the CPU variant (the CUDA one builds where nvcc is)"
    fi
    ;;
esac
mkdir -p "$build"
ln -sfn "$cache" "$build/llama.cpp"
