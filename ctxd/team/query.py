"""Team search and expand, on the server.

Search calls ``ctxd.search()`` (see :mod:`ctxd.team.schema` for why a function): PostgreSQL full-text search with
``websearch_to_tsquery`` (words, ``"a phrase"``, ``or``, ``-word``), ranked by ``ts_rank_cd``, with
``ts_headline`` snippets (matches between « and »), filtered by project, agent, user, time and session, and by
the caller's grants. Expand reads a session's messages as the caller (row-level security applies), in line
order, a page at a time (:func:`ctxd.history.ranges.paginate`, the local expand's pages).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import attrs

from ctxd.errors import TeamError
from ctxd.history.extract import Item
from ctxd.history.ranges import Page, paginate, parse_cursor

PAGE_ROWS = 400
"""Messages fetched for one expand page at most (a page holds at most 100,000 characters of text)."""


@attrs.frozen
class Filters:
    projects: list[str] | None = None
    agents: list[str] | None = None
    users: list[str] | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    session: str | None = None


@attrs.frozen
class TeamHit:
    session: str
    entry_id: str
    timestamp: str
    project: str
    agent: str
    user: str
    machine: str
    line: int
    role: str
    tool: str
    path: str
    score: float
    snippet: str


def _iso(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def search(conn: Any, query: str, filters: Filters, limit: int) -> list[TeamHit]:
    """Ranked hits, best first."""
    f = filters
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(
            "SELECT * FROM ctxd.search(%s, %s, %s, %s, %s, %s, %s, %s)",
            (query, limit, f.projects, f.agents, f.users, f.since, f.until, f.session),
        )
        rows = cur.fetchall()
    return [
        TeamHit(sid, eid, _iso(ts), project, agent, user, machine, line, role, tool, path, float(rank), snippet)
        for sid, eid, ts, project, agent, user, machine, line, role, tool, path, rank, snippet in rows
    ]


@attrs.frozen
class Expanded:
    session: str
    path: str
    kind: str
    page: Page
    facts: Any


def _line_of(cur: Any, session: str, entry_id: str, field: str) -> int:
    cur.execute(
        "SELECT line FROM ctxd.messages WHERE session_id = %s AND entry_id = %s ORDER BY ts LIMIT 1",
        (session, entry_id),
    )
    row = cur.fetchone()
    if row is None:
        raise TeamError("notFound", f"no entry {entry_id!r} of session {session} in the team database ({field})")
    return int(row[0])


def expand(
    conn: Any,
    session: str,
    entry_id: str | None,
    from_id: str | None,
    to_id: str | None,
    cursor: str | None,
    max_chars: int,
) -> Expanded:
    """A session's messages (all, one entry, or the lines from ``from_id`` to ``to_id``), one page."""
    start, _ = parse_cursor(cursor)
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("SELECT path, facts FROM ctxd.sessions WHERE session_id = %s", (session,))
        found = cur.fetchone()
        if found is None:
            raise TeamError("notFound", f"no session {session} in the team database (or not one you may see)")
        path, facts = found
        low, high, kind = 0, 2**31 - 1, "range"
        if entry_id:
            low = high = _line_of(cur, session, entry_id, "entryId")
            kind = "entry"
        else:
            if from_id:
                low = _line_of(cur, session, from_id, "fromEntryId")
            if to_id:
                high = _line_of(cur, session, to_id, "toEntryId")
            if low > high:
                raise ValueError(f"fromEntryId {from_id} comes after toEntryId {to_id}")
        where = "session_id = %s AND line BETWEEN %s AND %s" + (" AND entry_id = %s" if entry_id else "")
        args: list[Any] = [session, low, high] + ([entry_id] if entry_id else [])
        cur.execute(f"SELECT count(*) FROM ctxd.messages WHERE {where}", args)
        total = int(cur.fetchone()[0])
        cur.execute(
            f"SELECT entry_id, line, role, ts, tool, body FROM ctxd.messages WHERE {where}"
            " ORDER BY line, ts OFFSET %s LIMIT %s",
            [*args, start, PAGE_ROWS],
        )
        rows = cur.fetchall()
    items = [(line, Item(eid, role, body, _iso(ts), tool)) for eid, line, role, ts, tool, body in rows]
    return Expanded(session, path, kind, paginate(items, cursor, max_chars, base=start, total=total), facts)
