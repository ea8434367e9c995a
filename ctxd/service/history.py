"""``history/search`` and ``history/expand``: the session history index behind the daemon, the CLI
and ``ctxd mcp``.

Searching never waits for indexing unless asked (``waitMs``): each search asks the background
indexer (:mod:`ctxd.history.background`) for a pass and answers from what is indexed, saying whether
a pass is still running. Hits come from the index; whether an entry is summarised away, and every
expanded message, come from the session file itself (the source of truth).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from ctxd.errors import CtxdError
from ctxd.history.anchors import AnchorError, anchor_of
from ctxd.history.background import Indexer
from ctxd.history.db import check_fts5
from ctxd.history.index import HistoryIndex, Hit
from ctxd.history.opencode import database_of
from ctxd.history.ranges import read_page, span_of, summarized_ids
from ctxd.service import protocol as p
from ctxd.service.core import Core
from ctxd.service.registry import OpenSession, inside, only_inside
from ctxd.service.summarized import Summarized
from ctxd.store.listing import list_sessions
from ctxd.store.opencode import list_databases, session_path, split_ref

log = logging.getLogger(__name__)


def _dedupe(hits: list[Hit]) -> list[Hit]:
    """One hit per (session, entry): the live transcript's, not ctxd's archived copy of it."""
    live = {(h.session, h.entryId) for h in hits if not h.archived}
    seen: set[tuple[str, str, str]] = set()
    out = []
    for h in hits:
        key = (h.path if not h.session else h.session, h.entryId, h.role)
        if (h.archived and (h.session, h.entryId) in live) or key in seen:
            continue
        seen.add(key)
        out.append(h)
    return out


TEAM_ONLY = ("project", "agent", "user", "since", "until")
"""The filters of team searches (``scope: "team"``, :mod:`ctxd.service.team`)."""


class History:
    def __init__(self, core: Core) -> None:
        self.core = core
        self.config = core.config
        self.registry = core.registry
        self._indexer: Indexer | None = None
        self._reader: HistoryIndex | None = None
        self._summarized_closed = Summarized()
        """What the hits need of sessions that are not open (ctxd.service.summarized)."""
        self.history_watched = False
        """The daemon's watcher reports every changed file (:meth:`history_touch`): a search need not ask
        for a pass over every file."""

    def history_indexer(self, db_path: str | None = None) -> Indexer:
        """The background indexer (made on first use); raises HistoryUnavailableError without FTS5."""
        if self._indexer is None:
            check_fts5()
            self._indexer = Indexer(
                HistoryIndex(db_path),
                lambda: (self.config.all_roots, self.config.archive_roots),
                lambda: self.config.opencode_databases,
            )
            self._reader = HistoryIndex(self._indexer.index.path)
        return self._indexer

    def history_kick(self) -> None:
        """Ask for an indexing pass over every file (the daemon does at start)."""
        try:
            self.history_indexer().kick()
        except CtxdError as exc:
            log.warning("history: %s", exc)

    def history_touch(self, path: str) -> None:
        """Ask for one changed session file to be indexed (the daemon's watcher does)."""
        if self._indexer is not None:
            self._indexer.touch(path)

    def close(self) -> None:
        if self._indexer is not None:
            self._indexer.stop()  # returns at once: shutting down never waits for indexing

    async def history_search(self, params: p.HistorySearchParams) -> dict[str, Any]:
        """A search of this machine's history (``scope: "local"``; the team's is :mod:`ctxd.service.team`'s)."""
        used = [name for name in TEAM_ONLY if getattr(params, name) is not None]
        if used:
            raise p.InvalidParams(f'{used[0]}: a filter of team searches (scope: "team")', used[0])
        indexer = self.history_indexer()
        if not self.history_watched:
            indexer.kick()
        if params.waitMs:
            await asyncio.to_thread(indexer.wait, min(params.waitMs, p.WAIT_LIMIT_MS) / 1000)
        assert self._reader is not None
        limit = min(params.limit, p.SEARCH_LIMIT)
        session = params.session
        if session and (ref := split_ref(session)) is not None:
            session = session_path(os.path.realpath(ref[0]), ref[1])
        elif session and (os.sep in session or session.endswith(".jsonl")):
            session = os.path.realpath(session)
        found = await asyncio.to_thread(self._reader.search, params.query, session=session, limit=2 * limit + 10)
        roots, databases = self.config.all_roots, self.registry.databases_real()
        hits = _dedupe([h for h in found if inside(h.path, roots) or database_of(h.path) in databases])[:limit]
        away: dict[str, set[str] | None] = {}
        for path in dict.fromkeys(h.path for h in hits):
            away[path] = await self._summarized(path)
        result = p.HistorySearchResult(
            params.query,
            [
                p.HistoryHit(
                    p.HistorySession(h.session, h.path),
                    h.entryId,
                    h.line,
                    h.role,
                    h.snippet,
                    h.timestamp or None,
                    None if (ids := away[h.path]) is None else anchor_of(h.entryId, h.line) in ids,
                    h.toolName or None,
                    h.agent,
                    h.archived,
                )
                for h in hits
            ],
            indexer.busy,
            indexer.last.files if indexer.last is not None else None,
        )
        return p.to_json(result)  # type: ignore[no-any-return]

    async def _summarized(self, path: str) -> set[str] | None:
        """The entries of ``path`` summarised away now: from its open session, or from the file read
        once and let go (a search's hits do not keep their sessions open: ctxd.service.keeping)."""
        try:
            if self.registry.get(path) is not None:
                return await self.core.with_session(path, lambda o: summarized_ids(o.session))
            real = self.registry.resolve_quickly(path)  # inside the roots, as any session named
            if real is None:
                return None
            return set(await self._summarized_closed.ids(real, self.config.durability_mode))
        except (CtxdError, OSError) as exc:
            log.info("history: cannot read %s now: %s", path, exc)
            return None

    async def history_newest(self, cwd: str) -> str | None:
        """The newest live session (not an archive, not a Claude subagent's) started in ``cwd``."""
        found = await asyncio.to_thread(list_sessions, self.config.all_roots, os.path.normpath(cwd))
        subagents = os.sep + "subagents" + os.sep
        live = [s for s in only_inside(found, self.config.all_roots) if not s.archived and subagents not in s.path]
        if self.config.opencode_databases:  # opencode's own sessions (not its subagents'), from its databases
            rows = await asyncio.to_thread(list_databases, self.config.opencode_databases, os.path.normpath(cwd))
            live = sorted(live + [r for r in rows if r.parentSession is None], key=lambda s: s.modified, reverse=True)
        return live[0].path if live else None

    async def history_expand(self, params: p.HistoryExpandParams) -> dict[str, Any]:
        def work(opened: OpenSession) -> dict[str, Any]:
            s = opened.session
            try:
                span = span_of(s, params.entryId, params.fromEntryId, params.toEntryId)
                page = read_page(s, span, params.cursor, min(params.maxChars, p.EXPAND_MAX_CHARS))
            except AnchorError as exc:
                raise p.InvalidParams(str(exc), str(exc).split(" ", 1)[0]) from None
            except ValueError as exc:
                raise p.InvalidParams(str(exc), "cursor" if "cursor" in str(exc) else "fromEntryId") from None
            result = p.HistoryExpandResult(
                p.HistorySession(s.file.session_id, s.path),
                span.kind,
                p.messages_of(page.messages),
                page.total,
                page.next_cursor is not None,
                page.next_cursor,
                span.previous_compaction,
            )
            return p.to_json(result)  # type: ignore[no-any-return]

        return await self.core.with_session(params.session, work)
