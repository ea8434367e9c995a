"""The native scanner (``ctxd._native.scan_chunk``) line by line against the Python path.

Hypothesis writes pi session lines byte by byte (escapes of every kind, raw and invalid UTF-8,
numbers at every edge, duplicate and escaped keys, whitespace, nesting about the depth limit, wrong
types in head fields, damaged lines). Whenever the scanner takes a line it must give exactly what
the Python path gives: the head msgspec decodes from its reduced line equals ``decode_head`` of the
line (or both raise ValidationError), each estimate equals ``estimate_line`` of the line, and the
line is ``clean()`` and valid JSON by msgspec. A chunk is taken whole or declined whole. Plain lines
of the usual shapes must be taken and estimated, so a scanner that quietly declined everything fails.
"""

from __future__ import annotations

import json
import random
from array import array
from collections.abc import Callable
from typing import Any, NamedTuple

import msgspec
import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from native_paths import native_scan

from ctxd.context.line_estimate import clean, decode_noted, estimate_line
from ctxd.context.rules import message_calls
from ctxd.formats.codec import LineHead, decode_head
from ctxd.formats.depth import MAX_DEPTH, depth
from ctxd.store import native

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_decode_reduced = msgspec.json.Decoder(LineHead).decode_lines


@pytest.fixture(scope="module")
def scan() -> Callable[..., Any]:
    return native_scan()


# ---- values written by hand: objects as lists of pairs (duplicates allowed), strings and numbers
# with their exact bytes chosen while writing ----


class Obj:
    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        self.pairs = pairs


class Num:
    def __init__(self, text: str) -> None:
        self.text = text


class Bytes:
    """A string whose bytes are written as they are (invalid UTF-8)."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw


class Raw:
    """JSON text written as it is (nesting, damage)."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw


_SHORT = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


class Writer:
    """Serializes a value, choosing escapes, whitespace and hex case from a seeded random."""

    def __init__(self, seed: int, escape_rate: float, key_escape_rate: float, spaced: bool, raw_controls: bool) -> None:
        self.r = random.Random(seed)
        self.escape_rate = escape_rate
        self.key_escape_rate = key_escape_rate
        self.spaced = spaced
        self.raw_controls = raw_controls

    def ws(self) -> bytes:
        if not self.spaced:
            return b""
        return self.r.choice([b"", b"", b" ", b"\t", b"\r", b" \t\r "])

    def u(self, code: int) -> str:
        text = f"\\u{code:04x}"
        return text.upper().replace("\\U", "\\u") if self.r.random() < 0.3 else text

    def string(self, text: str, key: bool = False) -> bytes:
        out: list[str] = []
        rate = self.key_escape_rate if key else self.escape_rate
        for ch in text:
            code = ord(ch)
            escape = self.r.random() < rate
            if 0xD800 <= code <= 0xDFFF:  # a lone surrogate: an escape, or its bytes (invalid UTF-8)
                out.append(self.u(code) if self.r.random() < 0.7 else ch)
            elif ch in _SHORT and (ch in '"\\' or code < 0x20 or escape):
                out.append(self.u(code) if self.r.random() < 0.3 else _SHORT[ch])
            elif code < 0x20:
                out.append(ch if self.raw_controls and self.r.random() < 0.5 else self.u(code))
            elif code > 0xFFFF and escape:
                hi, lo = divmod(code - 0x10000, 0x400)
                out.append(self.u(0xD800 + hi) + self.u(0xDC00 + lo))
            elif escape:
                out.append(self.u(code))
            else:
                out.append(ch)
        return b'"' + "".join(out).encode("utf-8", "surrogatepass") + b'"'

    def value(self, v: Any) -> bytes:
        if isinstance(v, Obj):
            if not v.pairs:
                return b"{" + self.ws() + b"}"
            parts = [
                self.ws() + self.string(k, key=True) + self.ws() + b":" + self.ws() + self.value(x) + self.ws()
                for k, x in v.pairs
            ]
            return b"{" + b",".join(parts) + b"}"
        if isinstance(v, list):
            if not v:
                return b"[" + self.ws() + b"]"
            return b"[" + b",".join(self.ws() + self.value(x) + self.ws() for x in v) + b"]"
        if isinstance(v, str):
            return self.string(v)
        if isinstance(v, Num):
            return v.text.encode()
        if isinstance(v, Bytes):
            return b'"' + v.raw + b'"'
        if isinstance(v, Raw):
            return v.raw
        if v is None:
            return b"null"
        if v is True:
            return b"true"
        if v is False:
            return b"false"
        raise TypeError(v)

    def line(self, v: Any) -> bytes:
        return self.ws() + self.value(v) + self.ws()


# ---- strategies: a calm mode (most lines the scanner should take) and a wild one ----


class Mode(NamedTuple):
    wild: bool
    out_of_range: bool = False


