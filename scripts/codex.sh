#!/usr/bin/env bash
# Prints the path of a private Codex CLI (the npm package @openai/codex, a native binary inside the package),
# installing it into .cache/codex-<version> at the repository's top the first time (then it only checks the
# version; the version: scripts/versions.env). npm runs under the private Node 24 (scripts/node24.sh).
#
#   CODEX="$(bash scripts/codex.sh)"; "$CODEX" --version
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/versions.env
. "$REPO/scripts/versions.env"
PREFIX="$REPO/.cache/codex-$CODEX_VERSION"
BIN="$PREFIX/node_modules/.bin/codex"
NODE24_BIN="$(bash "$REPO/scripts/node24.sh")"
# The package's bin is a Node launcher that picks the platform binary; it needs node on PATH.
installed() { [ "$(PATH="$NODE24_BIN:$PATH" "$BIN" --version 2>/dev/null || true)" = "codex-cli $CODEX_VERSION" ]; }
# shellcheck source=scripts/npm_private.sh
. "$REPO/scripts/npm_private.sh"
npm_private codex "$PREFIX" "@openai/codex@$CODEX_VERSION"
echo "$BIN"
