"""A spool batch as rows for the server: published projects only, secrets redacted, one row per key, each with
its time.

Pure functions (the server is :mod:`ctxd.team.publish`'s business). What leaves the machine passes
:func:`ctxd.redact.redact` first: every message text and every string in a session's facts (known keys, and
credential-looking text such as ``sk-...``, ``Bearer ...``, ``api_key=...``); paths and ids lose only exact
known secrets (the patterns would mangle a path that merely looks like a key). Characters PostgreSQL's text
cannot hold (NUL, lone surrogates) become U+FFFD.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Any

import attrs

from ctxd.redact import redact, redact_json
from ctxd.team.projects import Projects
from ctxd.team.spool import SpoolRow

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
"""The time of an entry whose file holds no time before it (it still has to land in some month)."""
_UNFIT = re.compile("[\x00\ud800-\udfff]")

Message = tuple[str, str, dt.datetime, str, str, str, str, int, str, str, str]
"""(session, entry, time, project, agent, user, machine, line, role, tool, text): a row of ``ctxd.messages``."""


def clean(text: str) -> str:
    return _UNFIT.sub("\ufffd", text) if _UNFIT.search(text) else text


def parse_time(value: str) -> dt.datetime | None:
    """An entry's ISO 8601 time (``Z`` or an offset; a naive one is UTC), or None."""
    if not value:
        return None
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when


def month_of(when: dt.datetime) -> dt.date:
    utc = when.astimezone(dt.UTC)
    return dt.date(utc.year, utc.month, 1)


def month_end(month: dt.date) -> dt.datetime:
    following = (month + dt.timedelta(days=32)).replace(day=1)
    return dt.datetime(following.year, following.month, 1, tzinfo=dt.UTC)


def redact_facts(value: Any) -> Any:
    """A facts JSON value with every string redacted (patterns included: facts are conversation text)."""
    if isinstance(value, str):
        return clean(redact(value))
    if isinstance(value, dict):
        return {k: redact_facts(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_facts(v) for v in value]
    return value


@attrs.define
class SessionRow:
    """What a batch says of one session (``ctxd.sessions``)."""

    session_id: str
    project: str
    agent: str
    path: str
    cwd: str
    first: dt.datetime
    last: dt.datetime
    facts: Any = None


@attrs.define
class Batch:
    messages: list[Message] = attrs.field(factory=list)
    sessions: dict[str, SessionRow] = attrs.field(factory=dict)
    months: set[dt.date] = attrs.field(factory=set)
    consumed: list[int] = attrs.field(factory=list)
    """Every spool id this batch accounts for (sent, or not to be sent): off the spool once the server commits."""
    skipped: int = 0
    """Entries of projects that are not published."""
    expired: int = 0
    """Entries older than the server keeps (its retention)."""
    gone: int = 0
    """Entries no longer in the index (their file was rewritten or deleted; the new rows have their own turn)."""


def build(
    rows: list[SpoolRow],
    projects: Projects,
    user: str,
    machine: str,
    time_before: Callable[[str, int], str],
    cutoff: dt.datetime | None = None,
) -> Batch:
    """The batch for these spool rows. ``time_before(path, line)``: the time of the entry before an entry that has
    none; ``cutoff``: entries in months ending before it are not sent (the server would drop them)."""
    batch = Batch()
    keyed: dict[tuple[str, str, dt.datetime], tuple[bool, Message]] = {}
    project_of: dict[str, str | None] = {}
    for row in rows:
        batch.consumed.append(row.row_id)
        if row.text is None or not row.session:
            batch.gone += 1
            continue
        if row.cwd not in project_of:
            project_of[row.cwd] = projects.published(row.cwd)
        project = project_of[row.cwd]
        if project is None:
            batch.skipped += 1
            continue
        when = parse_time(row.ts) or parse_time(time_before(row.path, row.line)) or EPOCH
        month = month_of(when)
        if cutoff is not None and month_end(month) <= cutoff:
            batch.expired += 1
            continue
        session = clean(row.session)
        key = (session, clean(row.entry_id), when)
        message: Message = (
            session,
            key[1],
            when,
            project,
            row.kind,
            user,
            machine,
            row.line,
            row.role,
            row.tool,
            clean(redact(row.text)),
        )
        held = keyed.get(key)
        if held is None or held[0] or not row.archived:  # the live file's copy of an entry wins over an archive's
            keyed[key] = (row.archived, message)
        batch.months.add(month)
        known = batch.sessions.get(session)
        if known is None or (known.path != row.path and not row.archived):
            path = clean(redact_json(row.path))
            batch.sessions[session] = SessionRow(
                session, project, row.kind, path, clean(redact_json(row.cwd)), when, when
            )
            if known is not None:
                batch.sessions[session].first = min(known.first, when)
                batch.sessions[session].last = max(known.last, when)
        else:
            known.first, known.last = min(known.first, when), max(known.last, when)
    batch.messages = [message for _, message in keyed.values()]
    return batch
