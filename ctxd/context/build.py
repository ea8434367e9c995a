"""Building the context for the next request from the active branch, with pi 1.5.2's semantics.

The messages are pi's session projection (``ctxd.context.project``: the latest compaction's system
message and summary, the kept entries, everything after it, with context edits applied), each with
its entry id, file line and token estimate; settings (model, thinking level) come from the whole
path. The context size is pi's projected estimate. ``context_size`` gives the same size without
building the context, reading only bodies whose estimate is not cached.
"""

from __future__ import annotations

from typing import Any

import attrs

from ctxd.context.line_estimate import fill_estimates
from ctxd.context.pins import carried
from ctxd.context.pins import version as pins_version
from ctxd.context.project import context_path, entry_tokens, project, projected_estimate
from ctxd.context.rows import ContextMessage, materialize
from ctxd.context.rules import (
    USAGE_INVALIDATORS,
    compaction_summary,
    current_system_message,
    entry_message,
    is_system,
    may_yield,
    timestamp_ms,
)
from ctxd.context.tokens import estimate_tokens
from ctxd.formats.codec import CURRENT_VERSION, LineHead
from ctxd.store.session_file import SessionFile
from ctxd.tree.index import NONE, TreeIndex

__all__ = [
    "Context",
    "ContextMessage",
    "Size",
    "build_context",
    "compaction_message",
    "context_size",
    "entry_message",
    "materialize",
    "timestamp_ms",
]

compaction_message = compaction_summary


@attrs.define
class Context:
    leafId: str | None
    provider: str | None
    modelId: str | None
    thinkingLevel: str
    messages: list[ContextMessage]
    estimatedTokens: int
    contextTokens: int
    diagnostics: list[dict[str, Any]] = attrs.field(factory=list)
    compactionId: str | None = None
    """The compaction whose summary opens this context, if any."""

    @property
    def model(self) -> str | None:
        if self.modelId is None:
            return None
        return f"{self.provider}/{self.modelId}" if self.provider else self.modelId

    def agent_messages(self) -> list[dict[str, Any]]:
        materialize(self.messages)
        return [m.message for m in self.messages]

    def to_json(self, *, with_messages: bool = True, start: int = 0) -> dict[str, Any]:
        """``start``: leave out the messages before it (the caller has them already)."""
        if with_messages:
            materialize(self.messages[start:])
        return {
            "leafId": self.leafId,
            "model": self.model,
            "provider": self.provider,
            "modelId": self.modelId,
            "thinkingLevel": self.thinkingLevel,
            "messages": [m.to_json(with_message=with_messages) for m in self.messages[start:]],
            "estimatedTokens": self.estimatedTokens,
            "contextTokens": self.contextTokens,
            "compactionId": self.compactionId,
            "diagnostics": self.diagnostics,
        }


def build_context(
    session: SessionFile,
    tree: TreeIndex,
    leaf_id: str | None = None,
    *,
    estimates: dict[int, int] | None = None,
) -> Context:
    """The context at ``leaf_id`` (default: the session's leaf): pi's projection, flattened.

    ``estimates`` is an optional cache of per-entry token estimates, keyed by entry index, valid
    for one generation of the file; edited entries bypass it.
    """
    tree.update()
    diagnostics = [d.to_json() for d in [*session.diagnostics, *tree.problems()]]
    leaf = session.require(leaf_id) if leaf_id is not None else session.leaf_index()
    if leaf is None:
        return Context(None, None, None, "off", [], 0, 0, diagnostics)
    tree.update()
    provider, model_id = _model(session, tree, leaf)
    thinking = _thinking(session, tree, leaf)
    known = len(session.diagnostics)
    projection = project(session, tree, leaf)
    diagnostics.extend(d.to_json() for d in session.diagnostics[known:])  # found reading the bodies
    heads = session.heads
    comp = projection.compaction
    if comp != NONE and not projection.path.first_kept_found:
        diagnostics.append(
            {
                "line": session.lines[comp],
                "message": f"compaction's firstKeptEntryId {heads[comp].firstKeptEntryId!r} "
                "is not on its path; nothing before it is kept",
            }
        )
    messages: list[ContextMessage] = []
    owners: list[int] = []
    for k, pe in enumerate(projection.entries):
        eid = heads[pe.index].id or ""
        line = session.lines[pe.index]
        for msg, tokens in zip(pe.messages, entry_tokens(pe, estimates), strict=True):
            messages.append(ContextMessage(str(msg.get("role", "")), eid, line, tokens, msg))
            owners.append(k)
    if comp != NONE:
        _carry_pins(session, tree, projection, messages, owners)
    per_message = [m.tokens for m in messages]
    size = projected_estimate(projection, heads, [m.message for m in messages], per_message, owners)
    return Context(
        leafId=heads[leaf].id,
        provider=provider,
        modelId=model_id,
        thinkingLevel=thinking,
        messages=messages,
        estimatedTokens=sum(per_message),
        contextTokens=size.tokens,
        diagnostics=diagnostics,
        compactionId=heads[comp].id if comp != NONE else None,
    )


