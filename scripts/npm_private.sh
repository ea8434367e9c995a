# Sourced by the scripts that keep a private copy of an agent from npm (claude-code.sh, codex.sh, opencode.sh).
#
#   npm_private NAME PREFIX PACKAGE...
#
# installs the PACKAGEs (name@version) into PREFIX with npm under the private Node 24 (scripts/node24.sh),
# unless the caller's `installed` function already says yes. One lock (.cache/NAME.lock) serialises suites
# run side by side; `installed` is asked again under it, and once more after npm: still no is an error.
# REPO must be set (the repository's top).
npm_private() {
  local name="$1" prefix="$2" node24_bin
  shift 2
  installed && return 0
  node24_bin="$(bash "$REPO/scripts/node24.sh")"
  echo "[$name] installing $* into $prefix" >&2
  mkdir -p "$REPO/.cache"
  exec 9>"$REPO/.cache/$name.lock"
  flock 9
  if ! installed; then
    rm -rf "$prefix"
    mkdir -p "$prefix"
    PATH="$node24_bin:$PATH" npm_config_update_notifier=false timeout 600 npm install --prefix "$prefix" \
      --no-save --no-package-lock --no-audit --no-fund --loglevel=error "$@" >&2
  fi
  installed || { echo "[$name] $* did not install into $prefix" >&2; exit 1; }
}
