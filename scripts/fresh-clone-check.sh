#!/usr/bin/env bash
# Checks that the README's two commands work from nothing, in time: each in a clean
# clone of this repository's HEAD, with a fresh HOME (so an empty ~/.cache/llmr and an
# empty npm cache: everything is fetched and built again), the Debian packages being
# the machine's.
#   make run   from the command to the first answer of /v1/chat/completions (curl),
#              within RUN_BUDGET seconds (default 300)
#   make test  passes within TEST_BUDGET seconds (default 900)
# Prints each phase's time (the "phase NAME: N s" lines of the Makefile) and a summary;
# exits non-zero when a command fails or runs past its budget.  .ci/run runs it.
#
# Usage: scripts/fresh-clone-check.sh [run] [test]   (default: both)
# Environment: RUN_BUDGET, TEST_BUDGET (seconds), FRESH_PORT (default: the first free
#   port from 18080), KEEP=1
#   keeps the work directory (it is printed).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
run_budget=${RUN_BUDGET:-300}
test_budget=${TEST_BUDGET:-900}
port=${FRESH_PORT:-18080}
what=("$@")
[[ ${#what[@]} -gt 0 ]] || what=(run test)

work=$(mktemp -d "${TMPDIR:-/tmp}/llmr-fresh.XXXXXX")
serve_group=
cleanup() {
  [[ -n $serve_group ]] && kill -TERM -- "-$serve_group" 2>/dev/null
  if [[ ${KEEP:-} == 1 ]]; then echo "fresh: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
summary=()
failed=0

# fresh NAME: a clean clone of HEAD in $work/NAME/llmr (with the shared data beside it
# when this checkout has it) and an empty home in $work/NAME/home.
fresh() {
  local dir=$work/$1
  mkdir -p "$dir/home"
  git clone -q --no-hardlinks "$root" "$dir/llmr" || { echo "fresh: cannot clone $root" >&2; return 1; }
  [[ -d $root/../shared ]] && ln -s "$(cd "$root/../shared" && pwd)" "$dir/shared"
  return 0
}

# in_fresh NAME COMMAND...: runs COMMAND in that clone with that home.  The user's npm
# settings (a registry mirror, a proxy) still apply; only the caches are new.
in_fresh() {
  local dir=$work/$1
  shift
  local npmrc=${NPM_CONFIG_USERCONFIG:-$HOME/.npmrc} vars=(HOME="$dir/home" XDG_CACHE_HOME= XDG_DATA_HOME= LLMR_CACHE_DIR=)
  [[ -f $npmrc ]] && vars+=(NPM_CONFIG_USERCONFIG="$npmrc")
  (cd "$dir/llmr" && exec env "${vars[@]}" "$@")
}

phases() { grep -E '^phase ' "$1" | sed 's/^/  /'; }

# The first port from $port on that nothing listens on.
free_port() {
  local p
  for ((p = port; p < port + 50; p++)); do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
  done
  echo "$port"
}

check_run() {
  fresh run || { summary+=("make run: FAILED: no clean clone"); failed=1; return; }
  port=$(free_port)
  local log=$work/run/make-run.log key start=$SECONDS answered=
  key="llmr-fresh-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
  echo "=== fresh make run (budget ${run_budget} s), log $log"
  # A session of its own (setsid forks none here: $! leads it), so that make and the
  # server it starts stop together.
  setsid bash -c "$(declare -f in_fresh); work='$work'; in_fresh run env LLMR_ADMIN_KEY='$key' LLMR_PORT='$port' make run" \
    >"$log" 2>&1 &
  serve_group=$!
  local body='{"model":"gpt-oss-tiny-demo","messages":[{"role":"user","content":"Hello"}],"max_tokens":8}'
  while ((SECONDS - start <= run_budget)); do
    if ! kill -0 "$serve_group" 2>/dev/null; then
      echo "fresh: make run ended before it answered:" >&2
      tail -20 "$log" >&2
      break
    fi
    if curl -sf -m 30 -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
         -d "$body" "http://127.0.0.1:$port/v1/chat/completions" 2>/dev/null | grep -q '"choices"'; then
      answered=$((SECONDS - start))
      break
    fi
    sleep 2
  done
  kill -TERM -- "-$serve_group" 2>/dev/null
  wait "$serve_group" 2>/dev/null
  serve_group=
  phases "$log"
  if [[ -n $answered ]] && ((answered <= run_budget)); then
    summary+=("make run: first chat answered after $answered s (budget $run_budget s)")
  elif [[ -n $answered ]]; then
    summary+=("make run: FAILED: the first chat answered after $answered s, past the budget of $run_budget s")
    failed=1
  else
    summary+=("make run: FAILED: no chat answer within $run_budget s (log $log)")
    failed=1
  fi
}

check_test() {
  fresh test || { summary+=("make test: FAILED: no clean clone"); failed=1; return; }
  local log=$work/test/make-test.log start=$SECONDS rc
  echo "=== fresh make test (budget ${test_budget} s), log $log"
  in_fresh test timeout "$((test_budget + 60))" make test >"$log" 2>&1
  rc=$?
  local took=$((SECONDS - start))
  phases "$log"
  grep -E 'tests passed|tests failed' "$log" | tail -1 | sed 's/^/  /'
  if [[ $rc -ne 0 ]]; then
    tail -40 "$log" >&2
    summary+=("make test: FAILED (exit $rc) after $took s")
    failed=1
  elif ((took > test_budget)); then
    summary+=("make test: passed but took $took s, past the budget of $test_budget s")
    failed=1
  else
    summary+=("make test: passed in $took s (budget $test_budget s)")
  fi
}

for w in "${what[@]}"; do
  case "$w" in
    run) check_run ;;
    test) check_test ;;
    *) echo "usage: scripts/fresh-clone-check.sh [run] [test]" >&2; exit 2 ;;
  esac
done
echo "=== from a clean clone with a fresh HOME ($(nproc) cores):"
printf '  %s\n' "${summary[@]}"
((failed)) && KEEP=1
exit $failed