_CALM_CHARS = [*"abc xyz 019{}[]:,", '"', "\\", "/", "\b", "\f", "\n", "\r", "\t", "\x00", "\x1f", "\x7f"]
_CALM_CHARS += ["é", "ß", "€", "中", "\u2028", "\ufeff", "😀", "𝄞", "\U0010ffff"]
_LONE = ["\ud800", "\udc00", "\udbff"]
calm_texts = st.text(st.sampled_from(_CALM_CHARS), max_size=12)
wild_texts = st.text(st.sampled_from(_CALM_CHARS + _LONE), max_size=12)
plain_texts = st.text(st.sampled_from([*"abc xyz 019.-_", "é", "€", "😀", '"', "\\", "\n"]), max_size=20)


def texts(m: Mode) -> st.SearchStrategy[str]:
    return st.one_of(calm_texts, calm_texts, wild_texts) if m.wild else calm_texts


INVALID_UTF8 = [
    b"\xff",
    b"\xc0\x80",
    b"\xc3",
    b"\xe2\x82",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\xf8\x88\x80\x80\x80",
]

_CALM_NUMBERS = ["0", "-0", "7", "-12", "123456789012345", "-99999999999999", "0.5", "1e5", "1E-7"]
_WILD_NUMBERS = [
    "1234567890123456",  # 16 digits
    "12345678901234567",  # 17
    "1234567890123456789012",  # 22
    "-999999999999999",
    "-0.0",
    "1.0",
    "3.14159",
    "2.5e+10",
    "1e21",
    "1e-400",  # underflows to 0.0: in range
    "1" * 39,
    "1" * 41,  # longer than the scanner reads
    "1e0400",  # a four-digit exponent
]
OUT_OF_RANGE = ["1e400", "-1E400", "9" * 20 + "e300"]
"""Numbers msgspec refuses ("Number out of range"): see test_a_number_out_of_range_is_not_taken."""


def numbers(m: Mode) -> st.SearchStrategy[Any]:
    calm = st.one_of(st.sampled_from(_CALM_NUMBERS).map(Num), st.integers(-(10**14), 10**14).map(lambda n: Num(str(n))))
    if not m.wild:
        return calm
    if m.out_of_range:
        return st.one_of(calm, st.sampled_from(OUT_OF_RANGE).map(Num))
    return st.one_of(
        calm,
        st.sampled_from(_WILD_NUMBERS).map(Num),
        st.integers(-(10**25), 10**25).map(lambda n: Num(str(n))),
        st.floats(allow_nan=False, allow_infinity=False).map(lambda x: Num(repr(x))),
    )


def dup(
    draw: st.DrawFn, m: Mode, pairs: list[tuple[str, Any]], values: st.SearchStrategy[Any]
) -> list[tuple[str, Any]]:
    """Sometimes repeat a key (with another value) somewhere in the object."""
    if pairs and draw(st.integers(0, 5 if m.wild else 40)) == 0:
        key = draw(st.sampled_from([k for k, _ in pairs]))
        pairs = list(pairs)
        pairs.insert(draw(st.integers(0, len(pairs))), (key, draw(values)))
    return pairs


def nested(draw: st.DrawFn, m: Mode, level: int) -> Raw:
    """A value reaching about MAX_DEPTH when it sits at ``level``, over it only when wild."""
    levels = MAX_DEPTH - level + draw(st.integers(-1, 2 if m.wild else 0))
    if draw(st.booleans()):
        return Raw(b"[" * levels + b"1" + b"]" * levels)
    return Raw(b'{"a":' * levels + b"1" + b"}" * levels)


@st.composite
def json_values(draw: st.DrawFn, m: Mode, depth: int = 3) -> Any:
    leaf = st.one_of(st.none(), st.booleans(), numbers(m), texts(m), texts(m))
    if m.wild and draw(st.integers(0, 20)) == 0:
        return Bytes(b"x" + draw(st.sampled_from(INVALID_UTF8)))
    if depth <= 0:
        return draw(leaf)
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return draw(st.lists(json_values(m, depth - 1), max_size=3))
    if kind == 1:
        keys = st.sampled_from(["a", "path", "command", "é", "k\\", "0", "10", "name", "type"])
        names = draw(st.lists(keys, max_size=4, unique=True))
        pairs = [(name, draw(json_values(m, depth - 1))) for name in names]
        return Obj(dup(draw, m, pairs, leaf))
    return draw(leaf)


