#!/usr/bin/env bash
# Installs the Debian packages llmr needs, and only those missing.  Two sets:
#   run   what `make` and `make run` need: the toolchain, the libraries llmr links,
#         git and npm (llama.cpp's source bundle and prebuilt libraries, the dashboard)
#   test  run's, plus what only the tests need: clang for the fuzz targets, python3 for
#         the fake servers, numpy for the GGUF test models, chromium for the dashboard
# Idempotent: with everything present it prints one line and changes nothing.
# Usage: scripts/deps.sh [run|test] [--check]   (default: test; --check: report what is
#        missing, install nothing)
set -euo pipefail

set_name=test
check=
for arg in "$@"; do
  case "$arg" in
    run | test) set_name=$arg ;;
    --check) check=1 ;;
    *) echo "usage: scripts/deps.sh [run|test] [--check]" >&2; exit 2 ;;
  esac
done

# Keep these lists the single place that names dependencies (see docs/building.md).
run_packages=(
  gcc make cmake pkg-config     # toolchain
  libjansson-dev                # JSON
  libpcre2-dev                  # tokenizer pre-split regexes (UTF + UCP, JIT)
  libutf8proc-dev               # tokenizer Unicode normalization and properties
  libmicrohttpd-dev             # the HTTP servers (node, router)
  libcurl4-openssl-dev          # the HTTP client (model sync, the router link)
  libsqlite3-dev                # the router's store (models, nodes, keys, request log)
  git                           # unpacks llama.cpp's pinned source bundle
)
test_packages=(
  clang libclang-rt-14-dev      # libFuzzer targets (make fuzz) and their runtime
  python3 curl                  # test helpers: the fake origin, HTTP checks
  openssl                       # test_tls makes its CA and certificates
  python3-numpy                 # llama.cpp's gguf-py, which writes the GGUF test models
  chromium                      # the dashboard's browser tests (driven by playwright-core)
)
packages=("${run_packages[@]}")
[[ $set_name == test ]] && packages+=("${test_packages[@]}")
# Commands that may come from elsewhere than Debian's package of the same name (a
# newer Node.js brings its own npm): installed from Debian only when missing.  Both
# sets need them: npm fetches llama.cpp and builds the dashboard.
declare -A commands=([node]=nodejs [npm]=npm)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
for c in "${!commands[@]}"; do
  command -v "$c" >/dev/null 2>&1 || missing+=("${commands[$c]}")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "deps: all ${#packages[@]} packages and ${#commands[@]} commands for $set_name present"
  exit 0
fi
if [[ -n $check ]]; then
  echo "deps: missing: ${missing[*]}" >&2
  exit 1
fi

as_root=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    echo "deps: missing ${missing[*]}; run as root: apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

# One install at a time (`make -j test` starts both sets' checks at once).
exec 9>"${TMPDIR:-/tmp}/llmr-deps.lock"
flock 9
echo "deps: installing ${missing[*]} (for $set_name)"
start=$SECONDS
export DEBIAN_FRONTEND=noninteractive
# A fresh image may have no package lists yet; refresh them only when the install needs it.
if ! "${as_root[@]}" apt-get install -y --no-install-recommends "${missing[@]}"; then
  "${as_root[@]}" apt-get update
  "${as_root[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi
echo "deps: installed ${#missing[@]} packages in $((SECONDS - start)) s"
