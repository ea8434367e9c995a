"""The service layer in process (the daemon's tests drive the same code through a subprocess):
scheduling, group commit, reads during a compaction, notifications."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ctxd.compaction.settings import CompactionSettings
from ctxd.compaction.summary import SummaryRequest, SummaryResult
from ctxd.service import protocol as p
from ctxd.service.config import Config
from ctxd.service.service import Service


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def __call__(self, method: str, payload: Any) -> None:
        self.events.append((method, payload))

    def of(self, method: str) -> list[Any]:
        return [payload for m, payload in self.events if m == method]


def assistant(total: int, text: str = "ok") -> dict[str, Any]:
    usage = {"input": total, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": total}
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "usage": usage, "stopReason": "stop"}


def service(tmp_path: Path, **compaction: Any) -> tuple[Service, Recorder]:
    settings = CompactionSettings(context_window=10_000, reserve_tokens=2_000, keep_recent_tokens=50, **compaction)
    config = Config(roots=[str(tmp_path)], watch=False, compaction=settings)
    recorder = Recorder()
    return Service(config, recorder), recorder


async def new_session(svc: Service) -> str:
    created = await svc.session_create(p.SessionCreateParams(cwd="/proj"))
    return str(created["path"])


async def fill(svc: Service, path: str, turns: int, first: int = 0) -> None:
    for k in range(first, first + turns):
        params = p.SessionAppendParams(
            session=path, messages=[{"role": "user", "content": f"request {k} " + "x" * 400}, assistant(500 * (k + 1))]
        )
        await svc.session_append(params, explicit_parent=False)


async def test_concurrent_appends_keep_their_order_and_each_is_acknowledged(tmp_path: Path) -> None:
    svc, rec = service(tmp_path, enabled=False)
    path = await new_session(svc)
    replies = await asyncio.gather(
        *(
            svc.session_append(
                p.SessionAppendParams(session=path, messages=[{"role": "user", "content": f"m{k}"}]),
                explicit_parent=False,
            )
            for k in range(50)
        )
    )
    ids = [r["ids"][0] for r in replies]
    s = svc.registry.get(path)
    assert s is not None
    assert s.session.path_ids()[-50:] == ids  # a chain, in request order
    assert [d["ids"] for d in rec.of(p.DID_CHANGE)][-50:] == [[i] for i in ids]
    await svc.close()


async def test_threshold_compacts_in_the_background(tmp_path: Path) -> None:
    svc, rec = service(tmp_path)
    path = await new_session(svc)
    await fill(svc, path, 20)  # usage crosses 8,000 = 10,000 - 2,000
    for _ in range(100):
        if any(s["state"] == "succeeded" for s in rec.of(p.COMPACTION_STATUS)):
            break
        await asyncio.sleep(0.05)
    states = [(s["state"], s["trigger"]) for s in rec.of(p.COMPACTION_STATUS)]
    assert states[:2] == [("running", "threshold"), ("succeeded", "threshold")]
    await svc.close()


async def test_cache_aware_scheduling_waits_for_the_cache_to_expire(tmp_path: Path) -> None:
    svc, rec = service(tmp_path)
    svc.config.prompt_cache_ttl_seconds = 1.0
    path = await new_session(svc)
    await fill(svc, path, 20)
    await asyncio.sleep(0.5)
    assert rec.of(p.COMPACTION_STATUS) == []  # not straight after the turn
    await fill(svc, path, 1, first=20)  # activity keeps the cache warm: the timer starts again
    await asyncio.sleep(0.6)
    assert rec.of(p.COMPACTION_STATUS) == []
    for _ in range(60):
        if any(s["state"] == "succeeded" for s in rec.of(p.COMPACTION_STATUS)):
            break
        await asyncio.sleep(0.05)
    assert [s["state"] for s in rec.of(p.COMPACTION_STATUS)][-1] == "succeeded"
    await svc.close()


class Gate:
    """A summariser that waits until released, so the test can act during a compaction."""

    name = "gate"

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def summarize(self, request: SummaryRequest, progress: Any = None) -> SummaryResult:
        self.entered.set()
        await self.release.wait()
        return SummaryResult("## Goal\n- gated", "gate", None, "model")


async def test_reads_during_a_compaction_see_the_state_before_it(tmp_path: Path, monkeypatch: Any) -> None:
    svc, _ = service(tmp_path, enabled=False)
    path = await new_session(svc)
    await fill(svc, path, 10)
    gate = Gate()
    monkeypatch.setattr("ctxd.compaction.engine.summarizer_for", lambda settings: gate)
    opened = svc.registry.get(path)
    assert opened is not None
    leaf_before = opened.session.leaf_id()
    task = asyncio.ensure_future(svc.compact(p.CompactParams(session=path)))
    await asyncio.wait_for(gate.entered.wait(), 10)
    during = await svc.context_build(p.ContextBuildParams(session=path, includeMessages=False))
    assert during["compactionId"] is None and during["leafId"] == leaf_before
    # The agent keeps going meanwhile: the compaction still attaches to the leaf it summarised.
    await fill(svc, path, 1)
    gate.release.set()
    out = await asyncio.wait_for(task, 10)
    written = opened.session.file.entry_by_id(out["entryId"])
    assert written["parentId"] == leaf_before
    await svc.close()


async def test_a_growing_claude_transcript_updates_live(tmp_path: Path) -> None:
    from conftest import reference

    from ctxd.service.watch import Watcher

    claude_root = tmp_path / "claude"
    (claude_root / "-proj").mkdir(parents=True)
    first = reference("claude", "incremental-turn-1.jsonl").read_bytes()
    second = reference("claude", "incremental-turn-2.jsonl").read_bytes()
    path = claude_root / "-proj" / "s.jsonl"
    path.write_bytes(first)
    rec = Recorder()
    config = Config(roots=[str(tmp_path / "pi")], transcript_roots=[str(claude_root)], watch=True)
    svc = Service(config, rec)
    opened = await svc.session_open(p.SessionParams(session=str(path)))
    watcher = Watcher(config.all_roots, svc.file_changed, step_ms=10)
    task = asyncio.ensure_future(watcher.run())
    await asyncio.sleep(0.3)  # the watcher is up
    with open(path, "ab") as f:
        f.write(second[len(first) :])
    for _ in range(200):
        changes = [c for c in rec.of(p.DID_CHANGE) if c["origin"] == "external" and c["ids"]]
        if changes:
            break
        await asyncio.sleep(0.02)
    assert changes and changes[0]["session"] == str(path)
    tree = await svc.session_tree(p.SessionTreeParams(session=str(path), collapse=0))
    assert tree["entries"] > opened["entries"] and any(r["id"] in changes[0]["ids"] for r in tree["rows"])
    with pytest.raises(Exception, match="read-only"):
        await svc.session_append(
            p.SessionAppendParams(session=str(path), messages=[{"role": "user", "content": "x"}]), explicit_parent=False
        )
    watcher.stop()
    await asyncio.wait_for(task, 5)
    await svc.close()


async def test_listing_uses_real_paths_and_runs_can_be_fetched(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    config = Config(roots=[str(link)], transcript_roots=[], watch=False)
    svc = Service(config, Recorder())
    created = await svc.session_create(p.SessionCreateParams(cwd="/proj"))
    await fill(svc, created["path"], 6)
    listed = await svc.session_list(p.SessionListParams())
    assert [s["path"] for s in listed["sessions"]] == [created["path"]]
    assert created["path"].startswith(str(real)) and created["readOnly"] is False and created["agent"] == "pi"
    tree = await svc.session_tree(p.SessionTreeParams(session=created["path"]))
    run = next(r for r in tree["rows"] if r.get("type") == "collapsed")
    rows = await svc.session_tree(
        p.SessionTreeParams(session=created["path"], fromId=run["firstId"], limit=run["count"])
    )
    assert rows["rows"][0]["id"] == run["firstId"] and rows["rows"][-1]["id"] == run["lastId"]
    assert len(rows["rows"]) == run["count"]
    await svc.close()
