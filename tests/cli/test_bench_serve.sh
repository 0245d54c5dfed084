#!/usr/bin/env bash
# `llmr bench serve` against a real node serving the loopback engine over HTTP: levels
# of concurrent streamed completions, every token counted, the report as a table and
# JSON; the sharegpt-like workload's lengths; a bad request's reason in the report; a
# server that is not there; arguments it refuses.
# Usage: test_bench_serve.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_bench_serve.sh PATH_TO_LLMR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-bench-serve-XXXXXX")
node_pid=
cleanup() { [[ -n $node_pid ]] && kill -9 "$node_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"
export LLMR_DATA_DIR="$tmp/data"

mkdir -p "$tmp/data/models"
"$LLMR" model synth --preset loopback --out "$tmp/data/models/loop" >/dev/null 2>&1 || fail "synth loopback"
"$LLMR" node --host 127.0.0.1 --port 0 >"$tmp/node.log" 2>&1 &
node_pid=$!
port=
for _ in $(seq 200); do
  port=$(cat "$tmp/data/run/http.port" 2>/dev/null)
  [[ $port =~ ^[0-9]+$ ]] && break
  port=
  sleep 0.05
done
[[ -n $port ]] || { fail "the node wrote no run/http.port"; cat "$tmp/node.log"; finish_checks "bench serve"; }
url="http://127.0.0.1:$port"

# json FILE EXPR: a value of the report, through python's json.
json() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }

expect 0 "fixed workload, two levels" -- "$LLMR" bench serve --url "$url" --model loop --workload fixed \
  --prompt-len 16 --output-len 8 --concurrency 1,4 --requests 12 --vocab 500 --json "$tmp/fixed.json"
has "$err" "streams requests  output t/s" "the table"
[[ $(json "$tmp/fixed.json" "len(r['levels'])") == 2 ]] || fail "two levels: $(cat "$tmp/fixed.json")"
for level in 0 1; do
  [[ $(json "$tmp/fixed.json" "r['levels'][$level]['errors']") == 0 ]] || fail "level $level: errors"
  [[ $(json "$tmp/fixed.json" "r['levels'][$level]['output_tokens']") == 96 ]] || fail "level $level: 12 x 8 output tokens"
  [[ $(json "$tmp/fixed.json" "r['levels'][$level]['prompt_tokens']") == 192 ]] || fail "level $level: 12 x 16 prompt tokens"
  [[ $(json "$tmp/fixed.json" "r['levels'][$level]['ttft_p50_ms'] > 0 and r['levels'][$level]['output_tok_s'] > 0") == True ]] ||
    fail "level $level: TTFT and tokens/s measured"
done
[[ $(json "$tmp/fixed.json" "r['levels'][1]['concurrency']") == 4 ]] || fail "the second level is 4 streams"
cmp -s "$tmp/out" <(tr -d '\n' <"$tmp/fixed.json"; echo) || fail "stdout is the JSON of --json"
# one untimed warm-up request by default, before the first level; none with --warmup 0
has "$err" "warm-up took" "the warm-up's time"
[[ $(json "$tmp/fixed.json" "r['warmup']['requests'], r['warmup']['seconds'] > 0, r['warmup']['errors']") == "1 True 0" ]] ||
  fail "the report names one warm-up request, its time and no error: $(cat "$tmp/fixed.json")"
warm_line=$(grep -n "warm-up took" <<<"$err" | cut -d: -f1)
level_line=$(grep -n "concurrent streams" <<<"$err" | head -1 | cut -d: -f1)
(( warm_line < level_line )) || fail "the warm-up comes before the first level: $err"
# prompt tokens the node has read (its /metrics)
prompt_tokens_read() { curl -s "$url/metrics" | awk '/^llmr_prompt_tokens_total/ { s += $NF } END { print s + 0 }'; }
before=$(prompt_tokens_read)
expect 0 "--warmup 0" -- "$LLMR" bench serve --url "$url" --model loop --workload fixed \
  --prompt-len 4 --output-len 2 --concurrency 1 --requests 1 --vocab 500 --warmup 0
[[ $err != *warm-up* ]] || fail "--warmup 0 sends no warm-up: $err"
[[ $(json <(echo "$out") "r['warmup']['requests']") == 0 ]] || fail "--warmup 0 in the report"
after=$(prompt_tokens_read)
(( after - before == 4 )) || fail "--warmup 0: the node read $((after - before)) prompt tokens, not the level's 4"
before=$after
expect 0 "--warmup 3" -- "$LLMR" bench serve --url "$url" --model loop --workload fixed \
  --prompt-len 4 --output-len 2 --concurrency 1 --requests 1 --vocab 500 --warmup 3
