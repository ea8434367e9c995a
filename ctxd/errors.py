"""Every error ctxd raises on purpose.

    CtxdError                     base; ``code`` is the JSON-RPC error code the server uses
    ├── SessionError              a session file cannot be used (carries path, line)
    │   ├── BadHeaderError        line 1 is not a session header: the file is refused, never rewritten
    │   ├── UnsupportedVersionError
    │   ├── ReadOnlySessionError  a transcript of another agent: never written to
    │   └── SessionLockedError    another process kept the write lock past the wait (same code)
    ├── SessionNotFoundError      no such session (or outside the configured roots)
    ├── EntryNotFoundError        no such entry id in the session
    ├── InvalidEntryError         an entry given to append is not valid
    ├── CompactionError           compaction failed (nothing was written)
    ├── CancelledError            an operation was cancelled by its caller
    ├── HistoryUnavailableError   the history index cannot work here (no FTS5 in SQLite, no usable data folder)
    ├── InvalidQueryError         a search query that cannot be searched, even as plain words (-32602)
    └── TeamError                 team history on PostgreSQL cannot work now (``kind`` says why: see ctxd.team.driver)

Errors carry what a user needs to act: the file, the line, the entry id.
"""

from __future__ import annotations

from typing import Any


class CtxdError(Exception):
    """Base class. ``code`` is the JSON-RPC error code; ``data`` is structured detail for clients."""

    code = -31000

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.data = {k: v for k, v in data.items() if v is not None}


class SessionError(CtxdError):
    code = -31010

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None, **data: Any):
        where = f"{path}:{line}" if path and line else (path or "")
        super().__init__(f"{where}: {message}" if where else message, path=path, line=line, **data)
        self.path = path
        self.line = line


class BadHeaderError(SessionError):
    code = -31011


class UnsupportedVersionError(SessionError):
    code = -31012


class ReadOnlySessionError(SessionError):
    code = -31013


class SessionLockedError(SessionError):
    """The write lock stayed held by another process for the whole wait; ``data`` names it
    (``lockHolderPid``, ``lockHolder``: its command line, or "unknown")."""


class SessionNotFoundError(CtxdError):
    code = -31001


class EntryNotFoundError(CtxdError):
    code = -31002

    def __init__(self, entry_id: str, *, path: str | None = None):
        super().__init__(f"no entry {entry_id!r} in {path or 'the session'}", entryId=entry_id, path=path)
        self.entry_id = entry_id


class InvalidEntryError(CtxdError):
    code = -31003


class CompactionError(CtxdError):
    code = -31020


class CancelledError(CtxdError):
    code = -32800


class HistoryUnavailableError(CtxdError):
    code = -31030


class InvalidQueryError(CtxdError):
    """A search query FTS5 takes neither as written nor as plain words: invalid params, naming the query."""

    code = -32602


class TeamError(CtxdError):
    """Team history (``ctxd.team``) failed; ``kind`` is one of ``driver`` (psycopg is not installed), ``config``
    (no DSN, or a DSN that does not parse), ``unreachable``, ``auth`` (wrong credentials), ``database`` (no such
    database), ``schema`` (no schema: run ``ctxd team init``), ``schemaNewer`` (made by a newer ctxd),
    ``permission`` (the role lacks a grant), ``notFound`` (no such session or entry the role may see), ``busy``
    (another ctxd kept publishing), ``local`` (the local history index failed) or ``server`` (anything else the
    server said)."""

    code = -31040

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message, kind=kind)
        self.kind = kind
