"""What a context answer holds: :class:`Context` (the messages of the next request and pi's size) and
:class:`Size` (the size alone), and what both read of the index: the model, the thinking level, the
last message's outcome and the usage pi trusts.
"""

from __future__ import annotations

from typing import Any

import attrs

from ctxd.context.rows import ContextMessage, materialize
from ctxd.formats.codec import LineHead
from ctxd.store.session_file import SessionFile
from ctxd.tree.index import NONE, TreeIndex

__all__ = ["Context", "Size", "last_of_head", "last_of_message", "model_at", "thinking_at", "trusted_usage"]


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


@attrs.define
class Size:
    """The context's size without building it: what a status bar and auto-compaction need."""

    leafId: str | None
    tokens: int
    """pi's projected estimate (``Context.contextTokens``)."""
    last: dict[str, Any] | None
    """The last message's role, stopReason and errorMessage (from the index)."""


def model_at(session: SessionFile, tree: TreeIndex, leaf: int) -> tuple[str | None, str | None]:
    """(provider, model id) in effect at ``leaf``: the last model change or assistant message on its path."""
    i = tree.last_model[leaf]
    if i == NONE:
        return None, None
    head = session.heads[i]
    if head.type == "model_change":
        return head.provider, head.modelId
    msg = head.message
    return (msg.provider, msg.model) if msg is not None else (None, None)


def thinking_at(session: SessionFile, tree: TreeIndex, leaf: int) -> str:
    """The thinking level in effect at ``leaf`` ("off" without a change on its path)."""
    i = tree.last_thinking[leaf]
    if i == NONE:
        return "off"
    return session.heads[i].thinkingLevel or "off"


def trusted_usage(head: LineHead) -> int | None:
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


def last_of_head(head: LineHead) -> dict[str, Any]:
    """Role, stopReason and errorMessage of an entry's last message, from the index alone."""
    msg = head.message
    if msg is None:
        role = {"custom_message": "custom", "compaction": "compactionSummary"}.get(head.type, "branchSummary")
        return {"role": role, "stopReason": None, "errorMessage": None}
    return {"role": msg.role, "stopReason": msg.stopReason, "errorMessage": msg.errorMessage}


def last_of_message(message: dict[str, Any]) -> dict[str, Any]:
    """Role, stopReason and errorMessage of a decoded message."""
    return {
        "role": message.get("role"),
        "stopReason": message.get("stopReason"),
        "errorMessage": message.get("errorMessage"),
    }
