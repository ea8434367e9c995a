"""Property: after any compaction the context starts with the summary, keeps every kept message
in order, and no tool result lacks its call."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from helpers.factories import assistant, tool_result, user, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxd.compaction.cut.plan import NothingToCompact
from ctxd.compaction.engine import compact
from ctxd.compaction.settings import CompactionSettings
from ctxd.context.build import build_context
from ctxd.errors import CompactionError
from ctxd.tree.session import Session

turn = st.tuples(
    st.integers(min_value=1, max_value=3000),  # user text size
    st.lists(st.integers(min_value=0, max_value=6000), max_size=4),  # tool result sizes
    st.booleans(),  # ends with a final answer
)


def build(turns: list[tuple[int, list[int], bool]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    parent = None
    for k, (size, results, final) in enumerate(turns):
        u = user(parent, "u" * size)
        out.append(u)
        parent = u["id"]
        for j, rsize in enumerate(results):
            a = assistant(parent, "", calls=[(f"c{k}_{j}", "read", {"path": f"f{k}"})])
            r = tool_result(a["id"], f"c{k}_{j}", "r" * rsize)
            out += [a, r]
            parent = r["id"]
        if final:
            f = assistant(parent, "done " * 20)
            out.append(f)
            parent = f["id"]
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(turn, min_size=1, max_size=12), st.integers(min_value=1, max_value=8000))
def test_context_after_compaction(turns: list[tuple[int, list[int], bool]], keep: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        s = Session.open(write(Path(tmp) / "s.jsonl", build(turns)))
        before = build_context(s.file, s.tree)
        try:
            out = asyncio.run(compact(s, CompactionSettings(keep_recent_tokens=keep)))
        except (CompactionError, NothingToCompact):
            return
        after = build_context(s.file, s.tree)
        assert after.messages[0].role == "compactionSummary" and after.messages[0].entryId == out.entryId
        kept = [m.entryId for m in after.messages[1:]]
        start = [m.entryId for m in before.messages].index(out.firstKeptEntryId)
        assert kept == [m.entryId for m in before.messages[start:]]  # every kept message, in order
        calls: set[str] = set()
        for m in after.messages:
            if m.role == "assistant":
                calls |= {b["id"] for b in m.message["content"] if b.get("type") == "toolCall"}
            if m.role == "toolResult":
                assert m.message["toolCallId"] in calls
