#!/usr/bin/env bash
# The router's model sources end to end: source_driver against a fake Hub
# (fake_hub.py, paged listings, LFS digests, a private repository) and against local
# directories.  Checks: a listing has every file with its size and sha256 (LFS digests
# from the Hub, small files fetched and hashed, the same as sha256sum), the Hub's pages
# are all read, each form of a source names the same repository (and a revision), a
# private repository needs HF_TOKEN and works with it (files read with it too), an
# unknown repository or revision is NOT_FOUND, 503 answers are tried again, an
# unreachable Hub is IO; the registration checks name the files at fault (no
# tokenizer, shards without an index, an index naming a missing shard, two .gguf files,
# a filename not there); the manifests take the right files as required or optional
# (an allow-listed publisher's metal/model.bin as an optional model.metal.bin whose
# origin_url is the original path) and pass the node's manifest check; local
# directories are hashed, skip dot-files, and refuse a relative path and a symbolic
# link that leaves the directory.
# Usage: test_model_source.sh PATH_TO_SOURCE_DRIVER PATH_TO_LLMR
set -u
DRIVER=${1:?usage: test_model_source.sh PATH_TO_SOURCE_DRIVER PATH_TO_LLMR}
LLMR=${2:?usage: test_model_source.sh PATH_TO_SOURCE_DRIVER PATH_TO_LLMR}
DRIVER=$(cd "$(dirname "$DRIVER")" && pwd)/$(basename "$DRIVER")
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v python3 >/dev/null 2>&1; then
  echo "SKIP: python3 is needed for the fake Hub (tests/router/fake_hub.py)"
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-source-XXXXXX")
hub_pid=
cleanup() { [[ -n $hub_pid ]] && kill "$hub_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
source "$here/../cli/check_lib.sh"
unset HF_TOKEN HF_ENDPOINT

# jpy FILE EXPR: a Python expression over the JSON document d of FILE, printed
jpy() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=eval(sys.argv[2]); print(json.dumps(r) if not isinstance(r,str) else r)' "$1" "$2"; }
# entry_of FILE PATH: the manifest entry of that path (JSON), or null
entry_of() { jpy "$1" "next((f for f in d['files'] if f['path']=='$2'), None)"; }
paths_of() { jpy "$1" "sorted(f['path'] for f in d['files'])"; }

# ---- the repositories -----------------------------------------------------------------
r=$tmp/repos
mkdir -p "$r"
"$LLMR" model synth --preset loopback --out "$r/good" >/dev/null 2>"$tmp/synth.err" \
  || { echo "llmr model synth failed: $(cat "$tmp/synth.err")" >&2; exit 1; }
good=$r/good
printf '{"bos_token": "<s>"}\n' >"$good/tokenizer_config.json"
printf '{"eos_token_id": 511}\n' >"$good/generation_config.json"
printf '{{ messages }}\n' >"$good/chat_template.jinja"
printf '# a model\n' >"$good/README.md"
mkdir -p "$good/original"
head -c 3000 /dev/urandom >"$good/original/model.safetensors"
cp "$good/config.json" "$good/original/config.json"

# missing tokenizer.json / both metadata files
cp -r "$good" "$r/notok"; rm "$r/notok/tokenizer.json"
cp -r "$good" "$r/nometa"; rm "$r/nometa/tokenizer.json" "$r/nometa/config.json"
# three shards, no index
mkdir -p "$r/shards"
cp "$good/config.json" "$good/tokenizer.json" "$r/shards/"
for i in 1 2 3; do head -c $((1500 + i)) /dev/urandom >"$r/shards/model-0000$i-of-00003.safetensors"; done
# an index naming a shard that is not there
s1=model-00001-of-00002.safetensors
s2=model-00002-of-00002.safetensors
index_json='{"metadata": {"total_size": 4000}, "weight_map": {"a.weight": "'$s1'", "b.weight": "'$s2'", "c.weight": "'$s1'"}}'
mkdir -p "$r/badindex"
cp "$good/config.json" "$good/tokenizer.json" "$r/badindex/"
printf '%s\n' "$index_json" >"$r/badindex/model.safetensors.index.json"
head -c 2000 /dev/urandom >"$r/badindex/$s1"
# a sharded model with its index (and a stray consolidated file the index does not name)
cp -r "$r/badindex" "$r/sharded"
head -c 2100 /dev/urandom >"$r/sharded/$s2"
head -c 1000 /dev/urandom >"$r/sharded/consolidated.safetensors"
# two gguf files; a split gguf model
mkdir -p "$r/gguf2" "$r/ggufsplit"
head -c 1200 /dev/urandom >"$r/gguf2/a.gguf"
head -c 1300 /dev/urandom >"$r/gguf2/b.gguf"
cp "$good/config.json" "$good/chat_template.jinja" "$r/gguf2/"
head -c 900 /dev/urandom >"$r/ggufsplit/m-00001-of-00002.gguf"
head -c 800 /dev/urandom >"$r/ggufsplit/m-00002-of-00002.gguf"
# an official publisher's repository with a Metal artifact
cp -r "$good" "$r/gptoss"
mkdir -p "$r/gptoss/metal"
head -c 5000 /dev/urandom >"$r/gptoss/metal/model.bin"
# many files, for paging
cp -r "$good" "$r/big"
mkdir -p "$r/big/extra/deeper"
for i in $(seq 1 20); do printf 'file %d\n' "$i" >"$r/big/extra/f$i.txt"; done
printf 'deep\n' >"$r/big/extra/deeper/x.txt"
# another revision of good
cp -r "$good" "$r/good-v2"
printf '{"model_type": "v2"}\n' >"$r/good-v2/config.json"

# ---- the fake Hub ---------------------------------------------------------------------
: >"$tmp/port"
python3 "$here/fake_hub.py" --log "$tmp/hub.log" --page-size 4 \
  --repo "org/good=$good" --repo "org/good@v2=$r/good-v2" --repo "org/good@refs/pr/1=$r/good-v2" \
  --repo "org/notok=$r/notok" --repo "org/nometa=$r/nometa" --repo "org/shards=$r/shards" \
  --repo "org/badindex=$r/badindex" --repo "org/sharded=$r/sharded" \
  --repo "org/gguf2=$r/gguf2" --repo "org/ggufsplit=$r/ggufsplit" \
  --repo "openai/gpt-oss-mini=$r/gptoss" --repo "org/gptoss=$r/gptoss" \
  --repo "org/big=$r/big" --repo "org/secret=$good" --private org/secret --token hf_right \
  --repo "org/flaky=$good" --flaky org/flaky:2 \
  >"$tmp/port" 2>"$tmp/hub.err" &
hub_pid=$!
for _ in $(seq 200); do [[ -s "$tmp/port" ]] && break; sleep 0.05; done
port=$(head -1 "$tmp/port")
[[ -n $port ]] || { echo "the fake Hub did not start: $(cat "$tmp/hub.err")" >&2; exit 1; }
hub=http://127.0.0.1:$port
export HF_ENDPOINT=$hub

# verify_listing FILE DIR KIND: every file of DIR (dot-files left out for local) with
# its size and sha256, and the origin_url for hf
verify_listing() {
  python3 - "$1" "$2" "$3" "$hub" <<'EOF'
import hashlib, json, os, sys
out, root, kind, hub = sys.argv[1:5]
d = json.load(open(out))
want = {}
for dirpath, dirnames, filenames in os.walk(root):
    if kind == "local":
        dirnames[:] = [x for x in dirnames if not x.startswith(".")]
        filenames = [x for x in filenames if not x.startswith(".")]
    for f in filenames:
        full = os.path.join(dirpath, f)
        rel = os.path.relpath(full, root)
        want[rel] = (os.path.getsize(full), hashlib.sha256(open(full, "rb").read()).hexdigest())
got = {f["path"]: f for f in d["files"]}
problems = []
if sorted(got) != sorted(want):
    problems.append("paths %s, wanted %s" % (sorted(got), sorted(want)))
model_files = ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json",
               "special_tokens_map.json", "chat_template.jinja", "chat_template.json",
               "model.safetensors.index.json")
for p, f in got.items():
    if p not in want:
        continue
    size, sha = want[p]
    if f["size"] != size:
        problems.append("%s: size %s, wanted %s" % (p, f["size"], size))
    lfs = size > 1024 or p.endswith((".safetensors", ".gguf", ".bin"))
    top = "/" not in p or (p.startswith("metal/") and p.count("/") == 1)
    manifest_file = top and (p in model_files or p.endswith((".safetensors", ".gguf")) or p.startswith("metal/"))
    known = (kind == "local" and manifest_file) or (kind == "hf" and (lfs or p in model_files or p.startswith("metal/")))
    if known and f["sha256"] != sha:
        problems.append("%s: sha256 %s, wanted %s" % (p, f["sha256"], sha))
    if not known and f["sha256"] is not None:
        problems.append("%s: a sha256 for a file no manifest takes" % p)
    if kind == "hf" and f["origin_url"] != "%s/%s/resolve/%s/%s" % (hub, d["repo"], d["revision"].replace("/", "%2F"), p):
        problems.append("%s: origin_url %s" % (p, f["origin_url"]))
    if kind == "local" and f["origin_url"] is not None:
        problems.append("%s: an origin_url for a local file" % p)
print("\n".join(problems))
EOF
}
tree_requests() { grep -c "^GET /api/models/$1/tree/" "$tmp/hub.log"; }

