"""Turning bytes into index heads: one pass, tolerant of damage, recovering what it can.

A line that is not JSON is reported with its file and line; two objects run together on one line
(how real pi files were damaged by unguarded appends) are split and both served.
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Callable
from typing import Any, NamedTuple

import attrs
import msgspec

from ctxd.formats import depth
from ctxd.formats.codec import LineHead, decode_any, decode_head, head_from_dict
from ctxd.store import native

READ_CHUNK = 1 << 20
"""Bytes read at once: a buffer this small stays in the CPU's cache while its lines are decoded."""
MAX_LINE = 64 << 20
"""The longest line read (64 MB): a longer one is reported and skipped, never held in memory."""

TOO_DEEP = f"nested deeper than {depth.MAX_DEPTH} levels: the deeper values are replaced by a placeholder"
BAD_UTF8 = "invalid UTF-8 replaced"


@attrs.frozen
class Diagnostic:
    """Something wrong with one line of a session file. The rest of the file is still served."""

    path: str
    line: int
    message: str
    severity: str = "warning"
    entryId: str | None = None
    """The entry the line holds, when it is known."""
    kind: str | None = None
    """What is wrong, as a stable word (``malformed``, ``too-deep``, ``orphan``, ...: see
    docs/protocol.md, session/check)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "line": self.line, "message": self.message, "severity": self.severity}
        if self.entryId is not None:
            out["entryId"] = self.entryId
        if self.kind is not None:
            out["kind"] = self.kind
        return out


def note_kind(note: str) -> str:
    """The kind of a :func:`decode_bounded` note."""
    return "too-deep" if note.startswith(TOO_DEEP) else "bad-utf8"


def decode_bounded(data: bytes | memoryview) -> tuple[Any, str | None]:
    """One line's JSON value, made servable, and what had to be done to it (None: nothing).

    A value nested deeper than :data:`ctxd.formats.depth.MAX_DEPTH` is pruned to that depth;
    invalid UTF-8 inside strings is replaced.  Raises ValueError (msgspec.DecodeError) for a line
    that is not JSON at all (brackets opened deeper than the limit and never closed included).
    """
    raw = bytes(data)
    if depth.too_deep(raw):
        raw = depth.prune(raw)
        note: str | None = TOO_DEEP
    else:
        note = None
    try:
        return decode_any(raw), note
    except RecursionError as exc:  # cannot happen after prune; never let one line break the file
        raise ValueError("nested too deeply to read") from exc
    except ValueError:  # msgspec.DecodeError, or UnicodeDecodeError inside a string
        text = raw.decode("utf-8", errors="replace")
        if "\ufffd" not in text:
            raise
        return decode_any(text.encode()), BAD_UTF8 if note is None else f"{note}; {BAD_UTF8}"


@attrs.define
class ScannedLine:
    head: LineHead
    offset: int
    length: int
    line: int
    body: dict[str, Any] | None = None
    """Set when the body cannot be re-read from ``offset`` (a recovered line)."""


Sink = Callable[[ScannedLine], None]


def _split_objects(text: str) -> list[Any]:
    """Every JSON value in ``text`` run together without separators, or [] if any part is not JSON."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    pos = 0
    end = len(text)
    while pos < end:
        while pos < end and text[pos].isspace():
            pos += 1
        if pos >= end:
            break
        try:
            value, pos = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            return []
        values.append(value)
    return values


def parse_line(
    data: bytes | memoryview, offset: int, line: int, path: str, sink: Sink, diagnostics: list[Diagnostic]
) -> None:
    """Index one complete line (without its newline)."""
    decoded = False
    try:
        sink(ScannedLine(decode_head(data), offset, len(data), line))
        return
    except msgspec.ValidationError as exc:
        # Valid JSON, unexpected shape (a new field type, or not an object); or a first object of
        # an unexpected shape with more after it (two objects on one line): recovered below.
        error = str(exc)
        try:
            obj, note = decode_bounded(data)
            decoded = True
        except ValueError:
            pass
    except RecursionError:
        error = "too deep to read"  # deeper than the decoder goes: pruned below
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # the latter: in a field the head reads
        error = str(exc)
    if decoded:
        if isinstance(obj, dict):
            if note:
                diagnostics.append(Diagnostic(path, line, note, "warning", _id_of(obj), note_kind(note)))
            sink(ScannedLine(head_from_dict(obj), offset, len(data), line, body=obj if note else None))
        else:
            diagnostics.append(Diagnostic(path, line, f"not a JSON object ({type(obj).__name__})", kind="not-object"))
        return
    raw = bytes(data)
    if not raw.strip():
        return  # blank lines are harmless; pi skips them too
    try:
        obj, note = decode_bounded(raw)
    except ValueError:
        obj, note = None, None
    if isinstance(obj, dict) and note:
        # Servable only pruned, or after replacing invalid UTF-8: serve it, say so.
        diagnostics.append(Diagnostic(path, line, note, "warning", _id_of(obj), note_kind(note)))
        sink(ScannedLine(head_from_dict(obj), offset, len(data), line, body=obj))
        return
    if depth.too_deep(raw):
        message = f"malformed JSON nested more than {depth.MAX_DEPTH} levels deep ({error})"
        diagnostics.append(Diagnostic(path, line, message, severity="error", kind="malformed"))
        return
    text = raw.decode("utf-8", errors="replace")
    values = _split_objects(text)
    if len(values) > 1 and all(isinstance(v, dict) for v in values):
        diagnostics.append(
            Diagnostic(
                path, line, f"{len(values)} JSON objects on one line; recovered each", "info", kind="two-objects"
            )
        )
        for value in values:
            sink(ScannedLine(head_from_dict(value), offset, len(data), line, body=value))
        return
    diagnostics.append(Diagnostic(path, line, f"malformed JSON: {error}", severity="error", kind="malformed"))


