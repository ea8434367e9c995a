"""The wire types of ``history/search`` and ``history/expand`` (re-exported by :mod:`ctxd.service.protocol`)."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from ctxd.history.anchors import anchor_of

SEARCH_LIMIT = 200
"""The most hits one ``history/search`` answers."""
EXPAND_MAX_CHARS = 100_000
"""The most text one ``history/expand`` page carries."""
WAIT_LIMIT_MS = 10_000


@attrs.define
class HistorySearchParams:
    query: str = attrs.field(metadata={"min_len": 1, "max_len": 4096})
    """An SQLite FTS5 query (words, "a phrase", OR, NOT, prefix*); anything that is not valid FTS5 is
    searched as plain words."""
    session: str | None = None
    """Only this session (an id or a file path)."""
    limit: int = attrs.field(default=20, metadata={"min": 1})
    """At most this many hits (capped at 200)."""
    waitMs: int = attrs.field(default=0, metadata={"min": 0})
    """Wait up to this long (capped at 10 s) for indexing in progress before answering."""
    scope: Literal["local", "team"] = "local"
    """``local``: this machine's index (SQLite FTS5); ``team``: the team database (PostgreSQL, :mod:`ctxd.team`),
    where ``query`` is a web-search query (words, "a phrase", or, -word)."""
    project: str | None = None
    """``team`` only: hits of this project."""
    agent: str | None = None
    """``team`` only: hits of this agent's sessions (pi, claude, codex, opencode)."""
    user: str | None = None
    """``team`` only: hits of this user's sessions."""
    since: str | None = None
    """``team`` only: hits at or after this time (ISO 8601)."""
    until: str | None = None
    """``team`` only: hits before this time (ISO 8601)."""


@attrs.define
class HistorySession:
    id: str
    path: str


@attrs.define
class HistoryHit:
    session: HistorySession
    entryId: str
    line: int
    role: str
    snippet: str
    """The matching text around the hit, matches between « and »."""
    timestamp: str | None
    summarized: bool | None
    """The entry is on the session's active path but summarised away in its current context (before the
    latest compaction's first kept entry); null if the session cannot be read now."""
    toolName: str | None = None
    agent: str = "pi"
    archived: bool = False
    """A hit in ctxd's archived copy of a transcript (only when the live transcript lacks the entry)."""
    anchor: str = attrs.field(default=attrs.Factory(lambda hit: anchor_of(hit.entryId, hit.line), takes_self=True))
    """What ``history/expand`` takes to read the entry: its id, or ``L<line>`` when the session file gives its
    entries none (pi v1 files: ``entryId`` is then empty)."""


@attrs.define
class HistorySearchResult:
    query: str
    hits: list[HistoryHit]
    indexing: bool
    """Indexing is still in progress: sessions written since the last pass may be missing."""
    indexedFiles: int | None = None
    """Session files the last finished pass saw (null before the first pass ended)."""


@attrs.define
class HistoryExpandParams:
    session: str
    entryId: str | None = None
    """A compaction or branch summary: the messages behind it; any other entry: that entry. This and the two
    below are anchors (:mod:`ctxd.history.anchors`): an entry id, a unique prefix of one of at least 8
    characters, or ``L<line>`` (the entry on that line of the session file); an ambiguous prefix is invalid
    params, naming the entries it could be."""
    fromEntryId: str | None = None
    """Without ``entryId``: the range's first entry (default: the root) ..."""
    toEntryId: str | None = None
    """... and its last (default: the leaf); ``fromEntryId`` must be on the path to it."""
    maxChars: int = attrs.field(default=20_000, metadata={"min": 1})
    """Text per page (capped at 100,000; at least 1,000)."""
    cursor: str | None = None
    """``nextCursor`` of the previous page."""
    scope: Literal["local", "team"] = "local"
    """``team``: read the session from the team database (``session`` is its id)."""


@attrs.define
class HistoryMessage:
    entryId: str
    line: int
    role: str
    timestamp: str | None
    toolName: str | None
    text: str
    truncated: bool = False
    """The text goes on in the next page."""
    fromChar: int = 0
    """Where in the entry's text this page's ``text`` starts (after a cut)."""


@attrs.define
class HistoryExpandResult:
    session: HistorySession
    kind: str
    """``compaction``, ``branchSummary``, ``entry`` or ``range``."""
    messages: list[HistoryMessage]
    totalMessages: int
    truncated: bool
    """More follows: ask again with ``cursor``."""
    nextCursor: str | None
    previousCompactionId: str | None = None
    """For a compaction: the one before it on its path (expand it to read further back)."""


@attrs.define
class TeamHistoryHit:
    """A hit in the team database (``history/search`` with ``scope: "team"``)."""

    session: HistorySession
    """Its id, and its path on the machine it was published from."""
    entryId: str
    line: int
    role: str
    snippet: str
    timestamp: str
    toolName: str | None
    agent: str
    project: str
    user: str
    machine: str
    score: float


@attrs.define
class TeamSearchResult:
    query: str
    hits: list[TeamHistoryHit]
    scope: str = "team"
    queued: int | None = None
    """Entries of this machine still waiting to be published (null: this process does not publish)."""


@attrs.define
class TeamExpandResult:
    session: HistorySession
    kind: str
    """``entry`` or ``range`` (the team database holds messages, not the session's tree)."""
    messages: list[HistoryMessage]
    totalMessages: int
    truncated: bool
    nextCursor: str | None
    scope: str = "team"
    facts: Any = None
    """The session's must-keep facts as last published (redacted), or null."""


def messages_of(raw: list[dict[str, Any]]) -> list[HistoryMessage]:
    return [
        HistoryMessage(
            m["entryId"],
            m["line"],
            m["role"],
            m["timestamp"],
            m["toolName"],
            m["text"],
            bool(m.get("truncated")),
            int(m.get("fromChar", 0)),
        )
        for m in raw
    ]
