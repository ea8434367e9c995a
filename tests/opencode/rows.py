"""Copies of the real opencode database (tests/data/opencode/opencode.db) that tests may change, written the
way opencode writes (WAL mode, a writer connection left open, so the write-ahead log holds the new rows)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data" / "opencode" / "opencode.db"
SESSION = "ses_deb60502affel00BqeWtCJeQt7"
"""The session in the real database: bash tool call, an auto-compaction, a turn after it."""


def wal_copy(directory: Path) -> tuple[Path, sqlite3.Connection]:
    """A copy of the real database in WAL mode and an open writer connection to it (close it when done)."""
    directory.mkdir(parents=True, exist_ok=True)
    db = directory / "opencode.db"
    shutil.copyfile(DATA, db)
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")  # the new rows stay in the -wal file
    return db, writer


def add_turn(writer: sqlite3.Connection, session: str, text: str, answer: str, stamp: int) -> tuple[str, str]:
    """A user message and an assistant answer appended to ``session`` as opencode stores them; their ids."""
    user_id, answer_id = f"msg_zz{stamp}user", f"msg_zz{stamp}asst"
    user = {"role": "user", "time": {"created": stamp}, "agent": "build", "model": {"providerID": "fake"}}
    assistant: dict[str, Any] = {
        "parentID": user_id,
        "role": "assistant",
        "mode": "build",
        "agent": "build",
        "providerID": "fake",
        "modelID": "fake-model",
        "time": {"created": stamp + 1, "completed": stamp + 2},
        "tokens": {"total": 130, "input": 120, "output": 10, "reasoning": 0, "cache": {"write": 0, "read": 0}},
        "finish": "stop",
    }
    rows = [
        ("message", (user_id, session, stamp, stamp, json.dumps(user))),
        ("part", (f"prt_zz{stamp}a", user_id, session, stamp, stamp, json.dumps({"type": "text", "text": text}))),
        ("message", (answer_id, session, stamp + 1, stamp + 2, json.dumps(assistant))),
        (
            "part",
            (f"prt_zz{stamp}b", answer_id, session, stamp + 1, stamp + 2, json.dumps({"type": "text", "text": answer})),
        ),
    ]
    writer.execute("BEGIN")
    for table, values in rows:
        marks = ", ".join("?" * len(values))
        columns = (
            "id, session_id, time_created, time_updated, data"
            if table == "message"
            else ("id, message_id, session_id, time_created, time_updated, data")
        )
        writer.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", values)
    writer.execute("UPDATE session SET time_updated = ? WHERE id = ?", (stamp + 2, session))
    writer.execute("COMMIT")
    return user_id, answer_id


def clone_session(writer: sqlite3.Connection, session: str, new_id: str, old: str, new: str) -> None:
    """A second session: a copy of ``session``'s rows under new ids, ``old`` replaced by ``new`` in its data."""
    writer.execute("BEGIN")
    names = [d[1] for d in writer.execute("PRAGMA table_info(session)")]
    row = dict(zip(names, writer.execute("SELECT * FROM session WHERE id = ?", (session,)).fetchone(), strict=True))
    row.update(id=new_id, slug=new_id, title=f"Copy of {row['title']}")
    writer.execute(f"INSERT INTO session ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values()))
    ids: dict[str, str] = {}
    for mid, created, updated, data in writer.execute(
        "SELECT id, time_created, time_updated, data FROM message WHERE session_id = ?", (session,)
    ).fetchall():
        ids[mid] = f"msg_{new_id[-8:]}{len(ids):04d}"
        values = (ids[mid], new_id, created, updated, data.replace(old, new))
        writer.execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)", values
        )
    for n, (_pid, mid, created, updated, data) in enumerate(
        writer.execute(
            "SELECT id, message_id, time_created, time_updated, data FROM part WHERE session_id = ?", (session,)
        ).fetchall()
    ):
        values = (f"prt_{new_id[-8:]}{n:04d}", ids[mid], new_id, created, updated, data.replace(old, new))
        writer.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?, ?)",
            values,
        )
    writer.execute("COMMIT")


def delete_session(writer: sqlite3.Connection, session: str) -> None:
    """Delete a session as opencode does (its parts, messages and row, in one transaction)."""
    writer.execute("BEGIN")
    for table, column in (("part", "session_id"), ("message", "session_id"), ("session", "id")):
        writer.execute(f"DELETE FROM {table} WHERE {column} = ?", (session,))
    writer.execute("COMMIT")


if __name__ == "__main__":
    # For the editors' tests (Node, Lua): `python tests/opencode/rows.py DB TEXT ANSWER STAMP` adds one turn to
    # the real session of a copy, as opencode does (WAL mode), and prints the user's and the answer's ids.
    import sys

    db_path, text, answer, stamp = sys.argv[1:5]
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        print(*add_turn(conn, SESSION, text, answer, int(stamp)))
    finally:
        conn.close()