def _carry_pins(
    session: SessionFile, tree: TreeIndex, projection: Any, messages: list[ContextMessage], owners: list[int]
) -> None:
    """Insert the pinned messages the compaction summarised right after its summary (see ctxd.context.pins)."""
    extra = carried(session, tree, projection.compaction, projection.path.indices)
    if not extra:
        return
    at = sum(1 for k in owners if k == 0)  # after the compaction's own messages
    rows = [
        ContextMessage(str(m.get("role", "")), session.heads[i].id or "", session.lines[i], estimate_tokens(m), m)
        for i, m in extra
    ]
    messages[at:at] = rows
    owners[at:at] = [0] * len(rows)


def pinned_tokens(session: SessionFile, tree: TreeIndex, comp: int, shown: list[int]) -> int:
    """Tokens of the pinned messages a compaction carries (0 without pins)."""
    return sum(estimate_tokens(m) for _, m in carried(session, tree, comp, shown))


def _model(session: SessionFile, tree: TreeIndex, leaf: int) -> tuple[str | None, str | None]:
    i = tree.last_model[leaf]
    if i == NONE:
        return None, None
    head = session.heads[i]
    if head.type == "model_change":
        return head.provider, head.modelId
    msg = head.message
    return (msg.provider, msg.model) if msg is not None else (None, None)


def _thinking(session: SessionFile, tree: TreeIndex, leaf: int) -> str:
    i = tree.last_thinking[leaf]
    if i == NONE:
        return "off"
    return session.heads[i].thinkingLevel or "off"


@attrs.define
class Size:
    """The context's size without building it: what a status bar and auto-compaction need."""

    leafId: str | None
    tokens: int
    """pi's projected estimate (see ``build_context``)."""
    last: dict[str, Any] | None
    """The last message's role, stopReason and errorMessage (from the index)."""


def context_size(
    session: SessionFile, tree: TreeIndex, leaf_id: str | None = None, *, estimates: dict[int, int]
) -> Size:
    """Equal to ``build_context(...).contextTokens``, reading only bodies whose estimate is not cached.

    Appending one message costs one body decode, not a rebuild of the whole context.
    """
    leaf = session.require(leaf_id) if leaf_id is not None else session.leaf_index()
    if leaf is None:
        return Size(None, 0, None)
    tree.update()
    heads = session.heads
    pins = pins_version(session)
    if tree.size_memo_key != pins:
        tree.size_memo = None  # a pin or unpin changes what a compaction carries
        tree.size_memo_key = pins
    if not tree.has_context_edits:
        quick = _size_from_last_usage(session, tree, leaf, estimates)
        if quick is not None:
            return quick
    path = context_path(tree, leaf)
    if any(heads[i].type == "context_edit" for i in path.indices):
        ctx = build_context(session, tree, heads[leaf].id, estimates=estimates)
        last = ctx.messages[-1].message if ctx.messages else None
        return Size(ctx.leafId, ctx.contextTokens, _last_of_message(last) if last is not None else None)
    # No edits: usage is trusted only after the compaction (the kept part before it measured the old context).
    comp = path.compaction
    yielding = [i for i in path.indices if i != comp and heads[i].type != "compaction" and _yields(session, i)]
    after = set(path.indices[path.after :])
    trailing: list[int] = []
    tokens: int | None = None
    for i in reversed(yielding):
        if i not in after:
            break
        used = _trusted_usage(heads[i])
        if used is not None:
            _estimate(session, trailing, estimates)
            tokens = used + sum(estimates[j] for j in trailing)
            break
        trailing.append(i)
    usage_based = tokens is not None
    if tokens is None:
        tokens = _estimated_size(session, comp, yielding, estimates)
        if comp != NONE:
            tokens += pinned_tokens(session, tree, comp, path.indices)
    last_index = yielding[-1] if yielding else comp
    last = _last_of(heads[last_index]) if last_index != NONE else None
    if not tree.has_context_edits:
        tree.size_memo = (leaf, tokens, last, usage_based)
    return Size(heads[leaf].id, tokens, last)


