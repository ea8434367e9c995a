"""The spool: which indexed entries are still to be published, kept in the history database itself.

A trigger on the index's ``rows`` table adds each new row's id to ``team_spool`` in the same transaction that
indexes it, whichever process indexes (the daemon, ``ctxd search``, ``ctxd mcp``): the spool is exactly as
incremental as the index (the same file marks; an appended file adds its new lines, a rewritten one all of them
again), and no entry can be indexed without being spooled. A row deleted since (its file was rewritten or is
gone) is skipped: its replacement has its own spool entry.

An entry leaves the spool only after the server committed it (:mod:`ctxd.team.publish`), so a server that is
down, a daemon killed mid-batch or a dropped connection loses nothing; the server's upsert, keyed by session and
entry, makes a batch sent twice land once.

``team_state`` remembers which server and projects the spool was filled for: when they change (or the history
database was rebuilt, taking the spool with it), every indexed row is spooled again. The server's upsert makes
that cheap in effect: nothing is doubled.
"""

from __future__ import annotations

import json
import sqlite3

import attrs

_TABLES = (
    "CREATE TABLE IF NOT EXISTS team_spool(row_id INTEGER PRIMARY KEY)",
    "CREATE TABLE IF NOT EXISTS team_state(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TRIGGER IF NOT EXISTS team_spool_rows AFTER INSERT ON rows"
    " BEGIN INSERT OR IGNORE INTO team_spool(row_id) VALUES (new.id); END",
)


@attrs.frozen
class SpoolRow:
    """One spooled entry as the index holds it (``text`` None: the row is gone from the index)."""

    row_id: int
    path: str
    entry_id: str
    line: int
    role: str
    ts: str
    tool: str
    session: str
    kind: str
    cwd: str
    archived: bool
    text: str | None


def install(conn: sqlite3.Connection, target: str) -> bool:
    """Make the spool and its trigger; spool every indexed row when ``target`` (the server and projects) is not
    the one the spool was filled for. Whether it spooled everything again."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _TABLES:
            conn.execute(statement)
        row = conn.execute("SELECT value FROM team_state WHERE key = 'target'").fetchone()
        refill = row is None or row[0] != target
        if refill:
            conn.execute("INSERT OR IGNORE INTO team_spool(row_id) SELECT id FROM rows")
            conn.execute("INSERT OR REPLACE INTO team_state VALUES ('target', ?)", (target,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return refill


def uninstall(conn: sqlite3.Connection) -> bool:
    """Drop the trigger and the spool (team history was turned off); whether there was one."""
    had = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'team_spool_rows'").fetchone() is not None
    if had:
        conn.execute("BEGIN IMMEDIATE")
        for table in ("TRIGGER IF EXISTS team_spool_rows", "TABLE IF EXISTS team_spool", "TABLE IF EXISTS team_state"):
            conn.execute(f"DROP {table}")
        conn.execute("COMMIT")
    return had


def queued(conn: sqlite3.Connection) -> int:
    """Entries waiting to be published (0 when there is no spool)."""
    try:
        return int(conn.execute("SELECT count(*) FROM team_spool").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def read(conn: sqlite3.Connection, limit: int, after: int = 0) -> list[SpoolRow]:
    """The oldest ``limit`` spooled entries with a row id above ``after``, joined with their index rows."""
    rows = conn.execute(
        "SELECT s.row_id, r.path, r.entry_id, r.line, r.role, r.ts, r.tool, f.session, f.kind, f.cwd, f.archived,"
        " e.text FROM team_spool s LEFT JOIN rows r ON r.id = s.row_id LEFT JOIN files f ON f.path = r.path"
        " LEFT JOIN entries e ON e.rowid = s.row_id WHERE s.row_id > ? ORDER BY s.row_id LIMIT ?",
        (after, limit),
    ).fetchall()
    out = []
    for row_id, path, entry_id, line, role, ts, tool, session, kind, cwd, archived, text in rows:
        if path is None or session is None or text is None:
            out.append(SpoolRow(row_id, "", "", 0, "", "", "", "", "", "", False, None))
        else:
            out.append(SpoolRow(row_id, path, entry_id, line, role, ts, tool, session, kind, cwd, bool(archived), text))
    return out


def previous_ts(conn: sqlite3.Connection, path: str, line: int) -> str:
    """The time of the nearest entry before ``line`` in the same file that has one ("" if none does)."""
    row = conn.execute(
        "SELECT ts FROM rows WHERE path = ? AND line < ? AND ts != '' ORDER BY line DESC LIMIT 1", (path, line)
    ).fetchone()
    return str(row[0]) if row else ""


def remove(conn: sqlite3.Connection, row_ids: list[int]) -> None:
    """Take these entries off the spool (the server has them, or they are not published)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("DELETE FROM team_spool WHERE row_id IN (SELECT value FROM json_each(?))", (json.dumps(row_ids),))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def state(conn: sqlite3.Connection, key: str) -> str | None:
    try:
        row = conn.execute("SELECT value FROM team_state WHERE key = ?", (key,)).fetchone()
    except sqlite3.OperationalError:
        return None
    return None if row is None else str(row[0])


def set_state(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute("INSERT OR REPLACE INTO team_state VALUES (?, ?)", (key, value))
