"""The kept context (``ctxd.context.live``) always equals a full rebuild: after appends, leaf moves
(branches), compactions, context edits, reloads, truncations, another writer's appends, late parents
and duplicate ids, in any order; its size equals ``context_size``; its unchanged prefix is the
context at the earlier leaf."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import broken
from helpers.factories import assistant, chain, compaction, context_edit, header, tool_result, user, write
from helpers.histories import history_entry
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ctxd.compaction.cut.plan import NothingToCompact, plan_compaction
from ctxd.context.build import build_context, context_size
from ctxd.context.live import live_context, size_of
from ctxd.context.pins import pin_entry
from ctxd.errors import InvalidEntryError
from ctxd.store.session_file import SessionFile
from ctxd.tree import session as session_module
from ctxd.tree.session import Session


@pytest.fixture
def tiny_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every session keeps its index and lets its heads go (the thresholds are for big files)."""
    monkeypatch.setattr(session_module, "INDEX_MIN_ENTRIES", 1)
    monkeypatch.setattr(session_module, "RELEASE_AT", 1)


OPS = [
    "user",
    "tool_loop",
    "assistant_usage",
    "assistant_zero_usage",
    "assistant_aborted",
    "assistant_no_usage",
    "system",
    "system_tools",
    "compaction",
    "compaction_system",
    "edit_replace",
    "edit_hide",
    "branch_summary",
    "empty_branch_summary",
    "custom_message",
    "label",
    "move_leaf",
    "move_leaf",
    "external",
    "reload",
    "truncate",
    "orphan",
    "parent_arrives",
    "duplicate_id",
    "duplicate_first_kept",
    "bad_lines",
    "reopen",
    "pin",
    "pin",
    "unpin",
]


def _tool_loop(n: int) -> list[dict[str, Any]]:
    call = {"type": "toolCall", "id": f"c{n}", "name": "edit" if n % 2 else "read", "arguments": {"path": f"f{n}.py"}}
    usage = {"input": 2000 + n, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2005 + n}
    said = {"role": "assistant", "content": [call], "stopReason": "toolUse", "usage": usage, "timestamp": 1}
    result = {"role": "toolResult", "toolCallId": f"c{n}", "toolName": "read", "content": "y" * n, "timestamp": 1}
    return [{"type": "message", "message": said}, {"type": "message", "message": result}]


