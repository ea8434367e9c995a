"""The context's composition (``ctxd.context.composition``): its parts add up to the context's
per-message estimates (the numbers ``context/build`` reports), over random histories; the kept
timeline equals a fresh walk; and the parts of hand-made messages."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from helpers.histories import rich_entry
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_live_context import OPS, _apply

from ctxd.context.build import build_context
from ctxd.context.composition import PARTS, composition, split_message
from ctxd.context.pins import pinned
from ctxd.context.tokens import estimate_tokens
from ctxd.store.create import create_session
from ctxd.tree.session import Session

RICH = ["assistant_thinking_call", "tool_result_image", "bash_execution", "user_image"]
ALL_OPS = [*OPS, *RICH, *RICH]


def _composition(s: Session) -> Any:
    return composition(s, window=10_000, threshold=8_000, reserve=2_000, top=5)


def _check(s: Session) -> None:
    got = _composition(s)
    fresh = build_context(s.file, s.tree)  # no kept state, no estimate cache
    per_message = [m.tokens for m in fresh.messages]
    assert sum(got.parts.values()) == sum(per_message) == fresh.estimatedTokens == got.estimatedTokens
    assert set(got.parts) == set(PARTS)
    assert all(v >= 0 for v in got.parts.values())
    assert sum(got.toolResultsByTool.values()) <= got.parts["toolResults"]
    assert got.contextTokens == fresh.contextTokens
    chosen = pinned(s.file)
    if not chosen:
        assert sum(got.toolResultsByTool.values()) == got.parts["toolResults"]
    # The heaviest entries: each one's tokens are its messages' in the context, heaviest first.
    by_entry: dict[tuple[str, int], int] = {}  # (id, line): an id may be duplicated
    for m in fresh.messages:
        by_entry[m.entryId, m.line] = by_entry.get((m.entryId, m.line), 0) + m.tokens
    assert [t.tokens for t in got.top] == sorted((t.tokens for t in got.top), reverse=True)
    for t in got.top:
        assert by_entry[t.entryId, t.line] == t.tokens
    if got.top:
        assert got.top[0].tokens == max(by_entry.values())
    # The timeline: its last turn is the context's size now; the kept walk equals a fresh one.
    if got.timeline and got.timeline[-1].kind == "turn":
        assert got.timeline[-1].tokens == got.contextTokens
    # What is kept with the session (the walk, the sums) equals a computation from scratch.
    s.derived.pop("timeline", None)
    s.derived.pop("composition", None)
    again = _composition(s)
    assert again.timeline == got.timeline and again.markers == got.markers
    assert (again.parts, again.toolResultsByTool, again.top) == (got.parts, got.toolResultsByTool, got.top)
    assert all(0 <= m.at < len(got.timeline) for m in got.markers)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=st.lists(st.tuples(st.sampled_from(ALL_OPS), st.integers(0, 400)), min_size=1, max_size=30))
@example(ops=[("user", 3), ("assistant_thinking_call", 9), ("tool_result_image", 5), ("compaction", 1), ("user", 4)])
@example(ops=[("user", 0), ("user", 1), ("pin", 0), ("assistant_usage", 2), ("compaction", 1), ("user", 4)])
@example(ops=[("system_tools", 4), ("user", 2), ("edit_replace", 1), ("bash_execution", 7), ("move_leaf", 1)])
def test_parts_add_up_to_the_per_message_estimates(ops: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as root:
        s = Session.open(create_session(root, "/w"))
        path = Path(s.path)
        waiting: list[str] = []
        for step, (op, n) in enumerate(ops):
            entry = rich_entry(op, n)
            if entry is not None:
                s.append([entry])
            else:
                s = _apply(s, path, op, n, step, waiting)
            _check(s)
        s.close()


def test_a_message_splits_by_part_and_adds_up() -> None:
    call = {"type": "toolCall", "id": "c", "name": "read", "arguments": {"path": "a.py"}}
    said = {
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": "t" * 9}, {"type": "text", "text": "hi"}, call],
    }
    split = split_message(said, estimate_tokens(said))
    assert [s[0] for s in split] == ["assistant", "thinking", "toolCalls"]
    assert sum(s[2] for s in split) == estimate_tokens(said)
    result = {
        "role": "toolResult",
        "toolName": "read",
        "content": [{"type": "text", "text": "x" * 40}, {"type": "image"}],
    }
    split = split_message(result, estimate_tokens(result))
    assert ("toolResults", "read", 10) in split and ("images", None, 1200) in split
    system = {"role": "system", "content": "p" * 8, "toolsAdded": [{"name": "t"}]}
    split = split_message(system, estimate_tokens(system))
    assert dict((s[0], s[2]) for s in split) == {"system": 2, "tools": 4}  # 8 + 14 characters: ceil(22 / 4) = 6


def test_an_overflow_left_behind_and_a_compaction_are_marked(tmp_path: Path) -> None:
    s = Session.open(create_session(str(tmp_path), "/w"))
    (asked,) = s.append([{"type": "message", "message": {"role": "user", "content": "x" * 400}}])
    error = {"role": "assistant", "content": [], "stopReason": "error", "errorMessage": "prompt is too long: 9 > 8"}
    (failed,) = s.append([{"type": "message", "message": error}])
    summary = {"type": "compaction", "summary": "s" * 40, "firstKeptEntryId": asked, "tokensBefore": 900}
    (compacted,) = s.append([summary], parent_id=asked)  # the overflow leaves the context
    (after,) = s.append([{"type": "message", "message": {"role": "user", "content": "y" * 8}}])
    got = _composition(s)
    kinds = [(m.kind, m.entryId) for m in got.markers]
    assert ("overflow", failed) in kinds and ("branch", asked) in kinds and ("compaction", compacted) in kinds
    mark = next(m for m in got.markers if m.kind == "compaction")
    assert mark.tokensBefore == 900 and mark.tokensAfter == 10 + 100  # the summary and the kept message
    assert got.timeline[mark.at].kind == "compaction" and got.timeline[-1].entryId == after


def test_a_branch_continued_from_the_leaf_marker_is_marked(tmp_path: Path) -> None:
    """Another process continues from the last line, which may be ctxd's leaf marker (pi does)."""
    s = Session.open(create_session(str(tmp_path), "/w"))
    (first,) = s.append([{"type": "message", "message": {"role": "user", "content": "one"}}])
    s.append([{"type": "message", "message": {"role": "user", "content": "two"}}])
    assert _composition(s).markers == []  # walked once: the kept walk must notice the new branch
    marker = s.move_leaf(first)
    assert _composition(s).markers == []  # a bare marker is no branch yet
    s.append([{"type": "message", "message": {"role": "user", "content": "other"}}], parent_id=marker)
    got = _composition(s)
    assert [(m.kind, m.entryId, m.detail) for m in got.markers] == [("branch", first, "1 other branch")]
