#!/usr/bin/env bash
# The `llmr` command line end to end: exit codes, what goes to stdout and stderr,
# settings precedence, inspect on good and broken snapshots, serve's report.
# Usage: test_cli.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_cli.sh PATH_TO_LLMR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-cli-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"

expect 0 "help" -- "$LLMR" help
has "$out" "inspect" "help lists inspect"
has "$out" "LLMR_DATA_DIR" "help lists settings"
expect 2 "no command" -- "$LLMR"
expect 2 "unknown command" -- "$LLMR" frobnicate
has "$err" "unknown command" "unknown command message"
expect 0 "version" -- "$LLMR" version
has "$out" "llmr " "version text"
expect 0 "inspect --help" -- "$LLMR" inspect --help
has "$out" "--format" "inspect help"
expect 2 "inspect without a directory" -- "$LLMR" inspect
expect 2 "inspect with a bad format" -- "$LLMR" inspect "$tmp" --format onnx
has "$err" "safetensors or gguf" "bad format message"

# Settings: flag > environment > default.
expect 0 "config defaults" -- env -u LLMR_PORT "$LLMR" config
has "$out" "8080" "default port"
has "$out" "(default)" "default source"
expect 0 "config from env" -- env LLMR_PORT=9000 "$LLMR" config
has "$out" "9000" "env port"
has "$out" "(env)" "env source"
expect 0 "config from flag" -- env LLMR_PORT=9000 "$LLMR" config --port 9100
has "$out" "9100" "flag port"
has "$out" "(flag)" "flag source"
expect 2 "bad env value" -- env LLMR_PORT=http "$LLMR" config
has "$err" "LLMR_PORT=http" "bad env named"
expect 0 "config --json" -- "$LLMR" config --json
has "$out" '"source": "default"' "config json"

# A tiny snapshot: good, then broken.
mkdir -p "$tmp/tok"
echo '{"version": "1.0"}' >"$tmp/tok/tokenizer.json"
expect 0 "synth tiny" -- "$LLMR" model synth --preset gpt-oss-tiny --out "$tmp/tiny" --tokenizer-from "$tmp/tok"
expect 2 "synth into a non-empty directory" -- "$LLMR" model synth --preset gpt-oss-tiny --out "$tmp/tiny"
has "$err" "not empty" "synth refuses to overwrite"
expect 2 "synth unknown preset" -- "$LLMR" model synth --preset llama-70b --out "$tmp/x"
has "$err" "gpt-oss-20b" "synth lists presets"
expect 0 "inspect tiny" -- "$LLMR" inspect "$tmp/tiny"
has "$out" '"runtime": "gpt_oss"' "inspect runtime"
has "$out" '"primary_file": "model.safetensors.index.json"' "inspect primary file"
has "$out" '"total_bytes": ' "inspect total bytes"
[[ -z "$err" ]] || fail "inspect of a good model wrote to stderr: $err"

cp -r "$tmp/tiny" "$tmp/broken"
rm "$tmp/broken/tokenizer.json"
truncate -s -100 "$tmp/broken/model-00001-of-00001.safetensors"
expect 1 "inspect broken" -- "$LLMR" inspect "$tmp/broken"
[[ -z "$out" ]] || fail "inspect of a broken model printed a descriptor"
has "$err" "2 problems" "problem count"
has "$err" "tokenizer.json: missing" "missing tokenizer named"
has "$err" "model-00001-of-00001.safetensors: file is truncated" "truncated shard named"
has "$err" "100 bytes missing" "missing byte count"

# serve reports what it would serve.
mkdir -p "$tmp/data/models"
cp -r "$tmp/tiny" "$tmp/data/models/tiny"
cp -r "$tmp/broken" "$tmp/data/models/broken"
expect 0 "serve --check" -- "$LLMR" serve --check --data-dir "$tmp/data" --port 8181
has "$out" "tiny" "serve lists the model"
has "$out" "files check out" "serve says tiny is sound"
has "$out" "not ready: 2 problem(s)" "serve says broken is not ready"
has "$out" "127.0.0.1:8181" "serve names its address"
expect 2 "serve with an argument" -- "$LLMR" serve extra

