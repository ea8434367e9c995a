"""What a compaction plan reads of the messages it summarises, without decoding them first.

A plan names thousands of messages and reads few of them: the file operations of their tool calls
(:func:`file_ops_of`: from the calls' own bytes where the native scanner noted them,
``ctxd.context.line_estimate.noted_calls``, else from each line's tool calls alone, ``line_calls``) and,
only when a summariser asks, the messages themselves (:class:`Rows`, decoded on first read).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxd.compaction.fileops import FileOps, add_calls, extract_file_ops
from ctxd.context.line_estimate import line_calls, noted_calls
from ctxd.context.live_state import Agent
from ctxd.context.rows import ContextMessage
from ctxd.store.bodies import raw_lines

__all__ = ["Rows", "file_ops_of", "messages_of"]

_CALLERS = frozenset({"assistant", "toolResult"})


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
    lazy: list[ContextMessage] = []
    for row in rows:
        if row.role not in _CALLERS:
            continue
        if row.calls is not None:
            add_calls(ops, row.calls)
        elif row.source >= 0:
            lazy.append(row)
        else:
            ops.update(extract_file_ops([row.message]))
    if not lazy:
        return ops
    by_view: dict[int, list[ContextMessage]] = {}
    for row in lazy:
        by_view.setdefault(id(row.view), []).append(row)
    for group in by_view.values():
        view = group[0].view
        assert view is not None
        view.check()  # the lines are still the entries these rows were made from
        noted, left = noted_calls(view.reader, [row.source for row in group])
        for calls in noted.values():
            add_calls(ops, calls)
        if not left:
            continue
        rows = [row for row in group if row.source not in noted]
        for row, raw in zip(rows, raw_lines(view.reader, [row.source for row in rows]), strict=True):
            found = line_calls(raw)
            if found is None:
                ops.update(extract_file_ops([row.message]))
            else:
                add_calls(ops, found)
    return ops
