"""history/search and history/expand through a real ``ctxd serve`` subprocess, and ``ctxd search --json``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.factories import assistant, chain, compaction, header, tool_result, user, write

from ctxd.service import protocol as p

from .harness import REPO, append, call, call_error, server_env, start_ctxd
from .harness import user as user_message

FIGURE = "p99 latency 731.25 ms (budget 500 ms) on 12 hosts"


def _session(root: Path) -> tuple[Path, list[dict[str, Any]]]:
    entries = chain(
        lambda p_: user(p_, "Find why the checkout service is slow. Keep the public API unchanged."),
        lambda p_: assistant(p_, "Measuring", calls=[("c1", "bash", {"command": "./loadtest --hosts 12"})]),
        lambda p_: tool_result(p_, "c1", FIGURE, name="bash"),
        lambda p_: assistant(p_, "It is over budget. " + "Details follow. " * 200),
        lambda p_: user(p_, "Then profile the cart handler"),
    )
    entries.append(compaction(entries[-1]["id"], entries[-1]["id"], summary="The checkout service is slow."))
    entries.append(assistant(entries[-1]["id"], "Profiling the cart handler now"))
    path = root / "proj" / "checkout.jsonl"
    path.parent.mkdir(parents=True)
    write(path, entries, header(id="sess-checkout", cwd="/home/me/checkout"))
    return path, entries


async def _search(client: Any, **params: Any) -> dict[str, Any]:
    result: dict[str, Any] = await call(client, p.HISTORY_SEARCH, {"waitMs": 5000, **params})
    return result


async def test_search_finds_what_a_compaction_summarised_away(tmp_path: Path) -> None:
    root = tmp_path / "root"
    path, entries = _session(root)
    options = {"roots": [str(root)], "watch": True}
    async with start_ctxd(options, XDG_DATA_HOME=str(tmp_path / "data")) as client:
        found = await _search(client, query="731.25")
        assert found["indexing"] is False and found["query"] == "731.25"
        hit = next(h for h in found["hits"] if h["role"] == "toolResult")
        assert hit["session"] == {"id": "sess-checkout", "path": str(path)}
        assert (hit["entryId"], hit["line"], hit["toolName"]) == (entries[2]["id"], 4, "bash")
        assert hit["summarized"] is True and hit["timestamp"] == entries[2]["timestamp"]
        assert "«731.25»" in hit["snippet"]
        kept = (await _search(client, query="cart handler"))["hits"]
        assert {h["entryId"]: h["summarized"] for h in kept} == {entries[4]["id"]: False, entries[6]["id"]: False}
        assert (await _search(client, query="checkout", session="sess-checkout"))["hits"]
        assert (await _search(client, query="checkout", session="no-such-session"))["hits"] == []

        # A turn appended later is found once the watcher has seen it (the index follows the file).
        await append(client, str(path), user_message("Also check QUASAR-9 in the payment gateway"))
        deadline = time.monotonic() + 10
        while not (await _search(client, query="QUASAR-9"))["hits"]:
            assert time.monotonic() < deadline, "the appended message never reached the index"
            await asyncio.sleep(0.2)

        # The messages behind the compaction's summary, in pages with a cursor.
        first = await call(client, p.HISTORY_EXPAND, {"session": str(path), "entryId": entries[5]["id"]})
        assert first["kind"] == "compaction" and first["totalMessages"] == 4
        assert [m["entryId"] for m in first["messages"]] == [e["id"] for e in entries[:4]]
        assert FIGURE in first["messages"][2]["text"] and first["truncated"] is False
        paged = await call(
            client, p.HISTORY_EXPAND, {"session": "sess-checkout", "entryId": entries[5]["id"], "maxChars": 1000}
        )
        assert paged["truncated"] is True and paged["nextCursor"]
        texts, cursor, pages = [], None, 0
        while True:
            page = await call(
                client,
                p.HISTORY_EXPAND,
                {"session": str(path), "entryId": entries[5]["id"], "maxChars": 1000, "cursor": cursor},
            )
            pages += 1
            texts += [(m["entryId"], m["text"]) for m in page["messages"]]
            cursor = page["nextCursor"]
            if not page["truncated"]:
                break
            assert pages < 20
        whole = {}
        for eid, text in texts:
            whole[eid] = whole.get(eid, "") + text
        assert [whole[m["entryId"]] for m in first["messages"]] == [m["text"] for m in first["messages"]]
        assert pages >= 3

        ranged = await call(
            client,
            p.HISTORY_EXPAND,
            {"session": str(path), "fromEntryId": entries[2]["id"], "toEntryId": entries[4]["id"]},
        )
        assert ranged["kind"] == "range" and [m["entryId"] for m in ranged["messages"]] == [
            e["id"] for e in entries[2:5]
        ]

        unknown = await call_error(client, p.HISTORY_EXPAND, {"session": str(path), "entryId": "nope"})
        assert unknown.code == -31002
        empty = await call_error(client, p.HISTORY_SEARCH, {"query": ""})
        assert empty.code == -32602
        backwards = await call_error(
            client,
            p.HISTORY_EXPAND,
            {"session": str(path), "fromEntryId": entries[4]["id"], "toEntryId": entries[2]["id"]},
        )
        assert backwards.code == -32602 and "not on the path" in backwards.message


async def test_search_answers_at_once_while_indexing(tmp_path: Path) -> None:
    """A search never waits for indexing unless asked: it answers from what is indexed and says so."""
    root = tmp_path / "root"
    _session(root)
    big = root / "big"
    big.mkdir()
    # Enough that indexing outlasts the first search by far: 1,000 files (150 were indexed within the
    # first search's 0.57 s once the native scanner read them).
    for n in range(1000):
        write(big / f"s{n}.jsonl", chain(*(lambda p_, n=n, k=k: user(p_, f"filler {n} {k} " * 50) for k in range(40))))
    options = {"roots": [str(root)], "watch": True}
    async with start_ctxd(options, XDG_DATA_HOME=str(tmp_path / "data")) as client:
        started = time.monotonic()
        first = await call(client, p.HISTORY_SEARCH, {"query": "filler"})
        took = time.monotonic() - started
        seen_indexing = first["indexing"]
        deadline = time.monotonic() + 60
        while (await call(client, p.HISTORY_SEARCH, {"query": "731.25"}))["indexing"]:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)
        done = await call(client, p.HISTORY_SEARCH, {"query": "filler", "limit": 200})
        assert len(done["hits"]) == 200 and done["indexedFiles"] == 1001
        assert seen_indexing, f"the first search ({took:.2f} s) came after indexing 1,001 files had ended"


def test_cli_search_json(tmp_path: Path) -> None:
    root = tmp_path / "root"
    path, entries = _session(root)
    env = server_env(XDG_DATA_HOME=str(tmp_path / "data"))
    command = [sys.executable, "-P", "-m", "ctxd", "search", "731.25", "--root", str(root)]
    out = subprocess.run([*command, "--json"], env=env, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["indexing"] is False
    hit = next(h for h in result["hits"] if h["role"] == "toolResult")
    assert hit["session"]["path"] == str(path) and hit["entryId"] == entries[2]["id"] and hit["summarized"] is True
    human = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert human.returncode == 0
    assert f"{path}:4  toolResult (bash)  entry {entries[2]['id']}  session sess-checkout" in human.stdout
    assert "[summarised away]" in human.stdout and "«731.25»" in human.stdout
    only = subprocess.run(
        [*command, "--session", "other", "--json"], env=env, capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert json.loads(only.stdout)["hits"] == []
    db = tmp_path / "data" / "ctxd" / "history.sqlite3"
    assert oct(os.stat(db).st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("garbage", [b"", b"garbage " * 1000])
def test_cli_search_rebuilds_a_corrupt_database(tmp_path: Path, garbage: bytes) -> None:
    root = tmp_path / "root"
    _session(root)
    db = tmp_path / "data" / "ctxd" / "history.sqlite3"
    db.parent.mkdir(parents=True)
    db.write_bytes(garbage)
    env = server_env(XDG_DATA_HOME=str(tmp_path / "data"))
    command = [sys.executable, "-P", "-m", "ctxd", "search", "731.25", "--root", str(root), "--json"]
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["hits"]