@st.composite
def blocks(draw: st.DrawFn, m: Mode) -> Any:
    kind = draw(st.sampled_from(["text", "text", "image", "thinking", "toolCall", "toolCall", "other", None]))
    pairs: list[tuple[str, Any]] = []
    if kind is not None:
        pairs.append(("type", kind))
    any_value = json_values(m, 1)
    some_text = st.one_of(texts(m), texts(m), texts(m), any_value)
    if kind == "text" or draw(st.integers(0, 6)) == 0:
        pairs.append(("text", draw(some_text)))
    if kind == "thinking":
        pairs.append(("thinking", draw(some_text)))
        if draw(st.booleans()):
            pairs.append(("thinkingSignature", draw(texts(m))))
    if kind == "image":
        pairs += [("data", "aGVsbG8="), ("mimeType", "image/png")]
    if kind == "toolCall" or draw(st.integers(0, 6)) == 0:
        pairs.append(("id", draw(texts(m))))
        pairs.append(("name", draw(some_text)))
        if draw(st.integers(0, 5)):
            pairs.append(("arguments", draw(json_values(m, 4))))
        if draw(st.integers(0, 9)) == 0:
            pairs.append(("arguments", nested(draw, m, 5)))  # a block's members are level 5
    pairs = draw(st.permutations(pairs)) if draw(st.booleans()) else pairs
    if draw(st.integers(0, 15)) == 0:  # a block that is not an object
        return draw(st.one_of(texts(m), st.none(), numbers(m)))
    return Obj(dup(draw, m, pairs, any_value))


ROLES = ["user", "assistant", "toolResult", "custom", "bashExecution", "branchSummary", "compactionSummary", "x"]


@st.composite
def usages(draw: st.DrawFn, m: Mode) -> Obj:
    fields = ["input", "output", "cacheRead", "cacheWrite", "totalTokens"]
    pairs = [(f, draw(st.one_of(numbers(m), numbers(m), st.none(), texts(m)))) for f in draw(st.permutations(fields))]
    if draw(st.booleans()):
        pairs.append(("cost", Obj([("total", draw(numbers(m)))])))
    return Obj(dup(draw, m, pairs[: draw(st.integers(0, 6))], numbers(m)))


@st.composite
def messages(draw: st.DrawFn, m: Mode) -> Any:
    any_value = json_values(m, 2)
    role = draw(st.sampled_from(ROLES[:4]) if draw(st.integers(0, 3)) else st.one_of(st.sampled_from(ROLES), any_value))
    pairs: list[tuple[str, Any]] = [("role", role)]
    content = draw(st.one_of(texts(m), st.none(), st.lists(blocks(m), max_size=4), st.lists(blocks(m), max_size=4)))
    if draw(st.integers(0, 9)) == 0:
        content = draw(any_value)
    if draw(st.integers(0, 7)):
        pairs.append(("content", content))
    optional = [
        ("usage", usages(m)),
        ("stopReason", st.one_of(st.sampled_from(["stop", "toolUse", "error"]), any_value)),
        ("provider", st.one_of(texts(m), texts(m), any_value)),
        ("model", texts(m)),
        ("api", texts(m)),
        ("timestamp", numbers(m)),
        ("toolCallId", texts(m)),
        ("toolName", texts(m)),
        ("isError", st.booleans()),
        ("errorMessage", texts(m)),
        ("details", any_value),
        ("command", texts(m)),
        ("output", texts(m)),
        ("summary", texts(m)),
        ("customType", texts(m)),
        ("display", st.booleans()),
        ("nestedCalls", any_value),
    ]
    for key, values in optional:
        if draw(st.integers(0, 3)) == 0:
            pairs.append((key, draw(values)))
    if draw(st.integers(0, 9)) == 0:
        pairs.append(("details", nested(draw, m, 3)))  # the message's members are level 3
    pairs = draw(st.permutations(pairs)) if draw(st.booleans()) else pairs
    return Obj(dup(draw, m, pairs, any_value))


ENTRY_TYPES = [
    "model_change",
    "thinking_level_change",
    "compaction",
    "branch_summary",
    "label",
    "custom",
    "custom_message",
    "session_info",
    "context_edit",
    "session",
    "weird",
]
HEX_IDS = st.text("0123456789abcdef", min_size=8, max_size=8)