# ---- listing the Hub ----------------------------------------------------------------------
expect 0 "resolve org/good" -- "$DRIVER" resolve org/good
cp "$tmp/out" "$tmp/good.json"
[[ $(jpy "$tmp/good.json" 'd["kind"]') == hf ]] || fail "resolve: kind is not hf"
[[ $(jpy "$tmp/good.json" 'd["repo"]') == org/good ]] || fail "resolve: repo"
[[ $(jpy "$tmp/good.json" 'd["revision"]') == main ]] || fail "resolve: revision defaults to main"
problems=$(verify_listing "$tmp/good.json" "$good" hf)
[[ -z $problems ]] || fail "resolve org/good: $problems"
sha_tok=$(sha256sum "$good/tokenizer.json" | cut -d' ' -f1)
[[ $(jpy "$tmp/good.json" "[f['sha256'] for f in d['files'] if f['path']=='tokenizer.json'][0]") == "$sha_tok" ]] \
  || fail "the LFS digest of tokenizer.json is not its sha256sum"
grep -q "^GET /org/good/resolve/main/config.json " "$tmp/hub.log" \
  || fail "config.json (small, not in LFS) was not fetched to hash it: $(cat "$tmp/hub.log")"
grep -q "^GET /org/good/resolve/main/tokenizer.json " "$tmp/hub.log" \
  && fail "an LFS file was fetched although the Hub gave its digest"
