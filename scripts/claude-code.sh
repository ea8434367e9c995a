#!/usr/bin/env bash
# Prints the path of a private Claude Code (the npm package @anthropic-ai/claude-code), installing it into
# .cache/claude-code-<version> at the repository's top the first time (then it only checks the version); the
# version: scripts/versions.env.
# npm runs under the private Node 24 (scripts/node24.sh): Claude Code's installer wants Node >= 22.
#
#   CLAUDE="$(bash scripts/claude-code.sh)"; "$CLAUDE" --version
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/versions.env
. "$REPO/scripts/versions.env"
PREFIX="$REPO/.cache/claude-code-$CLAUDE_CODE_VERSION"
BIN="$PREFIX/node_modules/.bin/claude"
installed() { [ "$("$BIN" --version 2>/dev/null || true)" = "$CLAUDE_CODE_VERSION (Claude Code)" ]; }
# shellcheck source=scripts/npm_private.sh
. "$REPO/scripts/npm_private.sh"
npm_private claude-code "$PREFIX" "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION"
echo "$BIN"