# tokenize / detokenize with a small byte-level BPE tokenizer.json.
small_tokenizer() {
  # Byte-level BPE: the letters of "hello world!", "Ġ" (the byte-level space),
  # three merges and one special token.
  cat <<'JSON'
{"added_tokens":[{"id":100,"content":"<|end|>","special":true}],
 "pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false},
 "decoder":{"type":"ByteLevel"},
 "model":{"type":"BPE","vocab":{"h":0,"e":1,"l":2,"o":3,"\u0120":4,"w":5,"r":6,"d":7,"he":8,"hel":9,"\u0120w":10,"!":11},
          "merges":["h e","he l","\u0120 w"]}}
JSON
}
small_tokenizer > "$tmp/tok.json"
expect 0 "tokenize" -- sh -c "printf 'hello world!' | '$LLMR' tokenize --tokenizer '$tmp/tok.json'"
has "$out" "9 2 3 10 3 6 2 7 11" "tokenize ids"
expect 0 "tokenize --json" -- sh -c "printf 'hello<|end|>' | '$LLMR' tokenize --tokenizer '$tmp/tok.json' --json"
has "$out" "[9,2,3,100]" "tokenize json with a special token"
expect 0 "tokenize --no-special" -- sh -c "printf 'he<|end|>' | '$LLMR' tokenize --tokenizer '$tmp/tok.json' --no-special"
[[ "$out" != *100* ]] || fail "--no-special still parsed the special token: $out"
expect 1 "tokenize invalid UTF-8" -- sh -c "printf 'he\\377llo' | '$LLMR' tokenize --tokenizer '$tmp/tok.json'"
has "$err" "not valid UTF-8 at byte 2" "invalid UTF-8 offset"
expect 1 "tokenize unreadable input" -- sh -c "'$LLMR' tokenize --tokenizer '$tmp/tok.json' < '$tmp'"
has "$err" "cannot read standard input" "read error named"
# --jsonl: a bare JSON string or an object with "text" per line; a bad line is named.
printf '"hello"\n{"text":"hello world!","id":7}\n"<|end|>"\n' > "$tmp/lines.jsonl"
expect 0 "tokenize --jsonl" -- sh -c "'$LLMR' tokenize --tokenizer '$tmp/tok.json' --jsonl < '$tmp/lines.jsonl'"
[[ "$out" == $'[9,2,3]\n[9,2,3,10,3,6,2,7,11]\n[100]' ]] || fail "tokenize --jsonl ids: '$out'"
printf '"hello"\n{"text": 3}\n' > "$tmp/bad1.jsonl"
expect 1 "tokenize --jsonl without text" -- sh -c "'$LLMR' tokenize --tokenizer '$tmp/tok.json' --jsonl < '$tmp/bad1.jsonl'"
has "$err" "line 2: expected a JSON string or an object with a string \"text\"" "line without text named"
printf '"hello"\n"he\n' > "$tmp/bad2.jsonl"
expect 1 "tokenize --jsonl malformed" -- sh -c "'$LLMR' tokenize --tokenizer '$tmp/tok.json' --jsonl < '$tmp/bad2.jsonl'"
has "$err" "line 2, column" "malformed line named"
has "$err" "not valid JSON" "malformed line said"
expect 0 "detokenize --jsonl" -- sh -c "printf '[9,2,3]\\n9 2 3 10 3 6 2 7 11\\n' | '$LLMR' detokenize --tokenizer '$tmp/tok.json' --jsonl"
[[ "$out" == $'"hello"\n"hello world!"' ]] || fail "detokenize --jsonl text: '$out'"
expect 1 "detokenize --jsonl malformed" -- sh -c "printf '[9]\\n[9, x]\\n' | '$LLMR' detokenize --tokenizer '$tmp/tok.json' --jsonl"
has "$err" "line 2: byte 4: expected an id" "detokenize malformed line named"
expect 0 "detokenize" -- sh -c "echo '[9,2,3,10,3,6,2,7,11,100]' | '$LLMR' detokenize --tokenizer '$tmp/tok.json'"
[[ "$out" == "hello world!<|end|>" ]] || fail "detokenize text: '$out'"
expect 0 "detokenize --stream --skip-special" -- sh -c "echo '9 2 3 100 10' | '$LLMR' detokenize --tokenizer '$tmp/tok.json' --stream --skip-special"
[[ "$out" == "hello w" ]] || fail "streamed detokenize text: '$out'"
expect 2 "detokenize garbage" -- sh -c "echo '[1, x]' | '$LLMR' detokenize --tokenizer '$tmp/tok.json'"
has "$err" "expected an id" "detokenize bad input message"
echo '{"model": {"type": "Unigram", "vocab": [["a", 0.0]]}}' > "$tmp/unigram.json"
expect 1 "unsupported tokenizer" -- sh -c "printf x | '$LLMR' tokenize --tokenizer '$tmp/unigram.json'"
has "$err" "model type \"Unigram\" is not supported" "unsupported model named"

finish_checks CLI
