#!/usr/bin/env bash
# The official OpenAI Node SDK (pinned in package-lock.json) against a real node: the
# SDK is installed with `npm ci` into BUILD_DIR/sdk-cache (again only when the lock
# file changes), a node serves the loopback model over HTTP on a free port, and
# `node --test` runs openai_sdk.test.mjs against it.  The node must then stop cleanly
# on SIGTERM.  With "router", the same tests go through a router: the loopback model
# is registered there from a directory, the node syncs it, and the SDK talks to the
# router.  When gpt-oss's tokenizer and chat template are there (data/gpt-oss beside the
# binary, or LLMR_GPT_OSS_TOKENIZER_DIR), the gpt-oss-echo model is served beside it
# for harmony_sdk.test.mjs and responses_sdk.test.mjs (skipped otherwise).
# Usage: run_sdk_tests.sh PATH_TO_LLMR BUILD_DIR [node|router]
set -u
LLMR=${1:?usage: run_sdk_tests.sh PATH_TO_LLMR BUILD_DIR [node|router]}
BUILD_DIR=${2:?usage: run_sdk_tests.sh PATH_TO_LLMR BUILD_DIR [node|router]}
MODE=${3:-node}
here=$(cd "$(dirname "$0")" && pwd)

die() { echo "FAIL: $*" >&2; exit 1; }
source "$(dirname "$0")/../support/node_project.sh"

for tool in node npm; do
  command -v "$tool" >/dev/null 2>&1 ||
    die "'$tool' is not installed; the SDK tests need Node.js 18 or later and npm: run 'make deps'"
done
node_major=$(node -p 'process.versions.node.split(".")[0]')
[[ $node_major -ge 18 ]] || die "Node.js $(node --version) is too old (18 or later is needed): run 'make deps'"

# ---- the SDK, installed once per lock file -------------------------------------------
mkdir -p "$BUILD_DIR" || die "cannot create $BUILD_DIR"
cache="$(cd "$BUILD_DIR" && pwd)/sdk-cache"
# Two runs (node and router) may start at once: one installs, the other waits.
sdk_version=$(npm_project_install sdk "$here" "$cache" openai "$here/openai_sdk.test.mjs" \
  "$here/harmony_sdk.test.mjs" "$here/responses_sdk.test.mjs") || exit 1

# gpt-oss's tokenizer and chat template, for the echo model
bin=$(dirname "$LLMR")
echo_from=
for d in "${LLMR_GPT_OSS_TOKENIZER_DIR:-}" "$bin/data/gpt-oss" "$bin/../data/gpt-oss" \
  "${LLMR_SHARED_DIR:-/nonexistent}/models/gpt-oss-20b"; do
  [[ -n $d && -f $d/tokenizer.json && -f $d/chat_template.jinja ]] && { echo_from=$d; break; }
done

