#!/usr/bin/env bash
# Installs what the pi integration's tests need into git-ignored caches at the repository's top,
# once, and prints pi's CLI (run it with scripts/node24.sh's Node):
#   .cache/pi-0.87.1   pi 0.87.1 from npm (the newest whole pi the registry serves), TypeScript and
#                      Node's types, for the tests and for type-checking integrations/pi;
#   .cache/pi-1.5.2    pi 1.5.2's published package (npm pack) with the dependencies its extension
#                      types need, to type-check integrations/pi against 1.5.2's API as well.
# Idempotent and quick when cached (a stamp per cache).
#
#   PI_CLI="$(bash scripts/pi.sh)"; "$(bash scripts/node24.sh)/node" "$PI_CLI" --mode rpc ...
set -euo pipefail
PI_VERSION="${PI_VERSION:-0.87.1}"
PI_TYPES_VERSION="${PI_TYPES_VERSION:-1.5.2}"
TYPESCRIPT_VERSION=7.0.2
NODE_TYPES_VERSION=22.19.19
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE24_BIN="$(bash "$REPO/scripts/node24.sh")"
export PATH="$NODE24_BIN:$PATH" npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
PI_PREFIX="$REPO/.cache/pi-$PI_VERSION"
TYPES_PREFIX="$REPO/.cache/pi-$PI_TYPES_VERSION"
PI_STAMP="pi@$PI_VERSION typescript@$TYPESCRIPT_VERSION @types/node@$NODE_TYPES_VERSION"
TYPES_STAMP="pi@$PI_TYPES_VERSION types"
CLI="$PI_PREFIX/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"

if [ "$(cat "$PI_PREFIX/.ctxd-stamp" 2>/dev/null || true)" != "$PI_STAMP" ] \
  || [ "$(cat "$TYPES_PREFIX/.ctxd-stamp" 2>/dev/null || true)" != "$TYPES_STAMP" ]; then
  mkdir -p "$REPO/.cache"
  exec 9>"$REPO/.cache/pi.lock"
  flock 9
  if [ "$(cat "$PI_PREFIX/.ctxd-stamp" 2>/dev/null || true)" != "$PI_STAMP" ]; then
    echo "[pi] installing $PI_STAMP into $PI_PREFIX" >&2
    rm -rf "$PI_PREFIX" && mkdir -p "$PI_PREFIX"
    timeout 300 npm install --prefix "$PI_PREFIX" --no-save --no-package-lock --loglevel=error \
      "@earendil-works/pi-coding-agent@$PI_VERSION" "typescript@$TYPESCRIPT_VERSION" \
      "@types/node@$NODE_TYPES_VERSION" >&2
    [ -f "$CLI" ] || { echo "[pi] pi $PI_VERSION did not install" >&2; exit 1; }
    echo "$PI_STAMP" > "$PI_PREFIX/.ctxd-stamp"
  fi
  if [ "$(cat "$TYPES_PREFIX/.ctxd-stamp" 2>/dev/null || true)" != "$TYPES_STAMP" ]; then
    echo "[pi] unpacking pi $PI_TYPES_VERSION's package (its extension types) into $TYPES_PREFIX" >&2
    rm -rf "$TYPES_PREFIX" && mkdir -p "$TYPES_PREFIX"
    # Its own dependencies are not all published here (npm install fails): unpack the packages
    # whose types the extension API names, by hand.
    tmp="$(mktemp -d)"
    (cd "$tmp" && timeout 120 npm pack --silent "@earendil-works/pi-coding-agent@$PI_TYPES_VERSION" \
      "@earendil-works/pi-ai@$PI_TYPES_VERSION" "@earendil-works/pi-agent-core@$PI_TYPES_VERSION" typebox@1.3.27 >/dev/null)
    for tgz in "$tmp"/*.tgz; do
      case "$(basename "$tgz")" in
        earendil-works-pi-coding-agent-*) name=@earendil-works/pi-coding-agent ;;
        earendil-works-pi-ai-*) name=@earendil-works/pi-ai ;;
        earendil-works-pi-agent-core-*) name=@earendil-works/pi-agent-core ;;
        typebox-*) name=typebox ;;
        *) continue ;;
      esac
      mkdir -p "$TYPES_PREFIX/node_modules/$name"
      tar -xzf "$tgz" -C "$TYPES_PREFIX/node_modules/$name" --strip-components=1
    done
    rm -rf "$tmp"
    pkg="$TYPES_PREFIX/node_modules/@earendil-works/pi-coding-agent"
    [ -f "$pkg/dist/core/extensions/types.d.ts" ] || { echo "[pi] pi $PI_TYPES_VERSION did not unpack" >&2; exit 1; }
    echo "$TYPES_STAMP" > "$TYPES_PREFIX/.ctxd-stamp"
  fi
fi
echo "$CLI"
