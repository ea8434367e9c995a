"""The tool calls the native scanner noted: where each ``message`` entry's calls lie in its line.

A compaction plan reads the file operations of every tool call it summarises (thousands of lines). The
scanner (``ctxd/_native.c``) notes, as it indexes a line, whether the entry records tool calls (the calls
``ctxd.context.rules.message_calls`` reads: an assistant's ``toolCall`` blocks, a tool result's
``nestedCalls``) and where their JSON is: each ``toolCall`` block, or a tool result's ``nestedCalls``
value. :func:`read_calls` then reads those few bytes instead of the lines. Entries the scanner did not
note (read by the Python path, appended by ctxd itself, or from a transcript) are left to the caller,
which reads their lines.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import compress
from operator import add
from typing import Protocol

from ctxd.errors import SessionError
from ctxd.store.files import open_session_fd

__all__ = ["NESTED", "NONE", "NOTED", "TOOL_CALL", "NotedCalls", "read_calls"]

UNKNOWN, NONE, NOTED = 0, 1, 2
"""An entry's flag: its calls were not noted, it records none, they are listed."""
TOOL_CALL, NESTED = 1, 2
"""A listed call's kind: an assistant's ``toolCall`` block, or the ``nestedCalls`` value of a tool result."""
FIELDS = 4
"""Per listed call: its entry, its kind, its JSON's offset in the entry's line and its length."""
GAP = 1 << 16
"""Calls closer than this in the file are read in one piece."""


class NotedCalls:
    """Per entry, what the scanner noted of its calls (see the module)."""

    __slots__ = ("calls", "flags")

    def __init__(self, flags: bytes | bytearray | memoryview = b"", calls: array[int] | None = None) -> None:
        self.flags = bytearray(flags)
        """One byte per entry: :data:`UNKNOWN`, :data:`NONE` or :data:`NOTED` (entries past its end: unknown)."""
        self.calls = calls if calls is not None else array("q")
        """:data:`FIELDS` int64s per listed call, by entry (ascending)."""

    def note(self, first: int, flags: bytes, calls: array[int]) -> None:
        """The scanner's notes for entries ``first`` .. ``first + len(flags)``: ``calls`` lists their calls
        with each one's line in the chunk (0-based) in place of its entry."""
        have = self.flags
        if len(have) < first:
            have.extend(bytes(first - len(have)))
        have[first : first + len(flags)] = flags
        if calls:
            calls = array("q", calls)
            calls[0::FIELDS] = array("q", map(first.__add__, calls[0::FIELDS]))
            self.calls.extend(calls)  # chunks come in file order: entries stay ascending


class Lines(Protocol):
    """Where a file's indexed lines are (a :class:`ctxd.store.reader.SessionReader`)."""

    path: str
    offsets: array[int]
    noted_calls: NotedCalls


def read_calls(reader: Lines, indices: Sequence[int]) -> tuple[list[tuple[int, bytes]], list[int]]:
    """The calls of those of the entries ``indices`` the scanner noted, as (kind, JSON) each, in file order;
    and the entries it did not note (read their lines)."""
    noted = reader.noted_calls
    flags = noted.flags
    if not indices:
        return [], []
    if max(indices) < len(flags):
        found = bytes(map(flags.__getitem__, indices))
    else:
        found = bytes(flags[i] if i < len(flags) else UNKNOWN for i in indices)
    left = list(compress(indices, map(UNKNOWN.__eq__, found)))
    listed = set(compress(indices, map(NOTED.__eq__, found)))
    if not listed:
        return [], left
    calls = noted.calls
    entries = memoryview(calls)[0::FIELDS]
    lo, hi = bisect_left(entries, min(listed)), bisect_right(entries, max(listed))
    window = calls[lo * FIELDS : hi * FIELDS]
    keep = list(map(listed.__contains__, window[0::FIELDS]))
    kinds = list(compress(window[1::FIELDS], keep))
    starts = list(
        map(add, map(reader.offsets.__getitem__, compress(window[0::FIELDS], keep)), compress(window[2::FIELDS], keep))
    )
    return list(zip(kinds, _read(reader.path, starts, list(compress(window[3::FIELDS], keep))), strict=True)), left


def _read(path: str, starts: list[int], lengths: list[int]) -> list[bytes]:
    """The bytes at ``starts`` (ascending) of ``lengths``, read in few pieces (nearby ones together)."""
    out: list[bytes] = []
    fd = open_session_fd(path)
    try:
        k, n = 0, len(starts)
        while k < n:
            lo = starts[k]
            hi = lo + lengths[k]
            j = k + 1
            while j < n and starts[j] - hi <= GAP:
                hi = max(hi, starts[j] + lengths[j])
                j += 1
            buf = os.pread(fd, hi - lo, lo)
            if len(buf) != hi - lo:
                raise SessionError("the session file is shorter than its index; it will be read again", path=path)
            out.extend(buf[at - lo : at - lo + length] for at, length in zip(starts[k:j], lengths[k:j], strict=True))
            k = j
    finally:
        os.close(fd)
    return out