grep -q "^GET /org/good/resolve/main/README.md " "$tmp/hub.log" \
  && fail "README.md was fetched although no manifest takes it"

# paging: every page read, every file there
: >"$tmp/hub.log"
expect 0 "resolve a paged listing" -- "$DRIVER" resolve org/big
problems=$(verify_listing "$tmp/out" "$r/big" hf)
[[ -z $problems ]] || fail "paged listing: $problems"
pages=$(tree_requests org/big)
[[ $pages -ge 8 ]] || fail "paged listing: $pages tree requests, wanted one per page: $(cat "$tmp/hub.log")"
grep -q "^GET /api/models/org/big/tree/main?recursive=true&cursor=4 " "$tmp/hub.log" \
  || fail "the Link header's next page was not followed: $(cat "$tmp/hub.log")"

# the forms of a source
for form in "hf://org/good" "https://huggingface.co/org/good" "$hub/org/good" "$hub/org/good/" ; do
  expect 0 "resolve $form" -- "$DRIVER" resolve "$form"
  [[ $(jpy "$tmp/out" 'd["repo"] + "@" + d["revision"]') == org/good@main ]] || fail "$form: not org/good@main"
done
for form in "org/good@v2" "hf://org/good@v2" "$hub/org/good/tree/v2"; do
  expect 0 "resolve $form" -- "$DRIVER" resolve "$form"
  [[ $(jpy "$tmp/out" 'd["revision"]') == v2 ]] || fail "$form: revision is not v2"
  problems=$(verify_listing "$tmp/out" "$r/good-v2" hf)
  [[ -z $problems ]] || fail "$form: $problems"