def _estimated_size(session: SessionFile, comp: int, yielding: list[int], estimates: dict[int, int]) -> int:
    """The size without trusted usage: the current system message once, plus every other message
    (pi's fallback in ``estimateProjectedContextTokens``), from cached estimates."""
    heads = session.heads
    systems = [i for i in yielding if is_system(heads[i])]
    others = [i for i in yielding if not is_system(heads[i])] + ([comp] if comp != NONE else [])
    _estimate(session, others, estimates)
    prompt: list[dict[str, Any]] = []
    if comp != NONE:
        carried = session.entry(comp).get("systemMessage")
        if isinstance(carried, dict):
            prompt.append(carried)
    for body in session.entries(systems):
        found = entry_message(body)
        if found is not None:
            prompt.append(found)
    system = current_system_message(prompt)
    return sum(estimates[i] for i in others) + (estimate_tokens(system) if system is not None else 0)


def _size_from_last_usage(session: SessionFile, tree: TreeIndex, leaf: int, estimates: dict[int, int]) -> Size | None:
    """The size from the newest trusted usage, walking back from the leaf only as far as it (or as
    the previous size's leaf); None when a compaction comes first (then usage before it is stale)."""
    heads = session.heads
    trailing: list[int] = []
    last: dict[str, Any] | None = None
    memo = tree.size_memo
    i = leaf
    while i != NONE:
        if memo is not None and i == memo[0]:
            # The previous size was for an ancestor with nothing trusted since: add what came after,
            # unless that size was estimated and a system message arrived (it merges, it does not add).
            if not memo[3] and any(is_system(heads[j]) for j in trailing):
                return None
            _estimate(session, trailing, estimates)
            tokens = memo[1] + sum(estimates[j] for j in trailing)
            tree.size_memo = (leaf, tokens, last or memo[2], memo[3])
            return Size(heads[leaf].id, tokens, last or memo[2])
        head = heads[i]
        if head.type in USAGE_INVALIDATORS:
            return None
        if may_yield(head) and _yields(session, i):
            if last is None:
                last = _last_of(head)
            used = _trusted_usage(head)
            if used is not None:
                _estimate(session, trailing, estimates)
                tokens = used + sum(estimates[j] for j in trailing)
                tree.size_memo = (leaf, tokens, last, True)
                return Size(heads[leaf].id, tokens, last)
            trailing.append(i)
        i = tree.parent[i]
    return None


def _yields(session: SessionFile, i: int) -> bool:
    """Whether entry ``i`` yields messages; only a branch summary needs its body (an empty one yields none)."""
    head = session.heads[i]
    if head.type == "branch_summary":
        return bool(session.entry(i).get("summary"))
    return may_yield(head)


def _estimate(session: SessionFile, indices: list[int], estimates: dict[int, int]) -> None:
    """Fill ``estimates`` for ``indices`` not in it yet: message entries from their lines where they
    can be (``ctxd.context.line_estimate``), the rest from their bodies (one batched read)."""
    missing = [j for j in indices if j not in estimates]
    if missing and session.version == CURRENT_VERSION:
        heads = session.heads
        quick = [j for j in missing if _plain_message(heads[j]) and not session.recovered(j)]
        if quick:
            fill_estimates(session, quick, estimates)
            missing = [j for j in missing if j not in estimates]
    for j, body in zip(missing, session.entries(missing), strict=True):
        found = entry_message(body)
        estimates[j] = estimate_tokens(found) if found is not None else 0


def _plain_message(head: LineHead) -> bool:
    """A ``message`` entry whose role the index knows (what a line estimate can read)."""
    return head.type == "message" and head.message is not None and bool(head.message.role)


def _trusted_usage(head: LineHead) -> int | None:
    """The context size an assistant entry's usage reports, if pi uses it (``tokens.valid_usage`` on
    the index's usage: ``calculateContextTokens``, NaN and sizes not above 0 skipped)."""
    msg = head.message
    if msg is None or msg.role != "assistant" or msg.usage is None or msg.stopReason in ("aborted", "error"):
        return None
    u = msg.usage
    total = u.totalTokens  # a number or None (the index keeps no other type)
    if total:
        tokens = float(total)
    else:
        parts = (u.input, u.output, u.cacheRead, u.cacheWrite)
        if None in parts:
            return None  # NaN in pi
        tokens = float(sum(parts))  # type: ignore[arg-type]
    return int(tokens) if tokens > 0 else None


def _last_of(head: LineHead) -> dict[str, Any]:
    """Role, stopReason and errorMessage of an entry's last message, from the index alone."""
    msg = head.message
    if msg is None:
        role = {"custom_message": "custom", "compaction": "compactionSummary"}.get(head.type, "branchSummary")
        return {"role": role, "stopReason": None, "errorMessage": None}
    return {"role": msg.role, "stopReason": msg.stopReason, "errorMessage": msg.errorMessage}


def _last_of_message(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": message.get("role"),
        "stopReason": message.get("stopReason"),
        "errorMessage": message.get("errorMessage"),
    }
