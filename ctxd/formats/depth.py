"""How deeply a session line may nest, and what becomes of a line that nests deeper.

JSON has no depth limit, and pi (JavaScript's ``JSON.parse``) reads lines nested thousands of
levels deep.  Python does not: decoding, re-encoding, the JSON-RPC serializer and every recursive
walk over a message hit the interpreter's recursion limit somewhere between 300 and 1,000 levels,
and a line that fails there makes the whole session unusable, or a request that never answers.

So ctxd bounds every body it hands out at :data:`MAX_DEPTH` levels (the entry object is level 1;
a pi message's content blocks sit at level 4, tool-call arguments at level 5).  A line nested
deeper keeps its entry (type, id, parent: the tree stays whole) and everything down to the limit;
each value that would sit deeper is replaced by the string :data:`PLACEHOLDER`, and the line is
reported.  Appends deeper than the limit are refused (see :mod:`ctxd.store.validate`).
"""

from __future__ import annotations

import re

MAX_DEPTH = 100
"""The deepest nesting level served (and accepted in appends)."""

PLACEHOLDER = f"[ctxd: nested deeper than {MAX_DEPTH} levels; omitted]"

# A JSON string (escapes included) or one bracket: strings are skipped whole, so brackets inside
# them do not count.  Bytes, so that invalid UTF-8 inside a string does not matter.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
_OPEN = frozenset(b"[{")


def may_exceed(data: bytes | bytearray | memoryview, limit: int = MAX_DEPTH) -> bool:
    """A cheap necessary condition for nesting deeper than ``limit``: that many brackets at all."""
    raw = data if isinstance(data, bytes | bytearray) else bytes(data)
    return raw.count(b"[") + raw.count(b"{") > limit


def depth(data: bytes) -> int:
    """The deepest nesting level in one JSON text (0 for a scalar)."""
    level = deepest = 0
    for m in _TOKEN.finditer(data):
        c = data[m.start()]
        if c in _OPEN:
            level += 1
            deepest = max(deepest, level)
        elif c != 0x22:  # a closing bracket (0x22 is a string)
            level -= 1
    return deepest


def too_deep(data: bytes | bytearray | memoryview, limit: int = MAX_DEPTH) -> bool:
    raw = bytes(data)
    return may_exceed(raw, limit) and depth(raw) > limit


def prune(data: bytes, limit: int = MAX_DEPTH, placeholder: str = PLACEHOLDER) -> bytes:
    """``data`` with every value nested deeper than ``limit`` replaced by ``placeholder`` (a JSON
    string).  Works on the bytes without decoding them, so it never recurses."""
    quoted = b'"' + placeholder.encode() + b'"'
    out: list[bytes] = []
    level = 0
    cut_from = -1  # where the value being replaced starts
    copied = 0
    for m in _TOKEN.finditer(data):
        c = data[m.start()]
        if c == 0x22:
            continue
        if c in _OPEN:
            level += 1
            if level == limit + 1:
                cut_from = m.start()
        else:
            if level == limit + 1 and cut_from >= 0:
                out.append(data[copied:cut_from])
                out.append(quoted)
                copied = m.end()
                cut_from = -1
            level -= 1
    if cut_from >= 0:
        # A value opened deeper than the limit and never closed: the line is not JSON anyway; cut
        # it there so that it fails to decode as such instead of recursing through every bracket.
        out.append(data[copied:cut_from])
        out.append(quoted)
        return b"".join(out)
    out.append(data[copied:])
    return b"".join(out)
