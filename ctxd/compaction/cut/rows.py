"""What a compaction plan reads of the messages it summarises, without decoding them first.

A plan names thousands of messages and reads few of them: the file operations of their tool calls
(:func:`file_ops_of`: from the calls' own bytes where the native scanner noted them,
``ctxd.context.line_estimate.noted_calls``, else from each line's tool calls alone, ``line_calls``) and,
only when a summariser asks, the messages themselves (:class:`Rows`, decoded on first read).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import Any

from ctxd.compaction.reading.fileops import FileOps, add_calls, extract_file_ops
from ctxd.context.line_estimate import line_calls, noted_calls
from ctxd.context.live_state import Agent
from ctxd.context.rows import ContextMessage, by_read
from ctxd.store.bodies import raw_lines

__all__ = ["Rows", "file_ops_of", "messages_of"]

_CALLERS = frozenset({"assistant", "toolResult"})
_ROLE = attrgetter("role")
_CALLS = attrgetter("calls")


class Rows(Agent):
    """Messages of a context's rows, decoded in one batch when first read."""

    def messages(self) -> list[dict[str, Any]]:
        return self[:]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Rows | list):
            return self.messages() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Rows({len(self.rows)} messages)"


def messages_of(value: list[dict[str, Any]] | Rows) -> list[dict[str, Any]]:
    """The message list of a plan field (decoding a :class:`Rows` once)."""
    return value.messages() if isinstance(value, Rows) else value


def file_ops_of(rows: Sequence[ContextMessage]) -> FileOps:
    """``extract_file_ops`` of the rows' messages, reading only the tool calls of rows not decoded yet."""
    ops = FileOps()
    callers = list(compress(rows, map(_CALLERS.__contains__, map(_ROLE, rows))))
    carried = list(map(_CALLS, callers))
    for calls in filter(None, carried):
        add_calls(ops, calls)
    groups, read = by_read(list(compress(callers, map(is_, carried, repeat(None)))))
    for row in read:
        ops.update(extract_file_ops([row.message]))
    for view, group in groups:
        view.check()  # the lines are still the entries these rows were made from
        noted, left = noted_calls(view.reader, [row.index for row in group])
        add_calls(ops, noted)
        if not left:
            continue
        unread = set(left)
        rows = [row for row in group if row.index in unread]
        for row, raw in zip(rows, raw_lines(view.reader, [row.index for row in rows]), strict=True):
            found = line_calls(raw)
            if found is None:
                ops.update(extract_file_ops([row.message]))
            else:
                add_calls(ops, found)
    return ops
