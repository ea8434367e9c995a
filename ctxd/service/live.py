"""Live sessions: what the watcher saw (files added, grown, rewritten, removed) becomes
notifications, and may start an automatic compaction. A shared part of the service: every job that
creates a session announces it here (:meth:`Live.did_create`), and the core catches a changed session
up through :meth:`Live.freshen` before serving it."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import Any

from ctxd.context.answers import Size
from ctxd.context.live import size_of
from ctxd.errors import CtxdError, SessionNotFoundError
from ctxd.service import protocol as p
from ctxd.service.core import AutoCompact, Core
from ctxd.service.keeping import weigh
from ctxd.service.registry import OpenSession
from ctxd.store.files import is_regular, open_regular
from ctxd.store.listing_cache import LISTINGS
from ctxd.store.opencode import session_path, updated_sessions
from ctxd.tree.session import Session

log = logging.getLogger(__name__)
MAX_ANNOUNCED = 100_000
"""Files remembered as announced with ``session/didCreate``."""


class Live:
    def __init__(self, core: Core, auto_compact: AutoCompact) -> None:
        self.core = core
        self.config = core.config
        self.registry = core.registry
        self.auto_compact = auto_compact
        self._announced: dict[str, None] = {}
        """Session files announced with session/didCreate (by a method or by the watcher), oldest first."""
        self._opencode_seen: dict[str, dict[str, tuple[int, ...]]] = {}
        """Per opencode database: each session's update stamp when the watcher last looked."""

    def did_create(self, path: str, session_id: str | None) -> None:
        """Announce a new session file (``session/didCreate``) once. Our own new files reach the watcher too,
        often before the method that wrote them is done: each file is announced once, whoever sees it first."""
        if self._announce_once(path):
            self.core.emit(p.DID_CREATE, p.DidCreate(path, session_id))

    def _announce_once(self, path: str) -> bool:
        """Whether ``path`` is announced for the first time (remembered; the oldest are forgotten past
        :data:`MAX_ANNOUNCED`: one may then be announced twice, never missed)."""
        if path in self._announced:
            return False
        self._announced[path] = None
        if len(self._announced) > MAX_ANNOUNCED:
            del self._announced[next(iter(self._announced))]
        return True

    async def catch_up(self) -> None:
        """Once the watch is live: report the listed files that changed since they were listed (a
        ``session/list`` can be answered before the watch began, while the daemon was loading)."""
        for path, kind in await asyncio.to_thread(LISTINGS.changed_since_listed):
            await self.file_changed(path, kind)
        for db in self.config.opencode_databases:  # what changed since the baseline, told as the watcher would
            if os.path.exists(db):
                await self.database_changed(db)

    async def opencode_baseline(self) -> None:
        """What each opencode database holds before the watch begins (nothing, when it is not there yet): the
        sessions that appear later, even before the watch is live, are announced with ``session/didCreate``."""
        for db in self.config.opencode_databases:
            real = os.path.realpath(db)
            if real not in self._opencode_seen:
                try:
                    self._opencode_seen[real] = await asyncio.to_thread(updated_sessions, real)
                except CtxdError:
                    self._opencode_seen[real] = {}  # not there (yet): all its sessions will be new

    async def file_changed(self, path: str, kind: str) -> None:
        """A session file under a root was added, modified or deleted by someone (maybe us)."""
        if path in self.config.opencode_databases:
            await self.database_changed(path)
            return
        if kind == "deleted":
            real = os.path.abspath(path)
            opened = self.registry.get(real)
            if opened is not None or not os.path.exists(path):
                self.core.forget(real)
                self._announced.pop(real, None)
                self.core.emit(p.DID_DELETE, p.DidDelete(real))
            return
        try:
            # A link (or a folder swapped for one) that leads outside the roots is not ours to read.
            real = self.registry.check(path)
        except SessionNotFoundError:
            return
        opened = self.registry.get(real)
        if opened is None and not is_regular(real):
            return  # a FIFO, a device or a directory named *.jsonl: not a session, never opened
        if kind == "added" and opened is None:
            self.did_create(real, await asyncio.to_thread(_header_id, real))
            return
        if opened is None:
            session_id = await asyncio.to_thread(_header_id, real)
            self.core.emit(p.DID_CHANGE, p.DidChange(real, session_id, [], None, "external"))
            return
        await self._refresh_open(real, opened)

    async def database_changed(self, db: str) -> None:
        """opencode wrote its database (or its WAL): refresh the open sessions in it, and announce the
        sessions that appeared or changed (their ``time_updated`` / part count moved)."""
        real = os.path.realpath(db)
        try:
            now = await asyncio.to_thread(updated_sessions, real)
        except CtxdError as exc:
            log.warning("cannot read %s: %s", real, exc.message)
            return
        before = self._opencode_seen.get(real, {})
        self._opencode_seen[real] = now
        for session_id, stamp in now.items():
            path = session_path(real, session_id)
            self.registry.remember(session_id, path)
            opened = self.registry.get(path)
            if opened is not None:
                await self._refresh_open(path, opened)
            elif session_id not in before:
                self.did_create(path, session_id)
            elif before[session_id] != stamp:
                self.core.emit(p.DID_CHANGE, p.DidChange(path, session_id, [], None, "external"))
        for session_id in set(before) - set(now):
            path = session_path(real, session_id)
            self.core.forget(path)
            self._announced.pop(path, None)
            self.core.emit(p.DID_DELETE, p.DidDelete(path))

    async def freshen(self, opened: OpenSession) -> None:
        """A session whose file (or opencode database) changed since it was read is caught up before a
        request is served, so an answer never lags the watcher (or its absence: an edit in place of the
        same length is served at once by every method); what it finds is announced as the watcher would."""
        await self._refresh_open(opened.session.path, opened)

    async def _refresh_open(self, real: str, opened: OpenSession) -> None:
        s = opened.session

        def work() -> tuple[Any, range, Size, Any]:
            result, new = s.refresh()
            size = size_of(s)
            weigh(opened)
            return result, new, size, self.core.decision(s, size)

        opened.using += 1  # not closed meanwhile (the watcher's task does not open it)
        try:
            async with opened.lock:
                result, new, size, decision = await asyncio.to_thread(work)
        except CtxdError as exc:
            log.warning("cannot refresh %s: %s", real, exc.message)
            return
        finally:
            opened.using -= 1
        if not result.added and not result.reloaded:
            return  # our own append, already announced; or nothing complete yet
        ids = [] if result.reloaded else [s.tree.id_of(i) for i in result.added]
        self.registry.touch(real)  # a live session: another process writes it
        self.core.emit(
            p.DID_CHANGE, p.DidChange(real, s.file.session_id, ids, s.leaf_id(), "external", result.reloaded)
        )
        self.core.emit(p.CONTEXT_USAGE, self.core.usage(s, size.tokens))
        if self.config.auto_compact_external and any(_role(s, i) == "assistant" for i in new):
            self.auto_compact(opened, decision)


def _header_id(path: str) -> str | None:
    """The session id in a file's header line, if it can be read yet (never opening a FIFO)."""
    try:
        fd = open_regular(path)
    except (OSError, CtxdError):
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            header = json.loads(f.readline(1 << 20))
    except (OSError, ValueError):
        return None
    session_id = header.get("id") if isinstance(header, dict) else None
    return session_id if isinstance(session_id, str) else None


def _role(s: Session, i: int) -> str | None:
    message = s.file.heads[i].message
    return message.role if message is not None else None
