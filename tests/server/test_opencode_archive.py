"""``session/archive`` through a real daemon: an opencode session copied into ctxd's archive, listed beside the
live session with ``archived: true``, and still listed and readable once its rows are deleted from the database."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest
from opencode.rows import DATA, SESSION

from ctxd.service import protocol as p

from .harness import call, call_error, new_session, start_ctxd

pytestmark = pytest.mark.asyncio(loop_scope="function")


async def test_an_archived_session_outlives_its_rows_in_opencodes_database(tmp_path: Path) -> None:
    db = tmp_path / "opencode" / "opencode.db"
    db.parent.mkdir()
    shutil.copyfile(DATA, db)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode=WAL")  # as opencode keeps it
    data = tmp_path / "data"
    options = {"roots": [str(tmp_path / "pi")], "transcriptRoots": [], "opencodeDatabases": [str(db)], "watch": False}
    live = f"{os.path.realpath(db)}#{SESSION}"
    async with start_ctxd(options, XDG_DATA_HOME=str(data)) as ctxd:
        before = await call(ctxd, p.CONTEXT_BUILD, {"session": SESSION})
        done = await call(ctxd, p.SESSION_ARCHIVE, {"session": SESSION})
        copy = str(data / "ctxd" / "archive" / "opencode" / "global" / f"{SESSION}.jsonl")
        assert done == {"session": live, "path": copy, "copied": os.path.getsize(copy), "rotated": None}
        assert stat.S_IMODE(os.stat(copy).st_mode) == 0o600
        again = await call(ctxd, p.SESSION_ARCHIVE, {"session": live})
        assert again["copied"] == 0

        listed = {s["path"]: s for s in (await call(ctxd, p.SESSION_LIST, {}))["sessions"]}
        assert listed[live]["archives"] == [copy] and listed[live]["archived"] is False
        row = listed[copy]
        assert (row["agent"], row["id"], row["archived"], row["archiveOf"]) == ("opencode", SESSION, True, live)

        with sqlite3.connect(db) as writer:  # the user deletes the session in opencode
            for table, column in (("part", "session_id"), ("message", "session_id"), ("session", "id")):
                writer.execute(f"DELETE FROM {table} WHERE {column} = ?", (SESSION,))
        listed = {s["path"]: s for s in (await call(ctxd, p.SESSION_LIST, {}))["sessions"]}
        assert live not in listed
        row = listed[copy]
        assert (row["id"], row["archived"], row["archiveOf"], row["name"]) == (SESSION, True, None, "Hello with bash")
        error = await call_error(ctxd, p.SESSION_ARCHIVE, {"session": live})
        assert "no opencode session" in error.message
        assert Path(copy).read_bytes().count(b"\n") == 23  # the copy is kept whole

    async with start_ctxd(options, XDG_DATA_HOME=str(data)) as ctxd:  # a new daemon: the archive exists now
        opened = await call(ctxd, p.SESSION_OPEN, {"session": copy})
        assert opened["path"] == copy and opened["entries"] == 8
        tree = await call(ctxd, p.SESSION_TREE, {"session": copy})
        assert "compaction" in str(tree)
        after = await call(ctxd, p.CONTEXT_BUILD, {"session": copy})
        assert after["messages"] == before["messages"]
        assert [m["role"] for m in after["messages"]] == ["compactionSummary", "user", "assistant"]
        pi = await new_session(ctxd)
        refused = await call_error(ctxd, p.SESSION_ARCHIVE, {"session": pi})
        assert refused.code == -31010 and "opencode sessions only" in refused.message