done
: >"$tmp/hub.log"
expect 0 "resolve a revision with a slash" -- "$DRIVER" resolve "$hub/org/good/tree/refs%2Fpr%2F1"
[[ $(jpy "$tmp/out" 'd["revision"]') == refs/pr/1 ]] || fail "the revision from the URL is not decoded"
grep -q "^GET /api/models/org/good/tree/refs%2Fpr%2F1?recursive=true " "$tmp/hub.log" \
  || fail "the revision is not percent-encoded in the request: $(cat "$tmp/hub.log")"
problems=$(verify_listing "$tmp/out" "$r/good-v2" hf)
[[ -z $problems ]] || fail "refs/pr/1: $problems"

# names that are not sources
for bad in "org/../x" "a/b/c" "-org/x" "org/" "/org" "org/name@bad rev" "org/name@x/../y" \
           "org/$(printf 'n%.0s' $(seq 100))" "https://example.com/org/good" \
           "https://huggingface.co/datasets/org/x" "justaname" "hf://org"; do
  expect 1 "resolve \"$bad\"" -- "$DRIVER" resolve "$bad"
  case $bad in
    /org) has "$err" "does not exist" "\"$bad\" is a missing directory" ;;
    *) has "$err" "error: INVALID_ARGUMENT" "\"$bad\" is refused as invalid" ;;
  esac
done

# private, unknown, unavailable
: >"$tmp/hub.log"
expect 1 "private without a token" -- "$DRIVER" resolve org/secret
has "$err" "error: NOT_FOUND" "private without a token: status"
has "$err" "HF_TOKEN" "private without a token: the message says what to set"
has "$err" "private or gated" "private without a token: the message says why"
HF_TOKEN=hf_wrong expect 1 "private with a wrong token" -- "$DRIVER" resolve org/secret
has "$err" "token was refused" "a wrong token: the message says so"
HF_TOKEN=hf_right expect 0 "private with the token" -- "$DRIVER" resolve org/secret
problems=$(verify_listing "$tmp/out" "$good" hf)
[[ -z $problems ]] || fail "private with the token: $problems"
grep -q "^GET /org/secret/resolve/main/config.json auth=Bearer hf_right$" "$tmp/hub.log" \
  || fail "the token does not go with the file requests: $(cat "$tmp/hub.log")"
[[ $(grep -c "^GET /api/models/org/secret/tree/.*auth=Bearer hf_right$" "$tmp/hub.log") -ge 2 ]] \
  || fail "the token does not go with every page: $(cat "$tmp/hub.log")"
HF_TOKEN=hf_right expect 0 "read a private file" -- "$DRIVER" read org/secret config.json
cmp -s "$tmp/out" "$good/config.json" || fail "read: not config.json's bytes"
expect 1 "unknown repository" -- "$DRIVER" resolve org/nope
has "$err" "error: NOT_FOUND" "unknown repository: status"
has "$err" "no such repository (or revision)" "unknown repository: message"
expect 1 "unknown revision" -- "$DRIVER" resolve org/good@nope
has "$err" "no such repository (or revision)" "unknown revision: message"
has "$err" "Revision Not Found" "unknown revision: the Hub's words"
: >"$tmp/hub.log"
expect 0 "503 answers are tried again" -- "$DRIVER" resolve org/flaky
[[ $(tree_requests org/flaky) -ge 4 ]] || fail "503: not tried again: $(cat "$tmp/hub.log")"
has "$err" "HTTP 503: trying again" "503: the retry is logged"
HF_ENDPOINT=http://127.0.0.1:1 expect 1 "no Hub" -- "$DRIVER" resolve org/good
has "$err" "error: IO" "an unreachable Hub is IO"

