"""The native scanner, when it is built: one C pass per chunk of lines (``ctxd/_native.c``).

For a chunk of complete lines it validates every line strictly, finds each line's offset and length,
computes pi's token estimate of each ``message`` entry it can (the same figure as
:func:`ctxd.context.line_estimate.estimate_line`), and writes a reduced copy of the lines holding only
the members an index head reads, so that msgspec decodes the heads without skipping message bodies.
Any line it is not sure of makes it decline the whole chunk (:func:`scan_chunk` returns None), and the
Python path indexes that chunk as it always did: its diagnostics and answers are the reference.

Wheels carry the compiled module; an install without it (an sdist on a machine without a compiler)
reads the same files through the Python path. ``CTXD_NATIVE=0`` in the environment forces that path.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from ctxd.formats.depth import MAX_DEPTH

__all__ = ["CHUNK", "TOO_LONG", "NativeChunk", "available", "describe", "prefetch", "scan_chunk"]


class NativeChunk(NamedTuple):
    reduced: bytes
    """One reduced line per line, newline-terminated: only the members ``LineHead`` reads."""
    offsets: bytes
    """Each line's offset in the file, int64s (``array("q")`` bytes)."""
    lengths: bytes
    """Each line's length without its newline, int64s."""
    est_lines: bytes
    """The lines (0-based in the chunk) whose estimate is known, int64s."""
    est_values: bytes
    """Their estimates, int64s."""
    numbers: bytes
    """Each line's number (the first one's, counting on), int64s."""
    call_flags: bytes
    """Each line's tool calls flag (``ctxd.store.calls``: 0 not noted, 1 none, 2 listed), a byte each."""
    calls: bytes
    """The calls listed, six int64s each: line (0-based in the chunk), kind, name offset and length, value
    offset and length (offsets in the line, -1 when absent)."""


def _load() -> Any:
    if os.environ.get("CTXD_NATIVE", "1").strip() == "0":
        return None
    try:
        from ctxd import _native  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _native


_module = _load()
_scan = _module.scan_chunk if _module is not None else None
_prefetch = getattr(_module, "Prefetch", None)


def available() -> bool:
    """Whether the native scanner is in use (built, and not turned off by ``CTXD_NATIVE=0``)."""
    return _scan is not None


def describe() -> str:
    """Which scanner reads session files, in words (``ctxd doctor`` prints it)."""
    if _scan is not None:
        return "native (ctxd._native)" + (", reading ahead on a thread" if _prefetch is not None else "")
    if _module is not None:
        return "Python (CTXD_NATIVE=0 turns the native scanner off)"
    return "Python (ctxd._native is not built: a wheel carries it, or reinstall with a C compiler)"


def scan_chunk(buf: Any, end: int, base: int, first_line: int = 0) -> NativeChunk | None:
    """Index the complete lines of ``buf[:end]`` (``base``: the file offset of ``buf[0]``; its first
    line is numbered ``first_line``), or None when the native scanner is missing or declines the chunk
    (then take the Python path)."""
    if _scan is None:
        return None
    found = _scan(buf, end, base, MAX_DEPTH, first_line)
    return None if found is None else NativeChunk(*found)


CHUNK = 1
"""A ``Prefetch.next()`` item: a chunk of complete lines."""
TOO_LONG = 2
"""A ``Prefetch.next()`` item: a line longer than the longest read was skipped."""


def prefetch(fd: int, start: int, chunk: int, max_line: int, first_line: int) -> Any:
    """A ``ctxd._native.Prefetch`` reading and scanning ``fd`` from ``start`` on a native thread, a few
    chunks ahead of its reader (cut as ``ctxd.store.scan.scan`` cuts them); None without the native
    scanner. Its ``next()`` gives ``(kind, base, end, scanned)`` items (``scanned``: what
    :func:`scan_chunk` gives, None when declined: then ``data()`` holds the chunk's bytes) and None at
    the end, when ``offset`` is where the complete lines end. Close it before closing ``fd``."""
    if _prefetch is None or _scan is None:
        return None
    return _prefetch(fd, start, MAX_DEPTH, chunk, max_line, first_line)
