"""Truncating oversized tool results (OpenClaw's overflow recovery, seed 004).

A tool result longer than ``limit_chars(window)`` is cut, at a newline when one lies in the last
fifth of the kept part, and a notice says how much was removed and how to get the rest. A shell's log is cut
in its middle instead (:func:`truncate_log`): its head, its tail and its error lines stay.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ctxd.formats.lazy_re import lazy_compile

MAX_CHARS = 400_000
MIN_KEEP = 2_000
SHARE_OF_WINDOW = 0.3
CHARS_PER_TOKEN = 4
DEFAULT_HINT = "Re-run the tool with a narrower query (a line range, a filter) to see the rest."
LOG_HINT = "Re-run the command with its output filtered (grep, tail) or saved to a file to see the rest."
ERROR_LINE = lazy_compile(r"error|fail|fatal|exception|traceback|panic|assert|denied|not found|warn", re.IGNORECASE)
"""A log line worth keeping from the cut middle."""
HEAD_SHARE, ERRORS_SHARE = 0.3, 0.2
"""A cut log keeps this share of the limit from its head and at most this share as error lines; the rest is
its tail (where a build or a test run says how it ended)."""


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


def truncate_log(text: str, limit: int, *, hint: str | None = None) -> str:
    """A shell log cut in its middle to about ``limit`` characters (never below MIN_KEEP): its first lines,
    the error lines of the middle (as many as fit ERRORS_SHARE of the limit, first ones first) and its last
    lines, with a notice where the middle was."""
    if len(text) <= limit:
        return text
    budget = max(MIN_KEEP, limit - 300)  # the notice's room
    head_end = text.rfind("\n", 0, int(budget * HEAD_SHARE)) + 1
    head_end = head_end or int(budget * HEAD_SHARE)
    errors: list[str] = []
    error_room = int(budget * ERRORS_SHARE)
    tail_room = budget - head_end
    tail_start = max(head_end, len(text) - tail_room)
    middle_lines = text[head_end:tail_start].split("\n")
    for line in middle_lines:
        if ERROR_LINE.search(line) and len(line) + 1 <= error_room:
            errors.append(line)
            error_room -= len(line) + 1
    tail_room -= sum(len(e) + 1 for e in errors)
    tail_start = max(head_end, len(text) - tail_room)
    newline = text.find("\n", tail_start, tail_start + max(1, tail_room // 5))
    if newline >= 0:
        tail_start = newline + 1
    removed = len(text) - head_end - (len(text) - tail_start)
    kept_errors = f"; {len(errors):,} error lines of the cut part kept below" if errors else ""
    notice = (
        f"[ctxd truncated this tool result: {removed:,} of {len(text):,} characters removed from its middle to fit"
        f" the context window{kept_errors}. {hint or LOG_HINT}]"
    )
    middle = "\n".join([notice, *errors]) + "\n"
    if head_end and not text[:head_end].endswith("\n"):
        middle = "\n" + middle
    return text[:head_end] + middle + text[tail_start:]


def result_chars(message: Mapping[str, Any]) -> int:
    content = message.get("content")
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(str(b.get("text", ""))) for b in content if isinstance(b, Mapping) and b.get("type") == "text")
    return 0


def is_oversized(message: Mapping[str, Any], limit: int) -> bool:
    return message.get("role") == "toolResult" and result_chars(message) > limit


def truncate_tool_result(
    message: Mapping[str, Any], limit: int, *, style: str = "head", hint: str | None = None
) -> dict[str, Any]:
    """A copy of a toolResult message whose text fits in ``limit`` characters (images untouched); ``style="log"``
    cuts each text in its middle (:func:`truncate_log`)."""
    import copy  # not at the top: Claude Code's hook imports this module and never needs it

    out = copy.deepcopy(dict(message))
    shorten = truncate_log if style == "log" else truncate_text
    content = out.get("content")
    if isinstance(content, str):
        out["content"] = shorten(content, limit, hint=hint)
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
        block["text"] = shorten(str(block.get("text", "")), share, hint=hint)
    original = out.get("details")
    details: dict[str, Any] = dict(original) if isinstance(original, dict) else {}
    if original is not None and not isinstance(original, dict):
        details["original"] = original
    details["ctxdTruncated"] = {"originalChars": total, "limitChars": limit}
    out["details"] = details
    return out
