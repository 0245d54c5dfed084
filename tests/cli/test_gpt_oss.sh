#!/usr/bin/env bash
# The gpt-oss engine's CPU path end to end on a synthetic tiny model: it generates
# through `llmr run` and through a node, greedy decoding is the same every time and
# the same both ways, `llmr logits` answers, engine --options reach the engine (and
# what is not a JSON object is refused), `llmr bench engine` reports its figures as
# JSON, and broken snapshots (a missing shard, a tensor of the wrong shape, a config
# the engine cannot run) are refused naming what is wrong.  Needs the gpt-oss
# tokenizer: the shared data's, or the one the build fetched; skips (77) without
# either.
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

# --prompt is rendered with the model's chat template, as the node renders a chat:
# the snapshot's template (synth's harmony stand-in, or gpt-oss's own) and the built-in
# harmony format of a gpt-oss model without one give the same prompt; a template of the
# model's own decides the prompt's tokens; a template's error is its own message; a
# model that is not gpt-oss and has no template needs --raw or --prompt-ids.
copy_model() { mkdir "$1" && ln -s "$model"/* "$1"/ && rm "$1/chat_template.jinja"; }
prompt_shown() { grep -v '^llmr run: note' <<<"$err"; }
prompt_tokens() { grep -o '"prompt_tokens":[0-9]*' <<<"$out" | cut -d: -f2; }
count_tokens() { printf '%s' "$1" | "$LLMR" tokenize --tokenizer "$model" | wc -w; }
quiet=(env LLMR_LOG_LEVEL=warn "$LLMR" run)
expect 0 "a chat prompt, shown" -- "${quiet[@]}" "$model" --prompt hi --max-tokens 1 --json --show-prompt
templated=$(prompt_shown); templated_n=$(prompt_tokens)
[[ $templated == *'<|start|>user<|message|>hi<|end|><|start|>assistant' ]] ||
  fail "the prompt ends with the user's turn and the assistant's header: $templated"
[[ $templated_n -eq $(count_tokens "$templated") ]] || fail "prompt_tokens $templated_n is not the shown prompt's"
expect 0 "a chat prompt with a system message" -- "${quiet[@]}" "$model" --prompt hi --system "Be brief." --max-tokens 1 --show-prompt
has "$err" $'<|start|>developer<|message|># Instructions\n\nBe brief.' "--system becomes the developer's instructions"
bare="$tmp/no-template"
copy_model "$bare"
expect 0 "a gpt-oss model without a chat template" -- "${quiet[@]}" "$bare" --prompt hi --max-tokens 1 --json --show-prompt
has "$err" "no chat template; using llmr's built-in gpt-oss (harmony) format" "the fallback is noted"
[[ $(prompt_shown) == "$templated" ]] || fail "the built-in harmony format differs from the template: $(prompt_shown)"
[[ $(prompt_tokens) == "$templated_n" ]] || fail "the built-in format gave $(prompt_tokens) prompt tokens, not $templated_n"
expect 0 "--raw" -- "${quiet[@]}" "$bare" --prompt hi --raw --max-tokens 1 --json --show-prompt
[[ $err == hi && $(prompt_tokens) -eq $(count_tokens hi) ]] || fail "--raw tokenizes the text as it is: $err / $out"
own="$tmp/own-template"
copy_model "$own"
printf '%s' '<|start|>user<|message|>zebra {{ messages[-1].content }}<|end|>{% if add_generation_prompt %}<|start|>assistant{% endif %}' >"$own/chat_template.jinja"
expect 0 "a template of the model's own" -- "${quiet[@]}" "$own" --prompt hi --max-tokens 1 --json --show-prompt
want='<|start|>user<|message|>zebra hi<|end|><|start|>assistant'
[[ $err == "$want" ]] || fail "the model's own template was not used: $err"
[[ $(prompt_tokens) -eq $(count_tokens "$want") && $(prompt_tokens) -lt $templated_n ]] ||
  fail "the prompt tokens ($(prompt_tokens)) are not those of the model's own template's render"
printf '%s' '{{ raise_exception("zebras only") }}' >"$own/chat_template.jinja"
expect 1 "a template that raises" -- "${quiet[@]}" "$own" --prompt hi --max-tokens 1
has "$err" "zebras only" "the template's own message"
rm "$bare/config.json"
python3 - "$model/config.json" "$bare/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["model_type"] = "llama"
json.dump(c, open(sys.argv[2], "w"))
PY
expect 1 "no chat template, not gpt-oss" -- "${quiet[@]}" "$bare" --prompt hi --max-tokens 1
has "$err" "no chat template" "the missing template is said"
has "$err" "--raw" "--raw is suggested"
expect 0 "logits" -- "$LLMR" logits "$model" --ids 5,17,300 --top 5
[[ $(wc -l <<<"$out") -eq 5 ]] || fail "five top logits: $out"
top=$(head -1 <<<"$out" | cut -d' ' -f1)
[[ $top == $(cut -d' ' -f1 <<<"$first") ]] || fail "the top logit ($top) is not the greedy first token ($first)"
expect 0 "logits with engine options" -- "$LLMR" logits "$model" --ids 5,17,300 --top 1 --options '{"cpu":1,"threads":1}'
[[ $(cut -d' ' -f1 <<<"$out") == "$top" ]] || fail "--options changed the top logit: $out / $top"
expect 0 "run with engine options" -- "$LLMR" run "$model" --prompt-ids 5,17,300 --temperature 0 --max-tokens 12 --json --options '{"threads":1}'
[[ $(ids_of <<<"$out") == "$first" ]] || fail "--options changed the greedy tokens: $(ids_of <<<"$out") / $first"
# kv_dtype: fp16 or fp8 (the GPU's cache; the CPU path takes either and answers the same),
# anything else refused at load, naming the option and the values it takes
expect 0 "run with kv_dtype fp8" -- "$LLMR" run "$model" --prompt-ids 5,17,300 --temperature 0 --max-tokens 12 --json --options '{"kv_dtype":"fp8","threads":1}'
[[ $(ids_of <<<"$out") == "$first" ]] || fail "kv_dtype fp8 changed the CPU path's tokens: $(ids_of <<<"$out") / $first"
expect 1 "run with kv_dtype fp4" -- "$LLMR" run "$model" --prompt-ids 5 --options '{"kv_dtype":"fp4"}'
has "$err" 'the load option kv_dtype is "fp16" (the default) or "fp8", not "fp4"' "a bad kv_dtype is refused by name"
expect 1 "run with kv_dtype not a string" -- "$LLMR" run "$model" --prompt-ids 5 --options '{"kv_dtype":8}'
has "$err" 'the load option kv_dtype is "fp16" (the default) or "fp8"' "a kv_dtype that is no string is refused"
expect 2 "logits with options that are not an object" -- "$LLMR" logits "$model" --ids 5 --options '[1]'
has "$err" "not a JSON object" "the options are refused saying why"
expect 2 "run with options that are not JSON" -- "$LLMR" run "$model" --prompt-ids 5 --options '{"cpu":'
has "$err" "--options" "the flag is named"

# The engine benchmark: one JSON object on stdout with positive figures, a table on
# stderr, what does not fit the context skipped, and usage errors for bad options.
bench=(bench engine "$model" --prompts 8,32 --contexts 0,64 --decode-tokens 8 --runs 1 --ttft-prompt 8)
expect 0 "bench engine" -- "$LLMR" "${bench[@]}" --json "$tmp/bench.json"
python3 - "$out" "$tmp/bench.json" <<'PY' || fail "bench engine JSON: $out"
import json, sys
r = json.loads(sys.argv[1])
assert json.load(open(sys.argv[2])) == r, "--json FILE differs from stdout"
assert r["benchmark"] == "engine" and r["model"] == "tiny" and r["engine"].startswith("gpt-oss"), r
assert [p["prompt"] for p in r["prefill"]] == [8, 32], r["prefill"]
assert all(p["tok_s"] > 0 and p["ttft_ms"] > 0 for p in r["prefill"]), r["prefill"]
assert [d["context"] for d in r["decode"]] == [0, 64], r["decode"]
assert all(d["tok_s"] > 0 and d["ms_per_token"] > 0 for d in r["decode"]), r["decode"]
assert r["ttft_ms"] > 0 and r["ttft_prompt"] == 8 and r["runs"] == 1 and r["load_s"] > 0, r
assert r["ram_bytes"] > 0 and "vram_bytes" in r and "peak_vram_used_bytes" in r, r
assert r["context"] >= 64 + 8 + 1 and r["skipped"] == [], r
PY
has "$err" "decode at 64" "the table on stderr"
expect 0 "bench engine with a short context" -- "$LLMR" "${bench[@]}" --context 40
python3 - "$out" <<'PY' || fail "bench engine skips what does not fit: $out"
import json, sys
r = json.loads(sys.argv[1])
assert r["context"] == 40 and [d["context"] for d in r["decode"]] == [0], r
assert r["skipped"] == [{"what": "decode", "size": 64, "needs": 73}], r["skipped"]
PY
has "$err" "skipped" "the table says what was skipped"
expect 2 "bench engine --runs 0" -- "$LLMR" "${bench[@]}" --runs 0
has "$err" "--runs" "the bad option is named"
expect 2 "bench engine --prompts 0" -- "$LLMR" bench engine "$model" --prompts 0,8
expect 2 "bench engine --options not an object" -- "$LLMR" "${bench[@]}" --options 5
expect 2 "bench engine without DIR" -- "$LLMR" bench engine --runs 1
expect 2 "bench engine, an unknown option" -- "$LLMR" "${bench[@]}" --frobnicate

# The same through a node: the same tokens.
LLMR_DATA_DIR="$tmp/data" LLMR_LOG_LEVEL=warn LLMR_PORT=0 "$LLMR" node >"$tmp/node.log" 2>&1 &
node_pid=$!
for _ in $(seq 200); do [[ -S "$tmp/data/run/node.sock" ]] && break; sleep 0.05; done
expect 0 "generate through a node" -- env LLMR_DATA_DIR="$tmp/data" "$LLMR" node generate tiny --prompt-ids 5,17,300 --temperature 0 --max-tokens 12 --json
[[ $(ids_of <<<"$out") == "$first" ]] || fail "the node generated other tokens: $(ids_of <<<"$out") / $first"
# the KV cache in /metrics (engine ABI 1.2): its capacity, and nothing in use once the
# request has ended (the health check's pong carries it)
port=$(cat "$tmp/data/run/http.port" 2>/dev/null)
metrics=
for _ in $(seq 100); do
  metrics=$(curl -s "http://127.0.0.1:$port/metrics")
  grep -q '^llmr_kv_cache_used_tokens{model="tiny"} 0$' <<<"$metrics" && break
  sleep 0.1
done
grep -Eq '^llmr_kv_cache_capacity_tokens\{model="tiny"\} [1-9][0-9]*$' <<<"$metrics" ||
  fail "/metrics has no KV capacity for tiny: $(grep kv_cache <<<"$metrics")"
grep -q '^llmr_kv_cache_used_tokens{model="tiny"} 0$' <<<"$metrics" ||
  fail "/metrics: the KV cache is not back to 0 in use: $(grep kv_cache <<<"$metrics")"
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
has "$err" "UNSUPPORTED" "a config the engine cannot run is UNSUPPORTED"
cp "$model/config.json" "$bad/config.json"
python3 - "$bad/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["intermediate_size"] = 2 * c["intermediate_size"]
json.dump(c, open(sys.argv[1], "w"))
PY
expect 1 "tensors of the wrong shape" -- "$LLMR" run "$bad" --prompt-ids 1 --max-tokens 1
has "$err" "mlp.experts.gate_up_proj" "the misshapen tensor is named"
has "$err" "MODEL_CORRUPT" "tensors of the wrong shape are MODEL_CORRUPT"
sharded="$tmp/sharded"
"$LLMR" model synth --preset gpt-oss-tiny --seed 3 --out "$sharded" --max-shard-bytes 20000000 \
  "${tok_from[@]}" >/dev/null 2>&1 || fail "synth in shards"
second=$(ls "$sharded" | grep -m1 'model-00002-of-')
[[ -n $second ]] || fail "synth wrote no second shard: $(ls "$sharded")"
rm -f "$sharded/$second"
expect 1 "a missing shard" -- "$LLMR" run "$sharded" --prompt-ids 1 --max-tokens 1
has "$err" "$second" "the missing shard is named"
has "$err" "MODEL_CORRUPT" "a missing shard is MODEL_CORRUPT"

finish_checks gpt-oss