# ---- checks (Hub) -----------------------------------------------------------------------
expect 0 "check good" -- "$DRIVER" check org/good safetensors
has "$out" '"ok": true' "check good"
expect 1 "check without tokenizer.json" -- "$DRIVER" check org/notok safetensors
has "$err" "error: INVALID_ARGUMENT: tokenizer.json is missing: a safetensors model needs config.json and tokenizer.json" "no tokenizer: message"
[[ $(jpy "$tmp/out" 'd["files"]') == '["tokenizer.json"]' ]] || fail "no tokenizer: files $out"
expect 1 "check without both" -- "$DRIVER" check org/nometa safetensors
has "$err" "config.json and tokenizer.json are missing: a safetensors model needs both" "no metadata: message"
[[ $(jpy "$tmp/out" 'd["files"]') == '["config.json", "tokenizer.json"]' ]] || fail "no metadata: files $out"
expect 1 "check shards without an index" -- "$DRIVER" check org/shards safetensors
has "$err" "3 .safetensors files but no model.safetensors.index.json: which ones form the model is ambiguous (model-00001-of-00003.safetensors, model-00002-of-00003.safetensors, model-00003-of-00003.safetensors)" "shards without index: message"
[[ $(jpy "$tmp/out" 'len(d["files"])') == 3 ]] || fail "shards without index: files $out"
expect 1 "check an index naming a missing shard" -- "$DRIVER" check org/badindex safetensors
has "$err" "model.safetensors.index.json names files that are not there: $s2" "bad index: message"
[[ $(jpy "$tmp/out" 'd["files"]') == "[\"$s2\"]" ]] || fail "bad index: files $out"
: >"$tmp/hub.log"
expect 0 "check a sharded model" -- "$DRIVER" check org/sharded safetensors
grep -q "^GET /org/sharded/resolve/main/model.safetensors.index.json " "$tmp/hub.log" \
  || fail "the check did not read the index from the Hub: $(cat "$tmp/hub.log")"
expect 1 "check two gguf" -- "$DRIVER" check org/gguf2 gguf
has "$err" "2 .gguf files: say which with filename (a.gguf, b.gguf)" "two gguf: message"
[[ $(jpy "$tmp/out" 'd["files"]') == '["a.gguf", "b.gguf"]' ]] || fail "two gguf: files $out"
expect 1 "check a gguf filename not there" -- "$DRIVER" check org/gguf2 gguf x.gguf
has "$err" "filename x.gguf is not in the repository" "gguf filename: message"
expect 0 "check a gguf filename" -- "$DRIVER" check org/gguf2 gguf b.gguf
expect 0 "check a split gguf" -- "$DRIVER" check org/ggufsplit gguf
expect 1 "check a safetensors model as gguf" -- "$DRIVER" check org/good gguf
has "$err" "no .gguf file" "safetensors as gguf"
expect 1 "check an unknown format" -- "$DRIVER" check org/good onnx
has "$err" "format must be" "unknown format"

# ---- manifests (Hub) --------------------------------------------------------------------
# req FILE PATH true|false: the entry is there with that required flag
req() {
  local got
  got=$(jpy "$1" "next((f['required'] for f in d['files'] if f['path']=='$2'), 'absent')")
  [[ $got == "$3" ]] || fail "$(basename "$1"): $2 required=$got, wanted $3"
}
expect 0 "manifest good" -- "$DRIVER" manifest org/good tiny safetensors
cp "$tmp/out" "$tmp/m-good.json"
[[ $(paths_of "$tmp/m-good.json") == '["chat_template.jinja", "config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]' ]] \
  || fail "manifest good: paths $(paths_of "$tmp/m-good.json")"
for p in config.json tokenizer.json model.safetensors tokenizer_config.json generation_config.json chat_template.jinja; do
  req "$tmp/m-good.json" "$p" true
done
[[ $(jpy "$tmp/m-good.json" 'd["name"] + " " + d["format"]') == "tiny safetensors" ]] || fail "manifest good: name/format"
[[ $(jpy "$tmp/m-good.json" 'all("sha256" in f for f in d["files"])') == true ]] || fail "manifest good: a file without sha256"
[[ $(jpy "$tmp/m-good.json" '[f for f in d["files"] if f["path"]=="config.json"][0]["url"]') == /v0/models/tiny/files/config.json ]] \
  || fail "manifest good: url"
[[ $(jpy "$tmp/m-good.json" '[f for f in d["files"] if f["path"]=="config.json"][0]["origin_url"]') == "$hub/org/good/resolve/main/config.json" ]] \
  || fail "manifest good: origin_url"
[[ $(jpy "$tmp/m-good.json" '[f for f in d["files"] if f["path"]=="config.json"][0]["sha256"]') == "$(sha256sum "$good/config.json" | cut -d' ' -f1)" ]] \
  || fail "manifest good: config.json's sha256"
