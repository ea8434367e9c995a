"""The compaction engine: known answers, the written entry, fallbacks, cancellation, decisions,
branch summaries and tool-result truncation by replay."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, reference
from helpers.factories import assistant, chain, compaction, entry, tool_result, user, write

from ctxd.compaction.branching import branch
from ctxd.compaction.engine import HookDecision, compact, dry_run
from ctxd.compaction.overflow import decide
from ctxd.compaction.replay import truncate_by_replay
from ctxd.compaction.settings import CompactionSettings
from ctxd.compaction.summary import SummarizerError, SummaryRequest, SummaryResult
from ctxd.context.build import build_context
from ctxd.errors import CancelledError, CompactionError
from ctxd.options import read
from ctxd.tree.session import Session


class Scripted:
    """A summariser seam: each call takes the next behaviour ("ok", "fail", "huge", "slow")."""

    name = "scripted"

    def __init__(self, *behaviour: str, on_call: Any = None) -> None:
        self.behaviour = list(behaviour)
        self.requests: list[SummaryRequest] = []
        self.on_call = on_call

    async def summarize(self, request: SummaryRequest, progress: Any = None) -> SummaryResult:
        self.requests.append(request)
        if self.on_call:
            self.on_call()
        what = self.behaviour.pop(0) if self.behaviour else "ok"
        if what == "fail":
            raise SummarizerError("model said no")
        if what == "slow":
            await asyncio.sleep(30)
        text = "## Goal\n- " + ("x" * 200_000 if what == "huge" else "scripted summary")
        return SummaryResult(
            text, "scripted", "test-model", "model", {"prompt_tokens": 10, "completion_tokens": 5}, 0.01
        )


def conversation(n: int = 12, size: int = 4_000) -> list[dict[str, Any]]:
    """``n`` turns, each: user, assistant read call, its result, assistant answer."""
    out: list[dict[str, Any]] = []
    parent = None
    for k in range(n):
        u = user(parent, f"request {k}: please fix file{k}.py " + "u" * size)
        a = assistant(u["id"], "", calls=[(f"c{k}", "read", {"path": f"src/file{k}.py"})], total=1000 * (k + 1))
        r = tool_result(a["id"], f"c{k}", "r" * size)
        d = assistant(
            r["id"], f"done {k}", calls=[(f"e{k}", "edit", {"path": f"src/file{k}.py"})], total=1000 * k + 900
        )
        e = tool_result(d["id"], f"e{k}", "edited")
        f = assistant(e["id"], f"finished {k}", total=1000 * k + 950)
        out += [u, a, r, d, e, f]
        parent = f["id"]
    return out


def fresh(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries for Session.append: ids and parents are assigned there (chained)."""
    return [{k: v for k, v in e.items() if k not in ("id", "parentId")} for e in entries]


def session_at(tmp_path: Path, entries: list[dict[str, Any]]) -> Session:
    return Session.open(write(tmp_path / "s.jsonl", entries))


