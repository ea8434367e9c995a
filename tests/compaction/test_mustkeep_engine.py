"""Every summary the engine writes is checked against the fact sheet and patched: offline, a client's summary
through compact/willRun, and a model's through the fake OpenAI server (real HTTP). The ledger says what was
missing; the model is given the sheet up front; the goal survives a chain of compactions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.openai_server import FakeOpenAIServer, reply
from helpers.factories import assistant, tool_result, user, write

from ctxd.compaction.cut.plan import CompactionPlan
from ctxd.compaction.engine import HookDecision, compact, dry_run_with_facts
from ctxd.compaction.settings import CompactionSettings
from ctxd.compaction.summary import OfflineSummarizer
from ctxd.tree.session import Session

GOAL = "Port the billing service to Rust and keep the public API unchanged."
SETTINGS = CompactionSettings(keep_recent_tokens=2_000)


def work(parent: str | None, k: int, size: int = 3_000) -> list[dict[str, Any]]:
    """One turn: a request, a read, an edit, a test run that fails once then passes, an answer."""
    u = user(parent, f"Step {k}: port module billing/m{k}.rs. Never use unsafe code in m{k}.")
    a = assistant(u["id"], "", calls=[(f"r{k}", "read", {"path": f"src/billing/m{k}.py"})])
    r = tool_result(a["id"], f"r{k}", "x" * size)
    b = assistant(r["id"], "", calls=[(f"w{k}", "write", {"path": f"rust/billing/m{k}.rs", "content": "fn main(){}"})])
    w = tool_result(b["id"], f"w{k}", "Wrote it", name="write")
    c = assistant(w["id"], "", calls=[(f"t{k}", "bash", {"command": f"cargo test -p m{k} 2>&1 | tail -5"})])
    t = tool_result(c["id"], f"t{k}", f"error[E0425]: cannot find value `rate{k}`\n\nCommand exited with code 101")
    d = assistant(t["id"], "", calls=[(f"f{k}", "bash", {"command": f"cargo test -p m{k}"})])
    f = tool_result(d["id"], f"f{k}", "test result: ok. 3 passed")
    e = assistant(f["id"], f"Ported m{k}. I'll use serde instead of a hand-written parser because it is tested.")
    return [u, a, r, b, w, c, t, d, f, e]


def long_session(turns: int = 6) -> list[dict[str, Any]]:
    first = user(None, GOAL)
    ok = assistant(first["id"], "Starting with the first module.")
    entries = [first, ok]
    for k in range(turns):
        entries += work(entries[-1]["id"], k)
    return entries


def session_at(tmp_path: Path, entries: list[dict[str, Any]]) -> Session:
    return Session.open(write(tmp_path / "s.jsonl", entries))


def ledger(session: Session, entry_id: str) -> dict[str, Any]:
    return session.file.entry_by_id(entry_id)["details"]["ctxd"]  # type: ignore[no-any-return]


async def test_offline_summary_lacks_nothing_and_the_ledger_says_so(tmp_path: Path) -> None:
    s = session_at(tmp_path, long_session())
    out = await compact(s, SETTINGS, summarizer=OfflineSummarizer())
    must = ledger(s, out.entryId)["mustKeep"]
    assert must["facts"] > 10
    assert must["missing"] == 0 and must["patched"] == []
    assert "## Must keep" not in out.summary
    assert ledger(s, out.entryId)["goal"] == GOAL


async def test_a_clients_summary_that_missed_facts_is_patched_and_recorded(tmp_path: Path) -> None:
    s = session_at(tmp_path, long_session())

    async def thin(plan: CompactionPlan) -> HookDecision:
        return HookDecision(summary="## Goal\n- Port billing.\n\n## Progress\n- Some modules done.")

    out = await compact(s, SETTINGS, hook=thin)
    body, _, files = out.summary.partition("<read-files>")
    assert out.path == "hook" and body.startswith("## Goal\n- Port billing.")
    keep = body[body.index("## Must keep") :]
    assert f"- Goal: {GOAL}" in keep
    assert "rust/billing/m0.rs" in keep and "src/billing/m0.py" in keep  # named in the body, not only the lists
    assert "`cargo test -p m0` x2 (1 failed, last ok)" in keep  # compressed: distinct command, runs, outcome
    assert "Never use unsafe code in m0." in keep
    assert "cannot find value `rate0`" in keep
    assert files  # the file lists stay last, after the patch
    must = ledger(s, out.entryId)["mustKeep"]
    assert must["missing"] >= 10 and len(must["patched"]) == min(must["missing"], 60)
    assert {"kind": "goal", "text": GOAL} in [{"kind": f["kind"], "text": f["text"]} for f in must["patched"]]


async def test_the_goal_and_the_facts_survive_two_compactions(tmp_path: Path) -> None:
    entries = long_session(4)
    s = session_at(tmp_path, entries)
    first = await compact(s, SETTINGS, summarizer=OfflineSummarizer())
    more = [entries[-1]]
    parent = first.entryId
    for k in range(10, 14):
        turn = work(parent, k)
        more += turn
        parent = turn[-1]["id"]
    s.append([{k: v for k, v in e.items() if k not in ("id", "parentId")} for e in more[1:]])
    second = await compact(s, SETTINGS, summarizer=OfflineSummarizer())
    assert second.plan.previousCompactionId == first.entryId
    assert f"\n## Goal\n- {GOAL}" in second.summary  # the first request, not the latest range's
    assert ledger(s, second.entryId)["goal"] == GOAL
    assert ledger(s, second.entryId)["mustKeep"]["patched"] == []


def test_the_dry_run_shows_what_the_compaction_must_keep(tmp_path: Path) -> None:
    s = session_at(tmp_path, long_session())
    plan, sheet = dry_run_with_facts(s, SETTINGS)
    kinds = {f.kind for f in sheet.facts}
    assert {"goal", "constraint", "file-modified", "file-read", "command", "error"} <= kinds
    assert plan.messagesToSummarize  # the plan itself is unchanged


# --- through a model (the fake OpenAI server, real HTTP) -----------------------------------------------------


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(default_text="## Goal\n- Something about billing.") as fake:
        yield fake


async def test_a_models_summary_is_given_the_sheet_up_front_and_patched_with_what_it_left_out(
    tmp_path: Path, server: FakeOpenAIServer
) -> None:
    def answer(body: dict[str, Any], index: int) -> Any:
        prompt = body["messages"][1]["content"]
        if "<must-keep>" in prompt:  # the history; a split turn's prefix is summarised by a second call
            return reply("## Goal\n- Port billing to Rust.\n\n## Critical Context\n- rust/billing/m0.rs")
        return reply("## Original Request\nStep 5.")

    server.responder = answer
    s = session_at(tmp_path, long_session())
    settings = CompactionSettings(
        keep_recent_tokens=2_000, model="openai/fake", api_base=server.url, api_key="sk-test", max_attempts=1
    )
    out = await compact(s, settings)
    assert out.path == "model"
    prompts = [r.body["messages"][1]["content"] for r in server.requests]
    prompt = next(p for p in prompts if "<must-keep>" in p)
    sheet = prompt[prompt.index("<must-keep>") : prompt.index("</must-keep>")]
    assert f"Goal: {GOAL}" in sheet and "`cargo test -p m0` x2 (1 failed, last ok)" in sheet
    assert prompt.index("<must-keep>") < prompt.index("<conversation>")  # up front
    body = out.summary.split("<read-files>")[0]
    assert body.startswith("## Goal\n- Port billing to Rust.")
    keep = body[body.index("## Must keep") :]
    assert f"- Goal: {GOAL}" in keep and "src/billing/m1.py" in keep
    assert "rust/billing/m0.rs" not in keep  # the model kept that one itself
    must = ledger(s, out.entryId)["mustKeep"]
    assert must["missing"] > 0 and must["facts"] > must["missing"]