[[ $(jpy "$tmp/m-good.json" 'd["source"]') == '{"kind": "hf", "repo": "org/good", "revision": "main"}' ]] \
  || fail "manifest good: source $(jpy "$tmp/m-good.json" 'd["source"]')"

: >"$tmp/hub.log"
expect 0 "manifest sharded" -- "$DRIVER" manifest org/sharded big safetensors
cp "$tmp/out" "$tmp/m-sharded.json"
[[ $(paths_of "$tmp/m-sharded.json") == "[\"config.json\", \"$s1\", \"$s2\", \"model.safetensors.index.json\", \"tokenizer.json\"]" ]] \
  || fail "manifest sharded: paths $(paths_of "$tmp/m-sharded.json")"
for p in "$s1" "$s2" model.safetensors.index.json; do req "$tmp/m-sharded.json" "$p" true; done
[[ $(grep -c "resolve/main/model.safetensors.index.json" "$tmp/hub.log") -eq 2 ]] \
  || fail "manifest sharded: the index should be read by resolve and check only: $(cat "$tmp/hub.log")"
expect 1 "manifest of shards without an index" -- "$DRIVER" manifest org/shards x safetensors
has "$err" "ambiguous" "manifest of an ambiguous model fails its check"

expect 0 "manifest of an official publisher" -- "$DRIVER" manifest openai/gpt-oss-mini gpt safetensors
cp "$tmp/out" "$tmp/m-gpt.json"
req "$tmp/m-gpt.json" model.metal.bin false
[[ $(jpy "$tmp/m-gpt.json" '[f for f in d["files"] if f["path"]=="model.metal.bin"][0]["origin_url"]') == "$hub/openai/gpt-oss-mini/resolve/main/metal/model.bin" ]] \
  || fail "the artifact's origin_url is not its original path: $(entry_of "$tmp/m-gpt.json" model.metal.bin)"
[[ $(jpy "$tmp/m-gpt.json" '[f for f in d["files"] if f["path"]=="model.metal.bin"][0]["url"]') == /v0/models/gpt/files/model.metal.bin ]] \
  || fail "the artifact's url is not its manifest path"
[[ $(jpy "$tmp/m-gpt.json" '[f for f in d["files"] if f["path"]=="model.metal.bin"][0]["sha256"]') == "$(sha256sum "$r/gptoss/metal/model.bin" | cut -d' ' -f1)" ]] \
  || fail "the artifact's sha256"
[[ $(jpy "$tmp/m-gpt.json" '[f for f in d["files"] if f["path"]=="model.metal.bin"][0]["source_path"]') == metal/model.bin ]] \
  || fail "the artifact's source_path"
[[ $(jpy "$tmp/m-gpt.json" 'd["format"]') == safetensors ]] || fail "an artifact changed the format"
[[ $(entry_of "$tmp/m-gpt.json" metal/model.bin) == null ]] || fail "the artifact is also under its original path"
[[ $(entry_of "$tmp/m-gpt.json" original/model.safetensors) == null ]] || fail "original/ is in the manifest"
expect 0 "manifest of another publisher" -- "$DRIVER" manifest org/gptoss gpt safetensors
[[ $(entry_of "$tmp/out" model.metal.bin) == null ]] || fail "an artifact of a publisher not on the allowlist"
expect 0 "manifest with an empty allowlist" -- "$DRIVER" --allowlist "" manifest openai/gpt-oss-mini gpt safetensors
[[ $(entry_of "$tmp/out" model.metal.bin) == null ]] || fail "an artifact with an empty allowlist"
expect 0 "manifest with an allowlist of the org" -- "$DRIVER" --allowlist "nvidia/*, ORG/*" manifest org/gptoss gpt safetensors
req "$tmp/out" model.metal.bin false

expect 0 "manifest gguf" -- "$DRIVER" manifest org/gguf2 g gguf b.gguf
cp "$tmp/out" "$tmp/m-gguf.json"
[[ $(paths_of "$tmp/m-gguf.json") == '["b.gguf", "chat_template.jinja", "config.json"]' ]] \
  || fail "manifest gguf: paths $(paths_of "$tmp/m-gguf.json")"
