#!/usr/bin/env bash
# The VS Code extension's whole test run, from a fresh clone on a fresh machine:
#   install (npm ci; for the e2e also Chromium, libkrb5-dev, Node 24 and code-server, each only if
#   missing), type-check, bundle, package the .vsix, run the unit tests (against a real `ctxd
#   serve`), then the end-to-end test in real VS Code unless CTXD_SKIP_VSCODE_E2E=1.
#
# Environment:
#   CTXD_SERVER_COMMAND   how to start the daemon, space-separated (default: the repo's
#                         .venv/bin/ctxd serve if it exists, else python3 -m ctxd serve)
#   CTXD_SKIP_VSCODE_E2E  1 skips the end-to-end test
#   CTXD_VSCODE_PACKAGE_ONLY  1 stops once the .vsix is packaged (make dist)
# Downloads are cached in editors/vscode/node_modules and editors/vscode/.cache (git ignores both).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
CACHE="$HERE/.cache"
CODE_SERVER_VERSION=4.139.1
START=$(date +%s)

say() { printf '[vscode-test %s +%ss] %s\n' "$(date +%H:%M:%S)" "$(($(date +%s) - START))" "$*"; }
die() { say "FAILED: $*" >&2; exit 1; }
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false

cd "$HERE"

# --- node and the extension's dependencies --------------------------------------------------
command -v node >/dev/null && command -v npm >/dev/null || die "node (>= 20) and npm are needed on PATH"
NODE_MAJOR="$(node -p 'process.versions.node.split(".")[0]')"
[ "$NODE_MAJOR" -ge 20 ] || die "node >= 20 is needed (found $(node --version))"

LOCK_SUM="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ "$(cat node_modules/.ctxd-lock-sum 2>/dev/null || true)" != "$LOCK_SUM" ]; then
  say "npm ci"
  timeout 300 npm ci --no-audit --no-fund --loglevel=error
  echo "$LOCK_SUM" > node_modules/.ctxd-lock-sum
else
  say "node_modules is up to date"
fi

# --- build and package ---------------------------------------------------------------------
say "type-check (tsc, strict)"
timeout 180 npx --no-install tsc -p . --noEmit
timeout 180 npx --no-install tsc -p webview --noEmit
say "bundle (esbuild)"
timeout 120 node scripts/build.mjs --minify
say "package the .vsix (vsce)"
timeout 120 npx --no-install vsce package --no-dependencies --allow-missing-repository --out dist/ctxd.vsix </dev/null
VSIX="$HERE/dist/ctxd.vsix"
[ -s "$VSIX" ] || die "no .vsix was made"
if [ "${CTXD_VSCODE_PACKAGE_ONLY:-0}" = "1" ]; then  # make dist: the .vsix only
  say "packaged $VSIX"
  exit 0
fi

# --- the daemon ----------------------------------------------------------------------------
if [ -z "${CTXD_SERVER_COMMAND:-}" ]; then
  if [ -x "$REPO/.venv/bin/ctxd" ]; then
    CTXD_SERVER_COMMAND="$REPO/.venv/bin/ctxd serve"
  else
    CTXD_SERVER_COMMAND="python3 -m ctxd serve"
  fi
fi
export CTXD_SERVER_COMMAND CTXD_REPO="$REPO"
say "the daemon: $CTXD_SERVER_COMMAND"

# --- unit tests ----------------------------------------------------------------------------
say "unit tests (node --test; the protocol client runs against a real ctxd serve)"
timeout 60 node scripts/build.mjs --tests
# The daemons the tests start get private XDG folders: the user's archive, history and config stay out of
# the answers the tests compare (and the tests leave nothing there).
UNIT_XDG="$(mktemp -d /tmp/ctxd-vscode-xdg-XXXXXX)"
XDG_DATA_HOME="$UNIT_XDG/data" XDG_STATE_HOME="$UNIT_XDG/state" XDG_CACHE_HOME="$UNIT_XDG/cache" \
  XDG_CONFIG_HOME="$UNIT_XDG/config" timeout 300 node --test --test-concurrency=1 --test-reporter=spec out/test/ \
  || die "unit tests"
rm -rf "$UNIT_XDG"

if [ "${CTXD_SKIP_VSCODE_E2E:-0}" = "1" ]; then
  say "CTXD_SKIP_VSCODE_E2E=1: skipping the end-to-end test; done in $(($(date +%s) - START)) s"
  exit 0
fi

# --- what the end-to-end test needs --------------------------------------------------------
missing=()
for pkg in chromium libkrb5-dev; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  say "apt-get install ${missing[*]}"
  timeout 180 $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive timeout 300 $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[ -x /usr/bin/chromium ] || die "no /usr/bin/chromium"

NODE24_DIR="$(dirname "$(bash "$REPO/scripts/node24.sh")")"
NODE24="$NODE24_DIR/bin/node"
say "Node $("$NODE24" --version) (scripts/node24.sh)"

CODE_SERVER="$CACHE/code-server/node_modules/.bin/code-server"
CS_PKG="$CACHE/code-server/node_modules/code-server/package.json"
if [ ! -x "$CODE_SERVER" ] || [ "$(node -p "require('$CS_PKG').version" 2>/dev/null || true)" != "$CODE_SERVER_VERSION" ]; then
  say "code-server $CODE_SERVER_VERSION (built under Node $("$NODE24" --version); a few minutes)"
  rm -rf "$CACHE/code-server"
  mkdir -p "$CACHE/code-server"
  PATH="$NODE24_DIR/bin:$PATH" npm_config_nodedir="$NODE24_DIR" \
    timeout 480 npm install --prefix "$CACHE/code-server" --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
    "code-server@$CODE_SERVER_VERSION"
  [ -x "$CODE_SERVER" ] || die "code-server did not install"
fi

# --- the end-to-end test -------------------------------------------------------------------
say "end-to-end test in code-server $CODE_SERVER_VERSION (VS Code $(node -p "require('$CACHE/code-server/node_modules/code-server/lib/vscode/package.json').version" 2>/dev/null || echo '?'))"
timeout 60 node scripts/build.mjs --e2e
PATH="$NODE24_DIR/bin:$PATH" NODE24="$NODE24" CODE_SERVER="$CODE_SERVER" VSIX="$VSIX" \
  E2E_TIMEOUT_MS=480000 timeout 540 node out/e2e/run.js || die "end-to-end test (screenshots and logs: $REPO/artifacts/vscode-e2e)"

say "all passed in $(($(date +%s) - START)) s; screenshots in $REPO/artifacts/vscode-e2e"