def _raw_lines(path: Path, entries: list[dict[str, Any]]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        for e in entries:
            f.write(json.dumps({"timestamp": "2026-01-01T00:00:00.000Z", **e}) + "\n")


def _apply(s: Session, path: Path, op: str, n: int, step: int, waiting: list[str]) -> Session:
    """Apply ``op``; the session to go on with (another one after a reopen)."""
    ids = s.path_ids()
    leaf = s.leaf_id()
    if op == "move_leaf":
        if ids:
            s.move_leaf(ids[n % len(ids)])
    elif op == "tool_loop":
        s.append(_tool_loop(n))
    elif op == "external":
        other = SessionFile.open(str(path))
        other.append([{"type": "message", "message": {"role": "user", "content": f"from another writer {n}"}}])
        other.close()
        s.refresh()
    elif op == "reload":
        data = path.read_bytes()
        spare = path.with_suffix(".new")
        spare.write_bytes(data)
        os.replace(spare, path)  # a new inode: the session reloads
        s.refresh()
    elif op == "truncate":
        lines = path.read_bytes().split(b"\n")
        keep = max(1, len(lines) - 1 - (n % 4) - 1)
        with open(path, "r+b") as f:
            f.truncate(sum(len(x) + 1 for x in lines[:keep]))
        s.refresh()
    elif op == "orphan":  # its parent is written later (parent_arrives): the tree re-links it then
        late = f"late{step:04d}"
        waiting.append(late)
        early = {"role": "user", "content": "early " + "z" * n}
        _raw_lines(path, [{"type": "message", "id": f"kid{step:04d}", "parentId": late, "message": early}])
        s.refresh()
    elif op == "parent_arrives":
        if waiting and len(s.file):
            late = waiting.pop(0)
            message = {"role": "user", "content": "late"}
            parent = s.file.heads[0].id  # the first entry: not the orphan (unless it is first)
            _raw_lines(path, [{"type": "message", "id": late, "parentId": parent, "message": message}])
            s.refresh()
            if f"kid{late[4:]}" in s.file.index:  # unless a truncation took it
                s.move_leaf(f"kid{late[4:]}")
    elif op == "bad_lines":  # not JSON, two objects on one line, too deep, not UTF-8: served as the store can
        said = {"type": "message", "parentId": leaf, "timestamp": "2026-01-01T00:00:00.000Z"}
        one = {**said, "id": f"two{step:04d}a", "message": {"role": "user", "content": "first of two"}}
        two = {**said, "id": f"two{step:04d}b", "message": {"role": "user", "content": "second of two"}}
        deep = {**said, "id": f"deep{step:04d}", "message": {"role": "user", "content": "deep"}}
        odd = {**said, "id": f"odd{step:04d}", "message": {"role": "user", "content": "caf"}}
        with open(path, "ab") as f:
            f.write(b"{not json\n" + (json.dumps(one) + json.dumps(two)).encode() + b"\n")
            f.write(broken.nested(deep, 300 + n) + broken.non_utf8(odd))
        s.refresh()
    elif op in ("duplicate_id", "duplicate_first_kept"):
        target = None
        if op == "duplicate_id" and ids:
            target = ids[n % len(ids)]
        elif op == "duplicate_first_kept":
            comps = [i for i, h in enumerate(s.file.heads) if h.type == "compaction" and h.firstKeptEntryId]
            target = s.file.heads[comps[-1]].firstKeptEntryId if comps else None
        if target is not None:
            dup = {"role": "user", "content": "same id again"}
            _raw_lines(path, [{"type": "message", "id": target, "parentId": leaf, "message": dup}])
            s.refresh()
    elif op in ("pin", "unpin"):  # carried after a compaction's summary (ctxd.context.pins)
        if ids:
            try:
                entry = pin_entry(s.file, ids[n % len(ids)], op == "pin")
            except InvalidEntryError:
                return s
            s.append([entry])
    elif op == "reopen":  # from the persistent index (heads let go), then equal to a full read
        s.close()
        s = Session.open(str(path))
        with _no_cache():
            fresh = Session.open(str(path))
        assert s.path_ids() == fresh.path_ids()
        # Problems the closed session found reading bodies come back with the index (a full read
        # finds them only when it reads those bodies, and lists them after the tree's).
        kept, read = build_context(s.file, s.tree).to_json(), build_context(fresh.file, fresh.tree).to_json()
        assert set(map(str, read.pop("diagnostics"))) <= set(map(str, kept.pop("diagnostics")))
        assert kept == read
    else:
        entry = history_entry(op, n, ids)
        if entry is not None:
            s.append([entry])
    return s


@contextlib.contextmanager
def _no_cache() -> Iterator[None]:
    os.environ["CTXD_INDEX_CACHE"] = "0"
    try:
        yield
    finally:
        del os.environ["CTXD_INDEX_CACHE"]


def _plan(s: Session, keep: int, leaf: str | None = None) -> Any:
    try:
        plan = plan_compaction(s, keep_recent_tokens=keep, leaf_id=leaf)
    except NothingToCompact as exc:
        return str(exc)
    return {**plan.to_json(with_messages=True), "systemMessage": plan.systemMessage}


def _check(s: Session, n: int) -> None:
    live = live_context(s)
    got = live.context()
    fresh = build_context(s.file, s.tree)  # no estimate cache: computed from scratch
    assert got.to_json() == fresh.to_json()
    size = live.size()
    reference = context_size(s.file, s.tree, estimates={})
    assert (size.leafId, size.tokens, size.last) == (reference.leafId, reference.tokens, reference.last)
    assert size_of(s).tokens == fresh.contextTokens
    ids = s.path_ids()
    if len(ids) > 1:
        other = ids[n % len(ids)]
        assert live.context(other).to_json() == build_context(s.file, s.tree, other).to_json()
        # The context at an earlier leaf is a prefix of this one, when the live view says so.
        prefix = live.unchanged_prefix(other)
        at_other = build_context(s.file, s.tree, other).to_json()["messages"]
        now = live.context().to_json()["messages"]
        if prefix:
            assert prefix == len(at_other) and now[:prefix] == at_other
    # The plan reads the kept context (and carries file operations from plan to plan): the same as
    # a plan from a context built afresh.
    keep = 1 + n % 300
    for leaf in [None, ids[(n * 7) % len(ids)]] if ids else [None]:
        planned = _plan(s, keep, leaf)
        kept = s.derived.pop("context")
        assert planned == _plan(s, keep, leaf)
        s.derived["context"] = kept


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 400)), min_size=1, max_size=30))
@example(ops=[("user", 1), ("orphan", 0), ("parent_arrives", 0)])  # the kept path gains a parent
@example(ops=[("user", 0), ("user", 0), ("duplicate_id", 0), ("reopen", 0)])  # no tree kept: read again
@example(ops=[("user", 0), ("user", 1), ("pin", 0), ("assistant_usage", 2), ("compaction", 1), ("user", 4)])
@example(ops=[("user", 0), ("tool_loop", 1), ("compaction", 1), ("pin", 1), ("unpin", 1), ("edit_hide", 0)])
@example(ops=[("user", 9), ("user", 20), ("user", 30), ("compaction", 1), ("pin", 0), ("edit_hide", 3), ("user", 5)])
@example(ops=[("user", 0), ("orphan", 0), ("bad_lines", 0), ("reopen", 0), ("parent_arrives", 0), ("reopen", 0)])
@example(ops=[("user", 1), ("user", 2), ("compaction", 1), ("duplicate_first_kept", 0)])  # its id names another entry
@example(ops=[("user", 1), ("tool_loop", 5), ("edit_hide", 1), ("move_leaf", 1), ("move_leaf", 3)])
@example(ops=[("user", 1), ("system", 3), ("assistant_usage", 2), ("compaction_system", 0), ("reload", 0)])
def test_kept_context_equals_a_full_rebuild(ops: list[tuple[str, int]], tiny_cache: None) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.jsonl"
        path.write_text(json.dumps(header()) + "\n", encoding="utf-8")
        s = Session.open(str(path))
        live_context(s).context()
        waiting: list[str] = []
        for step, (op, n) in enumerate(ops):
            s = _apply(s, path, op, n, step, waiting)
            _check(s, n)


