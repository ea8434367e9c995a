"""A context's messages: :class:`ContextMessage` rows, whose message may be decoded only when read.

A context of thousands of messages is built from the index and the cached estimates (see
:mod:`ctxd.context.live`); each row names its entry, and :func:`materialize` decodes the messages of
many rows with one batched read per file, through the :class:`ctxd.store.bodies.BodyView` of the
read the context was made from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import compress, repeat
from operator import attrgetter, is_, not_
from typing import Any

import msgspec

from ctxd.context.rules import entry_message
from ctxd.store.bodies import BodyView

__all__ = ["ContextMessage", "by_read", "materialize"]


class ContextMessage(msgspec.Struct, gc=False, eq=False):
    """One message of a context: its role, entry, line, estimate and the message itself.

    ``message`` may be decoded only when first read (a *lazy* row, made from the index and the
    estimate: ``ctxd.context.live``): it is then read through a :class:`BodyView`, which raises
    SessionError if the file was read again or rewritten in place since the context was made. Once
    read it is kept, and is the same dict on every read. (A msgspec Struct: a context of thousands of
    messages makes thousands of these, and a Struct is made three times faster than a class.)
    """

    role: str
    entryId: str
    line: int
    tokens: int
    _message: dict[str, Any] | None = None
    _view: BodyView | None = None
    index: int = -1
    """The entry the message is read from, for a row made lazy (else -1)."""
    used: int | None = None
    """For a lazy assistant row: the context size its usage reports, if pi trusts it (from the index)."""
    calls: list[tuple[str, Any]] | None = None
    """For a lazy row: its tool calls as ``ctxd.context.line_estimate.line_calls`` reads them, when known."""

    @property
    def message(self) -> dict[str, Any]:
        found = self._message
        if found is None:
            materialize([self])
            found = self._message
            assert found is not None
        return found

    @property
    def view(self) -> BodyView | None:
        """For a lazy row not read yet: the read its message is to be read from (else None)."""
        return self._view

    @property
    def loaded(self) -> bool:
        """Whether ``message`` is decoded already."""
        return self._message is not None

    @property
    def source(self) -> int:
        """The entry index a lazy row reads its message from while it is not decoded (else -1)."""
        return self.index if self._message is None else -1

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ContextMessage):
            return NotImplemented
        return (self.role, self.entryId, self.line, self.tokens, self.message) == (
            other.role,
            other.entryId,
            other.line,
            other.tokens,
            other.message,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = "<not read>" if self._message is None else repr(self._message)
        return (
            f"ContextMessage(role={self.role!r}, entryId={self.entryId!r}, line={self.line!r}, "
            f"tokens={self.tokens!r}, message={shown})"
        )

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


_MESSAGE = attrgetter("_message")
_VIEW = attrgetter("_view")


def by_read(rows: Sequence[ContextMessage]) -> tuple[list[tuple[BodyView, list[ContextMessage]]], list[ContextMessage]]:
    """The rows whose message is not read yet, by the read they come from, and the others (one pass of maps:
    a plan sorts thousands of rows)."""
    unread = list(map(is_, map(_MESSAGE, rows), repeat(None)))
    groups: dict[int, tuple[BodyView, list[ContextMessage]]] = {}
    for row in compress(rows, unread):
        view = row._view
        if view is None:  # never read, never readable: an empty message (cannot happen for a lazy row)
            continue
        found = groups.get(id(view))
        if found is None:
            found = groups[id(view)] = (view, [])
        found[1].append(row)
    read = list(compress(rows, map(not_, unread)))
    return list(groups.values()), read


def materialize(rows: Iterable[ContextMessage]) -> None:
    """Decode the messages of the lazy rows among ``rows``, one batched read per file."""
    pending: dict[int, tuple[BodyView, list[ContextMessage]]] = {}
    for row in rows:
        view = row._view
        if row._message is None and view is not None:
            found = pending.get(id(view))
            if found is None:
                found = pending[id(view)] = (view, [])
            found[1].append(row)
    for view, group in pending.values():
        bodies = view.entries([row.index for row in group])
        for row, body in zip(group, bodies, strict=True):
            message = entry_message(body)
            row._message = message if message is not None else {}
            row._view = None
