#!/usr/bin/env bash
# The llama.cpp engine tests' models, into OUT: tiny/ (make_tiny_gguf.py), the three
# that llama.cpp must refuse (bad-wrong-shape/, bad-missing-tensor/,
# bad-unknown-arch/) and truncated/ (tiny's model.gguf cut in half).  The tokenizer is
# gpt-oss's, from the build's data/gpt-oss or the shared data directory.
# Usage: make_tiny_gguf.sh OUT GGUF_PY_DIR TOKENIZER_DIR
set -euo pipefail
out=${1:?usage: make_tiny_gguf.sh OUT GGUF_PY_DIR TOKENIZER_DIR}
gguf_py=${2:?}
tok_dir=${3:?}
here=$(cd "$(dirname "$0")" && pwd)
if [[ ! -f "$tok_dir/tokenizer.json" && -n "${LLMR_SHARED_DIR:-}" ]]; then
  tok_dir="$LLMR_SHARED_DIR/models/gpt-oss-20b"
fi
[[ -f "$tok_dir/tokenizer.json" ]] || { echo "FAIL: no gpt-oss tokenizer.json in $tok_dir (the build fetches it)" >&2; exit 1; }
[[ -d "$gguf_py/gguf" ]] || { echo "FAIL: no gguf-py in $gguf_py (scripts/build-llama-cpp.sh unpacks it)" >&2; exit 1; }
# A python3 with numpy: Debian's (python3-numpy) may not be the first on PATH.
py=
for candidate in /usr/bin/python3 python3; do
  if "$candidate" -c 'import numpy' >/dev/null 2>&1; then py=$candidate; break; fi
done
[[ -n $py ]] || { echo "FAIL: no python3 with numpy (make deps installs python3-numpy)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
gen() { PYTHONPATH="$gguf_py" "$py" "$here/make_tiny_gguf.py" --tokenizer "$tok_dir/tokenizer.json" "$@"; }
config=()
[[ -f "$tok_dir/tokenizer_config.json" ]] && config=(--tokenizer-config "$tok_dir/tokenizer_config.json")
gen --out "$out/tiny" "${config[@]}"
for kind in wrong-shape missing-tensor unknown-arch; do
  gen --out "$out/bad-$kind" --break "$kind" >/dev/null
done
mkdir -p "$out/truncated"
cp "$out/tiny/model.gguf" "$out/truncated/model.gguf"
truncate -s $(( $(stat -c %s "$out/tiny/model.gguf") / 2 )) "$out/truncated/model.gguf"
echo "make_tiny_gguf: models in $out"