@st.composite
def entries(draw: st.DrawFn, m: Mode) -> Any:
    """One entry object (its pairs), of any type, with head fields sometimes of the wrong type."""
    any_value = json_values(m, 2)
    kind: Any = "message" if draw(st.integers(0, 2)) else draw(st.sampled_from(ENTRY_TYPES))
    odd = draw(st.integers(0, 9)) == 0  # head fields of the wrong type
    if odd:
        kind = draw(st.one_of(st.just(kind), any_value))
    pairs: list[tuple[str, Any]] = [("type", kind), ("id", draw(any_value) if odd else draw(HEX_IDS))]
    pairs.append(("parentId", draw(st.one_of(st.none(), HEX_IDS))))
    pairs.append(("timestamp", draw(any_value) if odd else "2026-11-26T02:00:00.000Z"))
    if kind == "message" or draw(st.integers(0, 9)) == 0:
        pairs.append(("message", draw(any_value) if odd else draw(messages(m))))
    head_fields: list[tuple[str, st.SearchStrategy[Any]]] = [
        ("firstKeptEntryId", texts(m)),
        ("firstKeptEntryIndex", numbers(m)),
        ("tokensBefore", numbers(m)),
        ("fromId", texts(m)),
        ("targetId", texts(m)),
        ("label", st.one_of(texts(m), st.none())),
        ("name", texts(m)),
        ("thinkingLevel", texts(m)),
        ("provider", texts(m)),
        ("modelId", texts(m)),
        ("customType", st.one_of(st.just("ctxd.pin"), st.just("ctxd.leaf"), texts(m))),
        ("version", st.one_of(numbers(m), texts(m))),
        ("cwd", texts(m)),
        ("summary", texts(m)),
        ("data", any_value),
        ("content", any_value),
        ("details", any_value),
    ]
    for key, values in head_fields:
        if draw(st.integers(0, 5)) == 0:
            pairs.append((key, draw(st.one_of(values, any_value) if odd else values)))
    if draw(st.integers(0, 9)) == 0:
        pairs.append(("details", nested(draw, m, 2)))  # the entry's members are level 2
    pairs = draw(st.permutations(pairs)) if draw(st.booleans()) else pairs
    return Obj(dup(draw, m, pairs, any_value))


@st.composite
def lines(draw: st.DrawFn, out_of_range: bool = False) -> bytes:
    """One line's bytes (no newline), written by hand or by json.dumps; a wild one may be damaged."""
    m = Mode(wild=out_of_range or draw(st.integers(0, 2)) == 0, out_of_range=out_of_range)
    entry = draw(entries(m))
    how = draw(st.integers(0, 5))
    if how == 0:  # json.dumps, where it can write the value
        try:
            as_json = to_python(entry)
            raw = json.dumps(
                as_json,
                ensure_ascii=draw(st.booleans()),
                separators=draw(st.sampled_from([(",", ":"), (", ", ": ")])),
            ).encode("utf-8", "surrogatepass")
        except (TypeError, ValueError):
            how = 1
    if how != 0:
        writer = Writer(
            draw(st.integers(0, 2**32)),
            draw(st.sampled_from([0.0, 0.0, 0.1, 0.5, 1.0])),
            draw(st.sampled_from([0.0, 0.0, 0.0, 0.02]) if m.wild else st.just(0.0)),
            draw(st.booleans()),
            raw_controls=m.wild and draw(st.integers(0, 4)) == 0,
        )
        raw = writer.line(entry)
    damage = draw(st.integers(0, 9)) if m.wild else -1
    if damage == 0:
        raw = raw + draw(st.sampled_from([b"", b" "])) + raw  # two objects on one line
    elif damage == 1:
        raw = raw[: draw(st.integers(0, max(0, len(raw) - 1)))]  # cut short
    elif damage == 2:
        raw = draw(st.sampled_from([b"", b"   ", b"[1,2]", b'"text"', b"5", b"null", b"{}", b"{} ", b"\t{}\r"]))
    elif damage == 3 and raw:
        at = draw(st.integers(0, len(raw) - 1))
        raw = raw[:at] + draw(st.sampled_from(INVALID_UTF8)) + raw[at:]
    return raw


def to_python(v: Any) -> Any:
    """A value json.dumps can write (no duplicates kept, no raw bytes), or TypeError."""
    if isinstance(v, Obj):
        return {k: to_python(x) for k, x in v.pairs}
    if isinstance(v, list):
        return [to_python(x) for x in v]
    if isinstance(v, Num):
        number = json.loads(v.text)
        if isinstance(number, float) and not -1e308 < number < 1e308:
            raise TypeError(v.text)
        return number
    if isinstance(v, Bytes | Raw):
        raise TypeError(v)
    return v


# ---- what the scanner must satisfy ----


def run_scan(scan: Callable[..., Any], chunk: bytes, base: int = 0, tail: bytes = b"") -> native.NativeChunk | None:
    found = scan(bytearray(chunk + tail), len(chunk), base, MAX_DEPTH, 0)
    return None if found is None else native.NativeChunk(*found)


def ints(data: bytes) -> list[int]:
    out = array("q")
    out.frombytes(data)
    return out.tolist()


def head_or_error(decode: Callable[[bytes], Any], raw: bytes) -> Any:
    try:
        return decode(raw)
    except msgspec.ValidationError:
        return "ValidationError"


