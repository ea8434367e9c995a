#!/usr/bin/env bash
# Installs what the pi integration's tests need into git-ignored caches at the repository's top,
# once, and prints pi's CLI (run it with scripts/node24.sh's Node). The versions: scripts/versions.env.
#   .cache/pi-$PI_VERSION         pi from npm, TypeScript and Node's types: the tests run this pi, and the
#                                 extension is type-checked against its API (.cache/pi links to it);
#   .cache/pi-$PI_OLDEST_VERSION  the oldest pi the extension supports (and the same tools), to type-check
#                                 against its API too (.cache/pi-oldest links to it).
# Idempotent and quick when cached (a stamp per cache).
#
#   PI_CLI="$(bash scripts/pi.sh)"; "$(bash scripts/node24.sh)/node" "$PI_CLI" --mode rpc ...
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/versions.env
. "$REPO/scripts/versions.env"
NODE24_BIN="$(bash "$REPO/scripts/node24.sh")"
export PATH="$NODE24_BIN:$PATH" npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
PI_PACKAGE=@earendil-works/pi-coding-agent
CLI_IN=node_modules/$PI_PACKAGE/dist/bundle/cli.js

# install NAME STAMP PACKAGE...: npm install the packages into .cache/NAME unless its stamp says they are there.
install() {
  local prefix="$REPO/.cache/$1" stamp="$2"
  shift 2
  [ "$(cat "$prefix/.ctxd-stamp" 2>/dev/null || true)" = "$stamp" ] && return 0
  mkdir -p "$REPO/.cache"
  exec 9>"$REPO/.cache/pi.lock"
  flock 9
  if [ "$(cat "$prefix/.ctxd-stamp" 2>/dev/null || true)" != "$stamp" ]; then
    echo "[pi] installing $stamp into $prefix" >&2
    rm -rf "$prefix" && mkdir -p "$prefix"
    timeout 300 npm install --prefix "$prefix" --no-save --no-package-lock --loglevel=error "$@" >&2
    [ -f "$prefix/$CLI_IN" ] || { echo "[pi] $stamp did not install" >&2; exit 1; }
    echo "$stamp" > "$prefix/.ctxd-stamp"
  fi
  exec 9>&-
}

# The same tools beside each pi, so that a cache serves either role (PI_VERSION=0.87.1 runs the tests on the oldest).
for version in "$PI_VERSION" "$PI_OLDEST_VERSION"; do
  install "pi-$version" "pi@$version typescript@$TYPESCRIPT_VERSION @types/node@$NODE_TYPES_VERSION" \
    "$PI_PACKAGE@$version" "typescript@$TYPESCRIPT_VERSION" "@types/node@$NODE_TYPES_VERSION"
done
# Version-free names for the tsconfigs (integrations/pi, integrations/opencode).
ln -sfn "pi-$PI_VERSION" "$REPO/.cache/pi"
ln -sfn "pi-$PI_OLDEST_VERSION" "$REPO/.cache/pi-oldest"
echo "$REPO/.cache/pi-$PI_VERSION/$CLI_IN"
