#!/usr/bin/env bash
# The model lifecycle end to end through `llmr serve`: pull of a local directory (its
# files used in place: hard links, a 13.8 GB one included), a Hub model taken from a
# pre-filled Hugging Face cache (no weight byte downloaded), list,
# ps (what is loaded where), stop (unloaded on the node, its files kept, the next
# request loads it again), rm (the node's copy deleted, gone from its status
# and 404 from the router), a model registered again under the same name with other
# files or another tokenizer (the node syncs it again and answers with the new model,
# never the old copy),
# rm during a slow sync from a fake Hub (nothing left on the node, no ERROR in the log),
# and a load that failed, retried after the backoff once its cause is gone (the node
# does not answer 503 for good).
# Usage: test_lifecycle.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_lifecycle.sh PATH_TO_LLMR}
LLMR=$(cd "$(dirname "$LLMR")" && pwd)/$(basename "$LLMR")
here=$(cd "$(dirname "$0")" && pwd)
command -v curl >/dev/null || { echo "curl is missing: run make deps" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-life-XXXXXX")
serve_pid= hub_pid=
cleanup() {
  for p in $serve_pid $hub_pid; do { kill -9 "$p"; wait "$p"; } 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$here/../cli/check_lib.sh"

admin=llmr-test-admin-key-life-0123456789
export LLMR_DATA_DIR="$tmp/data" LLMR_API_KEY=$admin
unset LLMR_ROUTER LLMR_ADMIN_KEY
store=$LLMR_DATA_DIR/node/models

# --- the commands' own checks
for c in ps stop rm; do
  expect 0 "$c --help" -- "$LLMR" "$c" --help
  has "$out" "usage: llmr $c" "$c --help"
done
expect 2 "stop without a name" -- "$LLMR" stop
has "$err" "which model?" "stop without a name asks which"
expect 2 "rm --timeout 0" -- "$LLMR" rm x --timeout 0

# --- a fake Hub that sends slowly, for a sync to stop in the middle
"$LLMR" model synth --preset loopback --out "$tmp/src/loop" >/dev/null 2>&1 || fail "synth loopback"
"$LLMR" model synth --preset loopback --seed 7 --out "$tmp/src/other" >/dev/null 2>&1 || fail "synth loopback --seed 7"
cmp -s "$tmp/src/loop/model.safetensors" "$tmp/src/other/model.safetensors" &&
  fail "two seeds give the same weights: the re-registration check would prove nothing"
mkdir -p "$tmp/repos" && cp -r "$tmp/src/loop" "$tmp/repos/slow" && cp -r "$tmp/src/other" "$tmp/repos/cached"
size=$(stat -c %s "$tmp/repos/slow/model.safetensors")
python3 "$here/fake_hub.py" --repo "org/slow=$tmp/repos/slow" --repo "org/cached=$tmp/repos/cached" \
  --slow $((size / 30 + 1)) --log "$tmp/hub.log" >"$tmp/hubport" 2>"$tmp/hub.err" &
hub_pid=$!
for _ in $(seq 200); do [[ -s $tmp/hubport ]] && break; sleep 0.05; done
hport=$(head -1 "$tmp/hubport")
[[ -n $hport ]] || { cat "$tmp/hub.err"; fail "the fake Hub did not start"; finish_checks lifecycle; }

# a Hugging Face cache that holds org/cached already (as huggingface_hub lays it out:
# blobs named by the sha256 of an LFS file or the git blob sha1 of another, a snapshot of
# links, refs/main naming the commit)
python3 - "$tmp/repos/cached" "$tmp/hf/hub/models--org--cached" <<'PY' || fail "the Hugging Face cache"
import hashlib, os, sys
src, repo = sys.argv[1], sys.argv[2]
commit = "c0ffee" + "0" * 34
snap = os.path.join(repo, "snapshots", commit)
os.makedirs(os.path.join(repo, "blobs")); os.makedirs(snap); os.makedirs(os.path.join(repo, "refs"))
open(os.path.join(repo, "refs", "main"), "w").write(commit)
for name in os.listdir(src):
    data = open(os.path.join(src, name), "rb").read()
    lfs = len(data) > 1024 or name.endswith(".safetensors")
    etag = hashlib.sha256(data).hexdigest() if lfs else hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    open(os.path.join(repo, "blobs", etag), "wb").write(data)
    os.symlink(os.path.join("..", "..", "blobs", etag), os.path.join(snap, name))
PY

HF_ENDPOINT=http://127.0.0.1:$hport HF_HUB_CACHE=$tmp/hf/hub LLMR_ADMIN_KEY=$admin "$LLMR" serve --port 0 >"$tmp/serve.log" 2>&1 &
serve_pid=$!
port=
for _ in $(seq 300); do
  port=$(grep -o 'the OpenAI API at http://127.0.0.1:[0-9]*' "$tmp/serve.log" | grep -o '[0-9]*$')
  [[ -n $port ]] && break
  kill -0 "$serve_pid" 2>/dev/null || break
  sleep 0.05
done
[[ -n $port ]] || { cat "$tmp/serve.log"; fail "serve did not start"; finish_checks lifecycle; }
export LLMR_ROUTER=http://127.0.0.1:$port

# chat URL MODEL: a chat; HTTP status in $code, the answer's content in $content
chat() {
  content=
  code=$(curl -s -o "$tmp/chat" -w '%{http_code}' -H "Authorization: Bearer $admin" \
    -H 'Content-Type: application/json' "$1/v1/chat/completions" \
    --data-binary "{\"model\": \"$2\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 8, \"temperature\": 0}")
  content=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"])' \
    "$tmp/chat" 2>/dev/null)
}
# wait_for WHAT COMMAND...: runs COMMAND every 0.2 s until it succeeds (30 s at most)
wait_for() {
  local what=$1
  shift
  for _ in $(seq 150); do "$@" && return 0; sleep 0.2; done
  fail "$what (30 s)"
  return 1
}

# inode PATH: the file's inode number
inode() { stat -c %i "$1" 2>/dev/null; }

# --- pull, list, a chat loads it, ps shows it
expect 0 "pull ./loop" -- "$LLMR" pull "$tmp/src/loop" --name loop --timeout 30
# the directory is on serve's machine: its files are used in place (hard links), not copied
[[ $(inode "$store/loop/model.safetensors") == $(inode "$tmp/src/loop/model.safetensors") ]] ||
  fail "pull of a local directory links its files into the node's store: $(ls -li "$store/loop" "$tmp/src/loop" 2>&1)"
expect 0 "list" -- "$LLMR" list
grep -Eq "^loop +safetensors .* ready on 1/1 node$" <<<"$out" || fail "list shows loop ready: $out"
expect 0 "ps before any request" -- "$LLMR" ps
has "$out" "no model is loaded" "ps says nothing is loaded before a request"
chat "$LLMR_ROUTER" loop
[[ $code == 200 && -n $content ]] || fail "a chat with loop: $code $(head -c 300 "$tmp/chat")"
first=$content
# ps shows what the nodes' heartbeats said (every second under serve)
ps_loaded() { "$LLMR" ps >"$tmp/ps" 2>&1 && grep -q '^local  *loop ' "$tmp/ps"; }
wait_for "ps shows loop loaded: $(cat "$tmp/ps" 2>/dev/null)" ps_loaded
expect 0 "ps" -- "$LLMR" ps
grep -Eq "^NODE +MODEL +MEMORY +RUNNING +QUEUED +LOADED SINCE$" <<<"$out" || fail "ps prints its header: $out"
grep -Eq "^local +loop +[0-9.]+ [kMG]?B +0 +0 +[0-9:]+ \([0-9]+ s ago\)$" <<<"$out" || fail "ps shows loop loaded on local: $out"
expect 0 "ps --json" -- "$LLMR" ps --json
python3 -c '
import json, sys
rows = json.loads(sys.argv[1])["models"]
assert len(rows) == 1, rows
r = rows[0]
assert r["node"] == "local" and r["model"] == "loop" and r["loaded"] is True, r
assert r["loaded_since"] > 0 and r["ram_bytes"] + r.get("vram_bytes", 0) > 0, r
' "$out" || fail "ps --json: $out"
expect 0 "ps --all" -- "$LLMR" ps --all
grep -Eq "^local +loop +ready " <<<"$out" || fail "ps --all shows loop's state: $out"
# `llmr node status` through serve: the node of the data directory
expect 0 "node status" -- "$LLMR" node status
grep -qE '^  loop +' <<<"$out" || fail "node status through serve lists loop: $out"

# --- stop: unloaded, files kept, the next request loads it again
expect 0 "stop loop" -- "$LLMR" stop loop --timeout 20
has "$out" "loop unloaded on every node" "stop says the model is unloaded"
expect 0 "ps after stop" -- "$LLMR" ps
has "$out" "no model is loaded" "ps after stop shows nothing loaded"
[[ -f $store/loop/model.safetensors ]] || fail "stop keeps the node's copy"
chat "$LLMR_ROUTER" loop
[[ $code == 200 && $content == "$first" ]] || fail "after stop a chat loads loop again: $code $content"
expect 1 "stop of a model that is not there" -- "$LLMR" stop nope
has "$err" "No model named" "stop of an unknown model says so"

# --- rm: the node's copy goes, its own port and the router answer 404
expect 0 "rm loop" -- "$LLMR" rm loop --timeout 20
has "$out" "loop removed" "rm says the model is removed"
[[ ! -e $store/loop ]] || fail "rm deletes the node's copy: $(ls -la "$store/loop" 2>&1)"
[[ -s $tmp/src/loop/model.safetensors ]] || fail "rm of a model used in place keeps the directory's files"
# (serve's node answers /v1 only to its router: what it holds, through its control socket)
expect 0 "node status after rm" -- "$LLMR" node status
! grep -qE '^  loop +' <<<"$out" || fail "the node no longer has loop: $out"
chat "$LLMR_ROUTER" loop
[[ $code == 404 ]] || fail "the router answers 404 for a removed model: $code"
expect 1 "rm of a model that is not there" -- "$LLMR" rm loop
has "$err" "No model named" "rm of an unknown model says so"

# --- the same name, other files: synced again, answers from the new files
expect 0 "pull ./loop again" -- "$LLMR" pull "$tmp/src/loop" --name again --timeout 30
chat "$LLMR_ROUTER" again
[[ $code == 200 ]] || fail "a chat with again: $code"
old_answer=$content
expect 0 "rm again" -- "$LLMR" rm again --no-wait
# registered again at once, before the node saw the rm: only the version tells
expect 0 "pull ./other as again" -- "$LLMR" pull "$tmp/src/other" --name again --timeout 30
got_new() { cmp -s "$store/again/model.safetensors" "$tmp/src/other/model.safetensors"; }
wait_for "the node syncs the new files of again" got_new
chat_new() {
  chat "$LLMR_ROUTER" again
  [[ $code == 200 && $content != "$old_answer" ]]
}
wait_for "again answers from its new files (old answer \"$old_answer\", now $code \"$content\")" chat_new

# the same weights with another tokenizer (the byte tokens' ids rotated): the node reads
# the new tokenizer, not the one it had for the name
cp -r "$tmp/src/loop" "$tmp/src/retok"
python3 - "$tmp/src/retok/tokenizer.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
v = t["model"]["vocab"]
t["model"]["vocab"] = {k: ((i + 1) % 256 if i < 256 else i) for k, i in v.items()}
json.dump(t, open(sys.argv[1], "w"))
PY
expect 0 "pull ./loop as tok" -- "$LLMR" pull "$tmp/src/loop" --name tok --timeout 30
chat "$LLMR_ROUTER" tok
tok_answer=$content
expect 0 "rm tok" -- "$LLMR" rm tok --no-wait
expect 0 "pull ./retok as tok" -- "$LLMR" pull "$tmp/src/retok" --name tok --timeout 30
retok() {
  chat "$LLMR_ROUTER" tok
  [[ $code == 200 && $content != "$tok_answer" ]]
}
wait_for "tok answers with its new tokenizer (old answer \"$tok_answer\", now $code \"$content\")" retok

# --- a full-size directory (gpt-oss-20b's 13.8 GB, sparse zeros) in place: every shard a
# hard link, checked by its sampled digest, no byte copied
"$LLMR" model synth --preset gpt-oss-20b --fill zeros --out "$tmp/src/big" >/dev/null 2>&1 || fail "synth big"
t0=$(date +%s%3N)
expect 0 "pull ./big" -- "$LLMR" pull "$tmp/src/big" --name big --timeout 60
echo "(pull of a 13.8 GB directory in place: $(( $(date +%s%3N) - t0 )) ms)"
for f in "$tmp"/src/big/*.safetensors; do
  [[ $(inode "$store/big/${f##*/}") == $(inode "$f") ]] || fail "${f##*/} of big is used in place"
done
expect 0 "manifest of big" -- curl -sf -H "Authorization: Bearer $admin" "$LLMR_ROUTER/v0/models/big/manifest"
python3 -c '
import json, sys
m = json.loads(sys.argv[1])
assert m["source"]["kind"] == "local" and m["source"]["dir"].endswith("/src/big"), m["source"]
big = [f for f in m["files"] if f["size"] > 64 << 20]
assert len(big) == 3 and all(len(f["sample_sha256"]) == 64 and "sha256" not in f for f in big), big
assert all(len(f["sha256"]) == 64 for f in m["files"] if f["size"] <= 64 << 20)
' "$out" || fail "the manifest gives large files a sampled digest, small ones a sha256: $out"
expect 0 "rm big" -- "$LLMR" rm big --timeout 20
[[ ! -e $store/big && $(stat -c %s "$tmp/src/big/model-00001-of-00003.safetensors") -gt 1000000000 ]] ||
  fail "rm of big removes the links, not the directory's files"

# --- a Hub model that the Hugging Face cache holds: linked from there, not one of its
# files downloaded (the Hub answers only the listing)
expect 0 "pull org/cached" -- "$LLMR" pull org/cached --timeout 30
blob=$(readlink -f "$tmp/hf/hub/models--org--cached/snapshots/c0ffee"*"/model.safetensors")
[[ $(inode "$store/cached/model.safetensors") == $(inode "$blob") ]] ||
  fail "the cached weights are linked from the Hugging Face cache: $(ls -li "$store/cached" 2>&1)"
grep -q 'GET /api/models/org/cached/tree/main' "$tmp/hub.log" || fail "the router lists org/cached on the Hub"
if grep -E '(GET|HEAD) /org/cached/resolve/' "$tmp/hub.log"; then
  fail "no file the cache holds is downloaded, by the router or the node"
fi
grep -q 'taken from the Hugging Face cache' "$tmp/serve.log" || fail "the log says the files came from the cache"
chat "$LLMR_ROUTER" cached
[[ $code == 200 && -n $content ]] || fail "a chat with the cached model: $code $(head -c 300 "$tmp/chat")"
expect 0 "rm cached" -- "$LLMR" rm cached --timeout 20
[[ -s $blob ]] || fail "rm of a model linked from the cache keeps the cache's blob"

# --- rm during a sync: nothing left behind, no ERROR
# (the pull watched on a terminal of 80 columns for a few seconds first: one line
# rewritten in place, with percent, bytes, speed and time left, never wider than 79)
if command -v script >/dev/null; then
  timeout 6 script -qec "stty cols 80; '$LLMR' pull org/slow --timeout 60" /dev/null >"$tmp/pull.tty" 2>&1
  tr '\r' '\n' <"$tmp/pull.tty" | sed 's/\x1b\[K//g' | grep 'llmr pull: slow' >"$tmp/pull.lines"
  grep -Eq '^llmr pull: slow +[0-9]+ s: [0-9]+% [0-9.]+ [kMG]?B/[0-9.]+ [kMG]?B, [0-9.]+ [kMG]?B/s, [0-9:]+( s)? left; local: syncing' \
    "$tmp/pull.lines" || fail "pull shows percent, speed and time left: $(tail -3 "$tmp/pull.lines")"
  awk 'length($0) > 79 { bad = 1 } END { exit bad }' "$tmp/pull.lines" || fail "pull's line fits in 80 columns"
else
  expect 0 "pull org/slow --no-wait" -- "$LLMR" pull org/slow --no-wait
fi
syncing() { compgen -G "$store/.partial/slow/*.part" >/dev/null; }
wait_for "the node starts fetching org/slow" syncing
expect 0 "rm slow during its sync" -- "$LLMR" rm slow --timeout 20
gone() { [[ ! -e $store/slow && ! -e $store/.partial/slow ]]; }
wait_for "rm during a sync leaves nothing of slow: $(find "$store" -path '*slow*' 2>/dev/null)" gone
grep -q 'sync stopped (the router no longer lists it)' "$tmp/serve.log" || fail "the log says the sync stopped"
if grep 'ERROR' "$tmp/serve.log" | grep -q slow; then fail "no ERROR for an rm during a sync: $(grep ERROR "$tmp/serve.log")"; fi

# --- a load that failed is retried after the backoff once its cause is gone
expect 0 "pull ./loop as flaky" -- "$LLMR" pull "$tmp/src/loop" --name flaky --timeout 30
cp "$store/flaky/model.safetensors" "$tmp/weights.keep"
truncate -s 100 "$store/flaky/model.safetensors"
chat "$LLMR_ROUTER" flaky
[[ $code == 503 ]] || fail "a chat with broken weights: 503, got $code $(head -c 300 "$tmp/chat")"
has "$(cat "$tmp/chat")" "tries again after" "the failed load says when it tries again"
has "$(cat "$tmp/chat")" "model.safetensors changed on disk since it was synced" "the load names the file that changed"
cp "$tmp/weights.keep" "$store/flaky/model.safetensors"
retried() {
  chat "$LLMR_ROUTER" flaky
  [[ $code == 200 ]]
}
wait_for "after the backoff the next request loads flaky again (last: $code $(head -c 200 "$tmp/chat"))" retried

kill -TERM "$serve_pid"
wait "$serve_pid"
rc=$?
serve_pid=
[[ $rc == 0 ]] || fail "serve exits 0 on SIGTERM, got $rc: $(tail -20 "$tmp/serve.log")"
if grep -Eq 'AddressSanitizer|LeakSanitizer|runtime error' "$tmp/serve.log"; then
  fail "sanitizer reports in the log: $(grep -E -A20 'Sanitizer|runtime error' "$tmp/serve.log" | head -40)"
fi
finish_checks lifecycle