def check_taken(chunk_lines: list[bytes], found: native.NativeChunk, base: int = 0) -> None:
    """The contract, for a chunk the scanner took."""
    reduced = found.reduced.split(b"\n")
    assert reduced[-1] == b"" and len(reduced) - 1 == len(chunk_lines)
    offsets, lengths = ints(found.offsets), ints(found.lengths)
    pos = base
    for k, line in enumerate(chunk_lines):
        assert (offsets[k], lengths[k]) == (pos, len(line)), line
        pos += len(line) + 1
        msgspec.json.decode(line)  # valid JSON by msgspec's own decoder
        assert clean(line), line
        assert head_or_error(decode_head, reduced[k]) == head_or_error(decode_head, line), (line, reduced[k])
    estimated = dict(zip(ints(found.est_lines), ints(found.est_values), strict=True))
    assert sorted(estimated) == ints(found.est_lines)
    for k, value in estimated.items():
        assert value == estimate_line(chunk_lines[k]), (chunk_lines[k], value)
    check_calls(chunk_lines, found)
    try:  # how ctxd.store.scan reads the reduced lines: all at once
        heads = _decode_reduced(found.reduced)
    except msgspec.ValidationError:
        return
    assert heads == [decode_head(line) for line in chunk_lines]


def check_calls(chunk_lines: list[bytes], found: native.NativeChunk) -> None:
    """The tool calls the scanner noted of each line (``ctxd.store.calls``) are those the Python path reads
    of its message (``message_calls``): none for a line flagged 1, exactly those listed for one flagged 2."""
    flags, calls = found.call_flags, ints(found.calls)
    assert len(flags) == len(chunk_lines) and len(calls) % 4 == 0
    listed: dict[int, list[tuple[int, bytes]]] = {}
    for k in range(0, len(calls), 4):
        line, kind, at, length = calls[k : k + 4]
        assert kind in (1, 2) and at >= 0 and at + length <= len(chunk_lines[line])
        listed.setdefault(line, []).append((kind, chunk_lines[line][at : at + length]))
    assert list(listed) == sorted(listed)  # in line order
    for k, line in enumerate(chunk_lines):
        flag = flags[k]
        assert flag in (0, 1, 2) and (flag == 2) == (k in listed), (line, flag)
        if flag == 0:
            continue
        body = msgspec.json.decode(line)
        message = body.get("message") if isinstance(body, dict) and body.get("type") == "message" else None
        expected = message_calls(message) if isinstance(message, dict) else []
        assert decode_noted(listed.get(k, [])) == expected, line


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps({"type": "message", "id": "a", "parentId": None, "message": message}).encode()


def _call(name: Any, arguments: Any = None, **extra: Any) -> dict[str, Any]:
    block = {"type": "toolCall", "id": "c", "name": name, **extra}
    if arguments is not None:
        block["arguments"] = arguments
    return block


NESTED = {"calls": [{"name": "write", "arguments": {"path": "gen/out.ts"}}, "junk", {"arguments": {"path": "x"}}]}
CALL_LINES = [
    # (line, flag): 2 the calls are listed, 1 none, 0 not noted (a plan reads the line)
    (_line({"role": "assistant", "content": [{"type": "text", "text": "x"}, _call("read", {"path": "a.py"})]}), 2),
    (_line({"role": "assistant", "content": [_call("edit", {"path": "b"}), _call(7), _call("bash", {"c": [1.5]})]}), 2),
    (_line({"role": "assistant", "content": [_call(None)], "nestedCalls": NESTED}), 2),
    (_line({"role": "assistant", "content": "no blocks in a string"}), 1),
    (_line({"role": "toolResult", "content": [{"type": "text", "text": "ok"}], "nestedCalls": NESTED}), 2),
    (_line({"role": "toolResult", "content": [_call("read", {"path": "ignored"})]}), 1),
    (_line({"role": "toolResult", "nestedCalls": None, "content": []}), 2),
    (_line({"role": "user", "content": [_call("read", {"path": "ignored"})]}), 1),
    (_line({"role": "assistant", "content": [_call("read", {"path": "c"}) for _ in range(64)]}), 2),
    (_line({"role": "assistant", "content": [_call("read", {"path": "c"}) for _ in range(65)]}), 0),
    (
        b'{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"toolCall","name":"a",'
        b'"name":"b","arguments":{}}]}}',
        0,
    ),
    (b'{"type":"message","id":"a","message":{"role":"toolResult","nestedCalls":1,"nestedCalls":{}}}', 0),
    (b'{"type":"custom","id":"a","message":{"role":"assistant","content":[]}}', 0),
]


def test_the_scanner_notes_each_lines_tool_calls(scan: Callable[..., Any]) -> None:
    """What the scanner notes of each line's tool calls, line by line and as one chunk: listed, none, or
    not noted (a repeated member, more calls than it lists); each equal to the Python path's."""
    chunk = b"".join(line + b"\n" for line, _ in CALL_LINES)
    found = run_scan(scan, chunk)
    assert found is not None
    assert list(found.call_flags) == [flag for _, flag in CALL_LINES]
    check_taken([line for line, _ in CALL_LINES], found)


@SETTINGS
@given(lines())
def test_a_line_the_scanner_takes_reads_as_the_python_path(scan: Callable[..., Any], line: bytes) -> None:
    if b"\n" in line:
        return  # a raw newline ends the line: the chunk tests cover two lines
    found = run_scan(scan, line + b"\n")
    event("taken" if found is not None else "declined")
    if found is not None:
        event("estimated" if ints(found.est_lines) else "not estimated")
        check_taken([line], found)


