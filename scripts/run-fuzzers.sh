#!/usr/bin/env bash
# Runs each libFuzzer target for SECONDS on a corpus seeded from fuzz/seeds.c and the
# test fixtures, then prints one line per target with its exec count.  Exits non-zero
# when a target finds a crash (the input is saved as crash-* in the corpus folder).
# Usage: scripts/run-fuzzers.sh BUILD_DIR SECONDS
set -uo pipefail
build=${1:?usage: run-fuzzers.sh BUILD_DIR SECONDS}
seconds=${2:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
work="$build/fuzz-work"
mkdir -p "$work"
"$build/fuzz/fuzz_seeds" "$work/seeds" || exit 1
cp "$root"/tests/fixtures/nemotron_h_tiny/*.header.json "$work/seeds/safetensors/" 2>/dev/null
cp "$root"/tests/fixtures/nemotron_h_tiny/sharded/*.header.json "$work/seeds/safetensors/" 2>/dev/null
cp "$root"/tests/fixtures/nemotron_h_tiny/sharded/model.safetensors.index.json "$work/seeds/index/" 2>/dev/null
# gpt-oss answers for the harmony parser (its input format: fuzz/fuzz_harmony_parser.c)
mkdir -p "$work/seeds/harmony"
printf '\003analysis\002User greets.\001\000assistant\003final\002Hello!\005' >"$work/seeds/harmony/reason-final.bin"
printf '\003commentary to=functions.get_weather \004json\002{"city":\007"Paris"}\006' >"$work/seeds/harmony/call.bin"
printf '<|channel|>analysis<|message|>x<|end|>\007<|start|>assistant<|channel|>final<|message|>y' >"$work/seeds/harmony/spelled.bin"
printf '\000\000imentary to=functions.get_weather \004json\002{}\006' >"$work/seeds/harmony/plain-then-recipient.bin"
# a header-less answer past the header limit (a character across it), then a header
{ printf '\000'; head -c 255 /dev/zero | tr '\0' x; printf '\303\251\003final\002ok\005'; } \
  >"$work/seeds/harmony/long-then-header.bin"
# A few real chat templates (the shared data, when it is there), each with a conversation
# after a NUL: the template target's input format.
shared_ct="${LLMR_SHARED_DIR:-$root/../shared}/chat-templates"
mkdir -p "$work/seeds/template"
for t in openai-gpt-oss-120b Qwen-Qwen3-0.6B meta-llama-Llama-3.1-8B-Instruct google-gemma-2-2b-it \
         mistralai-Mistral-Nemo-Instruct-2407 deepseek-ai-DeepSeek-V3.1 NousResearch-Hermes-3-Llama-3.1-8B-tool_use; do
  [[ -f "$shared_ct/templates/$t.jinja" && -f "$shared_ct/cases/tools.json" ]] || continue
  { cat "$shared_ct/templates/$t.jinja"; printf '\0'; cat "$shared_ct/cases/tools.json"; } > "$work/seeds/template/$t.bin"
done

declare -A seeds=([fuzz_safetensors_header]=safetensors [fuzz_st_index]=index [fuzz_gguf_header]=gguf
                  [fuzz_tokenizer_load]=tokenizer [fuzz_tokenizer_roundtrip]=text [fuzz_o200k_split]=text
                  [fuzz_plugin_manifest]=manifest [fuzz_worker_wire]=wire
                  [fuzz_template]=template [fuzz_openai_request]=openai [fuzz_harmony_parser]=harmony)
declare -A dicts=([fuzz_safetensors_header]=safetensors [fuzz_st_index]=index [fuzz_gguf_header]=gguf
                  [fuzz_tokenizer_load]=tokenizer [fuzz_tokenizer_roundtrip]=text [fuzz_o200k_split]=text
                  [fuzz_plugin_manifest]=manifest [fuzz_worker_wire]=wire
                  [fuzz_template]=template [fuzz_openai_request]=openai [fuzz_harmony_parser]=harmony)
targets=(${FUZZ_TARGETS:-fuzz_safetensors_header fuzz_st_index fuzz_gguf_header fuzz_tokenizer_load fuzz_tokenizer_roundtrip fuzz_o200k_split fuzz_plugin_manifest fuzz_worker_wire fuzz_template fuzz_openai_request fuzz_harmony_parser})
status=0
summary=()
for target in "${targets[@]}"; do
  corpus="$work/corpus/$target"
  mkdir -p "$corpus"
  cp -n "$work/seeds/${seeds[$target]}"/* "$corpus/"
  log="$work/$target.log"
  echo "fuzz: $target for ${seconds}s"
  (cd "$work" && "$OLDPWD/$build/fuzz/$target" -max_total_time="$seconds" -max_len=65536 \
      -dict="$root/fuzz/${dicts[$target]}.dict" -print_final_stats=1 "$OLDPWD/$corpus") >"$log" 2>&1
  rc=$?
  execs=$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  if [[ $rc -ne 0 ]]; then
    status=1
    summary+=("$target: FAILED (exit $rc) after ${execs:-?} execs; see $log")
    tail -40 "$log"
  else
    summary+=("$target: ${execs:-?} execs in ${seconds}s, no crash")
  fi
done
printf '%s\n' "${summary[@]}"
exit $status