has "$err" "3 warm-up requests" "three warm-up requests"
after=$(prompt_tokens_read)
(( after - before == 3 * 16 + 4 )) || fail "--warmup 3: the node read $((after - before)) prompt tokens, not 3 x 16 + 4"

expect 0 "sharegpt-like workload" -- "$LLMR" bench serve --url "$url" --model loop --concurrency 8 \
  --requests 20 --vocab 500 --seed 7 --json "$tmp/share.json"
tokens=$(json "$tmp/share.json" "r['levels'][0]['output_tokens']")
(( tokens >= 20 * 32 && tokens <= 20 * 512 )) || fail "sharegpt-like: 20 outputs of 32..512 tokens, got $tokens"
prompts=$(json "$tmp/share.json" "r['levels'][0]['prompt_tokens']")
(( prompts >= 20 * 32 && prompts <= 20 * 512 )) || fail "sharegpt-like: 20 prompts of 32..512 tokens, got $prompts"
expect 0 "the same seed, the same workload (whatever the warm-up)" -- "$LLMR" bench serve --url "$url" --model loop \
  --concurrency 8 --requests 20 --vocab 500 --seed 7 --warmup 2 --json "$tmp/share2.json"
[[ $(json "$tmp/share2.json" "r['levels'][0]['prompt_tokens']") == "$prompts" ]] || fail "seed 7 twice: other prompts"
[[ $(json "$tmp/share2.json" "r['levels'][0]['output_tokens']") == "$tokens" ]] || fail "seed 7 twice: other outputs"

expect 1 "requests the server refuses" -- "$LLMR" bench serve --url "$url" --model loop --workload fixed \
  --prompt-len 4 --output-len 4 --concurrency 2 --requests 4 --vocab 100000
has "$err" "but the model's vocabulary has 512 tokens" "the server's reason in the report"
has "$out" '"errors":4' "every refused request counted"
has "$err" "warm-up request 1 failed" "the refused warm-up said so"
[[ $(json <(echo "$out") "r['warmup']['errors'], 'vocabulary' in r['warmup']['first_error']") == "1 True" ]] ||
  fail "the refused warm-up in the report: $out"

expect 1 "no server (options as --name=value)" -- "$LLMR" bench serve --url=http://127.0.0.1:1/ --model=loop --concurrency=1 --requests=2
has "$err" "first error:" "a connection error in the report"

# a server whose error answer is not UTF-8 (cut where a character was): the report still
# comes, as JSON, the bad bytes replaced
cat >"$tmp/bad_server.py" <<'PY'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = b"overloaded \xff\xfe " + "é".encode()[:1]
        self.send_response(500)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
python3 "$tmp/bad_server.py" >"$tmp/bad_port" &
bad_pid=$!
for _ in $(seq 100); do [[ -s $tmp/bad_port ]] && break; sleep 0.05; done
expect 1 "an error answer that is not UTF-8" -- "$LLMR" bench serve --url "http://127.0.0.1:$(cat "$tmp/bad_port")" \
  --model loop --concurrency 1 --requests 2
kill "$bad_pid" 2>/dev/null
has "$err" "first error: HTTP 500: overloaded" "the answer's text in the table"
[[ $(json <(echo "$out") "r['warmup']['first_error'], r['levels'][0]['errors'], r['levels'][0]['first_error']") == \
   "HTTP 500: overloaded ?? ? 2 HTTP 500: overloaded ?? ?" ]] ||
  fail "the report as JSON, the bytes that are not UTF-8 replaced: $out"

expect 2 "no model" -- "$LLMR" bench serve --url "$url"
has "$err" "which model?" "the missing model"
expect 2 "a bad workload" -- "$LLMR" bench serve --model loop --workload banana
has "$err" "--workload is sharegpt-like or fixed" "the workload's choices"
expect 2 "a bad level" -- "$LLMR" bench serve --model loop --concurrency 0,8
has "$err" "--concurrency takes" "the levels' range"
expect 2 "a bad warm-up count" -- "$LLMR" bench serve --model loop --warmup -1
has "$err" "--warmup takes a whole number from 0 to 1000" "the warm-up count's range"
finish_checks "bench serve"
