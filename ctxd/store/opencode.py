"""opencode's SQLite database (``$XDG_DATA_HOME/opencode/opencode.db``), read strictly read-only.

A session inside a database is addressed as ``<database path>#<session id>`` (see docs/protocol.md). The
database is opened with a ``file:...?mode=ro`` URI for every read and closed again, so ctxd never writes it
and never holds it open; opencode keeps it in WAL mode, and a read sees what the write-ahead log holds too.
:class:`OpencodeFile` serves one session through :class:`TranscriptFile` (mapped by
:mod:`ctxd.formats.transcripts.opencode`); :func:`list_database` lists a database's sessions.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from collections.abc import Sequence
from typing import Any

from ctxd.errors import SessionError
from ctxd.formats.transcripts._base import parse_json_object
from ctxd.formats.transcripts.opencode import OpencodeRows, map_opencode, ms_iso
from ctxd.store.listing import SessionSummary
from ctxd.store.session_file import RefreshResult
from ctxd.store.transcript import TranscriptFile

SEPARATOR = "#"
SQLITE_MAGIC = b"SQLite format 3\x00"
BUSY_TIMEOUT = 5.0
"""Seconds a read waits for opencode's writer (a WAL reader rarely waits at all)."""


def default_databases() -> list[str]:
    """opencode's database, ``$XDG_DATA_HOME/opencode/opencode.db`` (``~/.local/share`` by default), if it exists."""
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    path = os.path.join(data, "opencode", "opencode.db")
    return [path] if os.path.isfile(path) else []


def is_database(path: str) -> bool:
    """True for a regular file that begins like an SQLite database."""
    try:
        with open(path, "rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def split_ref(path: str) -> tuple[str, str] | None:
    """``(database, session id)`` for a ``<database>#<session id>`` path naming an SQLite file, else None."""
    if not isinstance(path, str) or SEPARATOR not in path:
        return None
    db, _, session_id = path.rpartition(SEPARATOR)
    if not db or not session_id or os.sep in session_id or not is_database(db):
        return None
    return db, session_id


def session_path(db: str, session_id: str) -> str:
    return f"{db}{SEPARATOR}{session_id}"


def state_token(db: str) -> tuple[int, ...]:
    """What changes whenever opencode writes: the database's and its WAL's identity, size and mtime. An empty
    WAL counts as none: the first reader of a database in WAL mode may create it, and it holds nothing."""
    out: list[int] = []
    for path in (db, db + "-wal"):
        try:
            st = os.stat(path)
        except OSError:
            st = None
        if st is not None and (st.st_size or path == db):
            out.extend((st.st_ino, st.st_size, st.st_mtime_ns))
        else:
            out.extend((0, 0, 0))
    return tuple(out)


def connect(db: str) -> sqlite3.Connection:
    """A read-only connection (``mode=ro``: SQLite refuses every write through it)."""
    uri = "file:" + urllib.parse.quote(os.path.abspath(db)) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT, check_same_thread=False)
        conn.execute("PRAGMA query_only = ON")
    except sqlite3.Error as exc:
        raise SessionError(f"cannot open opencode's database read-only: {exc}", path=db) from exc
    return conn


