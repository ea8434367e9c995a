"""Building the context for the next request from the active branch, with pi 1.5.2's semantics.

Walk from the leaf towards the root; if the path holds compactions only the latest counts: its
summary comes first, then the path from its ``firstKeptEntryId`` on.  Messages, custom messages
and branch summaries contribute; context edits replace or hide their targets; settings (model,
thinking level) come from the whole path.  Each message keeps its entry id, file line and token
estimate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ctxd.context.tokens import context_tokens, estimate_tokens
from ctxd.formats.codec import LineHead
from ctxd.store.session_file import SessionFile
from ctxd.tree.index import NONE, TreeIndex

EMITTING = frozenset({"message", "custom_message", "branch_summary"})


@attrs.define
class ContextMessage:
    role: str
    entryId: str
    line: int
    tokens: int
    message: dict[str, Any]

    def to_json(self, *, with_message: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "role": self.role,
            "entryId": self.entryId,
            "line": self.line,
            "tokens": self.tokens,
        }
        if with_message:
            out["message"] = self.message
        return out


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
        return [m.message for m in self.messages]

    def to_json(self, *, with_messages: bool = True) -> dict[str, Any]:
        return {
            "leafId": self.leafId,
            "model": self.model,
            "provider": self.provider,
            "modelId": self.modelId,
            "thinkingLevel": self.thinkingLevel,
            "messages": [m.to_json(with_message=with_messages) for m in self.messages],
            "estimatedTokens": self.estimatedTokens,
            "contextTokens": self.contextTokens,
            "compactionId": self.compactionId,
            "diagnostics": self.diagnostics,
        }


def timestamp_ms(iso: Any) -> int | None:
    from datetime import datetime

    if not isinstance(iso, str):
        return None
    try:
        return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def entry_message(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The AgentMessage an entry contributes to context (pi's getMessageFromEntry), or None."""
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        return message if isinstance(message, dict) else None
    if kind == "custom_message":
        return {
            "role": "custom",
            "customType": entry.get("customType", ""),
            "content": entry.get("content", ""),
            "display": entry.get("display", True),
            "details": entry.get("details"),
            "timestamp": timestamp_ms(entry.get("timestamp")),
        }
    if kind == "branch_summary":
        if not entry.get("summary"):
            return None
        return {
            "role": "branchSummary",
            "summary": entry.get("summary", ""),
            "fromId": entry.get("fromId", ""),
            "timestamp": timestamp_ms(entry.get("timestamp")),
        }
    if kind == "compaction":
        return compaction_message(entry)
    return None


def compaction_message(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "role": "compactionSummary",
        "summary": entry.get("summary", ""),
        "tokensBefore": entry.get("tokensBefore", 0),
        "timestamp": timestamp_ms(entry.get("timestamp")),
    }


@attrs.define
class ContextPath:
    """The entries a context is made of, before bodies are read."""

    leaf: int
    compaction: int
    """Index of the latest compaction on the path, or NONE."""
    indices: list[int]
    """Entries to walk, oldest first (from the first kept entry when there is a compaction)."""
    first_kept_found: bool


def context_path(tree: TreeIndex, leaf: int) -> ContextPath:
    comp = tree.last_compaction[leaf]
    if comp == NONE:
        return ContextPath(leaf, NONE, tree.path_to_root(leaf), True)
    session = tree.session
    first_kept_id = session.heads[comp].firstKeptEntryId
    fk = session.index.get(first_kept_id) if first_kept_id else None
    if fk is not None and tree.is_ancestor(fk, comp):
        return ContextPath(leaf, comp, tree.path_until(leaf, fk), True)
    return ContextPath(leaf, comp, tree.path_until(leaf, comp), False)


def build_context(
    session: SessionFile,
    tree: TreeIndex,
    leaf_id: str | None = None,
    *,
    estimates: dict[int, int] | None = None,
) -> Context:
    """The context at ``leaf_id`` (default: the session's leaf).

    ``estimates`` is an optional cache of per-entry token estimates, keyed by entry index, valid
    for one generation of the file; context edits bypass it.
    """
    diagnostics = [d.to_json() for d in session.diagnostics]
    leaf = session.require(leaf_id) if leaf_id is not None else session.leaf_index()
    if leaf is None:
        return Context(None, None, None, "off", [], 0, 0, diagnostics)
    tree.update()
    provider, model_id = _model(session, tree, leaf)
    thinking = _thinking(session, tree, leaf)
    path = context_path(tree, leaf)
    heads = session.heads
    comp = path.compaction

    wanted = [i for i in path.indices if heads[i].type in EMITTING or heads[i].type == "context_edit"]
    if comp != NONE:
        wanted.append(comp)
    bodies = dict(zip(wanted, session.entries(wanted), strict=True))
    edits: dict[str, Any] = {}
    for i in path.indices:
        if heads[i].type == "context_edit":
            body = bodies[i]
            edits[str(body.get("targetId", ""))] = body.get("replacement")

    messages: list[ContextMessage] = []
    if comp != NONE:
        body = bodies[comp]
        if not path.first_kept_found:
            diagnostics.append(
                {
                    "line": session.lines[comp],
                    "message": f"compaction's firstKeptEntryId {body.get('firstKeptEntryId')!r} "
                    "is not on its path; nothing before it is kept",
                }
            )
        summary = compaction_message(body)
        messages.append(ContextMessage("compactionSummary", heads[comp].id or "", session.lines[comp], 0, summary))

    trusted_from = 0
    for i in path.indices:
        if i == comp:
            trusted_from = len(messages)
        if i == comp or heads[i].type not in EMITTING:
            continue
        entry = bodies[i]
        found = entry_message(entry)
        if found is None:
            continue
        msg = found
        eid = heads[i].id or ""
        edited = eid in edits
        if edited:
            replacement = edits[eid]
            if not isinstance(replacement, Mapping):
                continue  # hidden by a context edit
            msg = dict(msg)
            if "content" in replacement:
                msg["content"] = replacement["content"]
        messages.append(ContextMessage(str(msg.get("role", "")), eid, session.lines[i], 0, msg))

    for m, idx in zip(messages, _indices_of(messages, session), strict=True):
        if estimates is not None and idx is not None and m.entryId not in edits:
            if idx not in estimates:
                estimates[idx] = estimate_tokens(m.message)
            m.tokens = estimates[idx]
        else:
            m.tokens = estimate_tokens(m.message)
    per_message = [m.tokens for m in messages]
    return Context(
        leafId=heads[leaf].id,
        provider=provider,
        modelId=model_id,
        thinkingLevel=thinking,
        messages=messages,
        estimatedTokens=sum(per_message),
        contextTokens=context_tokens([m.message for m in messages], per_message, trusted_from=trusted_from),
        diagnostics=diagnostics,
        compactionId=heads[comp].id if comp != NONE else None,
    )


