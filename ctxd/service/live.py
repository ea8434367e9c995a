"""Live sessions: what the watcher saw (files added, grown, rewritten, removed) becomes
notifications, and may start an automatic compaction."""

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
from ctxd.service.base import ServiceBase
from ctxd.service.keeping import weigh
from ctxd.service.registry import OpenSession
from ctxd.store.files import is_regular, open_regular
from ctxd.store.listing_cache import LISTINGS
from ctxd.store.opencode import session_path, updated_sessions
from ctxd.tree.session import Session

log = logging.getLogger(__name__)


class Live(ServiceBase):
    # --- live changes (from the watcher) ------------------------------------------------------

    def _did_create(self, path: str, session_id: str | None) -> None:
        # Our own new files reach the watcher too, often before the method that wrote them is done:
        # announce each file once, whoever sees it first.
        if self._announce_once(path):
            self._emit(p.DID_CREATE, p.DidCreate(path, session_id))

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
                self._forget(real)
                self._announced.pop(real, None)
                self._emit(p.DID_DELETE, p.DidDelete(real))
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
            self._did_create(real, await asyncio.to_thread(_header_id, real))
            return
        if opened is None:
            session_id = await asyncio.to_thread(_header_id, real)
            self._emit(p.DID_CHANGE, p.DidChange(real, session_id, [], None, "external"))
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
                self._did_create(path, session_id)
            elif before[session_id] != stamp:
                self._emit(p.DID_CHANGE, p.DidChange(path, session_id, [], None, "external"))
        for session_id in set(before) - set(now):
            path = session_path(real, session_id)
            self._forget(path)
            self._announced.pop(path, None)
            self._emit(p.DID_DELETE, p.DidDelete(path))

    async def _freshen(self, opened: OpenSession) -> None:
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
            return result, new, size, self._decision(s, size)

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
        self._emit(p.DID_CHANGE, p.DidChange(real, s.file.session_id, ids, s.leaf_id(), "external", result.reloaded))
        self._emit(p.CONTEXT_USAGE, self._usage(s, size.tokens))
        if self.config.auto_compact_external and any(_role(s, i) == "assistant" for i in new):
            self._maybe_auto_compact(opened, decision)


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
