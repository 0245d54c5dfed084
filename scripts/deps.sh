#!/usr/bin/env bash
# Installs the Debian packages llmr's build and tests need, and only those missing.
# Idempotent: with everything present it prints one line and changes nothing.
# Usage: scripts/deps.sh [--check]   (--check: report what is missing, install nothing)
set -euo pipefail

# Keep this list the single place that names build dependencies (see docs/building.md).
packages=(
  gcc make cmake pkg-config     # toolchain
  libjansson-dev                # JSON
  libpcre2-dev                  # tokenizer pre-split regexes (UTF + UCP, JIT)
  libutf8proc-dev               # tokenizer Unicode normalization and properties
  clang libclang-rt-14-dev      # libFuzzer targets (make fuzz) and their runtime
  libmicrohttpd-dev             # the HTTP servers (node, router)
  libcurl4-openssl-dev          # the HTTP client (model sync, the router link)
  libsqlite3-dev                # the router's store (models, nodes, keys, request log)
  python3 curl                  # test helpers: the fake origin, HTTP checks
  git                           # unpacks llama.cpp's pinned source bundle
  python3-numpy                 # llama.cpp's gguf-py, which writes the GGUF test models
  chromium                      # the dashboard's browser tests (driven by playwright-core)
)
# Commands that may come from elsewhere than Debian's package of the same name (a
# newer Node.js brings its own npm): installed from Debian only when missing.
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
  echo "deps: all ${#packages[@]} build packages and ${#commands[@]} commands present"
  exit 0
fi
if [[ "${1:-}" == "--check" ]]; then
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

echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# A fresh image may have no package lists yet; refresh them only when the install needs it.
if ! "${as_root[@]}" apt-get install -y --no-install-recommends "${missing[@]}"; then
  "${as_root[@]}" apt-get update
  "${as_root[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi
