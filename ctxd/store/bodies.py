"""Bodies read later: an entry's body as the file was when an answer was made, or a clear error.

An answer (a context, a compaction plan) names its messages by entry index and decodes them only when
a caller reads them. :class:`BodyView` remembers the read the answer was made from (the reader's
generation and :class:`ctxd.store.private.FileMark`); reading a body through it first checks that the
file is still that file, at most appended to since. A file read again (a new generation) or rewritten
in place since raises :class:`ctxd.errors.SessionError` instead of serving bytes that are no longer
the entry the answer named: an answer is never silently wrong.

:func:`raw_lines` hands out entries' line bytes for passes that need only a few fields of each (the
token estimates, the tool calls of a compaction plan), decoded by the caller with a typed decoder.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Sequence
from itertools import pairwise
from typing import Any, Protocol

from ctxd.errors import SessionError
from ctxd.store.calls import NotedCalls
from ctxd.store.files import open_session_fd
from ctxd.store.private import FileMark

__all__ = ["BodyView", "Lines", "Reader", "Span", "line_spans", "raw_lines"]


class Lines(Protocol):
    """Where a file's indexed lines are (a :class:`ctxd.store.reader.SessionReader`)."""

    path: str
    offsets: array[int]
    lengths: array[int]


class Reader(Lines, Protocol):
    """A reader whose bodies a view serves (a :class:`ctxd.store.reader.SessionReader`)."""

    generation: int
    mark: FileMark | None
    noted_calls: NotedCalls

    def entries(self, indices: Sequence[int]) -> list[dict[str, Any]]: ...


class BodyView:
    """A reader's bodies as of one read (see the module; ``SessionReader.body_view`` gives the current one)."""

    __slots__ = ("_seen", "generation", "mark", "reader")

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.generation = reader.generation
        self.mark: FileMark | None = reader.mark
        self._seen: tuple[int, ...] | None = None
        """The stat last found to be the marked file (at most appended to): no second look."""

    def entries(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """The bodies of entries ``indices`` (fresh dicts, as :meth:`SessionReader.entries`)."""
        self.check()
        return self.reader.entries(indices)

    def check(self) -> None:
        """Raise SessionError unless the file is still the one this view was made from."""
        reader = self.reader
        if reader.generation != self.generation:
            raise SessionError(
                "the session file was read again since this answer was made; ask again", path=reader.path
            )
        mark = self.mark
        if mark is None:
            return  # nothing read yet: no body to misplace
        try:
            st = os.stat(reader.path)
        except FileNotFoundError as exc:
            raise SessionError("session file disappeared", path=reader.path) from exc
        seen = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if seen == self._seen or mark.unchanged(st):
            self._seen = seen
            return
        fd = open_session_fd(reader.path)
        try:
            same = mark.appended_only(fd, os.fstat(fd))
        finally:
            os.close(fd)
        if not same:
            raise SessionError("the session file was rewritten since this answer was made; ask again", path=reader.path)
        self._seen = seen


GAP = 1 << 16
"""Lines closer than this are read in one piece (the bytes between are read and dropped)."""
RUN = 1 << 23
"""The most bytes read in one piece."""

Span = tuple[bytes, int, int]
"""A line as (bytes holding it, start, end): ``buf[start:end]`` is the line without its newline."""


def raw_lines(reader: Lines, indices: Sequence[int]) -> list[bytes]:
    """The line bytes of entries ``indices`` (without newline), read with one open file."""
    return [buf[a:b] for buf, a, b in line_spans(reader, indices)]


def line_spans(reader: Lines, indices: Sequence[int]) -> list[Span]:
    """Where the lines of entries ``indices`` are, read in few large pieces (nearby lines together)."""
    offsets, lengths = reader.offsets, reader.lengths
    starts = [offsets[i] for i in indices]
    order: Sequence[int] = range(len(indices))
    if any(a > b for a, b in pairwise(starts)):
        order = sorted(order, key=starts.__getitem__)
    out: list[Span] = [(b"", 0, 0)] * len(indices)
    fd = open_session_fd(reader.path)
    try:
        run: list[int] = []
        lo = hi = 0
        for k in order:
            start = starts[k]
            end = start + lengths[indices[k]]
            if run and (start - hi > GAP or end - lo > RUN):
                _fill(reader, fd, run, indices, lo, hi, out)
                run = []
            if not run:
                lo = hi = start
            run.append(k)
            if end > hi:
                hi = end
        if run:
            _fill(reader, fd, run, indices, lo, hi, out)
    finally:
        os.close(fd)
    return out


def _fill(reader: Lines, fd: int, run: list[int], indices: Sequence[int], lo: int, hi: int, out: list[Span]) -> None:
    offsets, lengths = reader.offsets, reader.lengths
    buf = os.pread(fd, hi - lo, lo)
    for k in run:
        i = indices[k]
        a = offsets[i] - lo
        b = a + lengths[i]
        if b > len(buf):
            raise SessionError("the session file is shorter than its index; it will be read again", path=reader.path)
        out[k] = (buf, a, b)
