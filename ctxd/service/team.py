"""Team history in the service: the background publisher, ``history/search`` and ``history/expand`` with
``scope: "team"``, and what ``ctxd team sync`` and ``ctxd team status`` ask.

Local search never waits for the team database and never fails because of it: publishing runs in its own thread
(:mod:`ctxd.team.worker`), kicked after each indexing pass that wrote entries. A team search or expand talks to
the server (in a worker thread) and fails with -31040 (``data.kind`` says why) when it cannot.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import threading
from typing import Any

from ctxd.errors import CtxdError, TeamError
from ctxd.service import protocol as p
from ctxd.service.config import Config
from ctxd.service.history import History
from ctxd.team import spool
from ctxd.team.projects import Projects
from ctxd.team.settings import masked_dsn

log = logging.getLogger(__name__)


def _facts_of(path: str) -> Any:
    """A session file's must-keep facts (``session/facts``' answer), for the sessions table."""
    from ctxd.service.facts import facts_json, session_facts

    return facts_json(session_facts(path))


def _time(value: str | None, field: str) -> dt.datetime | None:
    if value is None:
        return None
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        raise p.InvalidParams(
            f"{field}: expected an ISO 8601 time (2026-11-20 or 2026-11-20T10:00:00Z)", field
        ) from None
    return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when


class Team:
    """The team database's part of the service, over this machine's history index (``history``)."""

    def __init__(self, config: Config, history: History) -> None:
        self.config = config
        self.history = history
        self._team_worker: Any = None
        self._team_publisher: Any = None
        self._team_conn: Any = None
        self._team_lock = threading.Lock()

    # --- publishing -----------------------------------------------------------------------------

    def team_publisher(self) -> Any:
        """The publisher of this service's history database (made on first use)."""
        if self._team_publisher is None:
            from ctxd.team.publish import Publisher

            path = self.history.history_indexer().index.path
            self._team_publisher = Publisher(self.config.team, path, _facts_of)
        return self._team_publisher

    def team_start(self) -> None:
        """Publish in the background from now on, if a team database is configured (the daemon and ``ctxd mcp``
        do at start); without one, take the spool's trigger out of the history database."""
        team = self.config.team
        try:
            indexer = self.history.history_indexer()
        except CtxdError as exc:
            log.warning("team: %s", exc)
            return
        if not team.enabled:
            threading.Thread(
                target=self._team_off, args=(indexer.index.path,), name="ctxd-team-off", daemon=True
            ).start()
            return
        if not team.publish or self._team_worker is not None:
            return
        from ctxd.team.worker import TeamWorker

        self._team_worker = TeamWorker(self.team_publisher())
        indexer.after_pass = self._team_worker.kick
        self._team_worker.kick()

    @staticmethod
    def _team_off(path: str) -> None:
        from ctxd.history.db import connect

        try:
            conn = connect(path)
            try:
                if spool.uninstall(conn):
                    log.info("team: no team database configured: the spool is gone")
            finally:
                conn.close()
        except Exception as exc:
            log.info("team: could not drop the spool: %s", exc)

    def close(self) -> None:
        if self._team_worker is not None:
            self._team_worker.stop()
        elif self._team_publisher is not None:
            self._team_publisher.close()
        if self._team_conn is not None:
            with contextlib.suppress(Exception):
                self._team_conn.close()

    async def team_sync(self, wait: float) -> dict[str, Any]:
        """Index, then publish everything spooled, waiting up to ``wait`` seconds for another publisher."""
        from ctxd.team.driver import check_dsn
        from ctxd.team.publish import pass_lock

        check_dsn(self.config.team.dsn)
        indexer = self.history.history_indexer()
        indexer.kick()
        await asyncio.to_thread(indexer.wait, wait)
        publisher = self.team_publisher()

        def work() -> dict[str, Any]:
            with pass_lock(publisher.history_path, wait) as taken:
                if not taken:
                    raise TeamError("busy", f"another ctxd kept publishing for {wait:.0f} s; try again")
                return publisher.run().to_json()  # type: ignore[no-any-return]

        return await asyncio.to_thread(work)

    def team_status(self) -> dict[str, Any]:
        """What is queued (by project), where it goes, and what the last pass did (this process's or another's)."""
        team = self.config.team
        from ctxd.history.db import connect

        conn = connect(self.history.history_indexer().index.path)
        try:
            rules = Projects(team)
            by_project: dict[str, int] = {}
            try:
                for cwd, count in conn.execute(
                    "SELECT f.cwd, count(*) FROM team_spool s JOIN rows r ON r.id = s.row_id"
                    " JOIN files f ON f.path = r.path GROUP BY f.cwd"
                ):
                    name = rules.published(cwd) or "(not published)"
                    by_project[name] = by_project.get(name, 0) + int(count)
            except Exception:  # no spool yet
                by_project = {}
            last = spool.state(conn, "last_pass")
            error = spool.state(conn, "last_error")
            installed = spool.state(conn, "target") is not None
            queued = spool.queued(conn)
        finally:
            conn.close()
        worker = self._team_worker
        return {
            "enabled": team.enabled,
            "dsn": masked_dsn(team.dsn),
            "projects": team.projects,
            "user": team.user,
            "machine": team.machine,
            "spool": installed,
            "queued": queued,
            "queuedByProject": dict(sorted(by_project.items())),
            "lastPass": json.loads(last) if last else None,
            "lastError": json.loads(error) if error else None,
            "publishing": bool(worker is not None and worker.busy),
        }

    # --- searching --------------------------------------------------------------------------------

    def _team_query(self, work: Any) -> Any:
        """``work(conn)`` on this service's query connection (made, and checked, on first use; made again after
        a failure)."""
        from ctxd.team import driver, migrate

        team = self.config.team
        with self._team_lock:
            try:
                if self._team_conn is None:
                    conn = driver.connect(team.dsn, timeout=team.connect_timeout)
                    try:
                        migrate.check(conn, team.dsn)
                    except BaseException:
                        conn.close()
                        raise
                    self._team_conn = conn
                return work(self._team_conn)
            except (TeamError, ValueError):
                raise
            except Exception as exc:
                if self._team_conn is not None:
                    with contextlib.suppress(Exception):
                        self._team_conn.close()
                    self._team_conn = None
                raise driver.classify(exc, team.dsn) from None

    async def history_search(self, params: p.HistorySearchParams) -> dict[str, Any]:
        """A search of the team database (``scope: "team"``)."""
        from ctxd.team.query import Filters, search

        filters = Filters(
            [params.project] if params.project else None,
            [params.agent] if params.agent else None,
            [params.user] if params.user else None,
            _time(params.since, "since"),
            _time(params.until, "until"),
            params.session,
        )
        limit = min(params.limit, p.SEARCH_LIMIT)
        hits = await asyncio.to_thread(self._team_query, lambda c: search(c, params.query, filters, limit))
        queued = await asyncio.to_thread(self._team_publisher.queued) if self._team_worker is not None else None
        result = p.TeamSearchResult(
            params.query,
            [
                p.TeamHistoryHit(
                    p.HistorySession(h.session, h.path),
                    h.entry_id,
                    h.line,
                    h.role,
                    h.snippet,
                    h.timestamp,
                    h.tool or None,
                    h.agent,
                    h.project,
                    h.user,
                    h.machine,
                    round(h.score, 6),
                )
                for h in hits
            ],
            queued=queued,
        )
        return p.to_json(result)  # type: ignore[no-any-return]

    async def history_expand(self, params: p.HistoryExpandParams) -> dict[str, Any]:
        """A session's messages from the team database (``scope: "team"``)."""
        from ctxd.team.query import expand

        def work(conn: Any) -> Any:
            return expand(
                conn,
                params.session,
                params.entryId,
                params.fromEntryId,
                params.toEntryId,
                params.cursor,
                min(params.maxChars, p.EXPAND_MAX_CHARS),
            )

        try:
            found = await asyncio.to_thread(self._team_query, work)
        except ValueError as exc:
            raise p.InvalidParams(str(exc), "cursor" if "cursor" in str(exc) else "fromEntryId") from None
        page = found.page
        result = p.TeamExpandResult(
            p.HistorySession(found.session, found.path),
            found.kind,
            p.messages_of(page.messages),
            page.total,
            page.next_cursor is not None,
            page.next_cursor,
            facts=found.facts,
        )
        return p.to_json(result)  # type: ignore[no-any-return]