def _id_of(obj: dict[str, Any]) -> str | None:
    eid = obj.get("id")
    return eid if isinstance(eid, str) else None


class Lines(NamedTuple):
    """A chunk of consecutive well-formed lines, indexed at once."""

    heads: list[LineHead]
    offsets: array[int]
    """Each line's offset in the file."""
    lengths: array[int]
    """Each line's length, without its newline."""
    line: int
    """The first line's number."""
    estimates: tuple[array[int], array[int]] | None = None
    """From the native scanner: the lines (0-based here) whose token estimate it knows, and those
    estimates. Every line of such a chunk was validated whole (``ctxd.store.native``)."""
    numbers: array[int] | None = None
    """Each line's number, when the native scanner gave them (else ``line`` counting on)."""
    calls: tuple[bytes, array[int]] | None = None
    """From the native scanner: each line's tool calls flag and the calls it lists (``ctxd.store.calls``)."""


Bulk = Callable[[Lines], bool]
"""``bulk(lines)`` takes a chunk of consecutive well-formed lines at once, or returns False to have
them indexed one by one."""

_decode_lines = msgspec.json.Decoder(LineHead).decode_lines


PREFETCH_MIN = 8 * READ_CHUNK
"""A file with this much left to read is read and scanned ahead on a native thread, while the
chunks already scanned are indexed here (``ctxd.store.native.prefetch``)."""


def scan(
    fd: int,
    start: int,
    first_line: int,
    path: str,
    sink: Sink,
    diagnostics: list[Diagnostic],
    bulk: Bulk | None = None,
    after_chunk: Callable[[], None] | None = None,
) -> tuple[int, int]:
    """Index every complete line from byte ``start``; return (end offset consumed, next line number).
    ``after_chunk`` is called after each chunk of lines is indexed.

    Each chunk of complete lines is decoded in one call when it is clean (the hot path); a chunk
    with anything unusual is indexed line by line, reporting what is wrong.  A final line without
    its newline is left unconsumed: it is still being written, or torn.
    """
    try:  # a small buffer for a small read (a refresh, a reopen from the cached index)
        remaining = os.fstat(fd).st_size - start
    except OSError:
        remaining = READ_CHUNK
    if bulk is not None and remaining >= PREFETCH_MIN:
        ahead = native.prefetch(fd, start, READ_CHUNK, MAX_LINE, first_line)
        if ahead is not None:
            return _scan_ahead(ahead, first_line, path, sink, diagnostics, bulk, after_chunk)
    buf = bytearray(min(READ_CHUNK, max(1 << 16, remaining + 1)))
    view = memoryview(buf)
    have = 0
    base = start
    line = first_line
    pread = os.preadv
    while True:
        if have == len(buf):
            if have >= MAX_LINE:
                skipped = _skip_line(fd, base + have, buf)
                if skipped < 0:
                    break  # no newline yet: leave it unconsumed, like any partial line
                diagnostics.append(_too_long(path, line))
                base = skipped
                have = 0
                line += 1
                continue
            # One line longer than the buffer: grow it.
            del view
            buf.extend(bytes(min(len(buf), MAX_LINE - len(buf))))
            view = memoryview(buf)
        n = pread(fd, [view[have:]], base + have)
        if n <= 0:
            break
        have += n
        end = buf.rfind(b"\n", 0, have) + 1
        if end:
            taken = _native_chunk(view, end, base, line, bulk) if bulk is not None else 0
            if not taken:
                taken = _python_chunk(view, end, base, line, path, sink, diagnostics, bulk)
            line += taken
            if after_chunk is not None:
                after_chunk()
        rest = have - end
        if end:
            view[:rest] = bytes(view[end:have])  # a copy: source and target overlap
        base += end
        have = rest
    return base, line


