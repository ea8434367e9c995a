"""Format detection, dispatch, and the adapters' promise never to raise (property tests)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transcript_helpers import assert_valid_tree, jsonl, ref_or_skip

from ctxd.formats.transcripts import Transcript, detect, map_claude, map_codex, map_transcript


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("claude", "incremental-turn-1.jsonl"),
        ("claude", "session-9eda1058.jsonl"),
        ("claude", "session-624a4a58.jsonl"),
        ("codex", "incremental-turn-1.jsonl"),
        ("codex", "rollout-tui-0.125.jsonl"),
        ("pi", "all-entry-types-v3.jsonl"),
        ("pi", "large-session.jsonl"),
    ],
)
def test_detect_real_files(kind: str, name: str) -> None:
    data = ref_or_skip(kind, name).read_bytes()
    assert detect(data[: data.index(b"\n") + 1]) == kind
    assert detect(data[: data.index(b"\n")]) == kind  # without its newline too


@pytest.mark.parametrize(
    ("first", "kind"),
    [
        (b'{"type":"session","version":3,"id":"x","timestamp":"t","cwd":"/"}', "pi"),
        (b'{"type":"session","id":"x","timestamp":"t","cwd":"/"}', "pi"),  # v1
        (b'{"type":"summary","summary":"t","leafUuid":"u"}', "claude"),
        (b'{"type":"file-history-snapshot","messageId":"m","snapshot":{}}', "claude"),
        (b'{"type":"queue-operation","operation":"enqueue","timestamp":"t"}', "claude"),
        (b'{"parentUuid":null,"type":"user","uuid":"u","message":{}}', "claude"),
        (b'{"timestamp":"t","type":"session_meta","payload":{"id":"x"}}', "codex"),
        (b'{"timestamp":"t","type":"response_item","payload":{"type":"message"}}', "codex"),
        (b'{"id":"x","timestamp":"t","instructions":null}', "codex"),
        (b'\xef\xbb\xbf{"type":"session","id":"x"}', "pi"),
        (b'\n\n  \n{"type":"summary","summary":"t"}\n{"other": 1}\n', "claude"),
        (b"", None),
        (b"\n\n", None),
        (b"not json", None),
        (b"[1, 2]", None),
        (b'{"hello": "world"}', None),
        (b'{"type": "something-else"}', None),
    ],
)
def test_detect(first: bytes, kind: str | None) -> None:
    assert detect(first) == kind


def test_map_transcript_dispatches() -> None:
    claude = reference("claude", "incremental-turn-1.jsonl").read_bytes()
    codex = reference("codex", "incremental-turn-1.jsonl").read_bytes()
    pi = reference("pi", "all-entry-types-v3.jsonl").read_bytes()
    got_claude, got_codex = map_transcript(claude, "a.jsonl"), map_transcript(codex)
    assert got_claude is not None and got_claude.kind == "claude"
    assert got_codex is not None and got_codex.kind == "codex"
    assert map_transcript(pi) is None and map_transcript(b"garbage\n") is None


def test_mapping_is_deterministic() -> None:
    for kind, mapper in (("claude", map_claude), ("codex", map_codex)):
        data = reference(kind, "incremental-turn-2.jsonl").read_bytes()
        assert json.dumps(_as_tuple(mapper(data))) == json.dumps(_as_tuple(mapper(data)))


def _as_tuple(t: Transcript) -> Any:
    return [t.kind, t.header, t.entries, t.lines, t.diagnostics, t.leaf_id]


@pytest.mark.parametrize("mapper", [map_claude, map_codex])
@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\n",
        b"\xff\xfe\x00garbage\n",
        b"[" * 10000 + b"\n",
        b'{"type": "user", "message": {"content": 1e999}, "timestamp": "9999-99-99"}\n',
        b'{"timestamp": 12, "type": ["x"], "payload": {"type": 5, "call_id": 7}}\n',
        b'{"uuid": 5, "parentUuid": {"a": 1}, "type": "assistant", "message": {"id": [], "content": [1, null]}}\n',
        b'{"type": "compacted", "payload": {"replacement_history": [1, "x", {"type": "message"}]}}\n',
        b'{"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c", "output": 5}}\n',
        b'{"type": "response_item", "payload": {"type": "function_call", "call_id": "c", "arguments": 5}}\n',
        b'{"type": "event_msg", "payload": {"type": "token_count", "info": {"last_token_usage": 5}}}\n',
        b'{"timestamp": "2026-01-01T00:00:00+05:00", "type": "user", "uuid": "u", "message": {"content": "x"}}\n',
    ],
)
def test_odd_inputs_never_raise(mapper: Any, data: bytes) -> None:
    t = mapper(data)
    assert_valid_tree(t)


def test_non_bytes_input_is_tolerated() -> None:
    assert map_claude(bytearray(jsonl({"type": "summary", "summary": "x"}))).entries[0]["name"] == "x"
    assert map_codex(memoryview(jsonl({"type": "compacted", "payload": {}}))).entries[0]["type"] == "compaction"
    assert map_claude(None).entries == []  # type: ignore[arg-type]


# --- property tests: random lines built from each format's vocabulary --------------------------------

_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.sampled_from(["", "u1", "u2", "u3", "m1", "c1", "t1", "Task", "2026-01-01T00:00:00.000Z", "x"]),
)
_json = st.recursive(
    _scalar,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3),
    max_leaves=6,
)

_block = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "thinking", "tool_use", "tool_result", "image", "redacted_thinking", "zzz"])},
    optional={
        "text": _scalar,
        "thinking": _scalar,
        "id": st.sampled_from(["t1", "t2"]),
        "tool_use_id": st.sampled_from(["t1", "t2", "t3"]),
        "name": st.sampled_from(["Task", "Read"]),
        "input": _json,
        "content": st.one_of(_scalar, st.lists(_json, max_size=2)),
        "is_error": _scalar,
        "source": _json,
    },
)
_claude_line = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["user", "assistant", "system", "summary", "progress", "file-history-snapshot", "zzz"]),
    },
    optional={
        "uuid": st.sampled_from(["u1", "u2", "u3", "u4", "u5", "u6"]),
        "parentUuid": st.sampled_from([None, "u1", "u2", "u3", "u4", "u5", "missing"]),
        "logicalParentUuid": st.sampled_from([None, "u1", "u2", "missing"]),
        "isSidechain": st.booleans(),
        "isMeta": st.booleans(),
        "isCompactSummary": st.booleans(),
        "isApiErrorMessage": st.booleans(),
        "agentId": st.just("ag"),
        "subtype": st.sampled_from(["compact_boundary", "turn_duration", None]),
        "compactMetadata": _json,
        "summary": _scalar,
        "timestamp": _scalar,
        "message": st.one_of(
            _json,
            st.fixed_dictionaries(
                {},
                optional={
                    "id": st.sampled_from(["m1", "m2", None]),
                    "content": st.one_of(_scalar, st.lists(_block, max_size=3)),
                    "stop_reason": st.sampled_from([None, "end_turn", "tool_use", "odd"]),
                    "usage": _json,
                    "model": st.sampled_from(["claude", "<synthetic>", None]),
                },
            ),
        ),
    },
)
_codex_payload = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(
            ["message", "reasoning", "function_call", "function_call_output", "custom_tool_call", "token_count", "zzz"]
        ),
        "role": st.sampled_from(["user", "assistant", "developer", "tool", None]),
        "content": st.one_of(_scalar, st.lists(_json, max_size=2)),
        "call_id": st.sampled_from(["c1", "c2", None]),
        "name": _scalar,
        "arguments": st.one_of(_scalar, st.just('{"a": 1}'), st.just("[1]")),
        "output": _json,
        "summary": _json,
        "info": _json,
        "message": _scalar,
        "replacement_history": _json,
        "id": _scalar,
        "model": _scalar,
    },
)
_codex_line = st.fixed_dictionaries(
    {},
    optional={
        "timestamp": _scalar,
        "type": st.sampled_from(
            ["session_meta", "response_item", "event_msg", "turn_context", "compacted", "zzz", None]
        ),
        "payload": st.one_of(_codex_payload, _json),
        "id": _scalar,
        "record_type": _scalar,
    },
)


def _lines(strategy: Any) -> Any:
    garbage = st.sampled_from(['{"broken', "[]", "", "null", "\ufeff{}"])
    return st.lists(st.one_of(strategy.map(json.dumps), garbage), max_size=12).map(
        lambda ls: ("\n".join(ls) + "\n").encode()
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_lines(_claude_line), cut=st.integers(0, 50))
def test_claude_never_raises_and_always_builds_a_tree(data: bytes, cut: int) -> None:
    for chunk in (data, data[: len(data) - cut]):
        t = map_claude(chunk)
        assert_valid_tree(t)
        assert all(reason and isinstance(n, int) for n, reason in t.diagnostics)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_lines(_codex_line), cut=st.integers(0, 50))
def test_codex_never_raises_and_always_builds_a_tree(data: bytes, cut: int) -> None:
    for chunk in (data, data[: len(data) - cut]):
        t = map_codex(chunk)
        assert_valid_tree(t)
        assert all(reason and isinstance(n, int) for n, reason in t.diagnostics)
