#!/usr/bin/env bash
# Model sync end to end with real processes on loopback: a fake file server
# (fake_origin.py) serves a small model directory and breaks on purpose; sync_driver
# runs llmr_model_sync against it.  Checks: a full sync puts every file in place with
# its digest and the sync record, progress is reported, a cut download resumes with a
# Range request (within one sync, and in the next sync after a failed one), a whole
# part file is taken as done on the server's 416, a stalled download resumes, a server
# that ignores Range starts the file over, 5xx answers are retried and a 403 is not, a
# bad digest is refused with MODEL_CORRUPT and nothing left in place, a missing
# optional file is skipped and a missing required one is NOT_FOUND, a traversal path
# is refused before any request, a complete model downloads nothing, and the origin is
# used first when allowed (the router's key never goes there) with the router as the
# fallback.
# Usage: test_sync_e2e.sh PATH_TO_SYNC_DRIVER
set -u
DRIVER=${1:?usage: test_sync_e2e.sh PATH_TO_SYNC_DRIVER}
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v python3 >/dev/null 2>&1; then
  echo "SKIP: python3 is needed for the fake file server (tests/node/fake_origin.py)"
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-sync-XXXXXX")
origin_pid=
cleanup() { [[ -n $origin_pid ]] && kill "$origin_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
source "$here/../cli/check_lib.sh"

# ---- the model the server holds --------------------------------------------------------
src=$tmp/src
mkdir -p "$src/sub"
printf '{"architectures": ["LlamaForCausalLM"], "hidden_size": 64}\n' >"$src/config.json"
head -c 300000 /dev/urandom >"$src/model-00001-of-00002.safetensors"
head -c 200000 /dev/urandom >"$src/model-00002-of-00002.safetensors"
head -c 50000 /dev/urandom >"$src/tokenizer.json"
head -c 20000 /dev/urandom >"$src/sub/extra.bin"
printf '# tiny\n' >"$src/README.md"
shard1=model-00001-of-00002.safetensors
shard2=model-00002-of-00002.safetensors
files=(config.json "$shard1" "$shard2" tokenizer.json sub/extra.bin)

# entry PATH [REQUIRED [SHA256 [ORIGIN_URL]]]: one file of a manifest
entry() {
  local p=$1 req=${2:-true} sum=${3:-} origin=${4:-} size=0
  [[ -f "$src/$p" ]] && size=$(stat -c %s "$src/$p")
  [[ -z $sum && -f "$src/$p" ]] && sum=$(sha256sum "$src/$p" | cut -d' ' -f1)
  printf '{"path": "%s", "size": %s, "sha256": "%s", "required": %s, "url": "/files/%s"' \
    "$p" "$size" "$sum" "$req" "$p"
  [[ -n $origin ]] && printf ', "origin_url": "%s"' "$origin"
  printf '}'
}
# manifest FILE NAME ENTRY...
manifest() {
  local out=$1 name=$2; shift 2
  local IFS=,
  printf '{"name": "%s", "format": "safetensors", "files": [%s]}\n' "$name" "$*" >"$out"
}
all_entries() { local f; for f in "${files[@]}"; do entry "$f"; echo; done; }
mapfile -t full < <(all_entries)
manifest "$tmp/full.json" tiny "${full[@]}"

# start_origin FAULT...: a fresh server with an empty log; sets $port and $url
start_origin() {
  stop_origin
  : >"$tmp/origin.log"
  : >"$tmp/port"
  python3 "$here/fake_origin.py" --dir "$src" --log "$tmp/origin.log" "$@" \
    >"$tmp/port" 2>"$tmp/origin.err" &
  origin_pid=$!
  for _ in $(seq 200); do [[ -s "$tmp/port" ]] && break; sleep 0.05; done
  port=$(head -1 "$tmp/port")
  [[ -n $port ]] || { echo "the fake origin did not start: $(cat "$tmp/origin.err")" >&2; exit 1; }
  url=http://127.0.0.1:$port
}
stop_origin() {
  [[ -n $origin_pid ]] || return 0
  kill "$origin_pid" 2>/dev/null
  wait "$origin_pid" 2>/dev/null
  origin_pid=
}
# same_files DATA_DIR WHAT FILE...: each file in place, byte for byte
same_files() {
  local data=$1 what=$2 f; shift 2
  for f in "$@"; do
    cmp -s "$src/$f" "$data/models/tiny/$f" || fail "$what: $f is not in place or differs"
  done
}
requests() { grep -c "^GET /files/$1 " "$tmp/origin.log"; }

# (a) a full sync, (e) with progress
start_origin
expect 0 "full sync" -- "$DRIVER" "$tmp/a" "$url" "$tmp/full.json"
has "$out" "status: OK" "full sync status"
has "$out" "skipped: []" "nothing skipped"
same_files "$tmp/a" "full sync" "${files[@]}"
(cd "$tmp/a/models/tiny" && sha256sum -c --quiet <(cd "$src" && sha256sum "${files[@]}")) \
  || fail "sha256sum of the synced files"
[[ -f "$tmp/a/models/tiny/.llmr-manifest.json" ]] || fail "no .llmr-manifest.json after a full sync"
cmp -s <(python3 -m json.tool "$tmp/full.json") <(python3 -m json.tool "$tmp/a/models/tiny/.llmr-manifest.json") \
  || fail "the sync record is not the manifest"
[[ -e "$tmp/a/models/.partial/tiny" ]] && fail "the partial directory was left behind"
has "$err" "progress checking" "progress while checking"
has "$err" "progress fetching $shard1 " "progress names the file fetched"
has "$err" "progress ready - 570" "progress ends ready with every byte"
grep -qE "^progress fetching $shard1 [0-9]+/570[0-9]+ files [0-9]+/5$" <<<"$err" \
  || fail "progress lines have bytes done/total and files: $err"

# (g) a complete model downloads nothing
: >"$tmp/origin.log"
expect 0 "second sync" -- "$DRIVER" "$tmp/a" "$url" "$tmp/full.json"
has "$out" "status: OK" "second sync status"
[[ -s "$tmp/origin.log" ]] && fail "a complete model was fetched again: $(cat "$tmp/origin.log")"
# ... and a file damaged on disk is fetched again, alone
head -c 100 /dev/urandom | dd of="$tmp/a/models/tiny/$shard2" bs=1 seek=1000 conv=notrunc status=none
rm "$tmp/a/models/tiny/.llmr-manifest.json"
expect 0 "sync after damage" -- "$DRIVER" "$tmp/a" "$url" "$tmp/full.json"
same_files "$tmp/a" "sync after damage" "${files[@]}"
[[ $(grep -c '^GET' "$tmp/origin.log") -eq 1 && $(requests "$shard2") -eq 1 ]] \
  || fail "only the damaged file should be fetched: $(cat "$tmp/origin.log")"

# (b) a download cut in the middle resumes with a Range request
start_origin --cut "$shard1:100000"
expect 0 "cut download" -- "$DRIVER" "$tmp/b" "$url" "$tmp/full.json"
has "$out" "status: OK" "cut download status"
same_files "$tmp/b" "cut download" "${files[@]}"
grep -q "^GET /files/$shard1 range=bytes=100000- " "$tmp/origin.log" \
  || fail "no resuming Range request after the cut: $(cat "$tmp/origin.log")"
# ... and across syncs: a failed sync keeps the part file, the next one resumes it
start_origin --cut "$shard2:150000"
expect 1 "cut without retries" -- "$DRIVER" "$tmp/b2" "$url" "$tmp/full.json" --retries 0
has "$out" "status: IO" "a cut without retries fails"
has "$out" "$shard2" "the failure names the file"
part=$tmp/b2/models/.partial/tiny/$shard2.part
[[ -f $part && $(stat -c %s "$part") -eq 150000 ]] || fail "the part file was not kept at 150000 bytes"
[[ -e "$tmp/b2/models/tiny/$shard2" ]] && fail "a partial file was put in place"
start_origin
expect 0 "resumed sync" -- "$DRIVER" "$tmp/b2" "$url" "$tmp/full.json"
same_files "$tmp/b2" "resumed sync" "${files[@]}"
grep -q "^GET /files/$shard2 range=bytes=150000- " "$tmp/origin.log" \
  || fail "the next sync did not resume the part file: $(cat "$tmp/origin.log")"
[[ $(requests "$shard1") -eq 0 ]] || fail "the resumed sync fetched a file already in place"

# a part file already whole (a sync stopped before the rename): the server's 416 to
# its Range request means done
mkdir -p "$tmp/w/models/.partial/tiny"
cp "$src/$shard1" "$tmp/w/models/.partial/tiny/$shard1.part"
expect 0 "whole part file" -- "$DRIVER" "$tmp/w" "$url" "$tmp/full.json"
same_files "$tmp/w" "whole part file" "${files[@]}"
grep -q "^GET /files/$shard1 range=bytes=300000- " "$tmp/origin.log" \
  || fail "no Range request for the whole part file: $(cat "$tmp/origin.log")"
[[ $(requests "$shard1") -eq 1 ]] || fail "a whole part file was fetched again: $(cat "$tmp/origin.log")"

# a stalled download times out and resumes
start_origin --stall "$shard1:60000" --stall-seconds 20
expect 0 "stalled download" -- "$DRIVER" "$tmp/s" "$url" "$tmp/full.json" --stall-timeout 1
same_files "$tmp/s" "stalled download" "${files[@]}"
grep -q "^GET /files/$shard1 range=bytes=60000- " "$tmp/origin.log" \
  || fail "no resuming Range request after the stall: $(cat "$tmp/origin.log")"
has "$err" "stalled" "the stall is logged"

# a server that ignores Range: the file starts over and comes out right
start_origin --cut "$shard1:100000" --ignore-range "$shard1"
expect 0 "no range support" -- "$DRIVER" "$tmp/r" "$url" "$tmp/full.json"
same_files "$tmp/r" "no range support" "${files[@]}"
[[ $(requests "$shard1") -ge 3 ]] || fail "expected a cut, a refused resume and a restart: $(cat "$tmp/origin.log")"

# 5xx answers are retried
start_origin --fail5xx "$shard2:2"
expect 0 "5xx retried" -- "$DRIVER" "$tmp/x" "$url" "$tmp/full.json"
same_files "$tmp/x" "5xx retried" "${files[@]}"
[[ $(requests "$shard2") -eq 3 ]] || fail "two 503 then a success: $(cat "$tmp/origin.log")"

# other 4xx answers fail at once, with the URL and the status
start_origin --status "$shard2:403"
expect 1 "403" -- "$DRIVER" "$tmp/x403" "$url" "$tmp/full.json"
has "$out" "status: IO" "a 403 is IO"
has "$out" "GET $url/files/$shard2: HTTP 403" "the 403 message has the URL and the status"
[[ $(requests "$shard2") -eq 1 ]] || fail "a 403 was retried: $(cat "$tmp/origin.log")"

# (c) a file whose digest differs is refused and not left in place
start_origin --corrupt "$shard2"
expect 1 "corrupt shard" -- "$DRIVER" "$tmp/c" "$url" "$tmp/full.json"
has "$out" "status: MODEL_CORRUPT" "a bad digest is MODEL_CORRUPT"
has "$out" "$shard2" "MODEL_CORRUPT names the file"
has "$out" "sha256 mismatch: expected $(sha256sum "$src/$shard2" | cut -d' ' -f1), got" \
  "the message has the digests"
[[ -e "$tmp/c/models/tiny/$shard2" ]] && fail "the corrupt shard was put in place"
[[ -e "$tmp/c/models/.partial/tiny/$shard2.part" ]] && fail "the corrupt bytes were kept to resume from"
[[ -e "$tmp/c/models/tiny/.llmr-manifest.json" ]] && fail "a failed sync wrote the sync record"
has "$err" "progress failed" "progress ends failed"

# (d) a failing optional file is skipped and reported; a failing required one is not
manifest "$tmp/optional.json" tiny "${full[@]}" "$(entry README.md false)"
start_origin --missing README.md
expect 0 "optional 404" -- "$DRIVER" "$tmp/d" "$url" "$tmp/optional.json"
has "$out" "status: OK" "an optional 404 does not fail the sync"
has "$out" '"path":"README.md"' "the skipped file is reported"
has "$out" "404" "the skip says why"
same_files "$tmp/d" "optional 404" "${files[@]}"
[[ -e "$tmp/d/models/tiny/README.md" ]] && fail "a skipped file is in place"
manifest "$tmp/required.json" tiny "${full[@]}" "$(entry README.md true)"
expect 1 "required 404" -- "$DRIVER" "$tmp/d2" "$url" "$tmp/required.json"
has "$out" "status: NOT_FOUND" "a required 404 is NOT_FOUND"
has "$out" "README.md" "NOT_FOUND names the file"

# (f) a traversal path is refused before any download
manifest "$tmp/evil.json" tiny "${full[@]}" \
  '{"path": "../evil", "size": 5, "required": true, "url": "/files/config.json"}'
start_origin
expect 1 "traversal" -- "$DRIVER" "$tmp/f" "$url" "$tmp/evil.json"
has "$out" "status: INVALID_ARGUMENT" "a traversal path is INVALID_ARGUMENT"
has "$out" '"..' "the message names the problem"
[[ -s "$tmp/origin.log" ]] && fail "a refused manifest made requests: $(cat "$tmp/origin.log")"
[[ -e "$tmp/f/models/tiny" || -e "$tmp/evil" ]] && fail "a refused manifest touched the disk"

# the origin first when allowed, never with the router's key; the router as fallback
origin_entries() {
  local f; for f in "${files[@]}"; do entry "$f" true "" "http://localhost:$port/origin/$f"; echo; done
}
mapfile -t with_origin < <(origin_entries)
manifest "$tmp/origin.json" tiny "${with_origin[@]}"
expect 0 "prefer origin" -- "$DRIVER" "$tmp/o" "$url" "$tmp/origin.json" --prefer-origin \
  --allowlist "example.com, localhost" --auth "Authorization: Bearer node-key"
same_files "$tmp/o" "prefer origin" "${files[@]}"
[[ $(grep -c '^GET /origin/' "$tmp/origin.log") -eq ${#files[@]} ]] \
  || fail "every file should come from the origin: $(cat "$tmp/origin.log")"
grep -q '^GET /files/' "$tmp/origin.log" && fail "the router was asked although the origin had every file"
grep -q '^GET /origin/.*auth=-$' "$tmp/origin.log" || fail "no origin request without a key"
grep -q 'node-key' <(grep '^GET /origin/' "$tmp/origin.log") && fail "the router's key went to the origin"
start_origin
expect 0 "origin not allowed" -- "$DRIVER" "$tmp/o2" "$url" "$tmp/origin.json" --prefer-origin \
  --allowlist "huggingface.co" --auth "Authorization: Bearer node-key"
grep -q '^GET /origin/' "$tmp/origin.log" && fail "an origin off the allowlist was used"
grep -q "^GET /files/config.json range=- auth=Bearer node-key$" "$tmp/origin.log" \
  || fail "the router gets the key: $(cat "$tmp/origin.log")"
start_origin --missing /origin/tokenizer.json --corrupt "/origin/$shard1"
mapfile -t with_origin < <(origin_entries)
manifest "$tmp/origin.json" tiny "${with_origin[@]}"
expect 0 "origin fallback" -- "$DRIVER" "$tmp/o3" "$url" "$tmp/origin.json" --prefer-origin \
  --allowlist localhost
same_files "$tmp/o3" "origin fallback" "${files[@]}"
[[ $(requests tokenizer.json) -eq 1 && $(requests "$shard1") -eq 1 && $(requests config.json) -eq 0 ]] \
  || fail "the router is the fallback for the files the origin failed only: $(cat "$tmp/origin.log")"

stop_origin
finish_checks "model sync"
