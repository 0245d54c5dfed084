#!/usr/bin/env bash
# `llmr model synth` end to end: its options and their errors, the same bytes for the
# same seed whatever the thread count, the sparse zeros fill, the progress summary,
# and where the tokenizer is looked for without --tokenizer-from (the variable, then
# data/gpt-oss beside the binary, then ../data/gpt-oss).
# Usage: test_synth_cli.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_synth_cli.sh PATH_TO_LLMR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-synth-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/../cli/check_lib.sh"

mkdir -p "$tmp/tok"
echo '{"version": "1.0", "model": {"type": "BPE"}}' >"$tmp/tok/tokenizer.json"
shard=model-00001-of-00001.safetensors

expect 0 "help" -- "$LLMR" model --help
for word in --fill --seed --threads gpt-oss-20b-2l LLMR_GPT_OSS_TOKENIZER_DIR; do
  has "$out$err" "$word" "help names $word"
done

# Bad values are usage errors (exit 2), and nothing is written.
for bad in "--seed -1" "--seed abc" "--seed 1x" "--seed 18446744073709551616" "--threads 0" \
           "--threads many" "--threads 100000" "--fill ones" "--max-shard-bytes 0"; do
  # shellcheck disable=SC2086 # the option and its value are two words
  expect 2 "bad $bad" -- "$LLMR" model synth --preset gpt-oss-tiny --out "$tmp/bad" \
    --tokenizer-from "$tmp/tok" $bad
  has "$err" "${bad%% *}" "the error for $bad names the option"
  [[ -e "$tmp/bad" ]] && fail "bad $bad wrote $tmp/bad"
done
expect 2 "--seed without a value" -- "$LLMR" model synth --preset gpt-oss-tiny --out "$tmp/bad" --seed

# Random fill: the same bytes for the same seed with 1 and 3 threads, others for
# another seed; a progress summary on stderr.
expect 0 "random, 1 thread" -- "$LLMR" model synth --preset gpt-oss-tiny --out "$tmp/r1" \
  --tokenizer-from "$tmp/tok" --seed 5 --threads 1
has "$err" "synth: wrote 0.05 GB" "summary line"
has "$err" "seed 5, 1 threads" "summary names seed and threads"
expect 0 "random, 3 threads" -- "$LLMR" model synth --preset gpt-oss-tiny --out "$tmp/r3" \
  --tokenizer-from "$tmp/tok" --seed=5 --threads=3
cmp -s "$tmp/r1/$shard" "$tmp/r3/$shard" || fail "seed 5 differs between 1 and 3 threads"
expect 0 "random, seed 6" -- "$LLMR" model synth --preset gpt-oss-tiny --out "$tmp/r6" \
  --tokenizer-from "$tmp/tok" --seed 6
cmp -s "$tmp/r1/$shard" "$tmp/r6/$shard" && fail "seeds 5 and 6 gave the same bytes"
[[ -f "$tmp/r1/chat_template.jinja" && -f "$tmp/r1/generation_config.json" ]] \
  || fail "side files missing"
expect 0 "inspect random" -- "$LLMR" inspect "$tmp/r1"
has "$out" '"runtime": "gpt_oss"' "the random snapshot inspects as gpt-oss"

# Zeros: sparse.
expect 0 "zeros" -- "$LLMR" model synth --preset gpt-oss-tiny --out "$tmp/z" \
  --tokenizer-from "$tmp/tok" --fill zeros
has "$err" "zeros as sparse files" "zeros summary"
used=$(du -k "$tmp/z/$shard" | cut -f1)
[[ $used -lt 1024 ]] || fail "the zeros shard takes ${used} KiB on disk"

# The tokenizer without --tokenizer-from: a copy of the binary in a directory of
# its own finds nothing and says where it looked ...
mkdir -p "$tmp/alone" "$tmp/bundle/bin" "$tmp/bundle/data/gpt-oss" "$tmp/empty"
cp "$LLMR" "$tmp/alone/llmr"
expect 1 "no tokenizer anywhere" -- env LLMR_GPT_OSS_TOKENIZER_DIR="$tmp/empty" \
  "$tmp/alone/llmr" model synth --preset gpt-oss-tiny --out "$tmp/nt" --fill zeros
has "$err" "$tmp/empty" "the error names the variable's directory"
has "$err" "$tmp/alone/data/gpt-oss" "the error names data/gpt-oss beside the binary"
has "$err" "--tokenizer-from" "the error says what to do"
[[ -e "$tmp/nt" ]] && fail "a failed tokenizer lookup wrote $tmp/nt"
# ... the variable is used ...
expect 0 "tokenizer from the variable" -- env LLMR_GPT_OSS_TOKENIZER_DIR="$tmp/tok" \
  "$tmp/alone/llmr" model synth --preset gpt-oss-tiny --out "$tmp/v" --fill zeros
cmp -s "$tmp/tok/tokenizer.json" "$tmp/v/tokenizer.json" || fail "the variable's tokenizer not copied"
# ... and a bundle's bin/llmr finds data/gpt-oss beside bin/.
cp "$LLMR" "$tmp/bundle/bin/llmr"
cp "$tmp/tok/tokenizer.json" "$tmp/bundle/data/gpt-oss/"
expect 0 "tokenizer of a bundle" -- env -u LLMR_GPT_OSS_TOKENIZER_DIR \
  "$tmp/bundle/bin/llmr" model synth --preset gpt-oss-tiny --out "$tmp/b" --fill zeros
has "$err" "tokenizer files from $tmp/bundle/bin/../data/gpt-oss" "the bundle's tokenizer used"

finish_checks synth
