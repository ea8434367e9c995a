#!/usr/bin/env bash
# Prints the path of a private opencode (the npm package opencode-ai), installing it into
# .cache/opencode-<version> at the repository's top the first time (then it only checks the version), with the
# plugin API's types of the same version (@opencode-ai/plugin: the ctxd plugin is type-checked against them).
# The version: scripts/versions.env; .cache/opencode links to the installed one.
# npm runs under the private Node 24 (scripts/node24.sh); the package ships a native binary per platform.
#
#   OPENCODE="$(bash scripts/opencode.sh)"; "$OPENCODE" --version
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/versions.env
. "$REPO/scripts/versions.env"
PREFIX="$REPO/.cache/opencode-$OPENCODE_VERSION"
BIN="$PREFIX/node_modules/.bin/opencode"
TYPES="$PREFIX/node_modules/@opencode-ai/plugin/dist/index.d.ts"
installed() { [ "$("$BIN" --version 2>/dev/null || true)" = "$OPENCODE_VERSION" ] && [ -f "$TYPES" ]; }
# shellcheck source=scripts/npm_private.sh
. "$REPO/scripts/npm_private.sh"
npm_private opencode "$PREFIX" "opencode-ai@$OPENCODE_VERSION" "@opencode-ai/plugin@$OPENCODE_VERSION"
# A version-free name for integrations/opencode/tsconfig.json.
ln -sfn "opencode-$OPENCODE_VERSION" "$REPO/.cache/opencode"
echo "$BIN"
