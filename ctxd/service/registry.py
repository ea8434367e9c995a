"""Open sessions, resolved safely inside the configured roots, each with its own lock."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from typing import Any

import attrs

from ctxd.errors import SessionNotFoundError
from ctxd.store.listing import SessionSummary, iter_session_files, summarize_file
from ctxd.store.opencode import SEPARATOR, has_session, session_path
from ctxd.tree.session import Session


@attrs.define(eq=False)
class OpenSession:
    session: Session
    lock: asyncio.Lock = attrs.field(factory=asyncio.Lock)
    compaction: asyncio.Task[None] | None = None
    scheduled: asyncio.TimerHandle | None = None
    truncation_attempted: set[str] = attrs.field(factory=set)
    """Overflow errors (entry ids) for which tool-result truncation was already tried."""
    queue: list[Any] = attrs.field(factory=list)
    """Appends waiting for the writer (group commit)."""
    writer: asyncio.Task[None] | None = None


def real_roots(roots: Iterable[str]) -> list[str]:
    """The real paths of ``roots`` (a root may itself be a link: what counts is where it leads)."""
    return [os.path.realpath(root) for root in roots]


def _within(real: str, reals: list[str]) -> bool:
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in reals)


def inside(path: str, roots: list[str]) -> bool:
    """True when ``path``, links resolved, lies in one of ``roots`` (links resolved too)."""
    return _within(os.path.realpath(path), real_roots(roots))


def only_inside(summaries: Iterable[SessionSummary], roots: list[str]) -> list[SessionSummary]:
    """The listed sessions whose real path lies inside ``roots``, named by that real path (a link
    that leads outside is neither listed nor remembered)."""
    reals = real_roots(roots)
    kept: list[SessionSummary] = []
    for s in summaries:
        real = os.path.realpath(s.path)
        if _within(real, reals):
            s.path = real
            if s.parentSession:
                s.parentSession = os.path.realpath(s.parentSession)
            if s.archiveOf:
                s.archiveOf = os.path.realpath(s.archiveOf)
            s.archives = [a for a in map(os.path.realpath, s.archives) if _within(a, reals)]
            kept.append(s)
    return kept


def _outside(ref: str) -> SessionNotFoundError:
    return SessionNotFoundError(f"{ref!r} is outside the configured session roots", session=ref)


class Registry:
    """Every way of naming a session ends in :meth:`resolve`, which checks the real path against
    the roots each time: a name (path, link, id) is never trusted because it was good before."""

    def __init__(self, roots: list[str], databases: Iterable[str] = ()) -> None:
        self.roots = roots
        self.databases = list(databases)
        """opencode databases whose sessions (``<database>#<session id>``) may be named."""
        self.open: dict[str, OpenSession] = {}
        self._ids: dict[str, str] = {}

    def resolve(self, ref: str) -> str:
        """The real path of the session ``ref`` names (a path, relative to a root, or an id)."""
        path = self.resolve_quickly(ref, scan=True)
        assert path is not None
        return path

    def resolve_quickly(self, ref: str, *, scan: bool = False) -> str | None:
        """As :meth:`resolve`, with a few system calls; None when only a scan of the roots for an
        unknown id could tell (and ``scan`` is false)."""
        if not isinstance(ref, str) or not ref:
            raise SessionNotFoundError("session must be a non-empty string")
        if self.databases:
            found = self._opencode(ref, scan=scan)
            if found is not None:
                return found
        candidates = [ref] if os.path.isabs(ref) else [os.path.join(root, ref) for root in self.roots]
        for candidate in candidates:
            if os.path.isfile(candidate):
                return self.check(candidate, ref)
        if os.sep not in ref and "/" not in ref:
            known = self._ids.get(ref)
            # Checked again each time: a folder on the way may have been swapped for a link since.
            fresh = known is not None and os.path.realpath(known) == known and os.path.isfile(known)
            if known is not None and fresh and _within(known, real_roots(self.roots)):
                return known
            self._ids.pop(ref, None)
            if not scan:
                return None
            path = self._find_id(ref)
            if path:
                return path
        if os.path.isabs(ref) and not inside(ref, self.roots):
            raise _outside(ref)
        raise SessionNotFoundError(f"no session {ref!r} under the configured roots", session=ref)

    def _opencode(self, ref: str, *, scan: bool) -> str | None:
        """The path of the opencode session ``ref`` names (``<database>#<id>``, or an id the databases hold)."""
        reals = {os.path.realpath(db): db for db in self.databases}
        db, sep, session_id = ref.rpartition(SEPARATOR)
        if sep and db:
            if os.path.realpath(db) in reals and session_id:
                return session_path(os.path.realpath(db), session_id)
            return None
        known = self._ids.get(ref)
        if known is not None and known.rpartition(SEPARATOR)[0] in reals:
            return known
        if scan and ref.startswith("ses_"):
            for real in reals:
                if has_session(real, ref):
                    return self.remember(ref, session_path(real, ref))
        return None

    def check(self, path: str, ref: str | None = None) -> str:
        """The real path of ``path``, or -31001 if it lies outside the roots."""
        real = os.path.realpath(path)
        if not _within(real, real_roots(self.roots)):
            raise _outside(ref or path)
        return real

    def check_destination(self, directory: str, ref: str | None = None) -> None:
        """Refuse to create a file in ``directory`` unless it leads inside the roots (when it does
        not exist yet: its nearest existing ancestor, under which it would be made)."""
        probe = os.path.abspath(directory)
        roots = {os.path.abspath(root) for root in self.roots}
        while not os.path.lexists(probe) and os.path.dirname(probe) != probe:
            if probe in roots:
                return  # the root itself does not exist yet: it is made here, with the folder
            probe = os.path.dirname(probe)
        self.check(probe, ref or directory)

    def _find_id(self, session_id: str) -> str | None:
        reals = real_roots(self.roots)
        for root in self.roots:
            for path in iter_session_files(root):
                # pi names files <time>_<id>.jsonl, Claude <id>.jsonl, Codex rollout-<time>-<id>.jsonl.
                if len(session_id) >= 8 and os.path.basename(path).endswith(f"{session_id}.jsonl"):
                    real = os.path.realpath(path)
                    if not _within(real, reals) or not os.path.isfile(real):
                        continue  # a link leading outside the roots (or to something not a file)
                    try:
                        if summarize_file(real).id == session_id:
                            return self.remember(session_id, real)
                    except OSError:
                        continue
        return None

    def remember(self, session_id: str, path: str) -> str:
        real = path if SEPARATOR in path and path.rpartition(SEPARATOR)[0] in self.databases_real() else None
        real = real or os.path.realpath(path)
        if session_id:
            self._ids[session_id] = real
        return real

    def databases_real(self) -> set[str]:
        return {os.path.realpath(db) for db in self.databases}

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
        return self.open.pop(path, None)
