"""The summariser is told where each message it summarises lies (issue 28, item 7): ``SummaryRequest.entry_ids``
and ``entry_lines`` (and the turn prefix's), parallel to the messages, from the compaction plan and the session
file, so a summary can name the entries (anchors ``history/expand`` takes). The rendering is the summariser's."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from conftest import reference
from helpers.factories import assistant, tool_result, user, write

from ctxd.compaction.engine import compact
from ctxd.compaction.external import Preparation, summarize_preparation
from ctxd.compaction.settings import CompactionSettings
from ctxd.compaction.summary import OfflineSummarizer, SummarizerError, SummaryRequest, SummaryResult
from ctxd.tree.session import Session


class Recording:
    name = "recording"

    def __init__(self, fail: bool = False) -> None:
        self.requests: list[SummaryRequest] = []
        self.fail = fail

    async def summarize(self, request: SummaryRequest, progress: Any = None) -> SummaryResult:
        self.requests.append(request)
        if self.fail:
            raise SummarizerError("no")
        return SummaryResult("## State now\n- Next step: go on.", "recording", None, "model")


def turns(n: int, size: int = 3_000) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    parent = None
    for k in range(n):
        u = user(parent, f"request {k} " + "u" * size)
        a = assistant(u["id"], "", calls=[(f"c{k}", "read", {"path": f"f{k}.py"})])
        r = tool_result(a["id"], f"c{k}", "r" * size)
        d = assistant(r["id"], f"done {k}")
        out += [u, a, r, d]
        parent = d["id"]
    return out


def where(session: Session, ids: list[str]) -> list[int]:
    return [session.file.lines[session.file.index[i]] for i in ids]


async def test_a_session_compaction_tells_the_summariser_each_messages_entry_and_line(tmp_path: Path) -> None:
    session = Session.open(write(tmp_path / "s.jsonl", turns(8)))
    recording = Recording()
    out = await compact(session, CompactionSettings(keep_recent_tokens=2_000), summarizer=recording)
    (request,) = recording.requests
    plan = out.plan
    assert plan.summarizeEntryIds and len(request.entry_ids) == len(request.messages)
    assert request.entry_ids == plan.summarizeEntryIds
    assert request.entry_lines == where(session, plan.summarizeEntryIds)
    assert request.entry_lines[0] == 2  # the first entry, after the header
    assert request.turn_prefix_entry_ids == plan.turnPrefixEntryIds
    assert request.turn_prefix_entry_lines == where(session, plan.turnPrefixEntryIds)


async def test_a_pi_v1_session_gives_derived_ids_and_the_lines_expand_takes(tmp_path: Path) -> None:
    copy = tmp_path / "v1.jsonl"
    shutil.copyfile(reference("pi", "before-compaction.jsonl"), copy)
    session = Session.open(str(copy))
    recording = Recording()
    await compact(session, CompactionSettings(keep_recent_tokens=20_000), summarizer=recording)
    request = recording.requests[0]
    assert len(request.entry_lines) == len(request.messages) > 100
    assert request.entry_lines == sorted(request.entry_lines) and all(n > 1 for n in request.entry_lines)
    assert request.entry_lines == where(session, request.entry_ids)


async def test_the_offline_fallback_gets_them_too(tmp_path: Path, monkeypatch: Any) -> None:
    session = Session.open(write(tmp_path / "s.jsonl", turns(8)))
    seen: list[SummaryRequest] = []
    offline = OfflineSummarizer.summarize

    async def spy(self: OfflineSummarizer, request: SummaryRequest, progress: Any = None) -> SummaryResult:
        seen.append(request)
        return await offline(self, request, progress)

    monkeypatch.setattr(OfflineSummarizer, "summarize", spy)
    out = await compact(session, CompactionSettings(keep_recent_tokens=2_000), summarizer=Recording(fail=True))
    assert seen and out.path.startswith("fallback")
    last = seen[-1]
    assert last.entry_ids and len(last.entry_ids) == len(last.messages) == len(last.entry_lines)
    assert last.entry_lines == where(session, last.entry_ids)


async def test_an_agents_compaction_passes_the_ids_it_sent(tmp_path: Path) -> None:
    """pi's extension sends each message's entry id (``compact/summarize``); lines are unknown there (0)."""
    entries = turns(3)
    messages = [e["message"] for e in entries]
    recording = Recording()
    prep = Preparation(messages=messages, entry_ids=[e["id"] for e in entries])
    await summarize_preparation(prep, CompactionSettings(), trigger="manual", summarizer=recording)
    (request,) = recording.requests
    assert request.entry_ids == [e["id"] for e in entries]
    assert request.entry_lines == [0] * len(entries)
