"""Property tests: random sequences of session operations keep the context builder's guarantees.

A hypothesis state machine drives a real session file (a fresh one per example) through user
turns, assistant turns with tool calls and their results, leaf moves, compactions and labels, some
of them through a second handle on the same file.  It keeps its own model of the tree (parents,
leaf, labels) and after every step checks what ``build_context`` returns against pi's semantics,
and that reopening the file, or refreshing another handle incrementally, gives the same answer.

Constraints on the generator (each mirrors something pi itself never does):
- A leaf move never targets an assistant message with tool calls, nor a tool result that is not the
  last of its turn: that would leave a tool call without its result on the active path, which pi
  never sends.  (The tool-result property below would still hold, but the turn would be malformed.)
- A compaction's ``firstKeptEntryId`` is a user or assistant message on the current path: pi's cut
  points are never tool results (a kept result must follow its call), and since results are
  appended right after their assistant message and the leaf never sits inside a turn, an assistant
  kept at the cut keeps its results after it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ctxd.context.build import Context, build_context
from ctxd.store.create import create_session
from ctxd.store.session_file import LEAF_MARKER, SessionFile
from ctxd.tree.index import TreeIndex
from ctxd.tree.session import Session

texts = st.text(max_size=12)
labels = st.one_of(st.none(), st.text(min_size=1, max_size=8))


class Model:
    """What the file should hold: every entry's parent and kind, the leaf and the labels."""

    def __init__(self) -> None:
        self.parent: dict[str, str | None] = {}
        self.kind: dict[str, str] = {}
        """'user', 'assistant', 'toolResult', 'compaction', 'label' or 'marker'."""
        self.message: dict[str, dict[str, Any]] = {}
        self.calls: dict[str, list[str]] = {}
        """Tool call ids of each assistant message."""
        self.first_kept: dict[str, str] = {}
        self.order: list[str] = []
        self.leaf: str | None = None
        self.labels: dict[str, str] = {}
        self.legal_leaves: list[str] = []

    def add(self, eid: str, parent: str | None, kind: str, *, legal: bool = True) -> None:
        assert eid not in self.parent
        self.parent[eid] = parent
        self.kind[eid] = kind
        self.order.append(eid)
        if legal:
            self.legal_leaves.append(eid)

    def path(self, leaf: str | None = None) -> list[str]:
        node = self.leaf if leaf is None else leaf
        out: list[str] = []
        while node is not None:
            out.append(node)
            node = self.parent[node]
        out.reverse()
        return out

    def expected_context(self) -> list[tuple[str, str]]:
        """(entry id, role) of pi's context at the leaf, computed from the model alone."""
        path = self.path()
        comps = [e for e in path if self.kind[e] == "compaction"]
        out: list[tuple[str, str]] = []
        if comps:
            comp = comps[-1]
            out.append((comp, "compactionSummary"))
            path = path[path.index(self.first_kept[comp]) :]
        roles = ("user", "assistant", "toolResult")
        out.extend((e, self.kind[e]) for e in path if self.kind[e] in roles)
        return out


class SessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="ctxd-prop-")
        self.path = create_session(self.dir, "/proj", path=os.path.join(self.dir, "s.jsonl"))
        self.session = Session.open(self.path)
        self.other = Session.open(self.path)
        """A second handle on the same file: some appends go through it, and it must follow."""
        self.model = Model()
        self.next_call = 0

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def handle(self, via_other: bool) -> Session:
        return self.other if via_other else self.session

    # --- operations -----------------------------------------------------------------------------

    @rule(text=texts, via_other=st.booleans())
    def user(self, text: str, via_other: bool) -> None:
        message = {"role": "user", "content": text, "timestamp": 1}
        (eid,) = self.handle(via_other).append([{"type": "message", "message": message}])
        self.model.add(eid, self.model.leaf, "user")
        self.model.message[eid] = message
        self.model.leaf = eid

    @rule(text=texts, n_calls=st.integers(0, 3), one_batch=st.booleans(), via_other=st.booleans())
    def assistant_turn(self, text: str, n_calls: int, one_batch: bool, via_other: bool) -> None:
        """An assistant message with 0-3 tool calls, then their results in order: one append each,
        or (as a variant) all in one chained batch."""
        call_ids = [f"call{self.next_call + k}" for k in range(n_calls)]
        self.next_call += n_calls
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        content += [{"type": "toolCall", "id": c, "name": "read", "arguments": {"path": f"f{c}"}} for c in call_ids]
        assistant = {
            "role": "assistant",
            "content": content,
            "provider": "prov",
            "model": "m1",
            "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
            "stopReason": "toolUse" if call_ids else "stop",
            "timestamp": 1,
        }
        results = [
            {
                "role": "toolResult",
                "toolCallId": c,
                "toolName": "read",
                "content": [{"type": "text", "text": f"contents of f{c}"}],
                "isError": False,
                "timestamp": 1,
            }
            for c in call_ids
        ]
        messages = [assistant, *results]
        writer = self.handle(via_other)
        if one_batch:
            ids = writer.append([{"type": "message", "message": m} for m in messages])
        else:
            ids = [writer.append([{"type": "message", "message": m}])[0] for m in messages]
        assert len(ids) == len(messages)
        for k, (eid, m) in enumerate(zip(ids, messages, strict=True)):
            # Legal leaves: a complete turn (the assistant without calls, or its last result).
            self.model.add(eid, self.model.leaf, m["role"], legal=k == len(messages) - 1)
            self.model.message[eid] = m
            self.model.leaf = eid
        self.model.calls[ids[0]] = call_ids

    @precondition(lambda self: self.model.legal_leaves)
    @rule(data=st.data(), via_other=st.booleans())
    def move_leaf(self, data: st.DataObject, via_other: bool) -> None:
        target = data.draw(st.sampled_from(self.model.legal_leaves), label="target")
        marker = self.handle(via_other).move_leaf(target)
        self.model.add(marker, target, "marker")
        self.model.leaf = target

    @precondition(lambda self: self.model.order)
    @rule()
    def move_leaf_to_nothing(self) -> None:
        """Back before the first entry: the marker is a root and itself the leaf."""
        marker = self.session.move_leaf(None)
        self.model.add(marker, None, "marker")
        self.model.leaf = marker

    @rule(data=st.data(), summary=texts, via_other=st.booleans())
    def compact(self, data: st.DataObject, summary: str, via_other: bool) -> None:
        candidates = [e for e in self.model.path() if self.model.kind[e] in ("user", "assistant")]
        if not candidates:
            return
        first_kept = data.draw(st.sampled_from(candidates), label="firstKept")
        entry = {"type": "compaction", "summary": summary, "firstKeptEntryId": first_kept, "tokensBefore": 123}
        (eid,) = self.handle(via_other).append([entry])
        self.model.add(eid, self.model.leaf, "compaction")
        self.model.first_kept[eid] = first_kept
        self.model.leaf = eid

    @precondition(lambda self: self.model.order)
    @rule(data=st.data(), label=labels, via_other=st.booleans())
    def label(self, data: st.DataObject, label: str | None, via_other: bool) -> None:
        target = data.draw(st.sampled_from(self.model.order), label="labelled")
        entry: dict[str, Any] = {"type": "label", "targetId": target}
        if label is not None:
            entry["label"] = label
        (eid,) = self.handle(via_other).append([entry])
        self.model.add(eid, self.model.leaf, "label")
        self.model.leaf = eid
        if label:
            self.model.labels[target] = label
        else:
            self.model.labels.pop(target, None)

    # --- properties ---------------------------------------------------------------------------

    @invariant()
    def context_follows_pi_semantics(self) -> None:
        # Both handles catch up with what the other appended (incrementally).
        for handle in (self.session, self.other):
            result, _ = handle.refresh()
            assert not result.reloaded
        model = self.model
        s = self.session
        assert s.leaf_id() == model.leaf
        if model.leaf is None:
            assert build_context(s.file, s.tree).messages == []
            return
        path = s.path_ids()
        assert path == model.path()
        position = {eid: k for k, eid in enumerate(path)}
        ctx = build_context(s.file, s.tree)
        assert ctx.leafId == model.leaf
        msgs = ctx.messages

        # Every message lies on the path to the leaf, in path order (the summary leads).
        comps = [e for e in path if model.kind[e] == "compaction"]
        body = msgs[1:] if comps else msgs
        assert all(m.entryId in position for m in msgs)
        order = [position[m.entryId] for m in body]
        assert order == sorted(order) and len(set(order)) == len(order)

        # A compaction summary opens the context iff the path holds a compaction: the latest one.
        summaries = [k for k, m in enumerate(msgs) if m.role == "compactionSummary"]
        if comps:
            assert summaries == [0] and msgs[0].entryId == comps[-1] == ctx.compactionId
        else:
            assert summaries == [] and ctx.compactionId is None

        # Every tool result follows an assistant message in the context that made the call.
        called: set[str] = set()
        for m in msgs:
            if m.role == "assistant":
                called.update(b["id"] for b in m.message["content"] if b.get("type") == "toolCall")
            elif m.role == "toolResult":
                assert m.message["toolCallId"] in called, f"result {m.entryId} before (or without) its call"

        # The exact context pi would build, message bodies intact, lines matching the file.
        assert [(m.entryId, m.role) for m in msgs] == model.expected_context()
        for m in body:
            assert m.message == model.message[m.entryId]
            assert m.line == s.file.line_of(m.entryId)

        # Labels: the last label entry per target wins; a label without text clears it.
        assert {s.tree.id_of(i): text for i, text in s.tree.labels.items()} == model.labels

        # Reopening the file, or following it from another handle, gives the same answer.
        fresh = SessionFile.open(self.path)
        tree = TreeIndex(fresh)
        assert fresh.leaf_id() == model.leaf
        assert [h.id for h in fresh.heads] == model.order
        assert fresh.diagnostics == []
        assert tree.parent == s.tree.parent and tree.depth == s.tree.depth and tree.orphans == []
        assert _shape(build_context(fresh, tree)) == _shape(ctx)
        assert self.other.leaf_id() == model.leaf
        assert self.other.tree.parent == tree.parent and self.other.tree.labels == tree.labels
        assert _shape(build_context(self.other.file, self.other.tree)) == _shape(ctx)

    @invariant()
    def only_leaf_markers_are_custom_entries(self) -> None:
        for i, head in enumerate(self.session.file.heads):
            if head.type == "custom":
                assert head.customType == LEAF_MARKER
                assert self.session.tree.is_leaf_marker(i)


def _shape(ctx: Context) -> list[tuple[str, str, dict[str, Any]]]:
    return [(m.entryId, m.role, m.message) for m in ctx.messages]


SessionMachine.TestCase.settings = settings(
    max_examples=80,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_session_operations_keep_context_invariants = SessionMachine.TestCase
