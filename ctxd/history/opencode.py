"""opencode's databases in the history index: each session, ``<database>#<session id>``, indexed like a file.

opencode keeps its sessions in SQLite (:mod:`ctxd.store.opencode`, read strictly read-only), so a file's
identity cannot tell what changed. Two marks do instead:

- the database's state token (identity, size and mtime of the database and its ``-wal``), kept in
  ``opencode_dbs``: unchanged, the database is not opened at all;
- each session's update stamp (``time_updated``, the newest message and part update, part and message counts),
  kept in ``opencode_sessions``: a session whose stamp moved is read and indexed again whole; one gone from
  the database leaves the index.

The token is taken before anything is read, so a write during a pass leaves a stale token and the next pass
looks again. Each session is written in one transaction, as a file is. Hits carry the entry ids and "lines"
(message positions) of :func:`ctxd.formats.transcripts.opencode.map_opencode`, as ``history/expand`` reads the
session through :class:`ctxd.store.opencode.OpencodeFile`.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable

import attrs

from ctxd.errors import SessionError
from ctxd.formats.transcripts.opencode import map_opencode
from ctxd.history.extract import Item, item_of
from ctxd.history.rows import delete_rows, forget, insert_items
from ctxd.store.opencode import SEPARATOR, read_session, session_path, state_token, updated_sessions

KIND = "opencode"


@attrs.define
class DatabasePass:
    """What one look at a database did."""

    read: bool = False
    """The database was opened (its state token had changed)."""
    sessions: int = 0
    indexed: int = 0
    """Sessions read and indexed again."""
    entries: int = 0
    removed: int = 0


def _items(db: str, session_id: str) -> tuple[list[tuple[int, Item]], str, int]:
    """(line, item) of one session's entries, its cwd and its number of messages."""
    rows = read_session(db, session_id)
    transcript = map_opencode(rows, session_path(db, session_id))
    items = [
        (line, item)
        for entry, line in zip(transcript.entries, transcript.lines, strict=True)
        if (item := item_of(entry)) is not None
    ]
    return items, str(rows.session.get("directory") or ""), len(rows.messages)


def _stamp(conn: sqlite3.Connection, path: str) -> str | None:
    row = conn.execute("SELECT stamp FROM opencode_sessions WHERE path = ?", (path,)).fetchone()
    return None if row is None else str(row[0])


def _write_session(
    conn: sqlite3.Connection, db: str, session_id: str, stamp: str, updated_ms: int, known: str | None
) -> int | None:
    """Index one session again (unless another process did since ``known`` was read); entries written."""
    path = session_path(db, session_id)
    items, cwd, messages = _items(db, session_id)
    conn.execute("BEGIN IMMEDIATE")
    try:
        if _stamp(conn, path) != known:
            conn.execute("ROLLBACK")
            return None
        delete_rows(conn, path, 0)
        insert_items(conn, path, items)
        conn.execute(
            "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, 0, 0, 0, 0, ?, 0, x'', 0, ?, ?)",
            (
                path,
                KIND,
                session_id,
                os.path.normpath(cwd) if cwd else "",
                updated_ms * 1_000_000,
                messages,
                items[-1][0] if items else 0,
            ),
        )
        conn.execute(
            "INSERT INTO opencode_sessions VALUES (?, ?, ?, 1) ON CONFLICT(path)"
            " DO UPDATE SET stamp = excluded.stamp, reads = reads + 1",
            (path, db, stamp),
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return len(items)


def index_database(conn: sqlite3.Connection, db: str, stop: Callable[[], bool] | None = None) -> DatabasePass:
    """Bring the index up to date with one database (a real path). Raises SessionError when it cannot be read
    now (busy, damaged); a database that is gone takes its sessions out of the index."""
    done = DatabasePass()
    token = json.dumps(state_token(db))
    row = conn.execute("SELECT token FROM opencode_dbs WHERE db = ?", (db,)).fetchone()
    if row is not None and row[0] == token:
        done.sessions = conn.execute("SELECT count(*) FROM opencode_sessions WHERE db = ?", (db,)).fetchone()[0]
        return done
    known = dict(conn.execute("SELECT path, stamp FROM opencode_sessions WHERE db = ?", (db,)).fetchall())
    if not os.path.isfile(db):
        done.removed = forget(conn, sorted(known))
        conn.execute("DELETE FROM opencode_dbs WHERE db = ?", (db,))
        return done
    now = updated_sessions(db)
    done.read = True
    failed = False
    for session_id, values in now.items():
        if stop is not None and stop():
            return done  # the token is not kept: the next pass looks again
        path = session_path(db, session_id)
        stamp = json.dumps(values)
        done.sessions += 1
        if known.get(path) == stamp:
            continue
        try:
            written = _write_session(conn, db, session_id, stamp, values[0] if values else 0, known.get(path))
        except SessionError:
            failed = True  # deleted while we looked, or busy: the token is not kept, the next pass looks again
            continue
        if written is None:
            failed = True  # another process indexed it meanwhile, maybe from an older read: look again next time
        else:
            done.indexed += 1
            done.entries += written
    done.removed = forget(conn, sorted(set(known) - {session_path(db, s) for s in now}))
    if failed:
        return done
    conn.execute(
        "INSERT INTO opencode_dbs VALUES (?, ?, 1) ON CONFLICT(db) DO UPDATE SET token = excluded.token,"
        " reads = reads + 1",
        (db, token),
    )
    return done


def database_of(path: str) -> str:
    """The database part of a ``<database>#<session id>`` path ("" for a file path)."""
    db, sep, _ = path.rpartition(SEPARATOR)
    return db if sep else ""
