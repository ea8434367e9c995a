"""When to compact: the threshold, context-overflow errors, and what never triggers (aborted turns,
disabled settings)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from ctxd.compaction.settings import CompactionSettings
from ctxd.context.rules import is_overflow_message

__all__ = ["Decision", "Trigger", "decide", "is_overflow_message"]

Trigger = Literal["threshold", "overflow", "manual"]


@attrs.frozen
class Decision:
    trigger: Trigger | None
    reason: str
    retry: bool = False
    """After an overflow the caller should retry once, on the compacted context."""
    leafId: str | None = None
    """Where to compact: for an overflow, the entry before the error (the error leaves the context)."""


def decide(
    last: Mapping[str, Any] | None,
    *,
    last_id: str | None,
    last_parent: str | None,
    context_tokens: int,
    window: int,
    settings: CompactionSettings,
) -> Decision:
    """pi's decision after a turn, for the last message on the path."""
    if not settings.enabled:
        return Decision(None, "compaction is disabled")
    if last is not None and last.get("role") == "assistant":
        stop = last.get("stopReason")
        if stop == "aborted":
            return Decision(None, "the turn was aborted")
        if is_overflow_message(last):
            return Decision("overflow", "the model reported a context overflow", retry=True, leafId=last_parent)
        if stop == "error":
            return Decision(None, "the turn failed for another reason (no usage to judge)")
    threshold = settings.threshold(window)
    if context_tokens > threshold:
        return Decision("threshold", f"context {context_tokens:,} > threshold {threshold:,}", leafId=last_id)
    return Decision(None, f"context {context_tokens:,} <= threshold {threshold:,}")
