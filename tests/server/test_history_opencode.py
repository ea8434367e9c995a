"""opencode's database sessions in history/search and history/expand, through a real ``ctxd serve`` subprocess
(its watcher and background indexer) and ``ctxd search --json``, on a copy of a real opencode 1.18.33 database
written the way opencode writes it (WAL mode, a writer left open)."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from opencode.rows import SESSION, add_turn, clone_session, delete_session, wal_copy

from ctxd.service import protocol as p

from .harness import REPO, call, server_env, start_ctxd

CLONE = "ses_clone0000000000000000000"
RESULT = "prt_2149fc87a001Bjgr76vw7Ya5ks"
"""The bash tool result of the real session (before its compaction)."""
COMPACTION = "msg_2149fcf01001Dm7icS9D78B2Oo"


def reads(data: Path) -> tuple[int, dict[str, int]]:
    """How often the daemon's indexer opened the database and read each session (kept in the index)."""
    conn = sqlite3.connect(f"file:{data / 'ctxd' / 'history.sqlite3'}?mode=ro", uri=True)
    try:
        (db_reads,) = conn.execute("SELECT sum(reads) FROM opencode_dbs").fetchone()
        return int(db_reads or 0), dict(conn.execute("SELECT path, reads FROM opencode_sessions").fetchall())
    finally:
        conn.close()


async def search(client: Any, query: str, **params: Any) -> list[dict[str, Any]]:
    """The hits once the indexer has caught up (each answer waits up to 5 s for it; a loaded machine may need
    several)."""
    deadline = time.monotonic() + 60
    while (result := await call(client, p.HISTORY_SEARCH, {"query": query, "waitMs": 5000, **params}))["indexing"]:
        assert time.monotonic() < deadline, "the index was still being brought up to date after 60 s"
    return list(result["hits"])


async def until(client: Any, query: str, found: bool) -> list[dict[str, Any]]:
    """Search until ``query`` has hits (or none), as the watcher and the indexer catch up."""
    deadline = time.monotonic() + 60
    while bool(hits := await search(client, query)) != found:
        assert time.monotonic() < deadline, f"{query!r} {'never reached' if found else 'never left'} the index"
        await asyncio.sleep(0.2)
    return hits


async def test_search_expand_and_follow_an_opencode_database(tmp_path: Path) -> None:
    db, writer = wal_copy(tmp_path / "opencode")
    data = tmp_path / "data"
    try:
        clone_session(writer, SESSION, CLONE, "hello-from-bash", "greetings-from-the-clone")
        real = os.path.realpath(db)
        path, clone = f"{real}#{SESSION}", f"{real}#{CLONE}"
        options = {"roots": [str(tmp_path / "root")], "opencodeDatabases": [str(db)], "watch": True}
        async with start_ctxd(options, XDG_DATA_HOME=str(data)) as client:
            hits = await search(client, "hello-from-bash")
            assert hits and {(h["session"]["path"], h["session"]["id"], h["agent"]) for h in hits} == {
                (path, SESSION, "opencode")
            }
            result = next(h for h in hits if h["role"] == "toolResult")
            assert (result["entryId"], result["line"], result["toolName"]) == (RESULT, 2, "bash")
            assert result["summarized"] is True  # opencode's compaction stands for it in the current context
            (after,) = await search(client, '"Done (turn 3)"', session=path)
            assert after["summarized"] is False and after["role"] == "assistant"

            behind = await call(client, p.HISTORY_EXPAND, {"session": path, "entryId": COMPACTION})
            assert behind["kind"] == "compaction" and behind["session"] == {"id": SESSION, "path": path}
            assert [m["role"] for m in behind["messages"]] == ["user", "assistant", "toolResult", "assistant"]
            assert behind["messages"][2]["entryId"] == RESULT and behind["messages"][2]["text"] == "hello-from-bash\n"
            one = await call(client, p.HISTORY_EXPAND, {"session": result["session"]["path"], "entryId": RESULT})
            assert one["kind"] == "entry" and one["messages"][0]["line"] == 2

            # Rows opencode adds are found once the watcher has seen the database change; the other session,
            # whose stamp did not move, is not read again.
            user_id, _ = add_turn(writer, SESSION, "Now count the zebras in the yard", "Seven zebras.", 1795642500000)
            (hit,) = await until(client, "zebras yard", True)
            assert (hit["session"]["path"], hit["entryId"], hit["summarized"]) == (path, user_id, False)
            assert reads(data)[1][clone] == 1 and reads(data)[1][path] >= 2

            # A session deleted from the database leaves the index; the other one stays.
            delete_session(writer, CLONE)
            await until(client, "greetings", False)
            assert await search(client, "hello-from-bash")
        opened = reads(data)

        # Another daemon over the same index and the unchanged database: found, without opening the database.
        async with start_ctxd(options, XDG_DATA_HOME=str(data)) as client:
            assert await search(client, "zebras")
        assert reads(data) == opened
    finally:
        writer.close()


async def test_session_open_and_tree_name_an_opencode_session_by_its_title(tmp_path: Path) -> None:
    db, writer = wal_copy(tmp_path / "opencode")
    try:
        path = f"{os.path.realpath(db)}#{SESSION}"
        options = {"roots": [str(tmp_path / "root")], "opencodeDatabases": [str(db)], "watch": False}
        async with start_ctxd(options, XDG_DATA_HOME=str(tmp_path / "data")) as client:
            assert (await call(client, p.SESSION_OPEN, {"session": path}))["name"] == "Hello with bash"
            assert (await call(client, p.SESSION_TREE, {"session": path}))["name"] == "Hello with bash"
            writer.execute("UPDATE session SET title = 'Greeting the shell' WHERE id = ?", (SESSION,))
            add_turn(writer, SESSION, "and again", "ok", 1795642500000)  # opencode retitles as the session goes on
            assert (await call(client, p.SESSION_OPEN, {"session": path}))["name"] == "Greeting the shell"
    finally:
        writer.close()


def test_cli_search_json_reads_the_configured_databases(tmp_path: Path) -> None:
    db, writer = wal_copy(tmp_path / "opencode")
    writer.close()
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"roots": [str(tmp_path / "root")], "opencodeDatabases": [str(db)]}))
    data = tmp_path / "data"
    env = server_env(XDG_DATA_HOME=str(data), CTXD_CONFIG=str(config))
    path = f"{os.path.realpath(db)}#{SESSION}"
    command = [sys.executable, "-P", "-m", "ctxd", "search", "hello-from-bash", "--json"]
    for run in range(2):
        out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, cwd=REPO)
        assert out.returncode == 0, out.stderr
        hits = json.loads(out.stdout)["hits"]
        hit = next(h for h in hits if h["role"] == "toolResult")
        assert hit["session"] == {"id": SESSION, "path": path} and hit["entryId"] == RESULT
        assert hit["agent"] == "opencode" and hit["summarized"] is True
        assert reads(data) == (1, {path: 1}), f"run {run + 1} opened the unchanged database again"
    only = subprocess.run([*command, "--session", path], env=env, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert {h["session"]["path"] for h in json.loads(only.stdout)["hits"]} == {path}
