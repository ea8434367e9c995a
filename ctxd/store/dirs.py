"""ctxd's own folders (XDG): where its archive and its hooks' state and log live, created private (0700).

Standard library only: ``ctxd hook`` imports this on every Claude Code hook, and hooks must start fast.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

PRIVATE_DIR_MODE = 0o700


def _xdg(environ: Mapping[str, str], key: str, fallback: str) -> str:
    value = environ.get(key, "")
    # The XDG spec: relative values are invalid and ignored.
    if value and os.path.isabs(value):
        return os.path.join(value, "ctxd")
    return os.path.join(os.path.expanduser("~"), fallback, "ctxd")


def data_dir(environ: Mapping[str, str] | None = None) -> str:
    """``$XDG_DATA_HOME/ctxd`` or ``~/.local/share/ctxd``."""
    return _xdg(os.environ if environ is None else environ, "XDG_DATA_HOME", os.path.join(".local", "share"))


def state_dir(environ: Mapping[str, str] | None = None) -> str:
    """``$XDG_STATE_HOME/ctxd`` or ``~/.local/state/ctxd``: the hooks' log and per-session notes."""
    return _xdg(os.environ if environ is None else environ, "XDG_STATE_HOME", os.path.join(".local", "state"))


def archive_root(environ: Mapping[str, str] | None = None) -> str:
    return os.path.join(data_dir(environ), "archive")


def default_archive_roots() -> list[str]:
    """The archive folder, when it exists (the daemon lists it beside the live transcripts)."""
    root = archive_root()
    return [root] if os.path.isdir(root) else []


def makedirs_private(directory: str) -> None:
    """``os.makedirs`` where every directory it creates (not only the last) is 0700."""
    directory = os.path.abspath(directory)
    missing: list[str] = []
    while not os.path.isdir(directory):
        missing.append(directory)
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, PRIVATE_DIR_MODE)
        except FileExistsError:
            if not os.path.isdir(d):
                raise
            continue
        os.chmod(d, PRIVATE_DIR_MODE)  # whatever the umask took away or added