def test_append_extends_without_rebuilding(tmp_path: Path) -> None:
    e = chain(user, assistant, user)
    s = Session.open(write(tmp_path / "s.jsonl", e))
    live = live_context(s)
    first = live.context()
    assert live.rebuilds == 1
    for k in range(20):
        s.append(_tool_loop(k))
        ctx = live.context()
        assert ctx.to_json() == build_context(s.file, s.tree).to_json()
    assert live.rebuilds == 1
    assert len(ctx.messages) == len(first.messages) + 40
    # A branch back and forth moves the kept context: still no rebuild.
    leaf = s.leaf_id()
    s.move_leaf(e[1]["id"])
    assert live.context().to_json() == build_context(s.file, s.tree).to_json()
    s.move_leaf(leaf)
    assert live.context().to_json() == build_context(s.file, s.tree).to_json()
    assert live.rebuilds == 1


def test_compaction_and_edit_rebuild_from_what_was_decoded(tmp_path: Path) -> None:
    e = chain(user, assistant, user, assistant)
    s = Session.open(write(tmp_path / "s.jsonl", e))
    live = live_context(s)
    live.context()
    reads = []
    original = s.file.entries

    def counting(indices: Any) -> Any:
        reads.append(list(indices))
        return original(indices)

    s.file.entries = counting  # type: ignore[method-assign]
    s.append([{k: v for k, v in compaction(None, e[2]["id"]).items() if k not in ("id", "parentId", "timestamp")}])
    assert live.context().to_json() == build_context(s.file, s.tree).to_json()
    assert [len(r) for r in reads if r][:1] == [1]  # only the compaction's body was read
    reads.clear()
    s.append([{k: v for k, v in context_edit(None, e[3]["id"], "gone").items() if k not in ("id", "parentId")}])
    assert live.context().to_json() == build_context(s.file, s.tree).to_json()
    assert [len(r) for r in reads if r][:1] == [1]  # only the edit's body


def test_tool_results_and_unchanged_prefix(tmp_path: Path) -> None:
    e = chain(user, lambda p: assistant(p, calls=[("c1", "read", {"path": "a"})], total=500))
    e.append(tool_result(e[-1]["id"], "c1", "body"))
    s = Session.open(write(tmp_path / "s.jsonl", e))
    live = live_context(s)
    before = live.context()
    s.append([{"type": "message", "message": {"role": "user", "content": "next"}}])
    assert live.unchanged_prefix(e[-1]["id"]) == len(before.messages) == 3
    s.append([{"type": "context_edit", "targetId": e[0]["id"], "replacement": None}])
    assert live.unchanged_prefix(e[-1]["id"]) == 0  # the edit changed an earlier message


def _turn(n: int, tool: str, file: str) -> list[dict[str, Any]]:
    call = {"type": "toolCall", "id": f"t{n}", "name": tool, "arguments": {"path": file}}
    said = {"role": "assistant", "content": [call], "stopReason": "toolUse", "timestamp": 1}
    result = {"role": "toolResult", "toolCallId": f"t{n}", "toolName": tool, "content": "r" * 400, "timestamp": 1}
    return [
        {"type": "message", "message": {"role": "user", "content": "u" * 400, "timestamp": 1}},
        {"type": "message", "message": said},
        {"type": "message", "message": result},
    ]


def test_plan_after_a_branch_forgets_the_files_left_behind(tmp_path: Path) -> None:
    s = Session.open(write(tmp_path / "s.jsonl", chain(user)))
    root = s.leaf_id()
    for k in range(6):
        s.append(_turn(k, "edit", f"left{k}.py"))
    first = plan_compaction(s, keep_recent_tokens=200)
    assert "left0.py" in first.modifiedFiles
    s.move_leaf(root)
    for k in range(10):
        s.append(_turn(100 + k, "read", f"right{k}.py"))
    planned = plan_compaction(s, keep_recent_tokens=200)
    s.derived.pop("context")
    assert planned.to_json() == plan_compaction(s, keep_recent_tokens=200).to_json()
    assert not [f for f in planned.modifiedFiles + planned.readFiles if f.startswith("left")]
