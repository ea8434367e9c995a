"""One publishing pass: the spool, batch by batch, into the team database, each batch in one transaction.

A batch is read from the spool (:mod:`ctxd.team.spool`), made into rows (:mod:`ctxd.team.batch`), and sent in
one server transaction: the months' partitions made if needed (``ctxd.ensure_month``), the sessions upserted,
the messages COPYed into a temporary staging table and upserted from it into ``ctxd.messages`` (``ON CONFLICT
(session_id, entry_id, ts) DO UPDATE``, only where something changed and only on the publisher's own rows).
Only after the server committed does the batch leave the spool. A pass that fails anywhere (the server down, the
connection dropped, the process killed) leaves the rest of the spool, and the batch in flight, for the next pass;
a batch the server committed but whose commit never reached us is sent again and lands once.

While the server works on one batch, the next is read and redacted in a second thread (the field's pipelining:
the client's CPU and the server's overlap).

A backlog (more than ``batchRows`` entries spooled) goes out over ``connections`` server connections at once, so
that the server's work (the tsvector, the GIN index) runs on several of its cores: each spool read of up to
``batchRows`` x ``connections`` entries is split by session (a session's entries always go on one connection, in
one transaction), the parts are sent in parallel, and the next read is sent only once every part is committed, so
the entries of a session reach the server in the order they were spooled. A part the server committed leaves the
spool even when another part failed; the failed part's entries stay for the next pass.

One pass at a time per machine user: a file lock beside the history database (``team.lock``) serialises the
daemon's background passes and ``ctxd team sync``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import sqlite3
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import attrs

from ctxd.errors import TeamError
from ctxd.history.db import connect as connect_history
from ctxd.team import batch as batches
from ctxd.team import spool
from ctxd.team.projects import Projects
from ctxd.team.settings import TeamSettings

log = logging.getLogger(__name__)
MAINTENANCE_SECONDS = 24 * 3600
"""How often a publisher asks the server to drop the partitions past its retention."""
FACTS_SECONDS = 300.0
"""A session's facts are read again (its whole file) at most this often while it keeps growing."""
FactsOf = Callable[[str], Any]
"""A session file's must-keep facts as JSON (None when they cannot be read)."""

_STAGE = (
    "CREATE TEMP TABLE IF NOT EXISTS ctxd_stage(session_id text, entry_id text, ts timestamptz, project text,"
    " agent text, user_name text, machine text, line integer, role text, tool text, body text) ON COMMIT DELETE ROWS"
)
_STAGED = [
    ("session_id", "text"),
    ("entry_id", "text"),
    ("ts", "timestamptz"),
    ("project", "text"),
    ("agent", "text"),
    ("user_name", "text"),
    ("machine", "text"),
    ("line", "int4"),
    ("role", "text"),
    ("tool", "text"),
    ("body", "text"),
]
_COLUMNS = ", ".join(name for name, _ in _STAGED)
_UPSERT = (
    f"INSERT INTO ctxd.messages AS m ({_COLUMNS}) SELECT {_COLUMNS} FROM ctxd_stage"
    " ON CONFLICT (session_id, entry_id, ts) DO UPDATE SET project = excluded.project, agent = excluded.agent,"
    " user_name = excluded.user_name, machine = excluded.machine, line = excluded.line, role = excluded.role,"
    " tool = excluded.tool, body = excluded.body"
    " WHERE m.published_by = current_user AND (m.project, m.agent, m.user_name, m.machine, m.line, m.role, m.tool,"
    " m.body) IS DISTINCT FROM (excluded.project, excluded.agent, excluded.user_name, excluded.machine,"
    " excluded.line, excluded.role, excluded.tool, excluded.body)"
)
_SESSIONS = (
    "INSERT INTO ctxd.sessions AS s (session_id, project, agent, user_name, machine, path, cwd, first_ts, last_ts,"
    " facts) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (session_id) DO UPDATE SET"
    " project = excluded.project, agent = excluded.agent, user_name = excluded.user_name,"
    " machine = excluded.machine, path = excluded.path, cwd = excluded.cwd,"
    " first_ts = least(s.first_ts, excluded.first_ts), last_ts = greatest(s.last_ts, excluded.last_ts),"
    " facts = coalesce(excluded.facts, s.facts), published_at = now() WHERE s.published_by = current_user"
)