def _rows(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    cur = conn.execute(sql, args)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def read_session(db: str, session_id: str) -> OpencodeRows:
    """One session's rows, read in one transaction (a consistent snapshot while opencode writes)."""
    conn = connect(db)
    try:
        conn.execute("BEGIN")
        found = _rows(conn, "SELECT * FROM session WHERE id = ?", (session_id,))
        if not found:
            raise SessionError(
                f"no opencode session {session_id!r} in this database", path=session_path(db, session_id)
            )
        messages = conn.execute(
            "SELECT id, time_created, data FROM message WHERE session_id = ? ORDER BY time_created, id", (session_id,)
        ).fetchall()
        parts = conn.execute(
            "SELECT message_id, id, data FROM part WHERE session_id = ? ORDER BY message_id, id", (session_id,)
        ).fetchall()
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        raise SessionError(f"cannot read opencode's database: {exc}", path=db) from exc
    finally:
        conn.close()
    return OpencodeRows(found[0], list(messages), list(parts))


def has_session(db: str, session_id: str) -> bool:
    """True when ``db`` is readable and holds the session ``session_id``."""
    try:
        conn = connect(db)
    except SessionError:
        return False
    try:
        return conn.execute("SELECT 1 FROM session WHERE id = ?", (session_id,)).fetchone() is not None
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def updated_sessions(db: str) -> dict[str, tuple[int, ...]]:
    """Each session's last update times and part and message counts (what the watcher and the history index
    compare to tell which sessions changed)."""
    conn = connect(db)
    sql = (
        "SELECT s.id, s.time_updated, (SELECT MAX(time_updated) FROM message WHERE session_id = s.id),"
        " (SELECT MAX(time_updated) FROM part WHERE session_id = s.id),"
        " (SELECT COUNT(*) FROM part WHERE session_id = s.id),"
        " (SELECT COUNT(*) FROM message WHERE session_id = s.id) FROM session s"
    )
    try:
        return {str(row[0]): tuple(int(v or 0) for v in row[1:]) for row in conn.execute(sql)}
    except sqlite3.Error as exc:
        raise SessionError(f"cannot read opencode's database: {exc}", path=db) from exc
    finally:
        conn.close()


def list_databases(databases: list[str], cwd: str | None = None) -> list[SessionSummary]:
    """The sessions of every readable database (optionally only those started in ``cwd``), by real path."""
    out: list[SessionSummary] = []
    for db in databases:
        real = os.path.realpath(db)
        if not is_database(real):
            continue
        try:
            rows = list_database(real)
        except SessionError:
            continue
        out.extend(r for r in rows if cwd is None or os.path.normpath(r.cwd) == os.path.normpath(cwd))
    return out


def list_database(db: str) -> list[SessionSummary]:
    """Every session in one database, as listing rows (read-only, agent "opencode")."""
    conn = connect(db)
    try:
        sessions = _rows(
            conn,
            "SELECT s.id, s.parent_id, s.directory, s.title, s.time_created, s.time_updated,"
            " (SELECT COUNT(*) FROM message m WHERE m.session_id = s.id) AS messages,"
            " (SELECT COUNT(*) FROM part p WHERE p.session_id = s.id) AS parts,"
            " (SELECT p.data FROM part p JOIN message m ON m.id = p.message_id"
            '   WHERE p.session_id = s.id AND m.data LIKE \'%"role":"user"%\' AND p.data LIKE \'%"type":"text"%\''
            "   ORDER BY m.time_created, m.id, p.id LIMIT 1) AS first_text"
            " FROM session s",
        )
    except sqlite3.Error as exc:
        raise SessionError(f"cannot read opencode's database: {exc}", path=db) from exc
    finally:
        conn.close()
    out: list[SessionSummary] = []
    for row in sessions:
        first = parse_json_object(row["first_text"] or "") or {}
        text = first.get("text") if isinstance(first.get("text"), str) else ""
        summary = SessionSummary(
            path=session_path(db, str(row["id"])),
            id=str(row["id"]),
            cwd=str(row["directory"] or ""),
            root=db,
            name=str(row["title"]) if row["title"] else None,
            title=" ".join(str(text).split())[:120],
            created=ms_iso(row["time_created"]) or "",
            modified=(row["time_updated"] or 0) / 1000,
            size=0,
            entries=int(row["messages"] or 0) + int(row["parts"] or 0),
            parentSession=session_path(db, row["parent_id"]) if row["parent_id"] else None,
            agent="opencode",
            readOnly=True,
        )
        out.append(summary)
    return out


OPENCODE_ENTRY = 2048
"""Bytes an opencode entry holds as mapped, about (its body and parts)."""


class OpencodeFile(TranscriptFile):
    """One opencode session, ``<database>#<session id>``, as a read-only session file."""

    def __init__(self, path: str, **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        found = split_ref(self.path)
        if found is None:
            raise SessionError("not an opencode session (expected <database>#<session id>)", path=self.path)
        self.db, self.opencode_id = found
        self._token: tuple[int, ...] = ()

    def load(self) -> None:
        token = state_token(self.db)
        transcript = map_opencode(read_session(self.db, self.opencode_id), self.path)
        self._reset()
        self._install(transcript, b"")
        self._token = token
        self.generation += 1

    def held_bytes(self) -> int:
        """The index and every entry as mapped from the database (no file: about 2 KB an entry)."""
        return super().held_bytes() + OPENCODE_ENTRY * len(self.heads)

    def changed_since_read(self) -> bool:
        """Always maybe: whether opencode wrote is its database's state token, which :meth:`refresh`
        reads (two stats when nothing changed)."""
        return True

    def refresh(self) -> RefreshResult:
        token = state_token(self.db)
        if token == self._token:
            return RefreshResult(range(len(self.heads), len(self.heads)))
        transcript = map_opencode(read_session(self.db, self.opencode_id), self.path)
        self._token = token
        old = self._bodies_list
        new = transcript.entries
        if len(new) >= len(old) and new[: len(old)] == old:
            first = len(self.heads)
            self.header = dict(transcript.header)  # opencode retitles a session after its first answer
            self._extend(transcript, first)
            self._leaf = transcript.leaf_id
            self._diagnose(transcript)
            return RefreshResult(range(first, len(self.heads)))
        self._reset()
        self._install(transcript, b"")
        self.generation += 1
        return RefreshResult(range(len(self.heads)), reloaded=True)

    def entries(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """Every body is held as mapped (there is no file of lines to read them from)."""
        return [self.entry(i) for i in indices]
