#!/usr/bin/env bash
# The pi integration's whole test run, from a fresh clone on a fresh machine:
#   install Node 24 (scripts/node24.sh), the pi the tests run and the oldest pi the extension supports
#   (scripts/pi.sh; the versions: scripts/versions.env), each only if missing; type-check the extension and
#   the shared client (tsc, strict) against both pi APIs;
#   then run the end-to-end tests: real pi in RPC mode with the extension, against the fake
#   OpenAI-compatible server on 127.0.0.1 (integrations/pi/tests, pytest).
#
# Environment:
#   PY         the Python with ctxd and its test extra (default: the repo's .venv/bin/python)
#   PYTEST_ARGS  extra pytest arguments (e.g. -k tree)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
START=$(date +%s)
say() { printf '[pi-test %s +%ss] %s\n' "$(date +%H:%M:%S)" "$(($(date +%s) - START))" "$*"; }
die() { say "FAILED: $*" >&2; exit 1; }

PY="${PY:-$REPO/.venv/bin/python}"
[ -x "$PY" ] || die "no Python at $PY (run make .venv/.installed, or set PY)"

NODE24_BIN="$(bash "$REPO/scripts/node24.sh")"
PI_CLI="$(bash "$REPO/scripts/pi.sh")"
say "Node $("$NODE24_BIN/node" --version), pi $("$NODE24_BIN/node" "$PI_CLI" --version 2>/dev/null || echo '?')"

# shellcheck source=scripts/versions.env
. "$REPO/scripts/versions.env"
TSC="$REPO/.cache/pi/node_modules/.bin/tsc"
cd "$HERE"
say "type-check against pi $PI_VERSION's extension API (tsc, strict)"
PATH="$NODE24_BIN:$PATH" timeout 180 "$TSC" -p tsconfig.json || die "type-check (pi $PI_VERSION)"
say "type-check against pi $PI_OLDEST_VERSION's extension API (tsc, strict)"
PATH="$NODE24_BIN:$PATH" timeout 180 "$TSC" -p tsconfig.oldest.json || die "type-check (pi $PI_OLDEST_VERSION)"

cd "$REPO"
say "end-to-end tests: real pi in RPC mode with the extension (pytest integrations/pi/tests)"
# shellcheck disable=SC2086
timeout 900 "$PY" -m pytest -q integrations/pi/tests ${PYTEST_ARGS:-} || die "end-to-end tests"
say "all passed in $(($(date +%s) - START)) s"
