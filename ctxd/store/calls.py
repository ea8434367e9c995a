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
from bisect import bisect_left
from collections.abc import Sequence
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
GAP = 1 << 14
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


def read_calls(reader: Lines, indices: Sequence[int]) -> tuple[dict[int, list[tuple[int, bytes]]], list[int]]:
    """The calls of the entries ``indices`` the scanner noted, as (kind, JSON) each (entries without calls:
    an empty list); and the entries it did not note (read their lines)."""
    noted = reader.noted_calls
    flags = noted.flags
    n = len(flags)
    out: dict[int, list[tuple[int, bytes]]] = {}
    left: list[int] = []
    listed: list[int] = []
    for i in indices:
        flag = flags[i] if i < n else UNKNOWN
        if flag == NONE:
            out[i] = []
        elif flag == NOTED:
            out[i] = []
            listed.append(i)
        else:
            left.append(i)
    if not listed:
        return out, left
    listed.sort()
    calls, offsets = noted.calls, reader.offsets
    entries = memoryview(calls)[0::FIELDS]
    wanted: list[tuple[int, int, int, int]] = []  # entry, kind, offset in the file, length
    k = bisect_left(entries, listed[0])
    for i in listed:
        if k >= len(entries) or entries[k] != i:
            k = bisect_left(entries, i)
        base = offsets[i]
        while k < len(entries) and entries[k] == i:
            at = k * FIELDS
            wanted.append((i, calls[at + 1], base + calls[at + 2], calls[at + 3]))
            k += 1
    for (i, kind, _, _), data in zip(wanted, _read(reader.path, wanted), strict=True):
        out[i].append((kind, data))
    return out, left


def _read(path: str, wanted: list[tuple[int, int, int, int]]) -> list[bytes]:
    """The bytes of each wanted call (sorted by offset), read in few pieces (nearby calls together)."""
    out: list[bytes] = []
    fd = open_session_fd(path)
    try:
        k = 0
        while k < len(wanted):
            lo = wanted[k][2]
            hi = lo + wanted[k][3]
            j = k + 1
            while j < len(wanted) and wanted[j][2] - hi <= GAP:
                hi = max(hi, wanted[j][2] + wanted[j][3])
                j += 1
            buf = os.pread(fd, hi - lo, lo)
            if len(buf) != hi - lo:
                raise SessionError("the session file is shorter than its index; it will be read again", path=path)
            out.extend(buf[at - lo : at - lo + length] for _, _, at, length in wanted[k:j])
            k = j
    finally:
        os.close(fd)
    return out
