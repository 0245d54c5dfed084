# Shared by the shell runners of tests written for Node.js (tests/sdk, tests/dashboard):
# sourced after the runner has defined die().
#
# npm_project_install LABEL SRC_DIR CACHE PACKAGE FILE...
#   Installs the npm project SRC_DIR (package.json + package-lock.json, pinned) with
#   `npm ci` into CACHE, again only when the lock's sha256 changes or PACKAGE is
#   missing, under a lock so that two runs at once install once; then copies FILE...
#   (the test files) into CACHE, because ESM imports resolve from the importing file's
#   folder up.  Prints PACKAGE's installed version on stdout.
npm_project_install() {
  local label=$1 src=$2 cache=$3 package=$4 sum
  shift 4
  exec 9>"$cache.lock" || die "cannot create $cache.lock"
  flock 9 || die "cannot lock $cache.lock"
  sum=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)
  if [[ ! -d "$cache/node_modules/$package" || "$(cat "$cache/lock.sha256" 2>/dev/null)" != "$sum" ]]; then
    echo "$label: installing $package into $cache (npm ci)" >&2
    rm -rf "$cache"
    mkdir -p "$cache" || die "cannot create $cache"
    cp "$src/package.json" "$src/package-lock.json" "$cache/" || die "cannot copy the npm project"
    (cd "$cache" && npm ci --no-audit --no-fund --loglevel=error) >&2 ||
      die "npm ci failed in $cache (the npm registry must be reachable the first time)"
    echo "$sum" >"$cache/lock.sha256"
  fi
  cp "$@" "$cache/" || die "cannot copy the test files into $cache"
  node -p 'require(process.argv[1]).version' "$cache/node_modules/$package/package.json"
  flock -u 9
}

# stop_cleanly PID WHAT: SIGTERM to PID, which must exit 0 within 10 s.  Returns 1 (and
# says why, naming WHAT) when it had died before, does not stop, or exits non-zero.
stop_cleanly() {
  local pid=$1 what=$2 rc
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "FAIL: $what died during the tests" >&2
    return 1
  fi
  kill -TERM "$pid"
  for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "FAIL: $what did not stop within 10 s of SIGTERM" >&2
    return 1
  fi
  wait "$pid"
  rc=$?
  [[ $rc -eq 0 ]] || { echo "FAIL: $what exited $rc on SIGTERM" >&2; return 1; }
}
