"""Which sessions the service keeps open (ctxd.service.keeping): closed when idle, least recently used
first past the count and byte budgets, never one in use; a closed session opens again and answers the
same; a search's hits are read without being kept open; a closed session is freed."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import weakref
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest
from helpers.factories import assistant, chain, compaction, header, tool_result, user, write
from helpers.lock_holder import SCRIPT
from test_service import Gate

from ctxd.compaction.settings import CompactionSettings
from ctxd.service import protocol as p
from ctxd.service.config import Config, OpenSessions, config_from_json
from ctxd.service.service import Service

T = TypeVar("T")


def sessions(root: Path, count: int) -> list[str]:
    """``count`` sessions with a compaction, a tool loop and a branch-free path each."""
    paths = []
    for k in range(count):
        entries = chain(
            lambda q, k=k: user(q, f"session {k}: measure the loader " + "x" * 300),
            lambda q: assistant(q, "Running it", calls=[("c1", "bash", {"command": "make bench"})]),
            lambda q, k=k: tool_result(q, "c1", f"cold start {k}.5 ms " + "y" * 2000, name="bash"),
            lambda q: assistant(q, "Done", total=900),
            lambda q, k=k: user(q, f"now make it faster ({k})"),
        )
        entries.append(compaction(entries[-1]["id"], entries[3]["id"], summary=f"summary {k}"))
        entries.append(assistant(entries[-1]["id"], "Profiling"))
        entries.append(user(entries[-1]["id"], "and?"))
        path = root / "proj" / f"s{k:03d}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path, entries, header(id=f"sess-{k:03d}"))
        paths.append(str(path))
    return paths


def service(root: Path, **limits: Any) -> tuple[Service, list[tuple[str, Any]]]:
    notes: list[tuple[str, Any]] = []
    config = Config(
        roots=[str(root)],
        transcript_roots=[],
        archive_roots=[],
        opencode_databases=[],
        watch=False,
        open_sessions=OpenSessions(**limits),
        compaction=CompactionSettings(context_window=10_000, reserve_tokens=2_000, keep_recent_tokens=50),
    )
    return Service(config, lambda method, payload: notes.append((method, payload))), notes


async def answers(svc: Service, path: str) -> dict[str, Any]:
    """What a client reads of a session (``revision`` aside: a new kept context has a new one)."""
    built = await req(svc.context_build(p.ContextBuildParams(session=path)))
    built.pop("revision")
    tree = await req(svc.session_tree(p.SessionTreeParams(session=path)))
    entry_id = tree["rows"][-1]["id"]
    return {
        "open": await req(svc.session_open(p.SessionParams(path))),
        "tree": tree,
        "entry": await req(svc.session_entry(p.SessionEntryParams(path, entry_id))),
        "context": built,
        "openai": (await req(svc.context_build(p.ContextBuildParams(path, format="openai"))))["openai"],
        "stats": await req(svc.session_stats(p.SessionParams(path))),
        "ledger": await req(svc.session_ledger(p.SessionParams(path))),
    }


async def req(call: Coroutine[Any, Any, T]) -> T:
    """``call`` as the daemon runs a request: a task of its own (a session stays open while one runs)."""
    return await asyncio.create_task(call)


async def fresh_leaf(root: Path, path: str) -> str:
    fresh, _ = service(root)
    try:
        return str((await req(fresh.session_open(p.SessionParams(path))))["leafId"])
    finally:
        await fresh.close()


async def wait_for(condition: Any, timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    assert condition()


def test_the_limits_are_settings() -> None:
    problems: list[str] = []
    config = config_from_json({"openSessions": {"idleSeconds": 60, "maxCount": 8, "maxBytes": 1 << 20}}, problems)
    assert config.open_sessions == OpenSessions(60.0, 8, 1 << 20) and problems == []
    config = config_from_json({"openSessions": {"idleSeconds": 0, "maxCount": 2.5, "what": 1}}, problems)
    assert config.open_sessions == OpenSessions()  # each invalid value reported, its default kept
    assert len(problems) == 3 and "openSessions.maxCount" in problems[1] and "openSessions.what" in problems[2]


async def test_idle_sessions_close_and_open_again_with_the_same_answers(tmp_path: Path) -> None:
    paths = sessions(tmp_path, 3)
    svc, _ = service(tmp_path, idle_seconds=0.3)
    before = {path: await answers(svc, path) for path in paths}
    assert set(svc.registry.open) == set(paths)
    await wait_for(lambda: not svc.registry.open)  # each untouched for 0.3 s: closed
    for path in paths:
        assert await answers(svc, path) == before[path]
    await svc.close()


async def test_past_the_count_the_least_recently_used_close_first(tmp_path: Path) -> None:
    paths = sessions(tmp_path, 5)
    svc, _ = service(tmp_path, max_count=2)
    first = {path: await answers(svc, path) for path in paths}
    await wait_for(lambda: len(svc.registry.open) == 2)
    assert list(svc.registry.open) == paths[3:]
    await req(svc.session_open(p.SessionParams(paths[3])))  # used again: now the most recent
    await req(svc.session_open(p.SessionParams(paths[0])))
    await wait_for(lambda: list(svc.registry.open) == [paths[3], paths[0]])
    for path in paths:
        assert await answers(svc, path) == first[path]
        assert len(svc.registry.open) <= 3  # the one answering, and two
    await svc.close()


async def test_past_the_bytes_only_what_fits_stays_open(tmp_path: Path) -> None:
    paths = sessions(tmp_path, 6)
    svc, _ = service(tmp_path, max_bytes=1)  # less than any session weighs
    for path in paths:
        await answers(svc, path)
        opened = svc.registry.get(path)
        assert opened is not None and opened.weight > 5_000  # it weighs itself
        await wait_for(lambda: len(svc.registry.open) <= 1)  # only the one in use fits
    await svc.close()
    svc, _ = service(tmp_path, max_bytes=10 << 20)
    for path in paths:
        await answers(svc, path)
    assert len(svc.registry.open) == 6 and sum(o.weight for o in svc.registry.open.values()) <= 10 << 20
    await svc.close()


async def test_a_closed_session_is_freed_at_once(tmp_path: Path) -> None:
    """What a closed session held goes when it closes, not at the next full collection: its file's
    index and its views no longer refer to each other (found by make bench-soak: the RSS crept up)."""
    (path,) = sessions(tmp_path, 1)
    svc, _ = service(tmp_path, idle_seconds=0.2)
    await req(svc.session_open(p.SessionParams(path)))  # a kept context of lazy rows (nothing decoded yet)
    await req(svc.context_build(p.ContextBuildParams(session=path, includeMessages=False)))
    opened = svc.registry.get(path)
    assert opened is not None
    session = weakref.ref(opened.session)
    file = weakref.ref(opened.session.file)
    del opened
    collecting = gc.isenabled()
    gc.disable()  # freed by reference counting alone
    try:
        await wait_for(lambda: not svc.registry.open)
        await wait_for(lambda: session() is None and file() is None)  # the close runs in a worker thread
    finally:
        if collecting:
            gc.enable()
    await svc.close()


async def test_search_hits_are_read_without_keeping_their_sessions_open(tmp_path: Path) -> None:
    paths = sessions(tmp_path, 4)
    svc, _ = service(tmp_path)
    svc.history_indexer(str(tmp_path / "history.sqlite3"))
    found = await req(svc.history_search(p.HistorySearchParams("cold start", None, 20, 5000)))
    assert {h["session"]["path"] for h in found["hits"]} == set(paths)
    assert all(h["summarized"] is True for h in found["hits"])  # read from each file: before the compaction
    assert svc.registry.open == {}
    await req(svc.session_open(p.SessionParams(paths[0])))  # an open one is read as it is
    again = await req(svc.history_search(p.HistorySearchParams("cold start", None, 20, 0)))
    assert again["hits"] == found["hits"] and list(svc.registry.open) == [paths[0]]
    await svc.close()


async def test_an_append_waiting_for_the_lock_keeps_its_session_open(tmp_path: Path) -> None:
    """Idle time and the count both say close it; an append queued behind another process's lock
    says not yet. When the lock is let go the append is written once and answered."""
    paths = sessions(tmp_path, 3)
    svc, notes = service(tmp_path, idle_seconds=0.1, max_count=1)
    await req(svc.session_open(p.SessionParams(paths[0])))
    holder = subprocess.Popen([sys.executable, SCRIPT, paths[0], "1.0"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        params = p.SessionAppendParams(session=paths[0], messages=[{"role": "user", "content": "while locked"}])
        append = asyncio.ensure_future(svc.session_append(params, explicit_parent=False))
        for path in paths[1:]:  # other sessions used meanwhile: paths[0] is the least recently used
            await req(svc.session_open(p.SessionParams(path)))
        await asyncio.sleep(0.4)
        assert paths[0] in svc.registry.open and not append.done()
        waiting = svc.registry.open[paths[0]]
        result = await asyncio.wait_for(append, 10)
    finally:
        holder.kill()
        holder.wait()
    assert Path(paths[0]).read_text().count("while locked") == 1
    assert waiting.session.file.entry_by_id(result["ids"][0])["message"]["content"] == "while locked"
    assert [n for m, n in notes if m == p.DID_CHANGE and n["ids"] == result["ids"]]
    await wait_for(lambda: paths[0] not in svc.registry.open)  # done: it may go now
    await svc.close()


async def test_a_compaction_under_way_keeps_its_session_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = sessions(tmp_path, 2)
    svc, _ = service(tmp_path, idle_seconds=0.1, max_count=1)
    gate = Gate()
    monkeypatch.setattr("ctxd.compaction.engine.summarizer_for", lambda settings: gate)
    more = [{"role": "user", "content": f"request {k} " + "w" * 400} for k in range(6)]
    await req(svc.session_append(p.SessionAppendParams(session=paths[0], messages=more), explicit_parent=False))
    task = asyncio.ensure_future(svc.compact(p.CompactParams(session=paths[0])))
    await asyncio.wait_for(gate.entered.wait(), 10)
    await req(svc.session_open(p.SessionParams(paths[1])))
    await asyncio.sleep(0.4)
    assert paths[0] in svc.registry.open
    gate.release.set()
    out = await asyncio.wait_for(task, 10)
    assert (await req(svc.session_tree(p.SessionTreeParams(session=paths[0]))))["leafId"] == out["entryId"]
    await svc.close()


async def test_a_followed_composition_is_not_closed_when_idle_and_follows_its_session_when_closed(
    tmp_path: Path,
) -> None:
    paths = sessions(tmp_path, 3)
    svc, notes = service(tmp_path, idle_seconds=0.2)
    await req(svc.context_composition(p.ContextCompositionParams(session=paths[0])))
    await req(svc.session_open(p.SessionParams(paths[1])))
    await wait_for(lambda: list(svc.registry.open) == [paths[0]])  # the other one closed; this one stays
    svc.config.open_sessions.max_count = 1
    await req(svc.session_open(p.SessionParams(paths[2])))  # past the count: the followed one goes too
    await wait_for(lambda: paths[0] not in svc.registry.open)
    # Another process appends to it: the client following its composition is told, as before.
    leaf = await fresh_leaf(tmp_path, paths[0])
    with open(paths[0], "a") as f:
        f.write(json.dumps(user(leaf, "written by another process " + "z" * 4000)) + "\n")
    await svc.file_changed(paths[0], "modified")  # what the watcher does (watching is off here)
    await wait_for(lambda: any(m == p.COMPOSITION_CHANGED for m, _ in notes))
    sent = [n for m, n in notes if m == p.COMPOSITION_CHANGED][-1]
    fresh, _ = service(tmp_path)
    wanted = await req(fresh.context_composition(p.ContextCompositionParams(session=paths[0])))
    assert {**sent, "revision": None} == {**wanted, "revision": None}
    await fresh.close()
    await svc.close()
