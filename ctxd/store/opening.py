"""Which reader a session path needs: a pi session file, a read-only Claude Code or Codex transcript, or an
opencode session (``<database>#<session id>``)."""

from __future__ import annotations

from typing import Any

from ctxd.store.session_file import SessionFile
from ctxd.store.transcript import TranscriptFile, sniff

__all__ = ["open_session_file"]


def open_session_file(path: str, **kwargs: Any) -> SessionFile:
    """A pi session file, or a read-only view of a Claude Code / Codex transcript or of an opencode
    session (``<database>#<session id>``, :mod:`ctxd.store.opencode`)."""
    if isinstance(path, str) and "#" in path:  # opencode.SEPARATOR: only then is sqlite3 imported
        from ctxd.store.opencode import OpencodeFile, split_ref

        if split_ref(path) is not None:
            return OpencodeFile.open(path, **kwargs)
    kind = sniff(path)
    if kind in ("claude", "codex", "opencode"):
        return TranscriptFile.open(path, **kwargs)
    return SessionFile.open(path, **kwargs)
