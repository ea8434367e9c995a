"""Truncating an agent's structured tool output (Claude Code's ``tool_response``) with seed 004's rules.

Claude Code validates a replacement against the tool's own output shape (a Bash result is an object with
``stdout``/``stderr``, a Read result nests the file's ``content``), so the copy keeps every key and type and
only shortens strings: when the strings of a response hold more than ``limit`` characters, each long one gets a
share of the limit proportional to its size (never below :data:`~ctxd.context.truncate.MIN_KEEP`) and is cut
like a tool result (at a newline in the last fifth when there is one, with a notice of what was removed), or
in its middle for a shell's log (``style="log"``: head, error lines and tail stay). Which outputs are cut, and
how, is :mod:`ctxd.context.cut_rules`'s decision.
"""

from __future__ import annotations

from typing import Any, Literal

from ctxd.context.truncate import MIN_KEEP, truncate_log, truncate_text

MAX_DEPTH = 32


def _strings(value: Any, depth: int = 0) -> list[int]:
    """The lengths of every string in ``value`` (dict values and list items, to a bounded depth)."""
    if isinstance(value, str):
        return [len(value)]
    if depth >= MAX_DEPTH:
        return []
    out: list[int] = []
    if isinstance(value, dict):
        for item in value.values():
            out += _strings(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            out += _strings(item, depth + 1)
    return out


def output_chars(value: Any) -> int:
    """Characters in the strings of a tool's output."""
    return sum(_strings(value))


def truncate_output(
    value: Any, limit: int, *, hint: str | None = None, style: Literal["head", "log"] = "head"
) -> Any | None:
    """A copy of ``value`` whose strings fit about ``limit`` characters, or None when it fits already."""
    total = output_chars(value)
    if total <= limit:
        return None
    shorten = truncate_log if style == "log" else truncate_text

    def cut(item: Any, depth: int) -> Any:
        if isinstance(item, str):
            share = max(MIN_KEEP, int(limit * len(item) / total))
            return shorten(item, share, hint=hint) if len(item) > share else item
        if depth >= MAX_DEPTH:
            return item
        if isinstance(item, dict):
            return {k: cut(v, depth + 1) for k, v in item.items()}
        if isinstance(item, list):
            return [cut(v, depth + 1) for v in item]
        return item

    return cut(value, 0)
