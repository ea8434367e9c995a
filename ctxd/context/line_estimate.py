"""Token estimates and tool calls read straight from line bytes, without reading the entry's body.

A context or a compaction plan needs of most entries only pi's estimate of its message (and, for a
plan, the tool calls it made). Here one msgspec decode of the line's ``type`` and ``message`` (the
entry's other members skipped) feeds pi's estimate (:func:`ctxd.context.tokens.estimate_tokens`) and
the calls (:func:`ctxd.context.rules.message_calls`): the rules are written once, for the dicts both
paths hold.

Only lines that a full read would serve unchanged are read this way (:func:`clean`: valid UTF-8, not
nested deeper than the limit); anything else (not a message entry, a message that is not an object,
an old format version, a recovered line) returns None and the caller reads the body as before, so the
figures and diagnostics are those of a full read:
``estimate_line(raw) == estimate_tokens(entry_message(body))`` (tests/context/test_line_estimate.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ctxd.context.rules import Call, message_calls
from ctxd.context.tokens import estimate_tokens
from ctxd.formats import depth
from ctxd.store.bodies import line_spans
from ctxd.store.calls import NESTED, Lines, read_calls
from ctxd.store.reader import SessionReader

__all__ = [
    "Call",
    "clean",
    "decode_noted",
    "estimate_and_calls",
    "estimate_line",
    "fill_estimates",
    "line_calls",
    "noted_calls",
]


class _Entry(msgspec.Struct, gc=False):
    type: Any = None
    message: Any = None


class _CallBlock(msgspec.Struct, gc=False):
    name: Any = None
    arguments: Any = None


_decode_entry = msgspec.json.Decoder(_Entry).decode
_decode_blocks = msgspec.json.Decoder(list[_CallBlock]).decode
_decode_any = msgspec.json.Decoder().decode


def clean(raw: bytes) -> bool:
    """Whether a full read serves this line as it is (no invalid UTF-8, not nested too deep)."""
    return _clean(raw, 0, len(raw), raw.isascii() or _utf8(raw))


def _utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def _clean(buf: bytes, a: int, b: int, utf8: bool) -> bool:
    """``clean(buf[a:b])``; ``utf8``: the whole of ``buf`` is known to be valid UTF-8."""
    if not utf8 and not _utf8(buf[a:b]):
        return False
    if buf.count(b"[", a, b) + buf.count(b"{", a, b) <= depth.MAX_DEPTH:
        return True
    return depth.depth(buf[a:b]) <= depth.MAX_DEPTH


def estimate_line(raw: bytes | memoryview) -> int | None:
    """pi's estimate of a ``message`` entry's message from its (clean) line, or None when the line
    holds no message object (then read the body)."""
    found = estimate_and_calls(raw)
    return None if found is None else found[0]


def estimate_and_calls(raw: bytes | memoryview) -> tuple[int, list[Call]] | None:
    """:func:`estimate_line` and :func:`line_calls` of a ``message`` entry's (clean) line, from one
    decode; None when the line holds no message object (then read the body)."""
    message = _message(raw)
    if message is None:
        return None
    return estimate_tokens(message), message_calls(message)


def line_calls(raw: bytes) -> list[Call] | None:
    """The tool calls of a ``message`` entry's (clean) line (:func:`ctxd.context.rules.message_calls`);
    None when the line holds no message object (then read the body)."""
    if b'"toolCall"' not in raw and b'"nestedCalls"' not in raw and b"\\u" not in raw:
        return []  # neither can be there: without escapes they would appear as written
    message = _message(raw)
    return None if message is None else message_calls(message)


def noted_calls(reader: Lines, indices: Sequence[int]) -> tuple[list[Call], list[int]]:
    """The tool calls of those of the entries ``indices`` whose calls the native scanner noted, read from
    their bytes alone (``ctxd.store.calls``) as :func:`line_calls` reads them from the line; and the entries
    it did not note (read their lines)."""
    found, left = read_calls(reader, indices)
    return decode_noted(found), left


def decode_noted(found: list[tuple[int, bytes]]) -> list[Call]:
    """The calls in the JSON the scanner noted of them (``ctxd.store.calls.read_calls``): ``toolCall`` blocks
    decoded in one batch, a tool result's ``nestedCalls`` read by ``message_calls``."""
    blocks = [data for kind, data in found if kind != NESTED]
    calls: list[Call] = []
    if blocks:
        calls = [(str(b.name or ""), b.arguments) for b in _decode_blocks(b"[" + b",".join(blocks) + b"]")]
    if len(blocks) < len(found):
        for kind, data in found:
            if kind == NESTED:
                calls.extend(message_calls({"role": "toolResult", "nestedCalls": _decode_any(data)}))
    return calls


def _message(raw: bytes | memoryview) -> dict[str, Any] | None:
    """The message of a ``message`` entry's line, or None."""
    try:
        entry = _decode_entry(raw)
    except (msgspec.MsgspecError, RecursionError):
        return None
    message = entry.message
    if entry.type != "message" or not isinstance(message, dict):
        return None
    return message


def fill_estimates(
    reader: SessionReader,
    indices: Sequence[int],
    estimates: dict[int, int],
    calls: dict[int, list[Call]] | None = None,
) -> list[int]:
    """Estimate the ``message`` entries ``indices`` from their lines into ``estimates`` (and their tool
    calls into ``calls``) and note them read (as a full read of a clean line would); returns those
    this could not do (decode them)."""
    left: list[int] = []
    done: list[int] = []
    views: dict[int, tuple[memoryview, bool]] = {}  # by piece read: its view, and whether all of it
    # is valid UTF-8 (then so is each line in it)
    decode = estimate_and_calls
    for i, (buf, a, b) in zip(indices, line_spans(reader, indices), strict=True):
        known = views.get(id(buf))
        if known is None:
            known = views[id(buf)] = (memoryview(buf), buf.isascii() or _utf8(buf))
        found = decode(known[0][a:b]) if _clean(buf, a, b, known[1]) else None
        if found is None:
            left.append(i)
        else:
            estimates[i] = found[0]
            if calls is not None:
                calls[i] = found[1]
            done.append(i)
    reader.note_clean_all(done)
    return left
