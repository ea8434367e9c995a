"""Truncating oversized tool results (OpenClaw's overflow recovery, seed 004).

A tool result longer than ``limit_chars(window)`` is cut, at a newline when one lies in the last
fifth of the kept part, and a notice says how much was removed and how to get the rest.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

MAX_CHARS = 400_000
MIN_KEEP = 2_000
SHARE_OF_WINDOW = 0.3
CHARS_PER_TOKEN = 4
DEFAULT_HINT = "Re-run the tool with a narrower query (a line range, a filter) to see the rest."


def limit_chars(context_window: int) -> int:
    """min(window x 0.3 x 4, 400,000) characters, never below 2,000."""
    return max(MIN_KEEP, min(int(context_window * SHARE_OF_WINDOW * CHARS_PER_TOKEN), MAX_CHARS))


def truncate_text(text: str, limit: int, *, hint: str | None = None) -> str:
    """``text`` cut to at most ``limit`` characters including the notice (but never below
    MIN_KEEP kept characters)."""
    if len(text) <= limit:
        return text

    def notice(removed: int) -> str:
        return (
            f"\n\n[ctxd truncated this tool result: {removed:,} of {len(text):,} characters removed to fit the "
            f"context window. {hint or DEFAULT_HINT}]"
        )

    keep = max(MIN_KEEP, limit - len(notice(len(text))))
    cut = text.rfind("\n", int(keep * 0.8), keep)
    if cut <= 0:
        cut = keep
    return text[:cut] + notice(len(text) - cut)


def result_chars(message: Mapping[str, Any]) -> int:
    content = message.get("content")
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(str(b.get("text", ""))) for b in content if isinstance(b, Mapping) and b.get("type") == "text")
    return 0


def is_oversized(message: Mapping[str, Any], limit: int) -> bool:
    return message.get("role") == "toolResult" and result_chars(message) > limit


def truncate_tool_result(message: Mapping[str, Any], limit: int) -> dict[str, Any]:
    """A copy of a toolResult message whose text fits in ``limit`` characters (images untouched)."""
    out = copy.deepcopy(dict(message))
    content = out.get("content")
    if isinstance(content, str):
        out["content"] = truncate_text(content, limit)
        return out
    if not isinstance(content, list):
        return out
    texts = [b for b in content if isinstance(b, dict) and b.get("type") == "text"]
    total = sum(len(str(b.get("text", ""))) for b in texts)
    if total <= limit:
        return out
    # Give each text block a share of the limit proportional to its size.
    for block in texts:
        size = len(str(block.get("text", "")))
        share = max(MIN_KEEP, int(limit * size / total))
        block["text"] = truncate_text(str(block.get("text", "")), share)
    original = out.get("details")
    details: dict[str, Any] = dict(original) if isinstance(original, dict) else {}
    if original is not None and not isinstance(original, dict):
        details["original"] = original
    details["ctxdTruncated"] = {"originalChars": total, "limitChars": limit}
    out["details"] = details
    return out
