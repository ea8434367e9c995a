#!/usr/bin/env bash
# Prints the path of a private Claude Code (the npm package @anthropic-ai/claude-code), installing it into
# .cache/claude-code-<version> at the repository's top the first time (then it only checks the version).
# npm runs under the private Node 24 (scripts/node24.sh): Claude Code's installer wants Node >= 22.
#
#   CLAUDE="$(bash scripts/claude-code.sh)"; "$CLAUDE" --version
set -euo pipefail
CLAUDE_CODE_VERSION="${CLAUDE_CODE_VERSION:-2.1.330}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="$REPO/.cache/claude-code-$CLAUDE_CODE_VERSION"
BIN="$PREFIX/node_modules/.bin/claude"
installed() { [ "$("$BIN" --version 2>/dev/null || true)" = "$CLAUDE_CODE_VERSION (Claude Code)" ]; }
if ! installed; then
  NODE24_BIN="$(bash "$REPO/scripts/node24.sh")"
  echo "[claude-code] installing @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION into $PREFIX" >&2
  mkdir -p "$REPO/.cache"
  exec 9>"$REPO/.cache/claude-code.lock"
  flock 9
  if ! installed; then
    rm -rf "$PREFIX"
    mkdir -p "$PREFIX"
    PATH="$NODE24_BIN:$PATH" npm_config_update_notifier=false timeout 600 npm install --prefix "$PREFIX" \
      --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
      "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" >&2
  fi
  installed || { echo "[claude-code] Claude Code $CLAUDE_CODE_VERSION did not install" >&2; exit 1; }
fi
echo "$BIN"
