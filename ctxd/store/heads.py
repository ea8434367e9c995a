"""A file's index heads, each decoded from its own line when it is first asked for.

A session of a million entries holds about 700 MB of heads once decoded (a few dozen small
objects per line). The tree needs each head once, when it is built; afterwards requests read the
heads of a path or two. So :class:`Heads` is a list whose slots may be empty (None): an empty slot
is filled from the line's bytes (one read for a block of neighbours) on first access and kept. A
full scan fills every slot and :meth:`Heads.release` empties them once the tree is built; an index
read back from the cache (``ctxd.store.index_cache``) starts empty.

Heads that cannot be decoded again from their line alone (a line holding two objects, a line
served pruned or with invalid UTF-8 replaced: those the reader keeps a body for) are never emptied.
"""

from __future__ import annotations

import os
import weakref
from array import array
from collections.abc import Callable, Collection, Iterator
from typing import Any, Protocol, SupportsIndex, overload

import msgspec

from ctxd.errors import SessionError
from ctxd.formats.codec import LineHead, decode_head, head_from_dict
from ctxd.store.scan import decode_bounded

BLOCK = 32
"""Heads decoded together around a miss (neighbours on a path are usually neighbours in the file)."""


def decode_line_head(data: bytes | memoryview) -> LineHead:
    """A line's head as the scan made it (a line decode_head cannot type is read as a dict)."""
    try:
        return decode_head(data)
    except msgspec.ValidationError:
        obj, _ = decode_bounded(data)
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object") from None
        return head_from_dict(obj)


HeadSink = Callable[[int, LineHead], None]


class HeadSource(Protocol):
    """Where heads are decoded from (a :class:`ctxd.store.reader.SessionReader`)."""

    def keep_heads(self) -> Collection[int]:
        """Entries whose head only memory holds (never emptied)."""
        ...

    def read_heads(self, missing: list[int], put: HeadSink) -> None:
        """Decode the heads of entries ``missing`` (ascending) from the file into ``put``."""
        ...


class Lines(Protocol):
    """Where a file's indexed lines are, and their numbers."""

    path: str
    offsets: array[int]
    lengths: array[int]
    lines: array[int]


class Heads(list[Any]):
    """The heads of a reader's entries; an empty slot (None) is decoded from its line on access."""

    __slots__ = ("_owner",)

    def __init__(self, reader: HeadSource, items: Any = ()) -> None:
        super().__init__(items)
        self._owner = weakref.ref(reader)
        """The reader that owns this list, held weakly: the two are freed as soon as the reader is
        dropped, not at the next full collection (a closed session's index is most of what it held)."""

    @property
    def _reader(self) -> HeadSource:
        reader = self._owner()
        if reader is None:
            raise SessionError("the session's reader was let go; its heads cannot be read any more")
        return reader

    @overload
    def __getitem__(self, i: SupportsIndex) -> LineHead: ...
    @overload
    def __getitem__(self, i: slice) -> list[LineHead]: ...
    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step == 1:
                part = list.__getitem__(self, i)
                if None not in part:  # the usual case, checked in C
                    return part
                self._fill(start, stop)
            else:
                self._fill(0, len(self))
            return list.__getitem__(self, i)
        head = list.__getitem__(self, i)
        if head is None:
            k = i.__index__()
            if k < 0:
                k += len(self)
            self.fill_around(k)
            head = list.__getitem__(self, k)
        return head

    def __iter__(self) -> Iterator[LineHead]:
        self._fill(0, len(self))
        return list.__iter__(self)

    def __reversed__(self) -> Iterator[LineHead]:
        self._fill(0, len(self))
        return list.__reversed__(self)

    def released(self) -> int:
        """How many slots are empty now."""
        return list.count(self, None)

    def release(self, start: int = 0, stop: int | None = None) -> None:
        """Empty the slots from ``start`` to ``stop``, except heads that only the reader's memory holds."""
        stop = len(self) if stop is None else stop
        if stop <= start:
            return
        keep = {i: list.__getitem__(self, i) for i in self._reader.keep_heads() if start <= i < stop}
        list.__setitem__(self, slice(start, stop), [None] * (stop - start))
        for i, head in keep.items():
            list.__setitem__(self, i, head)

    def fill_around(self, k: int) -> None:
        first = k - k % BLOCK
        self._fill(first, min(len(self), first + BLOCK))

    def _fill(self, start: int, stop: int) -> None:
        """Decode every empty slot from ``start`` to ``stop`` (one read per run of neighbours)."""
        part = list.__getitem__(self, slice(start, stop))
        if None not in part:
            return
        missing = [i for i, head in enumerate(part, start) if head is None]
        if missing:
            self._reader.read_heads(missing, lambda i, head: list.__setitem__(self, i, head))


def read_heads(reader: Lines, fd: int, missing: list[int], put: HeadSink) -> None:
    """Decode the heads of entries ``missing`` (ascending) from ``fd``, reading each run of
    neighbouring lines at once."""
    offsets, lengths = reader.offsets, reader.lengths
    run_start = 0
    while run_start < len(missing):
        run_end = run_start + 1
        while run_end < len(missing) and missing[run_end] == missing[run_end - 1] + 1 and run_end - run_start < 4096:
            run_end += 1
        first, last = missing[run_start], missing[run_end - 1]
        base = offsets[first]
        size = offsets[last] + lengths[last] - base
        data = os.pread(fd, size, base)
        if len(data) != size:
            raise SessionError("the file changed on disk while being read; it will be read again", path=reader.path)
        view = memoryview(data)
        for i in missing[run_start:run_end]:
            o = offsets[i] - base
            try:
                head = decode_line_head(view[o : o + lengths[i]])
            except (ValueError, RecursionError) as exc:
                message = f"line {reader.lines[i]} changed on disk while being read; it will be read again"
                raise SessionError(message, path=reader.path) from exc
            put(i, head)
        run_start = run_end