@attrs.define
class PublishPass:
    """What one pass did."""

    sent: int = 0
    """Entries the server committed."""
    skipped: int = 0
    expired: int = 0
    gone: int = 0
    sessions: int = 0
    batches: int = 0
    seconds: float = 0.0
    queued: int = 0
    """Entries still in the spool after the pass."""
    refilled: bool = False
    """The whole index was spooled again (a new server or project list, or a rebuilt history database)."""
    months: set[dt.date] = attrs.field(factory=set)
    """The months whose partitions the pass wrote."""

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self, filter=lambda a, _: a.name != "months")


@contextlib.contextmanager
def pass_lock(history_path: str, wait: float | None) -> Iterator[bool]:
    """The machine user's publishing lock; yields whether it was taken (``wait``: seconds, None: forever)."""
    path = os.path.join(os.path.dirname(history_path), "team.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is not None and time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.05)
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class Publisher:
    """Publishes one history database's spool to one team database."""

    def __init__(self, settings: TeamSettings, history_path: str, facts_of: FactsOf | None = None) -> None:
        self.settings = settings
        self.history_path = history_path
        self.facts_of = facts_of
        self.projects = Projects(settings)
        self._server: Any = None
        self._more: list[Any] = []
        """The backlog's extra server connections (opened when a backlog needs them)."""
        self._local: sqlite3.Connection | None = None
        self._reading: sqlite3.Connection | None = None
        self._months: set[dt.date] = set()
        self._cutoff: dt.datetime | None = None
        self._maintained = 0.0
        self._facts_at: dict[str, float] = {}

    @property
    def target(self) -> str:
        """What the spool is filled for: the server (without the password), the projects, who and where."""
        from ctxd.team.driver import where

        s = self.settings
        return json.dumps([where(s.dsn), sorted(s.projects), s.user, s.machine])

    def local(self) -> sqlite3.Connection:
        if self._local is None:
            self._local = connect_history(self.history_path)
        return self._local

    def server(self) -> Any:
        """The open server connection (made and checked on first use)."""
        if self._server is None:
            from ctxd.team import driver, migrate

            conn = driver.connect(self.settings.dsn, timeout=self.settings.connect_timeout)
            try:
                migrate.check(conn, self.settings.dsn)
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute(_STAGE)
                    cur.execute("SELECT (SELECT value FROM ctxd.meta WHERE key = 'retention_months'), now()")
                    row = cur.fetchone()
                    assert row is not None
                    retention, now = row
            except BaseException:
                conn.close()
                raise
            months = int(retention or 0)
            self._cutoff = _months_before(now, months) if months > 0 else None
            self._server = conn
        return self._server

    def connections(self, count: int) -> list[Any]:
        """``count`` open server connections, the first :meth:`server`'s (the others are opened on first use)."""
        first = self.server()
        from ctxd.team import driver

        while len(self._more) < count - 1:
            conn = driver.connect(self.settings.dsn, timeout=self.settings.connect_timeout)
            try:
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute(_STAGE)
            except BaseException:
                conn.close()
                raise
            self._more.append(conn)
        return [first, *self._more[: count - 1]]

    def close(self) -> None:
        for conn in (self._server, *self._more, self._local, self._reading):
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
        self._server = self._local = self._reading = None
        self._more = []

    def _drop_server(self) -> None:
        for conn in (self._server, *self._more):
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
        self._server = None
        self._more = []
        self._months.clear()  # the server may have dropped partitions meanwhile (its retention)

    def queued(self) -> int:
        """Entries waiting in the spool (read on a connection of its own: any thread may ask)."""
        conn = connect_history(self.history_path)
        try:
            return spool.queued(conn)
        finally:
            conn.close()

    def run(self, stop: Callable[[], bool] | None = None) -> PublishPass:
        """Publish everything spooled now; raises TeamError (the rest stays spooled) when the server fails."""
        started = time.monotonic()
        done = PublishPass()
        local = self.local()
        done.refilled = spool.install(local, self.target)
        try:
            self._publish(done, stop)
        except Exception as exc:
            from ctxd.team import driver

            self._drop_server()
            if isinstance(exc, sqlite3.Error):
                error = TeamError("local", f"reading the local history index failed: {exc}")
            else:
                error = driver.classify(exc, self.settings.dsn)
            self._note(local, done, started, error)
            raise error from None
        self._flush(done)
        self._note(local, done, started, None)
        self._maintain()
        return done

    def _flush(self, done: PublishPass) -> None:
        """Merge the GIN pending lists of the months this pass wrote (searches read a pending list whole)."""
        if not done.months or self._server is None:
            return
        try:
            with self._server.transaction(), self._server.cursor() as cur:
                cur.execute("SELECT ctxd.flush_pending(%s)", (sorted(done.months),))
        except Exception as exc:  # the entries are in; searches are slower until autovacuum merges the lists
            log.info("team: merging the full-text index's pending list failed: %s", exc)

    def _note(self, local: sqlite3.Connection, done: PublishPass, started: float, error: TeamError | None) -> None:
        """Keep the pass's outcome in the spool's state, for ``ctxd team status`` in another process."""
        done.seconds = round(time.monotonic() - started, 3)
        done.queued = spool.queued(local)
        with contextlib.suppress(sqlite3.Error):
            now = time.time()
            if error is None:
                spool.set_state(local, "last_pass", json.dumps({**done.to_json(), "at": now}))
                spool.set_state(local, "last_error", "")
            else:
                spool.set_state(
                    local, "last_error", json.dumps({"kind": error.kind, "message": error.message, "at": now})
                )

    def _publish(self, done: PublishPass, stop: Callable[[], bool] | None) -> None:
        self.server()
        facts: dict[str, Any] = {}
        local = self.local()
        if self._reading is None:
            self._reading = connect_history(self.history_path)  # the reader thread's own connection
        reading = self._reading
        s = self.settings
        widest = max(1, s.connections)

        def prepare(after: int) -> tuple[list[batches.Batch], int] | None:
            rows = spool.read(reading, s.batch_rows * widest, after)
            if not rows:
                return None
            time_before = lambda path, line: spool.previous_ts(reading, path, line)  # noqa: E731
            parts = [
                batches.build(part, self.projects, s.user, s.machine, time_before, self._cutoff)
                for part in split(rows, min(widest, -(-len(rows) // s.batch_rows)))
            ]
            return parts, rows[-1].row_id

        with ThreadPoolExecutor(1, thread_name_prefix="ctxd-team-read") as reader:
            ahead: Future[tuple[list[batches.Batch], int] | None] = reader.submit(prepare, 0)
            while True:
                ready = ahead.result()
                if ready is None or (stop is not None and stop()):
                    return
                parts, last = ready
                ahead = reader.submit(prepare, last)  # read and redact the next batch while the server works
                for part in parts:
                    self._facts(part, facts)
                self._ensure_months(set().union(*(part.months for part in parts)))
                for part in self._send_all(parts):
                    spool.remove(local, part.consumed)
                    done.sent += len(part.messages)
                    done.skipped += part.skipped
                    done.expired += part.expired
                    done.gone += part.gone
                    done.sessions += len(part.sessions)
                    done.months |= part.months
                done.batches += 1

    def _ensure_months(self, months: set[dt.date]) -> None:
        """Make the months' partitions (committed before any part is sent: two connections making the same
        partition while inserting into the table would wait for each other)."""
        new = sorted(months - self._months)
        if new:
            with self._server.transaction(), self._server.cursor() as cur:
                for month in new:
                    cur.execute("SELECT ctxd.ensure_month(%s)", (month,))
            self._months |= set(new)

    def _send_all(self, parts: list[batches.Batch]) -> Iterator[batches.Batch]:
        """Send the parts, each on its own connection, in parallel; yields those the server committed (the
        first failure is raised after every part has finished)."""
        if len(parts) == 1:
            self._send(self._server, parts[0])
            yield parts[0]
            return
        conns = self.connections(len(parts))
        with ThreadPoolExecutor(len(parts), thread_name_prefix="ctxd-team-send") as senders:
            sent = [senders.submit(self._send, conn, part) for conn, part in zip(conns, parts, strict=True)]
            failed: BaseException | None = None
            for part, future in zip(parts, sent, strict=True):
                error = future.exception()
                if error is None:
                    yield part
                elif failed is None:
                    failed = error
        if failed is not None:
            raise failed

    def _facts(self, batch: batches.Batch, known: dict[str, Any]) -> None:
        if self.facts_of is None:
            return
        now = time.monotonic()
        for session in batch.sessions.values():
            if (
                session.session_id not in known
                and now - self._facts_at.get(session.session_id, -FACTS_SECONDS) < FACTS_SECONDS
            ):
                known[session.session_id] = None  # read recently: the server keeps the facts it has
            if session.session_id not in known:
                self._facts_at[session.session_id] = now
                try:
                    found = self.facts_of(session.path)
                except Exception as exc:  # facts are a bonus: a session that cannot be read now is sent without
                    log.info("team: no facts for %s: %s", session.path, exc)
                    found = None
                known[session.session_id] = batches.redact_facts(found) if found is not None else None
            session.facts = known[session.session_id]

    def _send(self, server: Any, batch: batches.Batch) -> None:
        from ctxd.team import driver

        s = self.settings
        with server.transaction(), server.cursor() as cur:
            cur.execute("SET LOCAL work_mem = '64MB'")  # GIN's pending list is merged in bigger, cheaper runs
            if batch.sessions:
                cur.executemany(
                    _SESSIONS,
                    [
                        (
                            r.session_id,
                            r.project,
                            r.agent,
                            s.user,
                            s.machine,
                            r.path,
                            r.cwd,
                            r.first,
                            r.last,
                            None if r.facts is None else driver.json_value(r.facts),
                        )
                        for r in sorted(batch.sessions.values(), key=lambda r: r.session_id)
                    ],  # in one order: two publishers' transactions never wait for each other in a circle
                )
            if batch.messages:
                driver.copy_rows(cur, "ctxd_stage", _STAGED, batch.messages)  # type: ignore[arg-type]
                cur.execute(_UPSERT)

    def _maintain(self) -> None:
        """Ask the server to drop what is past its retention, once a day (it decides; nobody else's rows are
        touched by a publisher's setting)."""
        if self._server is None or (time.monotonic() - self._maintained < MAINTENANCE_SECONDS and self._maintained):
            return
        self._maintained = time.monotonic()
        try:
            with self._server.transaction(), self._server.cursor() as cur:
                cur.execute("SELECT ctxd.drop_expired()")
                dropped = cur.fetchone()[0]
            if dropped:
                log.info("team: the server dropped %d partition(s) past its retention", dropped)
                self._months.clear()
        except Exception as exc:
            log.info("team: retention maintenance failed: %s", exc)


def split(rows: list[spool.SpoolRow], parts: int) -> list[list[spool.SpoolRow]]:
    """``rows`` in ``parts`` lists by session (one session's rows in one list, in their order); none empty."""
    if parts <= 1:
        return [rows]
    out: list[list[spool.SpoolRow]] = [[] for _ in range(parts)]
    for row in rows:
        out[zlib.crc32(row.session.encode("utf-8", "surrogatepass")) % parts].append(row)
    return [part for part in out if part]


def _months_before(now: dt.datetime, months: int) -> dt.datetime:
    year, month = now.year, now.month - months
    while month <= 0:
        year, month = year - 1, month + 12
    day = min(now.day, 28)
    return now.replace(year=year, month=month, day=day)