def _scan_ahead(
    ahead: Any,
    line: int,
    path: str,
    sink: Sink,
    diagnostics: list[Diagnostic],
    bulk: Bulk,
    after_chunk: Callable[[], None] | None,
) -> tuple[int, int]:
    """:func:`scan` with the chunks read and scanned ahead on a native thread: the same chunks, lines
    and diagnostics."""
    try:
        while (item := ahead.next()) is not None:
            kind, base, end, scanned = item
            if kind == native.TOO_LONG:
                diagnostics.append(_too_long(path, line))
                line += 1
                continue
            taken = _take(native.NativeChunk(*scanned), line, bulk) if scanned is not None else 0
            if not taken:
                taken = _python_chunk(memoryview(ahead.data()), end, base, line, path, sink, diagnostics, bulk)
            line += taken
            if after_chunk is not None:
                after_chunk()
        return ahead.offset, line
    finally:
        ahead.close()


def _too_long(path: str, line: int) -> Diagnostic:
    return Diagnostic(path, line, f"line longer than {MAX_LINE >> 20} MB; skipped", "error", kind="too-long")


def _python_chunk(
    view: memoryview,
    end: int,
    base: int,
    line: int,
    path: str,
    sink: Sink,
    diagnostics: list[Diagnostic],
    bulk: Bulk | None,
) -> int:
    """Index the complete lines of ``view[:end]`` in Python: in one decode when they are clean, else
    line by line, reporting what is wrong. Returns the number of lines."""
    offsets: list[int] = []
    lengths: list[int] = []
    find = view.obj.find if isinstance(view.obj, bytes | bytearray) else bytes(view[:end]).find
    pos = 0
    while pos < end:
        nl = find(b"\n", pos, end)
        offsets.append(pos)
        lengths.append(nl - pos)
        pos = nl + 1
    if not _bulk_chunk(view, end, offsets, lengths, base, line, bulk):
        for off, length, number in zip(offsets, lengths, range(line, line + len(offsets)), strict=True):
            data = view[off : off + length]
            try:
                head = decode_head(data)
            except (msgspec.MsgspecError, RecursionError, UnicodeDecodeError):
                parse_line(data, base + off, number, path, sink, diagnostics)
            else:
                sink(ScannedLine(head, base + off, length, number))
    return len(offsets)


def _skip_line(fd: int, pos: int, buf: bytearray) -> int:
    """The offset after the next newline from ``pos`` (reading into ``buf``), or -1 at the end."""
    view = memoryview(buf)
    try:
        while True:
            n = os.preadv(fd, [view], pos)
            if n <= 0:
                return -1
            nl = buf.find(b"\n", 0, n)
            if nl >= 0:
                return pos + nl + 1
            pos += n
    finally:
        view.release()


def _native_chunk(view: memoryview, end: int, base: int, line: int, bulk: Bulk) -> int:
    """Index the chunk through the native scanner (``ctxd.store.native``), if it takes it: the
    number of lines indexed, or 0."""
    found = native.scan_chunk(view, end, base, line)
    return 0 if found is None else _take(found, line, bulk)


def _take(found: native.NativeChunk, line: int, bulk: Bulk) -> int:
    """Index a chunk the native scanner took: the number of lines, or 0 to index it in Python."""
    try:
        heads = _decode_lines(found.reduced)
    except (msgspec.MsgspecError, RecursionError, UnicodeDecodeError):
        return 0  # a head field of an unexpected type: the line-by-line path reads it
    offsets, lengths, numbers, est_lines, est_values = array("q"), array("q"), array("q"), array("q"), array("q")
    offsets.frombytes(found.offsets)
    lengths.frombytes(found.lengths)
    numbers.frombytes(found.numbers)
    est_lines.frombytes(found.est_lines)
    est_values.frombytes(found.est_values)
    calls = array("q")
    calls.frombytes(found.calls)
    if len(heads) != len(offsets) or numbers[0] != line or len(found.call_flags) != len(heads):
        return 0
    if not bulk(Lines(heads, offsets, lengths, line, (est_lines, est_values), numbers, (found.call_flags, calls))):
        return 0
    return len(heads)


def _bulk_chunk(
    view: memoryview, end: int, offsets: list[int], lengths: list[int], base: int, line: int, bulk: Bulk | None
) -> bool:
    if bulk is None or 0 in lengths:
        return False
    try:
        heads = _decode_lines(view[:end])
    except (msgspec.MsgspecError, RecursionError, UnicodeDecodeError):
        return False
    if len(heads) != len(offsets):
        return False  # whitespace-only lines, or something decode_lines read differently
    return bulk(Lines(heads, array("q", [base + o for o in offsets]), array("q", lengths), line))