def _indices_of(messages: list[ContextMessage], session: SessionFile) -> list[int | None]:
    return [session.index.get(m.entryId) for m in messages]


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
    """pi's usage-based size (last trusted usage plus estimates after it)."""
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
    if not tree.has_context_edits:
        quick = _size_from_last_usage(session, tree, leaf, estimates)
        if quick is not None:
            tree.size_memo = (leaf, quick.tokens, quick.last)
            return quick
    path = context_path(tree, leaf)
    if any(heads[i].type == "context_edit" for i in path.indices):
        ctx = build_context(session, tree, heads[leaf].id, estimates=estimates)
        last = ctx.messages[-1].message if ctx.messages else None
        return Size(ctx.leafId, ctx.contextTokens, last)
    comp = path.compaction
    emitting = [i for i in path.indices if i != comp and heads[i].type in EMITTING]
    _estimate(session, ([comp] if comp != NONE else []) + emitting, estimates)
    # Usage is trusted only after the compaction (pi's rule, as in build_context).
    after_comp = emitting
    if comp != NONE and comp in path.indices:
        later = set(path.indices[path.indices.index(comp) + 1 :])
        after_comp = [i for i in emitting if i in later]
    trailing = 0
    tokens = None
    for i in reversed(after_comp):
        used = _trusted_usage(heads[i])
        if used is not None:
            tokens = used + trailing
            break
        trailing += estimates[i]
    if tokens is None:
        tokens = sum(estimates[i] for i in emitting) + (estimates[comp] if comp != NONE else 0)
    last = _last_of(heads[emitting[-1]]) if emitting else None
    if not tree.has_context_edits:
        tree.size_memo = (leaf, tokens, last)
    return Size(heads[leaf].id, tokens, last)


def _size_from_last_usage(session: SessionFile, tree: TreeIndex, leaf: int, estimates: dict[int, int]) -> Size | None:
    """The size from the newest trusted usage, walking back from the leaf only as far as it; None
    when there is none before the latest compaction (then the whole context is estimated)."""
    heads = session.heads
    trailing: list[int] = []
    last: dict[str, Any] | None = None
    memo = tree.size_memo
    i = leaf
    while i != NONE:
        if memo is not None and i == memo[0]:
            # The previous size was for an ancestor with nothing trusted since: add what came after.
            _estimate(session, trailing, estimates)
            return Size(heads[leaf].id, memo[1] + sum(estimates[j] for j in trailing), last or memo[2])
        head = heads[i]
        if head.type == "compaction":
            return None  # usage before a compaction measured the old context
        if head.type in EMITTING:
            if last is None:
                last = _last_of(head)
            used = _trusted_usage(head)
            if used is not None:
                _estimate(session, trailing, estimates)
                return Size(heads[leaf].id, used + sum(estimates[j] for j in trailing), last)
            trailing.append(i)
        i = tree.parent[i]
    return None


def _estimate(session: SessionFile, indices: list[int], estimates: dict[int, int]) -> None:
    """Fill ``estimates`` for ``indices`` not in it yet (one batched read)."""
    missing = [j for j in indices if j not in estimates]
    for j, body in zip(missing, session.entries(missing), strict=True):
        found = entry_message(body)
        estimates[j] = estimate_tokens(found) if found is not None else 0


def _trusted_usage(head: LineHead) -> int | None:
    """The context size an assistant entry's usage reports, if pi trusts it (not aborted/error)."""
    msg = head.message
    if msg is None or msg.role != "assistant" or msg.usage is None or msg.stopReason in ("aborted", "error"):
        return None
    u = msg.usage
    return int(u.totalTokens) or int(u.input) + int(u.output) + int(u.cacheRead) + int(u.cacheWrite)


def _last_of(head: LineHead) -> dict[str, Any]:
    """Role, stopReason and errorMessage of an emitting entry, from the index alone."""
    msg = head.message
    if msg is None:
        return {
            "role": "custom" if head.type == "custom_message" else "branchSummary",
            "stopReason": None,
            "errorMessage": None,
        }
    return {"role": msg.role, "stopReason": msg.stopReason, "errorMessage": msg.errorMessage}
