"""The history database: one SQLite file with an FTS5 table, private, rebuilt when damaged.

It lives at ``$XDG_DATA_HOME/ctxd/history.sqlite3`` (``~/.local/share/ctxd``): the folder 0700, the
file 0600 (created so before SQLite opens it; SQLite gives its ``-wal``/``-shm`` files the same mode).
It is a cache of the sessions, which stay the source of truth: a file that is not a database, is
damaged, or has another schema version is deleted and made again, and the indexer fills it anew.

Tables: ``files`` (one row per indexed session file: its identity as a
:class:`ctxd.store.private.FileMark`, how far it was read, its session id and cwd), ``rows`` (one per
indexed entry: file, entry id, line, role, time, tool) and ``entries``, the FTS5 index of the
entries' text, whose rowids are ``rows``'. An opencode session (``<database>#<session id>``) is a
``files`` row of kind ``opencode`` too; ``opencode_dbs`` keeps each database's state token and
``opencode_sessions`` each session's update stamp (:mod:`ctxd.history.opencode`), with how often
each was read.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Callable
from typing import TypeVar

from ctxd.errors import HistoryUnavailableError
from ctxd.store.dirs import data_dir, makedirs_private

log = logging.getLogger(__name__)
T = TypeVar("T")

SCHEMA_VERSION = 2
"""2: opencode databases (and ctxd's archives of opencode sessions, remembered unread by 1)."""
DB_NAME = "history.sqlite3"
BUSY_TIMEOUT_MS = 10_000
"""How long a writer waits for another process's write (the daemon, ``ctxd mcp`` and ``ctxd search``
may index at the same time)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files(
  path TEXT PRIMARY KEY, kind TEXT NOT NULL, session TEXT NOT NULL, cwd TEXT NOT NULL,
  archived INTEGER NOT NULL, dev INTEGER NOT NULL, ino INTEGER NOT NULL, size INTEGER NOT NULL,
  mtime_ns INTEGER NOT NULL, end INTEGER NOT NULL, tail BLOB NOT NULL, ctime_ns INTEGER NOT NULL,
  lines INTEGER NOT NULL, last_line INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS rows(
  id INTEGER PRIMARY KEY, path TEXT NOT NULL, entry_id TEXT NOT NULL, line INTEGER NOT NULL,
  role TEXT NOT NULL, ts TEXT NOT NULL, tool TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS rows_by_file ON rows(path, line);
CREATE TABLE IF NOT EXISTS opencode_dbs(db TEXT PRIMARY KEY, token TEXT NOT NULL, reads INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS opencode_sessions(
  path TEXT PRIMARY KEY, db TEXT NOT NULL, stamp TEXT NOT NULL, reads INTEGER NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS entries USING fts5(text, tokenize='porter unicode61 remove_diacritics 2');
"""


def default_path() -> str:
    return os.path.join(data_dir(), DB_NAME)


def check_fts5() -> None:
    """Raise :class:`ctxd.errors.HistoryUnavailableError` unless this Python's SQLite has FTS5 compiled in."""
    try:
        conn = sqlite3.connect(":memory:")
        try:
            conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        finally:
            conn.close()
    except sqlite3.OperationalError as exc:
        raise HistoryUnavailableError(
            f"searching history needs SQLite with FTS5, and this Python's SQLite {sqlite3.sqlite_version} "
            f"lacks it ({exc}); install a Python whose sqlite3 module has FTS5 (python.org and most "
            "distributions' builds do)"
        ) from None


def is_corrupt(exc: BaseException) -> bool:
    """Whether a SQLite error says the file is damaged or not a database (not merely busy)."""
    name = getattr(exc, "sqlite_errorname", "")
    if name in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or name.startswith("SQLITE_CORRUPT"):
        return True
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text


def _create_private(path: str) -> None:
    makedirs_private(os.path.dirname(path))
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def remove(path: str) -> None:
    """Delete the database and SQLite's side files."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path + suffix)


def _open(path: str) -> sqlite3.Connection:
    _create_private(path)
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION):
            raise sqlite3.DatabaseError("not a database of this schema version: SQLITE_NOTADB")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")  # a cache: a power loss may cost the last files, never the file
        conn.executescript(_SCHEMA)
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        conn.execute("SELECT count(*) FROM files").fetchone()
        conn.execute("SELECT rowid FROM entries LIMIT 1").fetchall()
    except BaseException:
        conn.close()
        raise
    return conn


def connect(path: str) -> sqlite3.Connection:
    """An open connection to the database at ``path``; a damaged file is deleted and made again."""
    check_fts5()
    try:
        _create_private(path)
    except OSError as exc:
        raise HistoryUnavailableError(
            f"cannot keep the history database at {path}: {exc.strerror or exc}", path=path
        ) from None
    try:
        return _open(path)
    except sqlite3.DatabaseError as exc:
        if not is_corrupt(exc):
            raise
        log.warning("history: %s is damaged (%s); rebuilding it", path, exc)
        remove(path)
        return _open(path)


def guarded(
    path: str, conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]
) -> tuple[sqlite3.Connection, T]:
    """Run ``work`` on ``conn``; if the database turns out to be damaged, rebuild it and run ``work``
    once more on the new connection (returned with the result)."""
    try:
        return conn, work(conn)
    except sqlite3.DatabaseError as exc:
        if not is_corrupt(exc):
            raise
        log.warning("history: %s is damaged (%s); rebuilding it", path, exc)
        with contextlib.suppress(Exception):
            conn.close()
        remove(path)
        conn = _open(path)
        return conn, work(conn)