@SETTINGS
@given(st.lists(lines(), min_size=1, max_size=6), st.integers(0, 1 << 40), st.sampled_from([b"", b'{"type":"mess']))
def test_a_chunk_is_taken_whole_or_declined_whole(
    scan: Callable[..., Any], chunk_lines: list[bytes], base: int, tail: bytes
) -> None:
    chunk_lines = [part for line in chunk_lines for part in line.split(b"\n")]
    chunk = b"".join(line + b"\n" for line in chunk_lines)
    found = run_scan(scan, chunk, base, tail)
    each = [run_scan(scan, line + b"\n") for line in chunk_lines]
    if found is None:
        assert None in each, "a chunk was declined though the scanner takes each of its lines"
        return
    assert None not in each, "a chunk was taken though the scanner declines one of its lines"
    check_taken(chunk_lines, found, base)
    shifted = [
        (k + i, v)
        for i, one in enumerate(each)
        if one is not None
        for k, v in zip(ints(one.est_lines), ints(one.est_values), strict=True)
    ]
    assert list(zip(ints(found.est_lines), ints(found.est_values), strict=True)) == shifted
    assert found.reduced == b"".join(one.reduced for one in each if one is not None)


@st.composite
def plain_messages(draw: st.DrawFn) -> bytes:
    """An ordinary message line, as pi and ctxd write them: the scanner must take and estimate it."""
    role = draw(st.sampled_from(["user", "assistant", "toolResult", "custom"]))
    text_block = st.builds(lambda t: {"type": "text", "text": t}, plain_texts)
    if role == "assistant":
        arguments = st.dictionaries(
            st.sampled_from(["path", "command", "n", "flag", "items", "opts"]),
            st.recursive(
                st.one_of(st.none(), st.booleans(), st.integers(1 - 10**14, 10**14 - 1), plain_texts),
                lambda inner: (
                    st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2)
                ),
                max_leaves=6,
            ),
            max_size=4,
        )
        call = st.builds(
            lambda i, n, a: {"type": "toolCall", "id": i, "name": n, "arguments": a},
            plain_texts,
            plain_texts,
            arguments,
        )
        thinking = st.builds(lambda t: {"type": "thinking", "thinking": t, "thinkingSignature": "sig"}, plain_texts)
        content: Any = draw(st.lists(st.one_of(text_block, call, thinking), max_size=4))
        message: dict[str, Any] = {"role": role, "content": content, "provider": "p", "model": "m"}
        message["usage"] = {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15}
        message["stopReason"] = "toolUse"
    else:
        image = st.just({"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"})
        content = draw(st.one_of(plain_texts, st.lists(st.one_of(text_block, image), max_size=3)))
        message = {"role": role, "content": content}
        if role == "toolResult":
            message.update(toolCallId="call_1", toolName="read", isError=False)
        if role == "custom":
            message.update(customType="note", display=True)
    message["timestamp"] = 1764120000000
    entry: dict[str, Any] = {"type": "message", "id": "0a1b2c3d", "parentId": "ffeeddcc"}
    entry["timestamp"] = "2026-11-26T02:00:00.000Z"
    entry["message"] = message
    return json.dumps(entry, ensure_ascii=draw(st.booleans()), separators=(",", ":")).encode()


@SETTINGS
@given(plain_messages())
def test_ordinary_message_lines_are_taken_and_estimated(scan: Callable[..., Any], line: bytes) -> None:
    found = run_scan(scan, line + b"\n")
    assert found is not None, f"the scanner declined an ordinary line: {line!r}"
    assert ints(found.est_lines) == [0], f"the scanner did not estimate an ordinary line: {line!r}"
    check_taken([line], found)


def test_ordinary_entries_of_every_type_are_taken(scan: Callable[..., Any]) -> None:
    objs = [
        {"type": "model_change", "id": "a", "parentId": None, "timestamp": "t", "provider": "p", "modelId": "m"},
        {"type": "thinking_level_change", "id": "b", "parentId": "a", "timestamp": "t", "thinkingLevel": "high"},
        {"type": "compaction", "id": "c", "parentId": "b", "timestamp": "t", "summary": "s", "firstKeptEntryId": "b"}
        | {"tokensBefore": 12345, "details": {"readFiles": ["a"], "modifiedFiles": []}},
        {"type": "label", "id": "d", "parentId": "c", "timestamp": "t", "targetId": "b", "label": "here"},
        {"type": "custom", "id": "e", "parentId": "d", "timestamp": "t", "customType": "x", "data": {"k": [1, 2.5]}},
        {"type": "session_info", "id": "f", "parentId": "e", "timestamp": "t", "name": "my session"},
        {"type": "branch_summary", "id": "g", "parentId": "f", "timestamp": "t", "fromId": "a", "summary": "s"},
        {"type": "custom_message", "id": "h", "parentId": "g", "timestamp": "t", "customType": "n", "content": "c"},
    ]
    chunk_lines = [json.dumps(o).encode() for o in objs]
    found = run_scan(scan, b"".join(line + b"\n" for line in chunk_lines), 4096)
    assert found is not None
    check_taken(chunk_lines, found, 4096)
    assert ints(found.est_lines) == []