req "$tmp/m-gguf.json" b.gguf true
req "$tmp/m-gguf.json" config.json false
req "$tmp/m-gguf.json" chat_template.jinja false
expect 0 "manifest split gguf" -- "$DRIVER" manifest org/ggufsplit g gguf
[[ $(paths_of "$tmp/out") == '["m-00001-of-00002.gguf", "m-00002-of-00002.gguf"]' ]] \
  || fail "manifest split gguf: paths $(paths_of "$tmp/out")"
expect 3 "manifest with a bad name" -- "$DRIVER" manifest org/good "../x" safetensors
has "$err" "the model name must be one plain file name" "a bad model name gives no manifest"

# ---- local directories ------------------------------------------------------------------
mkdir -p "$good/.git/objects" && printf 'x\n' >"$good/.git/objects/a" && printf 'h\n' >"$good/.hidden"
ln -s config.json "$good/alias.json"
expect 0 "resolve a local directory" -- "$DRIVER" resolve "$good"
cp "$tmp/out" "$tmp/local.json"
[[ $(jpy "$tmp/local.json" 'd["kind"] + " " + d["dir"]') == "local $(cd "$good" && pwd -P)" ]] || fail "local: kind and dir"
problems=$(verify_listing "$tmp/local.json" "$good" local)
[[ -z $problems ]] || fail "local listing: $problems"
expect 0 "resolve a local directory unhashed" -- "$DRIVER" --no-hash resolve "$good"
[[ $(jpy "$tmp/out" 'all(f["sha256"] is None for f in d["files"])') == true ]] || fail "--no-hash hashed"
# a registration reads what a manifest may take and no more: a 2 GB config.json gets a
# sampled digest (about 1 MiB read, not 2 GB hashed), a 1 GB file no manifest takes and a
# file in a subdirectory are not read at all
mkdir -p "$tmp/hog/sub" && cp "$good/tokenizer.json" "$tmp/hog/"
truncate -s 2G "$tmp/hog/config.json" && truncate -s 1G "$tmp/hog/notes.bin" && echo x >"$tmp/hog/sub/a.json"
expect 0 "resolve a directory with a 2 GB config.json" -- "$DRIVER" resolve "$tmp/hog"
[[ $(jpy "$tmp/out" '",".join("%s:%s:%s" % (f["path"], f["sha256"] is not None, f["sample_sha256"] is not None) for f in d["files"])') == \
   "config.json:False:True,notes.bin:False:False,sub/a.json:False:False,tokenizer.json:True:False" ]] ||
  fail "only the files a manifest takes are digested, a large one by samples: $(cat "$tmp/out")"
expect 0 "manifest local" -- "$DRIVER" manifest "$good" tiny safetensors
cp "$tmp/out" "$tmp/m-local.json"
[[ $(paths_of "$tmp/m-local.json") == "$(paths_of "$tmp/m-good.json")" ]] || fail "local and Hub manifests differ in paths"
[[ $(jpy "$tmp/m-local.json" 'any("origin_url" in f for f in d["files"])') == false ]] || fail "local manifest has an origin_url"
[[ $(jpy "$tmp/m-local.json" '[f["sha256"] for f in d["files"]]') == "$(jpy "$tmp/m-good.json" '[f["sha256"] for f in d["files"]]')" ]] \
  || fail "local and Hub manifests differ in digests"
[[ $(jpy "$tmp/m-local.json" 'd["source"]["kind"] + " " + d["source"]["dir"]') == "local $(cd "$good" && pwd -P)" ]] ||
  fail "local manifest: source (kind and dir, for a node on this machine to use it in place)"
rm "$good/alias.json"

