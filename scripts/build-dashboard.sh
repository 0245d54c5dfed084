#!/usr/bin/env bash
# Builds the operator's dashboard (dashboard/) into BUILD_DIR/dashboard: index.html,
# app.js, app.css and favicon.svg, which the router embeds and serves at /dashboard.
# The npm packages (pinned in dashboard/package-lock.json) are installed with `npm ci`
# into BUILD_DIR/dashboard-npm, outside the source tree, again only when the lock file
# changes; esbuild bundles the app (minified, ES2020).  Nothing is done when the
# sources, the lock file and this script are unchanged since the last build.
# Usage: scripts/build-dashboard.sh BUILD_DIR
set -u
BUILD_DIR=${1:?usage: scripts/build-dashboard.sh BUILD_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
src="$root/dashboard"

die() { echo "dashboard: $*" >&2; exit 1; }

command -v node >/dev/null 2>&1 || die "node is not installed (make deps installs it)"
command -v npm >/dev/null 2>&1 || die "npm is not installed (make deps installs it)"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[[ $node_major -ge 18 ]] || die "Node.js $(node --version) is too old: 18 or later is needed (make deps)"
[[ -f $src/package.json && -f $src/package-lock.json && -d $src/src ]] || die "no dashboard sources in $src"

mkdir -p "$BUILD_DIR" || die "cannot create $BUILD_DIR"
build=$(cd "$BUILD_DIR" && pwd)
cache="$build/dashboard-npm"
out="$build/dashboard"

# One build at a time per build directory: a second run waits for the first.
exec 9>"$cache.lock" || die "cannot create $cache.lock"
flock 9 || die "cannot lock $cache.lock"

# ---- the packages, installed once per lock file -----------------------------------
lock_sum=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)
installed=
if [[ ! -x $cache/node_modules/.bin/esbuild || "$(cat "$cache/lock.sha256" 2>/dev/null)" != "$lock_sum" ]]; then
  rm -rf "$cache"
  mkdir -p "$cache" || die "cannot create $cache"
  cp "$src/package.json" "$src/package-lock.json" "$cache/" || die "cannot copy the npm project to $cache"
  if ! (cd "$cache" && npm ci --no-audit --no-fund --loglevel=error) >"$cache/npm-ci.log" 2>&1; then
    if grep -Eq 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|network|getaddrinfo' "$cache/npm-ci.log"; then
      die "the npm registry is unreachable: npm ci needs it once to install the pinned packages (log: $cache/npm-ci.log)"
    fi
    die "npm ci failed in $cache: $(grep -m1 -i 'err' "$cache/npm-ci.log" || tail -n1 "$cache/npm-ci.log")"
  fi
  echo "$lock_sum" >"$cache/lock.sha256"
  installed=1
fi

# ---- skip when nothing changed ------------------------------------------------------
stamp=$( (cd "$src" && find src -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
          sha256sum package.json package-lock.json "$root/scripts/build-dashboard.sh") | sha256sum | cut -d' ' -f1)
if [[ -z $installed && "$(cat "$cache/build.stamp" 2>/dev/null)" == "$stamp" &&
      -f $out/index.html && -f $out/app.js && -f $out/app.css ]]; then
  echo "dashboard: up to date in $out"
  exit 0
fi

# ---- bundle -------------------------------------------------------------------------
# The sources are copied beside the cache's node_modules, so that imports resolve there
# and never from a stray node_modules in the source tree.
rm -rf "$cache/src" "$out.tmp"
cp -r "$src/src" "$cache/src" || die "cannot copy the sources to $cache/src"
mkdir -p "$out.tmp" || die "cannot create $out.tmp"
if ! (cd "$cache" && node_modules/.bin/esbuild src/main.jsx --bundle --minify --target=es2020 --format=iife \
        --jsx=automatic --jsx-import-source=preact --charset=utf8 --legal-comments=eof \
        --log-level=warning --outfile="$out.tmp/app.js") >"$cache/esbuild.log" 2>&1; then
  cat "$cache/esbuild.log" >&2
  die "esbuild failed (above)"
fi
if [[ -s $cache/esbuild.log ]]; then
  cat "$cache/esbuild.log" >&2
  die "esbuild warned (above): fix the sources"
fi
cp "$src/src/index.html" "$src/src/favicon.svg" "$out.tmp/" || die "cannot copy index.html and favicon.svg"
[[ -s $out.tmp/app.js && -s $out.tmp/app.css ]] || die "esbuild wrote no app.js or app.css"
rm -rf "$out" && mv "$out.tmp" "$out" || die "cannot move the build into $out"
echo "$stamp" >"$cache/build.stamp"

kb() { echo "$(( ($(stat -c %s "$1") + 1023) / 1024 )) KB"; }
esbuild_version=$("$cache/node_modules/.bin/esbuild" --version)
echo "dashboard: built $out (app.js $(kb "$out/app.js"), app.css $(kb "$out/app.css")) with esbuild $esbuild_version${installed:+, packages installed with npm ci}"
