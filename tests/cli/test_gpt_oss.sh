#!/usr/bin/env bash
# The gpt-oss engine's CPU path end to end on a synthetic tiny model: it generates
# through `llmr run` and through a node, greedy decoding is the same every time and
# the same both ways, `llmr logits` answers, and broken snapshots (a missing shard, a
# tensor of the wrong shape, a config the engine cannot run) are refused naming what
# is wrong.  Needs the gpt-oss tokenizer: the shared data's, or the one the build
# fetched; skips (77) without either.
# Usage: test_gpt_oss.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_gpt_oss.sh PATH_TO_LLMR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-gptoss-XXXXXX")
node_pid=
cleanup() { [[ -n $node_pid ]] && kill -9 "$node_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"

tok_from=()
shared=${LLMR_SHARED_DIR:-}/models/gpt-oss-20b
if [[ -n ${LLMR_SHARED_DIR:-} && -f $shared/tokenizer.json ]]; then
  tok_from=(--tokenizer-from "$shared")
fi
model="$tmp/data/models/tiny"
if ! "$LLMR" model synth --preset gpt-oss-tiny --seed 3 --out "$model" "${tok_from[@]}" >"$tmp/synth" 2>&1; then
  if grep -q "tokenizer" "$tmp/synth"; then
    echo "skipped: no gpt-oss tokenizer here ($(tail -1 "$tmp/synth"))"
    exit 77
  fi
  fail "synth: $(cat "$tmp/synth")"
fi

ids_of() { grep -o '"id":[0-9]*' | cut -d: -f2 | tr '\n' ' '; }
expect 0 "greedy run" -- "$LLMR" run "$model" --prompt-ids 5,17,300 --temperature 0 --max-tokens 12 --json
first=$(ids_of <<<"$out")
[[ $(wc -w <<<"$first") -eq 12 ]] || fail "twelve tokens from the greedy run: $out"
has "$out" '"end":"length"' "the run ends by length"
expect 0 "greedy run again" -- "$LLMR" run "$model" --prompt-ids 5,17,300 --temperature 0 --max-tokens 12 --json
[[ $(ids_of <<<"$out") == "$first" ]] || fail "greedy decoding is not deterministic: $first / $(ids_of <<<"$out")"
expect 0 "seeded sampling" -- "$LLMR" run "$model" --prompt-ids 5,17,300 --seed 9 --max-tokens 12 --json
a=$(ids_of <<<"$out")
expect 0 "seeded sampling again" -- "$LLMR" run "$model" --prompt-ids 5,17,300 --seed 9 --max-tokens 12 --json
[[ $(ids_of <<<"$out") == "$a" ]] || fail "the same seed gave other tokens"
expect 0 "a chat prompt" -- "$LLMR" run "$model" --prompt "Hello there" --max-tokens 8
expect 0 "logits" -- "$LLMR" logits "$model" --ids 5,17,300 --top 5
[[ $(wc -l <<<"$out") -eq 5 ]] || fail "five top logits: $out"
top=$(head -1 <<<"$out" | cut -d' ' -f1)
[[ $top == $(cut -d' ' -f1 <<<"$first") ]] || fail "the top logit ($top) is not the greedy first token ($first)"

# The same through a node: the same tokens.
LLMR_DATA_DIR="$tmp/data" LLMR_LOG_LEVEL=warn "$LLMR" node >"$tmp/node.log" 2>&1 &
node_pid=$!
for _ in $(seq 200); do [[ -S "$tmp/data/run/node.sock" ]] && break; sleep 0.05; done
expect 0 "generate through a node" -- env LLMR_DATA_DIR="$tmp/data" "$LLMR" node generate tiny --prompt-ids 5,17,300 --temperature 0 --max-tokens 12 --json
[[ $(ids_of <<<"$out") == "$first" ]] || fail "the node generated other tokens: $(ids_of <<<"$out") / $first"
kill -TERM "$node_pid"; wait "$node_pid"; node_pid=

# Broken snapshots.
bad="$tmp/bad"
cp -r "$model" "$bad"
python3 - "$bad/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["rope_scaling"]["rope_type"] = "linear"
json.dump(c, open(sys.argv[1], "w"))
PY
expect 1 "a config the engine cannot run" -- "$LLMR" run "$bad" --prompt-ids 1 --max-tokens 1
has "$err" "rope_scaling.rope_type" "the unsupported field is named"
cp "$model/config.json" "$bad/config.json"
python3 - "$bad/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["intermediate_size"] = 2 * c["intermediate_size"]
json.dump(c, open(sys.argv[1], "w"))
PY
expect 1 "tensors of the wrong shape" -- "$LLMR" run "$bad" --prompt-ids 1 --max-tokens 1
has "$err" "mlp.experts.gate_up_proj" "the misshapen tensor is named"
sharded="$tmp/sharded"
"$LLMR" model synth --preset gpt-oss-tiny --seed 3 --out "$sharded" --max-shard-bytes 20000000 \
  "${tok_from[@]}" >/dev/null 2>&1 || fail "synth in shards"
second=$(ls "$sharded" | grep -m1 'model-00002-of-')
[[ -n $second ]] || fail "synth wrote no second shard: $(ls "$sharded")"
rm -f "$sharded/$second"
expect 1 "a missing shard" -- "$LLMR" run "$sharded" --prompt-ids 1 --max-tokens 1
has "$err" "$second" "the missing shard is named"

finish_checks gpt-oss