expect 1 "check local without tokenizer.json" -- "$DRIVER" check "$r/notok" safetensors
has "$err" "tokenizer.json is missing" "local no tokenizer"
expect 1 "check local shards without an index" -- "$DRIVER" check "$r/shards" safetensors
has "$err" "3 .safetensors files but no model.safetensors.index.json" "local shards"
expect 1 "check local bad index" -- "$DRIVER" check "$r/badindex" safetensors
has "$err" "model.safetensors.index.json names files that are not there: $s2" "local bad index"
expect 0 "manifest local sharded" -- "$DRIVER" --no-hash manifest "$r/sharded" big safetensors
[[ $(paths_of "$tmp/out") == "$(paths_of "$tmp/m-sharded.json")" ]] || fail "local sharded manifest: paths $(paths_of "$tmp/out")"
expect 1 "check local two gguf" -- "$DRIVER" check "$r/gguf2" gguf
has "$err" "2 .gguf files: say which with filename (a.gguf, b.gguf)" "local two gguf"
expect 1 "check local gguf filename" -- "$DRIVER" check "$r/gguf2" gguf x.gguf
has "$err" "filename x.gguf is not in the directory" "local gguf filename"
expect 0 "manifest local gguf" -- "$DRIVER" manifest "$r/gguf2" g gguf a.gguf
req "$tmp/out" a.gguf true
[[ $(entry_of "$tmp/out" b.gguf) == null ]] || fail "local gguf manifest has the other .gguf"
expect 0 "manifest local official artifact" -- "$DRIVER" manifest "$r/gptoss" gpt safetensors
[[ $(entry_of "$tmp/out" model.metal.bin) == null ]] || fail "a local directory got an artifact"

# refused: relative paths, a link out of the directory, a link to nothing, no directory
expect 1 "a relative path" -- env -C "$r" "$DRIVER" resolve ./good
has "$err" "absolute" "a relative path: message"
expect 1 "a relative name" -- env -C "$r" "$DRIVER" resolve good
has "$err" "absolute" "a relative name: message"
cp -r "$good" "$r/escape"
printf 'secret\n' >"$tmp/outside.txt"
ln -s "$tmp/outside.txt" "$r/escape/notes.txt"
expect 1 "a link out of the directory" -- "$DRIVER" resolve "$r/escape"
has "$err" "error: INVALID_ARGUMENT" "a link out: status"
has "$err" "notes.txt is a symbolic link that leaves the directory" "a link out: message"
rm "$r/escape/notes.txt"
ln -s ../good/config.json "$r/escape/sneaky.json"
expect 1 "a relative link out of the directory" -- "$DRIVER" resolve "$r/escape"
has "$err" "sneaky.json is a symbolic link that leaves the directory" "a relative link out"
rm "$r/escape/sneaky.json"
ln -s missing.json "$r/escape/dangling.json"
expect 1 "a link to nothing" -- "$DRIVER" resolve "$r/escape"
has "$err" "dangling.json is a symbolic link to nothing" "a link to nothing"
rm "$r/escape/dangling.json"
mkdir -p "$r/escape/sub" && ln -s ../config.json "$r/escape/sub/cfg.json"
expect 0 "a link inside the directory" -- "$DRIVER" resolve "$r/escape"
[[ $(jpy "$tmp/out" "[f['size'] for f in d['files'] if f['path']=='sub/cfg.json']") == "[$(stat -c %s "$good/config.json")]" ]] \
  || fail "a link inside the directory is not listed with its target's size"
expect 1 "no such directory" -- "$DRIVER" resolve "$r/nothing"
has "$err" "error: NOT_FOUND" "no such directory: status"
expect 1 "a file, not a directory" -- "$DRIVER" resolve "$good/config.json"
has "$err" "is not a directory" "a file is not a directory"

# a Hugging Face cache snapshot: links into the cache's blob store are fine
cache=$tmp/cache/models--org--good
mkdir -p "$cache/blobs" "$cache/snapshots/abc123"
for f in config.json tokenizer.json model.safetensors; do
  sum=$(sha256sum "$good/$f" | cut -d' ' -f1)
  cp "$good/$f" "$cache/blobs/$sum"
  ln -s "../../blobs/$sum" "$cache/snapshots/abc123/$f"
done
expect 0 "a cache snapshot" -- "$DRIVER" manifest "$cache/snapshots/abc123" tiny safetensors
[[ $(paths_of "$tmp/out") == '["config.json", "model.safetensors", "tokenizer.json"]' ]] \
  || fail "cache snapshot manifest: paths $(paths_of "$tmp/out")"
[[ $(jpy "$tmp/out" "[f['sha256'] for f in d['files'] if f['path']=='model.safetensors'][0]") == "$(sha256sum "$good/model.safetensors" | cut -d' ' -f1)" ]] \
  || fail "cache snapshot: the digest of a linked file"

finish_checks "model source"
