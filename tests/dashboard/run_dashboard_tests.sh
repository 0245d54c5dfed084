#!/usr/bin/env bash
# The dashboard in a real browser: Debian's chromium, driven by playwright-core (pinned
# in package-lock.json, installed with `npm ci` into BUILD_DIR/dashboard-test-npm, again
# only when the lock file changes; it downloads no browser), against `llmr serve` on a
# fresh data directory and a free port.  A loopback model directory and a copy of it
# without tokenizer.json are made for the registrations, and, when gpt-oss's tokenizer
# and chat template are there (data/gpt-oss beside the binary, or
# LLMR_GPT_OSS_TOKENIZER_DIR), the gpt-oss-echo model for the playground's chat (its
# tests are skipped otherwise); dashboard.test.mjs runs under
# `node --test`; screenshots of every page at 1280×800 and 390×844 go to
# BUILD_DIR/tests/dashboard-artifacts.  serve must then stop cleanly on SIGTERM.
# Usage: run_dashboard_tests.sh PATH_TO_LLMR BUILD_DIR
set -u
LLMR=${1:?usage: run_dashboard_tests.sh PATH_TO_LLMR BUILD_DIR}
BUILD_DIR=${2:?usage: run_dashboard_tests.sh PATH_TO_LLMR BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
LLMR=$(cd "$(dirname "$LLMR")" && pwd)/$(basename "$LLMR")
started=$(date +%s)

die() { echo "FAIL: $*" >&2; exit 1; }
source "$(dirname "$0")/../support/node_project.sh"

for tool in node npm curl; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is not installed: run 'make deps'"
done
node_major=$(node -p 'process.versions.node.split(".")[0]')
[[ $node_major -ge 18 ]] || die "Node.js $(node --version) is too old (playwright-core needs 18 or later): run 'make deps'"
CHROMIUM=${CHROMIUM:-$(command -v chromium || true)}
[[ -n $CHROMIUM && -x $CHROMIUM ]] || die "chromium is not installed (Debian's package 'chromium'): run 'make deps'"

# ---- playwright-core, installed once per lock file ------------------------------------
mkdir -p "$BUILD_DIR" || die "cannot create $BUILD_DIR"
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
cache="$BUILD_DIR/dashboard-test-npm"
pw_version=$(npm_project_install "dashboard tests" "$here" "$cache" playwright-core "$here/dashboard.test.mjs") || exit 1

artifacts="$BUILD_DIR/tests/dashboard-artifacts"
rm -rf "$artifacts" && mkdir -p "$artifacts" || die "cannot create $artifacts"

# ---- llmr serve on a fresh data directory ---------------------------------------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-dashboard-XXXXXX")
serve_pid=
cleanup() {
  [[ -n $serve_pid ]] && { kill -9 "$serve_pid"; wait "$serve_pid"; } 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
admin=llmr-dashboard-test-admin-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
unset LLMR_ROUTER LLMR_API_KEY LLMR_ADMIN_KEY LLMR_DATA_DIR

serve_failed() {
  echo "FAIL: $*" >&2
  echo "--- serve log" >&2
  tail -n 60 "$tmp/serve.log" >&2
  exit 1
}

"$LLMR" model synth --preset loopback --out "$tmp/models/loop" >"$tmp/synth.log" 2>&1 ||
  die "synthesizing the loopback model failed: $(cat "$tmp/synth.log")"
cp -r "$tmp/models/loop" "$tmp/models/notok" && rm "$tmp/models/notok/tokenizer.json" ||
  die "cannot make the directory without tokenizer.json"

# gpt-oss's tokenizer and chat template, for the echo model
bin=$(dirname "$LLMR")
echo_from=
for d in "${LLMR_GPT_OSS_TOKENIZER_DIR:-}" "$bin/data/gpt-oss" "$bin/../data/gpt-oss"; do
  [[ -n $d && -f $d/tokenizer.json && -f $d/chat_template.jinja ]] && { echo_from=$d; break; }
done
echo_dir=
if [[ -n $echo_from ]]; then
  "$LLMR" model synth --preset gpt-oss-echo --out "$tmp/models/echo" --tokenizer-from "$echo_from" \
    >"$tmp/synth.log" 2>&1 || die "synthesizing the echo model failed: $(cat "$tmp/synth.log")"
  echo_dir="$tmp/models/echo"
else
  echo "dashboard tests: no gpt-oss tokenizer and chat template (scripts/fetch-gpt-oss-tokenizer.sh): the echo model's chat is skipped"
fi

# The loopback engine paces its tokens (20 ms each), as a real model does, so the
# playground's stream arrives token by token.
LLMR_ENGINE_OPTIONS='{"token_delay_us":20000}' LLMR_ADMIN_KEY=$admin "$LLMR" serve --data-dir "$tmp/data" --host 127.0.0.1 --port 0 >"$tmp/serve.log" 2>&1 &
serve_pid=$!
port=
for _ in $(seq 300); do # 15 s
  port=$(grep -o 'the OpenAI API at http://127.0.0.1:[0-9]*' "$tmp/serve.log" | grep -o '[0-9]*$')
  [[ -n $port ]] && break
  kill -0 "$serve_pid" 2>/dev/null || serve_failed "serve exited before it listened"
  sleep 0.05
done
[[ -n $port ]] || serve_failed "serve did not say where it listens within 15 s"
base="http://127.0.0.1:$port"
code=$(curl -s -o "$tmp/app.js" -w '%{http_code}' "$base/dashboard/app.js")
[[ $code == 200 ]] ||
  serve_failed "GET /dashboard/app.js answered $code: this llmr was built without the dashboard (scripts/build-dashboard.sh BUILD_DIR, then build again)"

# ---- the tests ------------------------------------------------------------------------
echo "dashboard tests: playwright-core $pw_version, $("$CHROMIUM" --version 2>/dev/null | head -n1), Node.js $(node --version), against $base"
(cd "$cache" && LLMR_DASHBOARD_URL=$base LLMR_DASHBOARD_ADMIN_KEY=$admin \
  LLMR_DASHBOARD_LOOP_DIR="$tmp/models/loop" LLMR_DASHBOARD_BAD_DIR="$tmp/models/notok" \
  LLMR_DASHBOARD_ECHO_DIR="$echo_dir" LLMR_DASHBOARD_ARTIFACTS="$artifacts" CHROMIUM="$CHROMIUM" \
  node --test --test-reporter=spec dashboard.test.mjs)
tests_rc=$?
echo "dashboard tests: screenshots in $artifacts ($(ls "$artifacts" | wc -l) files)"

# ---- a clean stop ---------------------------------------------------------------------
failures=0
stop_cleanly "$serve_pid" serve || failures=1
serve_pid=

if [[ $tests_rc -ne 0 || $failures -ne 0 ]]; then
  [[ $tests_rc -ne 0 ]] && echo "FAIL: node --test exited $tests_rc" >&2
  echo "--- serve log (last 60 lines)" >&2
  tail -n 60 "$tmp/serve.log" >&2
  exit 1
fi
echo "all dashboard checks passed in $(( $(date +%s) - started )) s"
exit 0
