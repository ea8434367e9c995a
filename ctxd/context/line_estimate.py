"""Token estimates and tool calls read straight from line bytes, without decoding whole bodies.

A context or a compaction plan needs of most entries only pi's estimate of its message (and, for a
plan, the tool calls it made). Decoding each body into dicts to walk them costs most of a cold build;
here one typed msgspec decode per line takes only the fields :func:`ctxd.context.tokens.message_chars`
reads (texts, thinking, tool-call names and arguments) and skips the rest without building it.

Only lines that a full read would serve unchanged are read this way (:func:`clean`: valid UTF-8, not
nested deeper than the limit); anything else (another role, an unexpected shape, an old format
version, a recovered line) returns None and the caller decodes the body as before, so the figures and
diagnostics are those of a full read. Each function equals the dict path on the same line:
``estimate_line(raw) == estimate_tokens(entry_message(body))`` (tests/test_line_estimate.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import msgspec

from ctxd.context.tokens import IMAGE_CHARS, js_json_len_and_value, js_len
from ctxd.formats import depth
from ctxd.store.bodies import line_spans
from ctxd.store.reader import SessionReader

__all__ = ["Call", "clean", "estimate_and_calls", "estimate_line", "fill_estimates", "line_calls"]

Call = tuple[str, Any]
"""One tool call: its name (``str(name or "")``) and its arguments (None when absent)."""

_TEXT_ROLES = frozenset({"user", "toolResult", "custom"})


class _Block(msgspec.Struct, gc=False):
    type: Any = None
    text: Any = None
    thinking: Any = None
    name: Any = None
    arguments: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class _Message(msgspec.Struct, gc=False):
    role: Any = None
    content: str | list[_Block] | None = None
    nestedCalls: Any = None


class _Entry(msgspec.Struct, gc=False):
    type: Any = None
    message: _Message | None = None


class _CallBlock(msgspec.Struct, gc=False):
    type: Any = None
    name: Any = None
    arguments: Any = None


class _CallMessage(msgspec.Struct, gc=False):
    role: Any = None
    content: str | list[_CallBlock] | None = None
    nestedCalls: Any = None


class _CallEntry(msgspec.Struct, gc=False):
    message: _CallMessage | None = None


_decode_entry = msgspec.json.Decoder(_Entry).decode
_decode_calls = msgspec.json.Decoder(_CallEntry).decode


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
    """pi's estimate of a ``message`` entry's message from its (clean) line, or None when this fast
    path does not know the shape (then decode the body)."""
    found = estimate_and_calls(raw)
    return None if found is None else found[0]


def estimate_and_calls(raw: bytes | memoryview) -> tuple[int, list[Call]] | None:
    """:func:`estimate_line` and :func:`line_calls` of a ``message`` entry's (clean) line, from one
    decode; None when the shape is not one this knows (then decode the body)."""
    try:
        entry = _decode_entry(raw)
    except (msgspec.MsgspecError, RecursionError):
        return None
    message = entry.message
    if entry.type != "message" or message is None:
        return None
    role = message.role
    if not isinstance(role, str):
        return None  # a list or an object: no role pi estimates (and unhashable)
    content = message.content
    chars = 0
    calls: list[Call] = []
    if role in _TEXT_ROLES:
        if isinstance(content, str):
            chars = js_len(content)
        else:
            for block in content or ():
                kind = block.type
                if kind == "text":
                    if isinstance(block.text, str):
                        chars += js_len(block.text)
                elif kind == "image":
                    chars += IMAGE_CHARS
        if role == "toolResult" and message.nestedCalls is not None:
            nested = message.nestedCalls
            found = nested.get("calls") if isinstance(nested, dict) else None
            if isinstance(found, list):
                calls = [(str(c.get("name") or ""), c.get("arguments")) for c in found if isinstance(c, dict)]
    elif role == "assistant":
        # A string content has no blocks to count (see tokens.assistant_chars).
        for block in content if isinstance(content, list) else ():
            kind = block.type
            if kind == "text":
                chars += _str_len(block.text)
            elif kind == "thinking":
                chars += _str_len(block.thinking)
            elif kind == "toolCall":
                arguments = block.arguments
                if arguments is msgspec.UNSET:
                    size, value = 2, None
                else:
                    size, value = js_json_len_and_value(arguments)
                chars += _str_len(block.name) + size
                calls.append((str(block.name or ""), value))
    else:
        return None
    return math.ceil(chars / 4), calls


def _str_len(value: Any) -> int:
    return js_len(value) if isinstance(value, str) else 0


def line_calls(raw: bytes) -> list[Call] | None:
    """The tool calls of a ``message`` entry's (clean) line as ``extract_file_ops`` reads them: an
    assistant's ``toolCall`` blocks, a tool result's ``nestedCalls.calls``; None when the shape is
    not the usual one (then decode the body)."""
    if b'"toolCall"' not in raw and b'"nestedCalls"' not in raw and b"\\u" not in raw:
        return []  # neither can be there: without escapes they would appear as written
    try:
        message = _decode_calls(raw).message
    except (msgspec.MsgspecError, RecursionError):
        return None
    if message is None:
        return []
    if message.role == "assistant":
        content = message.content
        if not isinstance(content, list):
            return []
        return [(str(b.name or ""), b.arguments) for b in content if b.type == "toolCall"]
    if message.role == "toolResult":
        nested = message.nestedCalls
        calls = nested.get("calls") if isinstance(nested, dict) else None
        if not isinstance(calls, list):
            return []
        return [(str(c.get("name") or ""), c.get("arguments")) for c in calls if isinstance(c, dict)]
    return []


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
