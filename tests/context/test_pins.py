"""Pins: a pinned message is never summarised away. It is carried verbatim right after the summary, across
compactions, counted in the plan's estimatedTokensAfter and the context size, until unpinned; the pin entry
keeps the leaf where it was (for ctxd and, as the last line, harmlessly for pi)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conformance.pi_answers import oracle_missing, pi_answers
from helpers.factories import assistant, tool_result, user, write

from ctxd.compaction.engine import compact, dry_run
from ctxd.compaction.settings import CompactionSettings
from ctxd.compaction.summary import OfflineSummarizer
from ctxd.context.build import build_context, context_size
from ctxd.context.pins import PINNED_TYPE, pin_entry
from ctxd.context.view import project
from ctxd.errors import InvalidEntryError
from ctxd.tree.session import Session

SETTINGS = CompactionSettings(keep_recent_tokens=1_500)
PINNED = "The API key lives in VAULT_PATH=/secrets/prod; never print it. Keep this in mind all session."


def turns(parent: str | None, start: int, count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in range(start, start + count):
        u = user(parent, f"Request {k}: refactor module m{k} " + "x" * 1_500)
        a = assistant(u["id"], "", calls=[(f"c{k}", "read", {"path": f"src/m{k}.py"})])
        r = tool_result(a["id"], f"c{k}", "y" * 1_500)
        d = assistant(r["id"], f"Done with m{k}.")
        out += [u, a, r, d]
        parent = d["id"]
    return out


def fresh(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k not in ("id", "parentId")} for e in entries]


def pin(session: Session, entry_id: str, pinned: bool = True) -> str:
    (pin_id,) = session.append([pin_entry(session.file, entry_id, pinned)])
    return pin_id


def context_texts(session: Session) -> list[tuple[str, str]]:
    ctx = build_context(session.file, session.tree, estimates=session.estimates)
    out = []
    for m in ctx.messages:
        content = m.message.get("content") or m.message.get("summary") or ""
        text = content if isinstance(content, str) else " ".join(str(b.get("text", "")) for b in content)
        out.append((m.role, text))
    return out


@pytest.fixture
def session(tmp_path: Path) -> Session:
    first = user(None, PINNED)
    ok = assistant(first["id"], "Understood.")
    entries = [first, ok, *turns(ok["id"], 0, 6)]
    return Session.open(write(tmp_path / "s.jsonl", entries))


async def test_a_pinned_message_is_carried_after_the_summary_across_two_compactions(session: Session) -> None:
    target = session.path_ids()[0]
    leaf = session.leaf_id()
    pin(session, target)
    assert session.leaf_id() == leaf  # the pin entry stands for its parent as the leaf

    plan = dry_run(session, SETTINGS)
    assert target in plan.summarizeEntryIds  # summarised, and carried anyway
    first = await compact(session, SETTINGS, summarizer=OfflineSummarizer())
    texts = context_texts(session)
    assert texts[0][0] == "compactionSummary"
    assert texts[1] == ("user", PINNED)  # verbatim, right after the summary
    assert sum(1 for _, t in texts if t == PINNED) == 1

    ctx = build_context(session.file, session.tree, estimates=session.estimates)
    assert ctx.messages[1].entryId == target
    cold = context_size(session.file, session.tree, estimates={})
    assert cold.tokens == ctx.contextTokens  # the size counts the carried message

    session.append(fresh(turns(first.entryId, 10, 6)))
    second = await compact(session, SETTINGS, summarizer=OfflineSummarizer())
    assert second.plan.previousCompactionId == first.entryId
    texts = context_texts(session)
    assert texts[0][0] == "compactionSummary" and texts[1] == ("user", PINNED)  # still carried

    pin(session, target, pinned=False)
    texts = context_texts(session)
    assert all(t != PINNED for _, t in texts)  # unpinned: summarised away like the rest
    assert (
        context_size(session.file, session.tree, estimates=session.estimates).tokens
        == build_context(session.file, session.tree, estimates=session.estimates).contextTokens
    )


async def test_the_plan_counts_pinned_messages_in_estimated_tokens_after(session: Session) -> None:
    before = dry_run(session, SETTINGS).estimatedTokensAfter
    pin(session, session.path_ids()[0])
    after = dry_run(session, SETTINGS).estimatedTokensAfter
    assert after - before == -(-len(PINNED) // 4)  # the pinned message's estimate (ceil(chars / 4))
    out = await compact(session, SETTINGS, summarizer=OfflineSummarizer())
    ctx = build_context(session.file, session.tree, estimates=session.estimates)
    # What the plan estimated is what the context holds after the summary (the dry run adds an allowance
    # for a summary not written yet; the written one is measured).
    assert ctx.estimatedTokens == ctx.messages[0].tokens + out.plan.estimatedTokensAfter


async def test_pinned_tool_results_and_tool_calls_are_carried_without_breaking_pairs(session: Session) -> None:
    ids = session.path_ids()
    call_id, result_id = ids[3], ids[4]  # the first read call and its result
    pin(session, call_id)
    pin(session, result_id)
    await compact(session, SETTINGS, summarizer=OfflineSummarizer())
    ctx = build_context(session.file, session.tree, estimates=session.estimates)
    carried = [m for m in ctx.messages if m.entryId in (call_id, result_id)]
    assert [m.role for m in carried] == ["custom"]  # the call had no text: nothing of it is carried
    assert carried[0].message["customType"] == PINNED_TYPE
    assert "[Pinned result of the read call]" in carried[0].message["content"][0]["text"]
    assert not any(m.role == "toolResult" and m.entryId == result_id for m in ctx.messages)


def test_pins_show_in_the_tree_and_only_messages_can_be_pinned(session: Session) -> None:
    target = session.path_ids()[2]
    pin(session, target)
    rows, _ = project(session, collapse=0)
    pinned = [r for r in rows if getattr(r, "pinned", False)]
    assert [r.id for r in pinned] == [target]
    assert not any(getattr(r, "preview", "").startswith("[ctxd.pin]") for r in rows)  # bookkeeping is hidden
    leaf_rows = [r for r in rows if getattr(r, "isLeaf", False)]
    assert len(leaf_rows) == 1 and leaf_rows[0].id == session.leaf_id()
    pin_id = pin(session, target, pinned=False)
    with pytest.raises(InvalidEntryError):
        pin_entry(session.file, pin_id)


def test_cli_pin_and_unpin(session: Session) -> None:
    target = session.path_ids()[0]
    run = [sys.executable, "-m", "ctxd"]
    out = subprocess.run([*run, "pin", session.path, target, "--json"], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["pinned"] is True
    tree = subprocess.run([*run, "tree", session.path], capture_output=True, text=True, check=True).stdout
    assert "[pinned]" in tree
    out = subprocess.run([*run, "unpin", session.path, target], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"unpinned {target}"
    bad = subprocess.run([*run, "pin", session.path, "nope"], capture_output=True, text=True)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr


@pytest.mark.skipif(oracle_missing() is not None, reason=str(oracle_missing()))
async def test_pi_continues_from_a_pin_entry_with_the_same_context(session: Session) -> None:
    await compact(session, SETTINGS, summarizer=OfflineSummarizer())
    before = pi_answers([(session.path, 1_500)])[0]
    pin_id = pin(session, session.path_ids()[0])
    after = pi_answers([(session.path, 1_500)])[0]
    assert after["leaf"]["id"] == pin_id  # pi takes the last line as its leaf ...
    assert [m["entryId"] for m in after["messages"]] == [m["entryId"] for m in before["messages"]]  # ... harmlessly
