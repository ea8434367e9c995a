"""Estimates and tool calls read from line bytes (``ctxd.context.line_estimate``) equal the dict path
(``estimate_tokens(entry_message(body))``, ``extract_file_ops``) on every message shape, over random
messages: texts outside the BMP and lone surrogates, floats and huge integers in arguments, images,
missing or null arguments, values of unexpected types, and lines written with other spacing."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxd.compaction.reading.fileops import FileOps, call_file_ops, extract_file_ops
from ctxd.context.line_estimate import Call, clean, estimate_and_calls, estimate_line, line_calls
from ctxd.context.rules import entry_message
from ctxd.context.tokens import estimate_tokens, js_json_len, js_json_len_raw

texts = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", "caf\u00e9", "\U0001f600 x", "\ud800 lone", "tool\\u0043all", '"toolCall"', "1" * 25]),
)
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**30), max_value=10**30),
        st.floats(allow_nan=False, allow_infinity=False),
        texts,
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)),
    max_leaves=12,
)
loose = st.one_of(texts, st.none(), st.integers(), st.lists(st.integers(), max_size=2))


@st.composite
def blocks(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["text", "thinking", "toolCall", "image", "other", None]))
    block: dict[str, Any] = {} if kind is None else {"type": kind}
    if kind == "text" or draw(st.booleans()):
        block["text"] = draw(loose)
    if kind == "thinking":
        block["thinking"] = draw(loose)
    if kind == "toolCall":
        block["name"] = draw(st.one_of(st.sampled_from(["read", "write", "edit", "bash"]), loose))
        choice = draw(st.integers(0, 3))
        if choice == 0:
            block["arguments"] = {"path": draw(texts), "extra": draw(json_values)}
        elif choice == 1:
            block["arguments"] = draw(json_values)
        elif choice == 2:
            block["arguments"] = None
    if kind == "image":
        block["data"] = "AAAA"
    return block


@st.composite
def entries(draw: Any) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "assistant", "toolResult", "custom", "bashExecution", "system", 7]))
    content = draw(st.one_of(texts, st.none(), st.lists(blocks(), max_size=5)))
    message: dict[str, Any] = {"role": role, "content": content, "timestamp": 1}
    if role == "toolResult" and draw(st.booleans()):
        message["nestedCalls"] = {"calls": [{"name": "write", "arguments": {"path": draw(texts)}}, "junk"]}
    if role == "bashExecution":
        message.update(command=draw(loose), output=draw(loose))
    return {"type": "message", "id": "e1", "parentId": None, "message": message}


def _line(entry: dict[str, Any], spaced: bool) -> bytes:
    if spaced:  # another writer's spacing and escapes
        return json.dumps(entry, ensure_ascii=True).encode()
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


@settings(max_examples=400, deadline=None)
@given(entry=entries(), spaced=st.booleans())
def test_estimate_from_the_line_equals_the_dict_path(entry: dict[str, Any], spaced: bool) -> None:
    raw = _line(entry, spaced)
    if not clean(raw):
        return  # a full read reports or repairs it: the fast path is never asked
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:  # not servable at all (a lone surrogate escape): nor from the line
        assert estimate_line(raw) is None
        return
    expected = entry_message(body)
    found = estimate_line(raw)
    both = estimate_and_calls(raw)
    assert found == (None if both is None else both[0])
    if found is not None and both is not None:
        assert expected is not None
        assert found == estimate_tokens(expected)
        assert _ops(both[1]) == extract_file_ops([body["message"]])


@settings(max_examples=400, deadline=None)
@given(entry=entries(), spaced=st.booleans())
def test_tool_calls_from_the_line_equal_the_dict_path(entry: dict[str, Any], spaced: bool) -> None:
    raw = _line(entry, spaced)
    if not clean(raw):
        return
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        assert line_calls(raw) in (None, [])
        return
    calls = line_calls(raw)
    if calls is None:
        return  # an unusual shape: the caller decodes the body
    assert _ops(calls) == extract_file_ops([body["message"]])


def _ops(calls: list[Call]) -> FileOps:
    got = FileOps()
    for name, arguments in calls:
        for op, path in call_file_ops(name, arguments):
            got.add(op, path)
    return got


@settings(max_examples=300, deadline=None)
@given(value=json_values, spaced=st.booleans())
def test_json_length_from_bytes_equals_the_value_walk(value: Any, spaced: bool) -> None:
    raw = json.dumps(value, ensure_ascii=spaced, separators=(", ", ": ") if spaced else (",", ":"))
    data = raw.encode("utf-8", "surrogatepass")
    try:
        decoded = msgspec.json.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return  # msgspec cannot read it: neither can a session line
    assert js_json_len_raw(data) == js_json_len(decoded)


def test_lines_a_full_read_would_repair_are_not_clean() -> None:
    assert clean(b'{"type":"message","message":{"role":"user","content":"caf\xc3\xa9"}}')
    assert not clean(b'{"type":"message","message":{"role":"user","content":"o\xffk"}}')
    assert not clean(b'{"x":' + b"[" * 150 + b"]" * 150 + b"}")
    assert clean(b'{"x":"' + b"[" * 150 + b'"}')  # brackets inside a string do not nest
