"""The small files that let the Claude Code hook's shell wrapper decide "nothing to do" without starting Python.

``integrations/claude-code/bin/ctxd-hook`` reads them; ctxd writes them, each derived in one place:

- ``<state>/hooks.env``: the settings the wrapper needs (the tool-output limit from ctxd's config, the tools
  never cut, the prompt pattern asking for whole output), as shell-safe ``name='value'`` lines. Written by every
  ``ctxd hook`` run whose content differs (:func:`write_shell_settings`); the wrapper ignores it when it names
  another config file, or when the config file is newer (then it runs ``ctxd hook``, which rewrites it).
- ``<state>/claude/<session>.pending``: exists exactly while the session's notes hold facts waiting to be handed
  over (or waiting for the summary to check them against); :func:`sync_pending` derives it from the notes each
  time they are saved. The wrapper then runs ctxd for a prompt and for every tool result.
- ``<state>/claude/<session>.whole``: exists from a prompt asking to see tool output whole until the next prompt
  (:func:`set_whole`); no output is cut meanwhile.

Standard library only (every hook imports this).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

SHELL_SETTINGS = "hooks.env"
SHELL_FORMAT = "2"
"""Bumped when the wrapper must read the file differently (it then ignores an older one); 2: ``window_fixed`` and
``share_permille``, for a window Claude Code is told (``CLAUDE_CODE_AUTO_COMPACT_WINDOW``)."""
PRIVATE_MODE = 0o600


def marker(notes_path: str, kind: str) -> str:
    """``<state>/claude/<session>.<kind>`` beside the session's notes ``<session>.json``."""
    return f"{notes_path.removesuffix('.json')}.{kind}"


def _ensure(path: str, present: bool) -> None:
    if present:
        if not os.path.exists(path):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, PRIVATE_MODE))
        return
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def sync_pending(notes_path: str, notes: Mapping[str, Any]) -> None:
    """Make ``<session>.pending`` exist exactly when ``notes`` hold facts waiting to be handed over, or waiting for
    the summary they are checked against."""
    _ensure(marker(notes_path, "pending"), bool(notes.get("pending") or notes.get("awaiting")))


def set_whole(notes_path: str, whole: bool) -> None:
    _ensure(marker(notes_path, "whole"), whole)


def is_whole(notes_path: str) -> bool:
    return os.path.exists(marker(notes_path, "whole"))


def _quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


def shell_settings(values: Mapping[str, str]) -> str:
    lines = ["# Written by `ctxd hook`; read by integrations/claude-code/bin/ctxd-hook. Do not edit."]
    lines += [f"ctxd_{name}={_quote(value)}" for name, value in {"format": SHELL_FORMAT, **values}.items()]
    return "\n".join(lines) + "\n"


def write_shell_settings(state_dir: str, values: Mapping[str, str]) -> None:
    """Write ``<state>/hooks.env`` (0600, atomically) unless it holds these values already."""
    from ctxd.store.dirs import makedirs_private

    path = os.path.join(state_dir, SHELL_SETTINGS)
    text = shell_settings(values)
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except (OSError, ValueError):
        pass
    makedirs_private(state_dir)
    temporary = f"{path}.{os.getpid()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_MODE)
    try:
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)
    os.replace(temporary, path)