def _value_for(struct: Any, field: str) -> Any:
    """A value the head decoder takes for ``field`` of ``struct`` (a string, else a number)."""
    for value in ("v-" + field, 7, 2.5):
        try:
            msgspec.json.decode(json.dumps({field: value}).encode(), type=struct)
        except msgspec.ValidationError:
            continue
        return value
    raise AssertionError(f"no simple value for {struct.__name__}.{field}")


def test_every_head_field_survives_the_reduced_line(scan: Callable[..., Any]) -> None:
    """Built from the head types themselves: a field added to LineHead, MessageHead or UsageHead
    and not to the scanner's lists makes the reduced line lose it, and this fails."""
    from ctxd.formats.codec import MessageHead, UsageHead

    usage = {f: _value_for(UsageHead, f) for f in UsageHead.__struct_fields__}
    message: dict[str, Any] = {f: _value_for(MessageHead, f) for f in MessageHead.__struct_fields__ if f != "usage"}
    message |= {"usage": usage, "role": "assistant", "content": [{"type": "text", "text": "abc"}], "other": [1]}
    entry: dict[str, Any] = {f: _value_for(LineHead, f) for f in LineHead.__struct_fields__ if f != "message"}
    entry |= {"type": "message", "message": message, "extra": {"k": "v"}}
    for order in (entry, dict(reversed(entry.items()))):
        line = json.dumps(order).encode()
        found = run_scan(scan, line + b"\n")
        assert found is not None
        check_taken([line], found)
        head = decode_head(found.reduced[:-1])
        for f in LineHead.__struct_fields__:
            assert getattr(head, f) is not None, f"{f} was dropped from the reduced line"
        assert head.message is not None and head.message.usage is not None
        for f in MessageHead.__struct_fields__:
            assert getattr(head.message, f) is not None, f"message.{f} was dropped"
        for f in UsageHead.__struct_fields__:
            assert getattr(head.message.usage, f) is not None, f"message.usage.{f} was dropped"
        assert ints(found.est_values) == [1]


def _at_depth(level: int, where: str) -> bytes:
    """A user or assistant message line nesting to exactly ``level`` (the entry is level 1)."""
    if where == "entry":  # the entry's members are level 2
        inner = b"[" * (level - 1) + b"]" * (level - 1)
        return b'{"type":"message","id":"a","details":' + inner + b',"message":{"role":"user","content":"x"}}'
    if where == "message":  # the message's members are level 3
        inner = b"[" * (level - 2) + b"]" * (level - 2)
        return b'{"type":"message","id":"a","message":{"role":"user","content":"x","details":' + inner + b"}}"
    # a tool call's arguments: the call (a block) is level 4, so its arguments' members level 6
    inner = b'{"a":' * (level - 4) + b"1" + b"}" * (level - 4)
    return (
        b'{"type":"message","id":"a","message":{"role":"assistant","content":'
        b'[{"type":"toolCall","name":"f","arguments":' + inner + b"}]}}"
    )


@pytest.mark.parametrize("where", ["entry", "message", "arguments"])
def test_nesting_to_the_limit_is_taken_and_past_it_declined(scan: Callable[..., Any], where: str) -> None:
    at_limit, over = _at_depth(MAX_DEPTH, where), _at_depth(MAX_DEPTH + 1, where)
    assert depth(at_limit) == MAX_DEPTH and depth(over) == MAX_DEPTH + 1
    found = run_scan(scan, at_limit + b"\n")
    assert found is not None
    check_taken([at_limit], found)
    assert ints(found.est_lines) == [0]
    assert run_scan(scan, over + b"\n") is None


# ---- known cases, written out (each a minimal example of what the property tests look for) ----

_MSG = b'{"type":"message","id":"a1","parentId":null,"timestamp":"t","message":{"role":"user","content":"hi"%s}}'


