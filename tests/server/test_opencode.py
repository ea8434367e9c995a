"""opencode sessions through the daemon: listed beside pi's, opened by ``<database>#<id>`` or by id, their
tree and context built, writes refused, and rows opencode adds (in the write-ahead log) seen live."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from opencode.harness import SUMMARY
from opencode.rows import DATA, SESSION, add_turn
from pytest_lsp import LanguageClient

from ctxd.service import protocol as p

from .harness import call, call_error, user

pytestmark = pytest.mark.asyncio(loop_scope="module")


def ctxd_options(root: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
    folder = root.parent / f"{root.name}-opencode"
    folder.mkdir()
    db = folder / "opencode.db"
    shutil.copyfile(DATA, db)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode=WAL")  # as opencode keeps it
    request.module.DB = str(db)
    return {"roots": [str(root)], "opencodeDatabases": [str(db)], "watch": True, "autoCompact": False}


def session_ref() -> str:
    return f"{os.path.realpath(DB)}#{SESSION}"


DB = ""


async def test_session_list_shows_the_opencode_session(ctxd: LanguageClient) -> None:
    listed = await call(ctxd, p.SESSION_LIST, {})
    (row,) = [s for s in listed["sessions"] if s["agent"] == "opencode"]
    assert row["path"] == session_ref() and row["id"] == SESSION and row["readOnly"] is True
    assert row["name"] == "Hello with bash" and row["title"] == '"Say hello using bash"'
    only = await call(ctxd, p.SESSION_LIST, {"roots": [DB]})
    assert [s["path"] for s in only["sessions"]] == [session_ref()]


async def test_open_tree_and_context_of_the_opencode_session(ctxd: LanguageClient) -> None:
    by_id = await call(ctxd, p.SESSION_OPEN, {"session": SESSION})
    by_path = await call(ctxd, p.SESSION_OPEN, {"session": session_ref()})
    assert by_id["path"] == by_path["path"] == session_ref() and by_id["entries"] == 8
    tree = await call(ctxd, p.SESSION_TREE, {"session": session_ref()})
    assert "compaction" in str(tree)
    built = await call(ctxd, p.CONTEXT_BUILD, {"session": session_ref()})
    roles = [m["role"] for m in built["messages"]]
    assert roles == ["compactionSummary", "user", "assistant"]
    assert built["messages"][0]["message"]["summary"] == SUMMARY
    error = await call_error(ctxd, p.SESSION_APPEND, {"session": session_ref(), "entries": [user("no")]})
    assert error.code == -31013


async def test_rows_opencode_adds_reach_a_watching_daemon(ctxd: LanguageClient) -> None:
    notes = ctxd.notes  # type: ignore[attr-defined]
    await call(ctxd, p.SESSION_OPEN, {"session": session_ref()})
    mark = notes.mark()
    writer = sqlite3.connect(DB, isolation_level=None)
    try:
        writer.execute("PRAGMA wal_autocheckpoint=0")
        user_id, answer_id = add_turn(writer, SESSION, "one more thing", "done, live", 1795642500000)
        change = await notes.wait(p.DID_CHANGE, lambda c: c["origin"] == "external", session=session_ref(), since=mark)
        assert change["ids"] == [user_id, answer_id] and change["leafId"] == answer_id
        usage = await notes.wait(p.CONTEXT_USAGE, session=session_ref(), since=mark)
        assert usage["tokens"] == 130
        built = await call(ctxd, p.CONTEXT_BUILD, {"session": session_ref()})
        assert built["messages"][-1]["message"]["content"] == [{"type": "text", "text": "done, live"}]
    finally:
        writer.close()
