"""Writing one indexed session's rows: its entries into ``rows`` and the FTS5 table, or out of both.

Shared by session files (:mod:`ctxd.history.index`) and opencode's database sessions
(:mod:`ctxd.history.opencode`); the caller holds the transaction.
"""

from __future__ import annotations

import sqlite3

from ctxd.history.extract import Item


def insert_items(conn: sqlite3.Connection, path: str, items: list[tuple[int, Item]]) -> None:
    """Index ``(line, item)`` pairs of the session at ``path``."""
    conn.executemany(
        "INSERT INTO rows(path, entry_id, line, role, ts, tool) VALUES (?, ?, ?, ?, ?, ?)",
        [(path, it.entry_id, line, it.role, it.timestamp, it.tool) for line, it in items],
    )
    if items:
        first = conn.execute("SELECT last_insert_rowid()").fetchone()[0] - len(items) + 1
        conn.executemany(
            "INSERT INTO entries(rowid, text) VALUES (?, ?)", [(first + k, it.text) for k, (_, it) in enumerate(items)]
        )


def delete_rows(conn: sqlite3.Connection, path: str, from_line: int) -> None:
    """Drop the indexed entries of ``path`` from line ``from_line`` on."""
    conn.execute(
        "DELETE FROM entries WHERE rowid IN (SELECT id FROM rows WHERE path = ? AND line >= ?)", (path, from_line)
    )
    conn.execute("DELETE FROM rows WHERE path = ? AND line >= ?", (path, from_line))


def forget(conn: sqlite3.Connection, paths: list[str]) -> int:
    """Drop these sessions' rows, each in its own transaction; how many of them were indexed."""
    gone = 0
    for path in paths:
        conn.execute("BEGIN IMMEDIATE")
        delete_rows(conn, path, 0)
        gone += conn.execute("DELETE FROM files WHERE path = ?", (path,)).rowcount
        conn.execute("DELETE FROM opencode_sessions WHERE path = ?", (path,))
        conn.execute("COMMIT")
    return gone