@pytest.mark.parametrize(
    "line",
    [
        _MSG % b',"x":"\\ud800"',  # a lone surrogate escape
        _MSG % b',"x":"\\udc00\\ud800"',  # a pair in the wrong order
        _MSG % b',"x":"\xed\xa0\x80"',  # a surrogate's bytes
        _MSG % b',"x":"\xc0\x80"',  # an overlong form
        _MSG % b',"x":"a\tb"',  # a raw control character
        _MSG % b',"x":1e0400',  # a four-digit exponent
        _MSG % b',"x":' + b"1" * 41,  # a number longer than the scanner reads
        b'{"\\u0074ype":"message","id":"a1","message":{"role":"user","content":"hi"}}',  # an escaped key
        b'{"type":"message","id":"a1","message":{"r\\u006fle":"user","content":"hi"}}',
        b'{"type":"message","id":"a1","message":{"role":"user"}}{"type":"label","id":"b"}',  # two objects
        b'{"type":"message","id":"a1","details":' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}",  # level 101
        b"",
        b"   ",
        b"[1]",
        b'{"type":"message","id":"a1",}',
    ],
)
def test_lines_the_scanner_must_decline(scan: Callable[..., Any], line: bytes) -> None:
    good = _MSG % b""
    assert run_scan(scan, good + b"\n") is not None
    assert run_scan(scan, good + b"\n" + line + b"\n" + good + b"\n") is None


@pytest.mark.parametrize(
    ("line", "estimate"),
    [
        (_MSG % b"", 1),
        (
            b'{"type":"message","id":"a","message":{"role":"custom","content":[{"type":"image"},{"type":"text","text":"\\u00e9\\ud83d\\ude00"}]}}',
            1201,
        ),
        (
            b'{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"toolCall","name":"ab","arguments":{"x":-0,"y":[true,null],"z":"\\u0001"}}]}}',
            10,
        ),
        (b'{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"toolCall","name":"ab"}]}}', 1),
        (
            b'{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"toolCall","name":"f",'
            b'"arguments":{"s":"\\ud83d\\ude00\\u00e9\\/\\b\\u0000\\u007f\xe2\x80\xa8","n":-12345678901234}}]}}',
            11,
        ),
        (b'{"type":"message","id":"a","message":{"role":"toolResult","content":"\\/\\"\\\\\xf0\x9f\x98\x80"}}', 2),
        (b' {"type" : "message" ,\t"id":"a","message":{ "role":"user" , "content" : [ ] } }\r', 0),
        (b'{"type":"message","id":"a","message":{"role":"assistant","content":"text is not counted"}}', 0),
    ],
)
def test_estimates_of_written_out_lines(scan: Callable[..., Any], line: bytes, estimate: int) -> None:
    found = run_scan(scan, line + b"\n")
    assert found is not None
    assert ints(found.est_values) == [estimate] == [estimate_line(line)]
    check_taken([line], found)


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"toolCall","name":"f","arguments":{"x":1.5}}]}}',
        b'{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"toolCall","name":"f","arguments":{"x":1234567890123456}}]}}',
        b'{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"toolCall","name":"f","arguments":{"x":1,"x":22}}]}}',
        b'{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"toolCall","name":"f","arguments":{"\\u0078":1}}]}}',
        b'{"type":"message","id":"a","message":{"role":"user","role":"assistant","content":"x"}}',
        b'{"type":"message","id":"a","message":{"role":"user","content":"x","content":"yy"}}',
        b'{"type":"message","id":"a","message":{"role":"u\\u0073er","content":"x"}}',
        b'{"type":"mess\\u0061ge","id":"a","message":{"role":"user","content":"x"}}',
        b'{"type":"message","type":"message","id":"a","message":{"role":"user","content":"x"}}',
        b'{"type":"message","id":"a","message":{"role":"user","content":[{"type":"text","text":"a","text":"bb"}]}}',
        b'{"type":"message","id":"a","message":{"role":"user","content":{"text":"x"}}}',
        b'{"type":"message","id":"a","message":{"role":"user","content":["x"]}}',
    ],
)
def test_shapes_the_scanner_leaves_to_python_are_not_estimated(scan: Callable[..., Any], line: bytes) -> None:
    found = run_scan(scan, line + b"\n")
    assert found is not None
    check_taken([line], found)
    assert ints(found.est_lines) == []


def test_the_wrapper_hands_back_what_the_extension_gives(
    scan: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(native, "_scan", scan)
    line = _MSG % b""
    assert native.available()
    assert native.scan_chunk(memoryview(bytearray(line + b"\nxx")), len(line) + 1, 7) == run_scan(scan, line + b"\n", 7)
    monkeypatch.setattr(native, "_scan", None)
    assert not native.available() and native.scan_chunk(line + b"\n", len(line) + 1, 0) is None


# ---- a known bug, kept failing until it is mended ----


def test_a_number_out_of_range_is_not_taken(scan: Callable[..., Any]) -> None:
    line = _MSG % b',"x":1e400'
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(line)
    assert run_scan(scan, line + b"\n") is None


@settings(SETTINGS, phases=[Phase.generate])
@given(lines(out_of_range=True))
def test_lines_with_numbers_out_of_range(scan: Callable[..., Any], line: bytes) -> None:
    if b"\n" in line:
        return
    found = run_scan(scan, line + b"\n")
    if found is not None:
        check_taken([line], found)
