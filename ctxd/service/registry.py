"""Open sessions, resolved safely inside the configured roots, each with its own lock."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import attrs

from ctxd.errors import SessionNotFoundError
from ctxd.store.listing import iter_session_files, summarize_file
from ctxd.tree.session import Session


@attrs.define(eq=False)
class OpenSession:
    session: Session
    lock: asyncio.Lock = attrs.field(factory=asyncio.Lock)
    last_activity: float = attrs.field(factory=time.monotonic)
    compaction: asyncio.Task[None] | None = None
    scheduled: asyncio.TimerHandle | None = None
    truncation_attempted: set[str] = attrs.field(factory=set)
    """Overflow errors (entry ids) for which tool-result truncation was already tried."""
    queue: list[Any] = attrs.field(factory=list)
    """Appends waiting for the writer (group commit)."""
    writer: asyncio.Task[None] | None = None


def inside(path: str, roots: list[str]) -> bool:
    real = os.path.realpath(path)
    for root in roots:
        r = os.path.realpath(root)
        if real == r or real.startswith(r.rstrip(os.sep) + os.sep):
            return True
    return False


class Registry:
    def __init__(self, roots: list[str]) -> None:
        self.roots = roots
        self.open: dict[str, OpenSession] = {}
        self._ids: dict[str, str] = {}
        self._resolved: dict[str, str] = {}

    def resolve(self, ref: str) -> str:
        """The real path of the session ``ref`` names (a path, relative to a root, or an id)."""
        if not isinstance(ref, str) or not ref:
            raise SessionNotFoundError("session must be a non-empty string")
        known = self._resolved.get(ref)
        if known is not None and known in self.open:
            return known  # an open session named the same way before: already checked
        path = self._resolve(ref)
        self._resolved[ref] = path
        return path

    def _resolve(self, ref: str) -> str:
        candidates = [ref] if os.path.isabs(ref) else [os.path.join(root, ref) for root in self.roots]
        for candidate in candidates:
            if os.path.isfile(candidate):
                if not inside(candidate, self.roots):
                    raise SessionNotFoundError(f"{ref!r} is outside the configured session roots", session=ref)
                return os.path.realpath(candidate)
        if os.sep not in ref and "/" not in ref:
            path = self._ids.get(ref) or self._find_id(ref)
            if path:
                return path
        if os.path.isabs(ref) and not inside(ref, self.roots):
            raise SessionNotFoundError(f"{ref!r} is outside the configured session roots", session=ref)
        raise SessionNotFoundError(f"no session {ref!r} under the configured roots", session=ref)

    def _find_id(self, session_id: str) -> str | None:
        for root in self.roots:
            for path in iter_session_files(root):
                # pi names files <time>_<id>.jsonl, Claude <id>.jsonl, Codex rollout-<time>-<id>.jsonl.
                if len(session_id) >= 8 and os.path.basename(path).endswith(f"{session_id}.jsonl"):
                    try:
                        if summarize_file(path).id == session_id:
                            return self.remember(session_id, path)
                    except OSError:
                        continue
        return None

    def remember(self, session_id: str, path: str) -> str:
        real = os.path.realpath(path)
        if session_id:
            self._ids[session_id] = real
        return real

    def get(self, path: str) -> OpenSession | None:
        return self.open.get(path)

    def add(self, path: str, session: Session) -> OpenSession:
        existing = self.open.get(path)
        if existing is not None:
            return existing
        opened = OpenSession(session)
        self.open[path] = opened
        self.remember(session.file.session_id, path)
        return opened

    def drop(self, path: str) -> OpenSession | None:
        self._resolved = {k: v for k, v in self._resolved.items() if v != path}
        return self.open.pop(path, None)