SMALL = CompactionSettings(keep_recent_tokens=3_000)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("before-compaction.jsonl", (948, True, 941, 383, 7, 180_820)),
        ("large-session.jsonl", (839, True, 836, 730, 3, 177_657)),
    ],
)
def test_dry_run_known_answers_through_the_cli(tmp_path: Path, name: str, expected: tuple[Any, ...]) -> None:
    copy = tmp_path / name
    shutil.copyfile(reference("pi", name), copy)
    before = copy.read_bytes()
    out = subprocess.run(
        [sys.executable, "-m", "ctxd", "compact", str(copy), "--dry-run", "--json", "--keep-recent-tokens", "20000"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    keys = [
        "firstKeptLine",
        "isSplitTurn",
        "turnStartLine",
        "messagesToSummarize",
        "turnPrefixMessages",
        "tokensBefore",
    ]
    assert tuple(plan[k] for k in keys) == expected
    assert plan["estimatedTokensAfter"] < plan["tokensBefore"] and isinstance(plan["firstKeptEntryId"], str)
    assert copy.read_bytes() == before  # a dry run writes nothing


async def test_compaction_entry_child_of_leaf_with_ledger(tmp_path: Path) -> None:
    s = session_at(tmp_path, conversation())
    leaf = s.leaf_id()
    out = await compact(s, SMALL, summarizer=Scripted("ok"), trigger="manual", instructions="focus on tests")
    written = s.file.entry_by_id(out.entryId)
    assert written["parentId"] == leaf and s.leaf_id() == out.entryId
    assert written["firstKeptEntryId"] == out.firstKeptEntryId and written["tokensBefore"] == out.tokensBefore
    assert written["summary"].startswith("## Goal") and "<modified-files>\nsrc/file0.py" in written["summary"]
    ledger = written["details"]["ctxd"]
    assert ledger["trigger"] == "manual" and ledger["path"] == "model" and ledger["model"] == "test-model"
    assert ledger["usage"] == {"prompt_tokens": 10, "completion_tokens": 5} and ledger["cost"] == 0.01
    assert isinstance(ledger["durationMs"], int) and ledger["instructions"] == "focus on tests"
    assert "src/file0.py" in written["details"]["modifiedFiles"]
    ctx = build_context(s.file, s.tree, estimates=s.estimates)
    assert ctx.messages[0].role == "compactionSummary" and ctx.messages[1].entryId == out.firstKeptEntryId
    assert out.tokensAfter < out.tokensBefore


async def test_entry_attaches_to_the_summarised_leaf_even_if_the_leaf_moves(tmp_path: Path) -> None:
    s = session_at(tmp_path, conversation())
    leaf = s.leaf_id()
    other = s.file.heads[3].id

    def agent_keeps_going() -> None:
        s.move_leaf(other)
        s.append([{"type": "message", "message": {"role": "user", "content": "meanwhile"}}])

    out = await compact(s, SMALL, summarizer=Scripted("ok", on_call=agent_keeps_going))
    assert s.file.entry_by_id(out.entryId)["parentId"] == leaf  # not the new leaf (pi #9178)


async def test_messages_between_compactions_are_not_lost(tmp_path: Path) -> None:
    entries = conversation()
    s = session_at(tmp_path, entries)
    first = await compact(s, SMALL, summarizer=Scripted("ok"))
    kept_before = s.file.line_of(first.firstKeptEntryId)
    s.append(fresh(conversation(3)), parent_id=first.entryId)
    plan = dry_run(s, SMALL)
    # The second boundary starts at the first compaction's firstKeptEntryId (pi #2608).
    assert plan.summarizeEntryIds[0] == first.firstKeptEntryId
    assert plan.previousSummary and plan.previousSummary.startswith("## Goal")
    assert s.file.line_of(plan.firstKeptEntryId) > kept_before


async def test_failing_model_falls_back_to_pruned_input(tmp_path: Path) -> None:
    s = session_at(tmp_path, conversation())
    scripted = Scripted("fail", "ok")
    out = await compact(s, SMALL, summarizer=scripted)
    assert out.path == "fallback-prune" and out.failures == ["scripted: model said no"]
    pruned = scripted.requests[1].messages
    assert all(b.get("type") != "thinking" for m in pruned for b in (m.get("content") or []) if isinstance(b, dict))


async def test_failing_model_twice_keeps_the_last_turns(tmp_path: Path) -> None:
    s = session_at(tmp_path, conversation())
    settings = CompactionSettings(keep_recent_tokens=12_000, keep_last_turns=2)
    out = await compact(s, settings, summarizer=Scripted("fail", "fail"))
    assert out.path == "fallback-keep-last-turns" and len(out.failures) == 2
    written = s.file.entry_by_id(out.entryId)
    users = [m for m in build_context(s.file, s.tree).messages if m.role == "user"]
    assert len(users) == 2 and written["summary"].startswith("## State now") and "\n## Goal\n" in written["summary"]
    assert written["details"]["ctxd"]["summarizer"] == "offline"


async def test_oversized_summary_keeps_the_last_turns(tmp_path: Path) -> None:
    s = session_at(tmp_path, conversation())
    out = await compact(
        s, CompactionSettings(keep_recent_tokens=3_000, max_output_tokens=1_000), summarizer=Scripted("huge")
    )
    assert out.path == "fallback-keep-last-turns"
    assert any("larger than the target" in f for f in out.failures)


async def test_cancellation_and_failures_write_nothing(tmp_path: Path) -> None:
    s = session_at(tmp_path, conversation())
    before = Path(s.path).read_bytes()
    task = asyncio.ensure_future(compact(s, SMALL, summarizer=Scripted("slow")))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    async def refuse(plan: Any) -> HookDecision:
        return HookDecision(cancel=True)

    with pytest.raises(CancelledError):
        await compact(s, SMALL, summarizer=Scripted("ok"), hook=refuse)
    (tmp_path / "t").mkdir()
    tiny = session_at(tmp_path / "t", chain(user))
    with pytest.raises(CompactionError, match="nothing to compact"):
        await compact(tiny, SMALL, summarizer=Scripted("ok"))
    assert Path(s.path).read_bytes() == before


async def test_hook_can_supply_the_summary(tmp_path: Path) -> None:
    s = session_at(tmp_path, conversation())

    async def mine(plan: Any) -> HookDecision:
        assert plan.messagesToSummarize
        return HookDecision(summary="MY SUMMARY")

    scripted = Scripted("ok")
    out = await compact(s, SMALL, summarizer=scripted, hook=mine)
    assert out.path == "hook" and out.summary.startswith("MY SUMMARY") and not scripted.requests


def test_decisions_disabled_aborted_overflow_threshold() -> None:
    on = CompactionSettings()
    off = CompactionSettings(enabled=False)
    overflow = {
        "role": "assistant",
        "stopReason": "error",
        "errorMessage": "prompt is too long: 210000 tokens > 200000",
    }
    big = {"role": "assistant", "stopReason": "stop"}
    kw = {"last_id": "e", "last_parent": "p", "window": 200_000}
    assert decide(overflow, context_tokens=0, settings=off, **kw).trigger is None  # type: ignore[arg-type]
    assert decide(big, context_tokens=199_000, settings=off, **kw).trigger is None  # type: ignore[arg-type]
    d = decide(overflow, context_tokens=0, settings=on, **kw)  # type: ignore[arg-type]
    assert (d.trigger, d.retry, d.leafId) == ("overflow", True, "p")  # the error leaves the context
    aborted = {"role": "assistant", "stopReason": "aborted"}
    assert decide(aborted, context_tokens=199_000, settings=on, **kw).trigger is None  # type: ignore[arg-type]
    other_error = {"role": "assistant", "stopReason": "error", "errorMessage": "overloaded"}
    assert decide(other_error, context_tokens=199_000, settings=on, **kw).trigger is None  # type: ignore[arg-type]
    assert decide(big, context_tokens=183_617, settings=on, **kw).trigger == "threshold"  # type: ignore[arg-type]
    assert decide(big, context_tokens=183_616, settings=on, **kw).trigger is None  # type: ignore[arg-type]
    pct = CompactionSettings(trigger_percent=0.75)
    assert decide(big, context_tokens=150_001, settings=pct, **kw).trigger == "threshold"  # type: ignore[arg-type]


async def test_branch_with_summary(tmp_path: Path) -> None:
    entries = conversation(4)
    s = session_at(tmp_path, entries)
    old_leaf = s.leaf_id()
    target = entries[5]["id"]  # end of the first turn
    out = await branch(s, target, summarize=True, summarizer=Scripted("ok"))
    written = s.file.entry_by_id(out.summaryEntryId or "")
    assert written["type"] == "branch_summary" and written["fromId"] == old_leaf and written["parentId"] == target
    assert "src/file3.py" in written["details"]["modifiedFiles"] and s.leaf_id() == out.summaryEntryId
    ctx = build_context(s.file, s.tree)
    assert ctx.messages[-1].role == "branchSummary"
    plain = await branch(s, entries[0]["id"])
    assert plain.summaryEntryId is None and Session.open(s.path).leaf_id() == entries[0]["id"]


def test_truncation_by_replay_keeps_originals(tmp_path: Path) -> None:
    big = "line\n" * 40_000
    u = user(None, "show me the log")
    a = assistant(u["id"], "", calls=[("c1", "bash", {"command": "cat log"})], total=90_000)
    r = tool_result(a["id"], "c1", big, name="bash")
    lab = entry("label", r["id"], targetId=a["id"], label="the call")
    f = assistant(lab["id"], "the log is long", total=95_000)
    s = session_at(tmp_path, [u, a, r, lab, f])
    original = Path(s.path).read_text().splitlines()
    out = truncate_by_replay(s, 10_000)
    assert out.truncated == [r["id"]] and out.replayed == 3
    assert Path(s.path).read_text().splitlines()[: len(original)] == original
    ctx = build_context(s.file, s.tree)
    text = ctx.messages[2].message["content"][0]["text"]
    assert len(text) < 13_000 and "ctxd truncated this tool result" in text
    assert [m.role for m in ctx.messages] == ["user", "assistant", "toolResult", "assistant"]
    assert out.tokensAfter < out.tokensBefore
    again = truncate_by_replay(s, 10_000)
    assert again.truncated == [] and again.replayed == 0


async def test_compaction_of_a_session_with_a_previous_compaction(tmp_path: Path) -> None:
    entries = conversation()
    c = compaction(entries[-1]["id"], entries[30]["id"], "## Goal\n- older goal")
    s = session_at(tmp_path, [*entries, c])
    s.append(fresh(conversation(4)))
    scripted = Scripted("ok")
    await compact(s, SMALL, summarizer=scripted)
    assert scripted.requests[0].previous_summary == "## Goal\n- older goal"


async def test_litellm_path_prompt_carries_previous_summary_files_and_instructions(tmp_path: Path) -> None:
    from fakes.openai_server import FakeOpenAIServer, reply, server_error

    entries = conversation()
    c = compaction(
        entries[-1]["id"], entries[30]["id"], "## Goal\n- older goal", details={"readFiles": ["docs/old.md"]}
    )
    s = session_at(tmp_path, [*entries, c])
    s.append(fresh(conversation(4)))
    with FakeOpenAIServer() as fake:
        fake.script(reply("## Goal\n- from the model"), reply("## Goal\n- from the model"))
        settings = CompactionSettings(
            keep_recent_tokens=3_000, model="openai/test", api_base=fake.url, api_key="sk-test", max_attempts=1
        )
        out = await compact(s, settings, instructions="KEEP THE TEST NAMES")
        # A split turn makes a second, concurrent request: find the history one.
        history = [p for p in fake.prompts if "<previous-summary>" in p]
        assert len(history) == 1 and len(fake.prompts) == 2
        prompt = history[0]
        assert "older goal" in prompt and "KEEP THE TEST NAMES" in prompt
        assert "<read-files>" in prompt and "docs/old.md" in prompt and "src/file0.py" in prompt
        assert out.path == "model" and out.summary.startswith("## Goal\n- from the model")
        # Every failure takes a fallback and leaves no partial entry.
        s.append(fresh(conversation(8)))
        size = Path(s.path).stat().st_size
        fake.script(server_error(), server_error(), server_error(), server_error())
        failed = await compact(s, settings)
        assert failed.path == "fallback-keep-last-turns" and len(failed.failures) == 2
        lines = Path(s.path).read_bytes()[size:].splitlines()
        assert len(lines) == 1 and json.loads(lines[0])["id"] == failed.entryId


async def test_tokens_after_is_recorded_and_matches_the_new_context(tmp_path: Path) -> None:
    s = session_at(tmp_path, conversation())
    out = await compact(s, SMALL, summarizer=Scripted("ok"))
    written = s.file.entry_by_id(out.entryId)
    ctx = build_context(s.file, s.tree)
    assert written["details"]["ctxd"]["tokensAfter"] == out.tokensAfter == ctx.estimatedTokens == ctx.contextTokens


async def test_the_compaction_carries_the_prompt_state_and_tokens_after_counts_it(tmp_path: Path) -> None:
    sys_msgs = [
        entry("message", None, message={"role": "system", "content": "be terse", "toolsAdded": [{"name": "grep"}]}),
        entry("message", None, message={"role": "system", "content": "", "sections": {"tone": "calm"}}),
    ]
    turns = conversation()
    turns[0]["parentId"], sys_msgs[1]["parentId"] = sys_msgs[1]["id"], sys_msgs[0]["id"]
    turns.insert(30, entry("message", turns[29]["id"], message={"role": "system", "content": "late patch"}))
    turns[31]["parentId"] = turns[30]["id"]
    s = session_at(tmp_path, [*sys_msgs, *turns])
    out = await compact(s, SMALL, summarizer=Scripted("ok"))
    written = s.file.entry_by_id(out.entryId)
    assert written["systemMessage"]["content"] == "be terse\n\nlate patch"
    assert written["systemMessage"]["sections"] == {"tone": "calm"}
    assert written["systemMessage"]["toolsAdded"] == [{"name": "grep"}]
    ctx = build_context(s.file, s.tree)
    assert [m.role for m in ctx.messages[:2]] == ["system", "compactionSummary"]
    assert "system" not in [m.role for m in ctx.messages[2:]]
    assert written["details"]["ctxd"]["tokensAfter"] == out.tokensAfter == ctx.contextTokens


def test_invalid_settings_are_reported_and_defaulted() -> None:
    s, problems = read(CompactionSettings, {"reserveTokens": -5, "maxAttempts": 0, "keepRecentTokens": "x"}, source="t")
    assert (s.reserve_tokens, s.max_attempts, s.keep_recent_tokens) == (16_384, 2, 20_000)
    assert [p.path for p in problems] == ["reserveTokens", "keepRecentTokens", "maxAttempts"]
    assert all(p.text.startswith("expected ") for p in problems)


async def test_an_offline_summary_makes_the_context_smaller(tmp_path: Path) -> None:
    words = " ".join(f"word{j}" for j in range(200))
    turns = [{"type": "message", "message": {"role": "user", "content": words}} for _ in range(6)]
    s = session_at(tmp_path, [])
    for t in turns:
        s.append(
            [t, {"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": words}]}}]
        )
    out = await compact(s, CompactionSettings(keep_recent_tokens=500))
    assert out.path == "offline" and out.tokensAfter < out.tokensBefore


async def test_the_offline_summary_takes_at_most_its_setting_and_never_more_than_the_reserve(tmp_path: Path) -> None:
    """The offline summary's size limit is ``summaryMaxTokens`` (5,000 by default, what the agents' own summaries
    take), at most ``reserveTokens``; the file lists the engine appends count against it."""
    assert CompactionSettings().summary_limit() == 5_000
    assert CompactionSettings(summary_max_tokens=9_000, reserve_tokens=3_000).summary_limit() == 3_000
    settings, problems = read(CompactionSettings, {"summaryMaxTokens": 0}, source="t")
    assert settings.summary_max_tokens == 5_000 and problems
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    big = await compact(session_at(tmp_path / "a", conversation(40, 8_000)), CompactionSettings(keep_recent_tokens=500))
    small = await compact(
        session_at(tmp_path / "b", conversation(40, 8_000)),
        CompactionSettings(keep_recent_tokens=500, summary_max_tokens=1_200),
    )
    assert big.path == small.path == "offline"
    assert len(small.summary) <= 4 * 1_200 + 600 < len(big.summary)  # within the limit (and a must-keep patch)
    assert len(big.summary) <= 4 * 5_000 + 600