# ---- a node serving the loopback model -----------------------------------------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-sdk-XXXXXX")
node_pid=
router_pid=
cleanup() {
  [[ -n $node_pid ]] && kill -9 "$node_pid" 2>/dev/null
  [[ -n $router_pid ]] && kill -9 "$router_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
export LLMR_DATA_DIR="$tmp/data"

if [[ $MODE == router ]]; then
  command -v curl >/dev/null 2>&1 || die "curl is not installed: run 'make deps'"
  LLMR_DATA_DIR="$tmp/router" "$LLMR" router --host 127.0.0.1 --port 0 --no-auth >"$tmp/router.log" 2>&1 &
  router_pid=$!
  for _ in $(seq 200); do grep -q "listening on" "$tmp/router.log" && break; sleep 0.05; done
  rport=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$tmp/router.log" | grep -o '[0-9]*$')
  [[ -n $rport ]] || die "the router did not start: $(cat "$tmp/router.log")"
  "$LLMR" model synth --preset loopback --out "$tmp/src/loop" >"$tmp/synth.log" 2>&1 ||
    die "synthesizing the loopback model failed: $(cat "$tmp/synth.log")"
  code=$(curl -s -o "$tmp/reg" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary "{\"path\": \"$tmp/src/loop\", \"format\": \"safetensors\"}" "http://127.0.0.1:$rport/v0/models")
  [[ $code == 201 ]] || die "registering the model with the router: $code $(cat "$tmp/reg")"
  if [[ -n $echo_from ]]; then
    "$LLMR" model synth --preset gpt-oss-echo --out "$tmp/src/echo" --tokenizer-from "$echo_from" \
      >"$tmp/synth.log" 2>&1 || die "synthesizing the echo model failed: $(cat "$tmp/synth.log")"
    code=$(curl -s -o "$tmp/reg" -w '%{http_code}' -H 'Content-Type: application/json' \
      --data-binary "{\"path\": \"$tmp/src/echo\", \"format\": \"safetensors\"}" "http://127.0.0.1:$rport/v0/models")
    [[ $code == 201 ]] || die "registering the echo model with the router: $code $(cat "$tmp/reg")"
  fi
  "$LLMR" node --host 127.0.0.1 --port 0 --router "http://127.0.0.1:$rport" --allow-cpu --heartbeat 0.3 \
    >"$tmp/node.log" 2>&1 &
  node_pid=$!
else
  "$LLMR" model synth --preset loopback --out "$tmp/data/models/loop" >"$tmp/synth.log" 2>&1 ||
    die "synthesizing the loopback model failed: $(cat "$tmp/synth.log")"
  if [[ -n $echo_from ]]; then
    "$LLMR" model synth --preset gpt-oss-echo --out "$tmp/data/models/echo" --tokenizer-from "$echo_from" \
      >"$tmp/synth.log" 2>&1 || die "synthesizing the echo model failed: $(cat "$tmp/synth.log")"
  fi
  "$LLMR" node --host 127.0.0.1 --port 0 >"$tmp/node.log" 2>&1 &
  node_pid=$!
fi

node_failed() {
  echo "FAIL: $*" >&2
  echo "--- node log" >&2
  cat "$tmp/node.log" >&2
  exit 1
}

port=
for _ in $(seq 200); do # 10 s
  kill -0 "$node_pid" 2>/dev/null || node_failed "the node exited before serving HTTP"
  port=$(cat "$tmp/data/run/http.port" 2>/dev/null)
  [[ $port =~ ^[0-9]+$ ]] && break
  port=
  sleep 0.05
done
[[ -n $port ]] || node_failed "the node wrote no run/http.port within 10 s"
base="http://127.0.0.1:$port"

# /health answers 200 (Node's own fetch: no other tool needed).
health_ok=0
for _ in $(seq 100); do # 10 s
  if node -e 'fetch(process.argv[1]).then(r => process.exit(r.status === 200 ? 0 : 1), () => process.exit(1))' \
      "$base/health"; then
    health_ok=1
    break
  fi
  kill -0 "$node_pid" 2>/dev/null || node_failed "the node exited before /health answered"
  sleep 0.1
done
[[ $health_ok -eq 1 ]] || node_failed "GET $base/health did not answer 200 within 10 s"

if [[ $MODE == router ]]; then # the router's /v1 once the node has the model ready
  base="http://127.0.0.1:$rport"
  ready=0
  for _ in $(seq 400); do # 40 s
    if node -e 'fetch(process.argv[1]).then(r => r.json()).then(j => process.exit(process.argv.slice(2).every(n => j.data.some(m => m.id === n)) ? 0 : 1), () => process.exit(1))' \
        "$base/v1/models" loop ${echo_from:+echo}; then
      ready=1
      break
    fi
    sleep 0.1
  done
  [[ $ready -eq 1 ]] || node_failed "the router never listed loop${echo_from:+ and echo} as ready: $(tail -5 "$tmp/router.log")"
fi

# ---- the tests -----------------------------------------------------------------------
echo "sdk: openai $sdk_version on Node.js $(node --version) against $base"
[[ -n $echo_from ]] || echo "sdk: no gpt-oss tokenizer and chat template here: the harmony tests are skipped"
(cd "$cache" && LLMR_BASE_URL="$base/v1" LLMR_ECHO_MODEL=${echo_from:+echo} LLMR_SDK_MODE=$MODE \
  node --test openai_sdk.test.mjs harmony_sdk.test.mjs responses_sdk.test.mjs)
tests_rc=$?

# ---- a clean stop --------------------------------------------------------------------
failures=0
stop_cleanly "$node_pid" "the node" || failures=1
node_pid=

if [[ $tests_rc -ne 0 || $failures -ne 0 ]]; then
  [[ $tests_rc -ne 0 ]] && echo "FAIL: node --test exited $tests_rc" >&2
  echo "--- node log" >&2
  cat "$tmp/node.log" >&2
  exit 1
fi
echo "all SDK checks passed"
exit 0
