"""Codex rollouts mapped onto pi v3 entries: real files from the reference set, then one small hand-written
file per rule."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from transcript_helpers import (
    all_source_lines,
    assert_pi_shapes,
    assert_results_follow_calls,
    assert_valid_tree,
    by_id,
    ctxd_context,
    jsonl,
    path_to_root,
    raw_objects,
    ref_or_skip,
    role,
)

from ctxd.formats.transcripts import map_codex

REAL = ["incremental-turn-1.jsonl", "incremental-turn-2.jsonl", "rollout-tui-0.125.jsonl"]


def mapped(name: str) -> tuple[Path, Any]:
    path = ref_or_skip("codex", name)
    return path, map_codex(path.read_bytes(), str(path))


def is_call(p: dict[str, Any]) -> bool:
    return p.get("type", "").endswith("_call") and "call_id" in p


def is_output(p: dict[str, Any]) -> bool:
    return p.get("type", "").endswith("_output") and "call_id" in p


def expected(objs: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    """What a rollout should map to, counted straight from its lines."""
    counts: Counter[str] = Counter()
    responses: list[list[dict[str, Any]]] = []  # the pieces of each model response
    open_response = False
    for _, o in objs:
        t, p = o["type"], o.get("payload") or {}
        piece = t == "response_item" and (
            (p.get("type") == "message" and p.get("role") == "assistant") or p.get("type") == "reasoning" or is_call(p)
        )
        closes = (
            (t == "response_item" and p.get("type") == "message" and p.get("role") != "assistant")
            or (t == "response_item" and is_output(p))
            or t == "compacted"
            or (t == "event_msg" and p.get("type") == "token_count" and (p.get("info") or {}).get("last_token_usage"))
        )
        if piece:
            if not open_response:
                responses.append([])
                open_response = True
            responses[-1].append(p)
        elif closes:
            open_response = False
        if t == "response_item" and p.get("type") == "message":
            counts[{"assistant": "-", "user": "user", "developer": "system", "system": "system"}[p["role"]]] += 1
        elif t == "response_item" and is_output(p):
            counts["toolResult"] += 1
        elif t == "event_msg" and p.get("type") == "token_count" and (p.get("info") or {}).get("last_token_usage"):
            counts["usage"] += 1
        elif t == "compacted":
            counts["compaction"] += 1
        elif not piece:
            counts["custom"] += 1
    counts["assistant"] = len(responses)
    del counts["-"]
    return {"counts": counts, "responses": responses}


def kind_of(entry: dict[str, Any]) -> str:
    return str(role(entry)) if entry["type"] == "message" else entry["type"]


# --- real files ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", REAL)
def test_real_file_is_a_valid_linear_pi_tree(name: str) -> None:
    path, t = mapped(name)
    assert t.kind == "codex"
    assert t.diagnostics == []
    assert_valid_tree(t)
    assert_pi_shapes(t)
    assert all_source_lines(t) == [n for n, _ in raw_objects(path)]
    assert [e["parentId"] for e in t.entries] == [None] + [e["id"] for e in t.entries[:-1]]
    assert t.leaf_id == t.entries[-1]["id"]


@pytest.mark.parametrize("name", REAL)
def test_real_file_kinds_match_the_raw_lines(name: str) -> None:
    path, t = mapped(name)
    assert Counter(kind_of(e) for e in t.entries) == +expected(raw_objects(path))["counts"]


@pytest.mark.parametrize("name", REAL)
def test_real_file_assistant_pieces_merge_per_response(name: str) -> None:
    path, t = mapped(name)
    responses = expected(raw_objects(path))["responses"]
    assistants = [e["message"] for e in t.entries if role(e) == "assistant"]
    assert len(assistants) == len(responses)
    for message, pieces in zip(assistants, responses, strict=True):
        kinds = []
        for p in pieces:
            if p["type"] == "message":
                kinds += ["text"] * len(p["content"])
            else:
                kinds.append("thinking" if p["type"] == "reasoning" else "toolCall")
        assert [b["type"] for b in message["content"]] == kinds
        calls = [b for b in message["content"] if b["type"] == "toolCall"]
        assert [c["id"] for c in calls] == [p["call_id"] for p in pieces if is_call(p)]
        assert message["stopReason"] == ("toolUse" if calls else "stop")
        for block, piece in zip(calls, [p for p in pieces if is_call(p)], strict=True):
            if piece["type"] == "function_call":
                assert block["arguments"] == json.loads(piece["arguments"])
            elif piece["type"] == "custom_tool_call":
                assert block["arguments"] == {"input": piece["input"]}
            assert block["name"] == piece["name"]


@pytest.mark.parametrize("name", REAL)
def test_real_file_tool_results_link_by_call_id(name: str) -> None:
    path, t = mapped(name)
    assert_results_follow_calls(t)
    outputs = [o["payload"] for _, o in raw_objects(path) if o["type"] == "response_item" and is_output(o["payload"])]
    results = [e["message"] for e in t.entries if role(e) == "toolResult"]
    assert [r["toolCallId"] for r in results] == [p["call_id"] for p in outputs]
    for message, payload in zip(results, outputs, strict=True):
        assert message["content"] == [{"type": "text", "text": payload["output"]}]
        assert message["isError"] is False


@pytest.mark.parametrize("name", REAL)
def test_real_file_token_counts_become_usage(name: str) -> None:
    path, t = mapped(name)
    counts = [
        (n, o["payload"]["info"])
        for n, o in raw_objects(path)
        if o["type"] == "event_msg" and o["payload"]["type"] == "token_count" and o["payload"]["info"]
    ]
    usages = [e for e in t.entries if e["type"] == "usage"]
    assert [e["ctxdSource"]["lines"] for e in usages] == [[n] for n, _ in counts]
    for entry, (_, info) in zip(usages, counts, strict=True):
        last = info["last_token_usage"]
        assert entry["usage"] == {
            "input": last["input_tokens"] - last["cached_input_tokens"],
            "output": last["output_tokens"],
            "cacheRead": last["cached_input_tokens"],
            "cacheWrite": 0,
            "totalTokens": last["total_tokens"],
        }
        assert entry["totalUsage"]["totalTokens"] == info["total_token_usage"]["total_tokens"]
        assert entry["kind"] == "codex.token_count"
        # the assistant message this count closes carries the same usage
        index = t.entries.index(entry)
        before = next(e for e in reversed(t.entries[:index]) if role(e) == "assistant")
        assert before["message"]["usage"] == entry["usage"]
    # every assistant message of these rollouts was followed by a count
    assert all("usage" in e["message"] for e in t.entries if role(e) == "assistant")


@pytest.mark.parametrize("name", REAL)
def test_real_file_header_and_roles(name: str, tmp_path: Path) -> None:
    path, t = mapped(name)
    objs = raw_objects(path)
    meta = objs[0][1]["payload"]
    assert t.header["id"] == meta["id"] and t.header["cwd"] == meta["cwd"]
    assert t.header["timestamp"] == meta["timestamp"]
    assert t.header["cliVersion"] == meta["cli_version"] and t.header["provider"] == meta["model_provider"]
    assert t.header["gitBranch"] == meta["git"]["branch"] and t.header["agent"] == "codex"
    model = next(o["payload"]["model"] for _, o in objs if o["type"] == "turn_context")
    assert t.header["model"] == model
    assert t.entries[0]["type"] == "custom" and t.entries[0]["customType"] == "codex.session_meta"
    for entry in t.entries:
        if role(entry) == "system":
            assert entry["message"]["codexRole"] == "developer"
        if role(entry) == "assistant":
            assert entry["message"]["model"] == model and entry["message"]["provider"] == "openai"
    ctx = ctxd_context(t, tmp_path)
    assert ctx.diagnostics == []
    assert ctx.model == f"openai/{model}"
    assert {m.role for m in ctx.messages} <= {"system", "user", "assistant", "toolResult"}


def test_real_rollout_compaction_if_present() -> None:
    path, t = mapped("rollout-tui-0.125.jsonl")
    compacted = [(n, o) for n, o in raw_objects(path) if o["type"] == "compacted"]
    compactions = [e for e in t.entries if e["type"] == "compaction"]
    assert len(compactions) == len(compacted)  # this rollout has none; the rules are covered below


# --- hand-written files, one rule each -------------------------------------------------------------

T0 = "2026-05-12T10:00:00.000Z"


def rec(kind: str, payload: Any, ts: str = T0) -> dict[str, Any]:
    return {"timestamp": ts, "type": kind, "payload": payload}


def item(**payload: Any) -> dict[str, Any]:
    return rec("response_item", payload)


def event(**payload: Any) -> dict[str, Any]:
    return rec("event_msg", payload)


def meta(**extra: Any) -> dict[str, Any]:
    payload = {"id": "sess-1", "timestamp": T0, "cwd": "/proj", "cli_version": "0.130.0", "model_provider": "openai"}
    return rec("session_meta", {**payload, **extra})


def said(role_: str, text: str) -> dict[str, Any]:
    kind = "output_text" if role_ == "assistant" else "input_text"
    return item(type="message", role=role_, content=[{"type": kind, "text": text}])


def tokens(inp: int, cached: int, out: int, total: int | None = None, window: int = 1000) -> dict[str, Any]:
    usage = {
        "input_tokens": inp,
        "cached_input_tokens": cached,
        "output_tokens": out,
        "total_tokens": total or inp + out,
    }
    info = {"last_token_usage": usage, "total_token_usage": usage, "model_context_window": window}
    return event(type="token_count", info=info, rate_limits={})


def check(t: Any) -> None:
    assert_valid_tree(t)
    assert_pi_shapes(t)


def test_calls_and_outputs_link_by_call_id() -> None:
    t = map_codex(
        jsonl(
            meta(),
            said("user", "fix it"),
            item(type="function_call", name="exec_command", arguments='{"cmd": "ls"}', call_id="c1"),
            item(type="custom_tool_call", name="apply_patch", input="*** Begin Patch\n", call_id="c2", status="done"),
            item(type="local_shell_call", call_id="c3", status="completed", action={"type": "exec", "command": ["ls"]}),
            item(type="function_call", name="odd", arguments="not json", call_id="c4"),
            item(type="function_call_output", call_id="c1", output="a\nb"),
            item(type="custom_tool_call_output", call_id="c2", output="Success"),
            item(type="function_call_output", call_id="c3", output={"content": "denied", "success": False}),
            item(type="function_call_output", call_id="c4", output=[{"type": "input_text", "text": "x"}]),
            item(type="function_call_output", call_id="zz", output="lost"),
        )
    )
    check(t)
    calls = t.entries[2]["message"]["content"]
    assert calls == [
        {"type": "toolCall", "id": "c1", "name": "exec_command", "arguments": {"cmd": "ls"}},
        {"type": "toolCall", "id": "c2", "name": "apply_patch", "arguments": {"input": "*** Begin Patch\n"}},
        {"type": "toolCall", "id": "c3", "name": "local_shell", "arguments": {"type": "exec", "command": ["ls"]}},
        {"type": "toolCall", "id": "c4", "name": "odd", "arguments": {"input": "not json"}},
    ]
    assert t.entries[2]["ctxdSource"] == {"lines": [3, 4, 5, 6], "kind": "response_item.function_call"}
    results = [e["message"] for e in t.entries if role(e) == "toolResult"]
    assert [(r["toolCallId"], r["toolName"], r["isError"]) for r in results] == [
        ("c1", "exec_command", False),
        ("c2", "apply_patch", False),
        ("c3", "local_shell", True),
        ("c4", "odd", False),
        ("zz", "", False),
    ]
    assert results[0]["content"] == [{"type": "text", "text": "a\nb"}]
    assert results[2]["content"] == [{"type": "text", "text": "denied"}]
    assert results[3]["content"] == [{"type": "text", "text": "x"}]
    assert t.diagnostics == [(11, "tool output for unknown call_id 'zz'")]


def test_token_count_usage_goes_to_the_response_it_closes() -> None:
    t = map_codex(
        jsonl(
            meta(),
            rec("turn_context", {"model": "gpt-5", "cwd": "/proj"}),
            said("user", "hi"),
            event(type="token_count", info=None, rate_limits={}),
            item(
                type="reasoning",
                summary=[{"type": "summary_text", "text": "think"}],
                content=None,
                encrypted_content="E",
            ),
            event(type="agent_message", message="hello"),
            said("assistant", "hello"),
            tokens(1000, 600, 20, window=258400),
            tokens(1000, 600, 20),  # a repeated count does not overwrite
            said("user", "again"),
            said("assistant", "no count for this one"),
        )
    )
    check(t)
    first, second = [e for e in t.entries if role(e) == "assistant"]
    usage = {"input": 400, "output": 20, "cacheRead": 600, "cacheWrite": 0, "totalTokens": 1020}
    assert first["message"]["usage"] == usage
    assert first["message"]["content"][0]["thinking"] == "think"
    assert json.loads(first["message"]["content"][0]["thinkingSignature"])["encrypted_content"] == "E"
    assert first["message"]["model"] == "gpt-5" and first["message"]["api"] == "openai-responses"
    assert "usage" not in second["message"]
    usage_entries = [e for e in t.entries if e["type"] == "usage"]
    assert len(usage_entries) == 2
    assert usage_entries[0]["usage"] == usage and usage_entries[0]["modelContextWindow"] == 258400
    assert usage_entries[0]["provider"] == "openai" and usage_entries[0]["model"] == "gpt-5"
    empty = by_id(t)["00000004"]
    assert empty["type"] == "custom" and empty["customType"] == "codex.event_msg.token_count"


def test_adjacent_pieces_merge_until_a_tool_output_or_count() -> None:
    t = map_codex(
        jsonl(
            meta(),
            said("user", "go"),
            item(type="reasoning", summary=[], content=[{"type": "reasoning_text", "text": "raw"}]),
            event(type="agent_message", message="looking"),
            said("assistant", "looking"),
            item(type="web_search_call", status="completed", action={"type": "search", "query": "q"}),
            item(type="function_call", name="f", arguments="{}", call_id="c1"),
            item(type="function_call_output", call_id="c1", output="r"),
            item(type="reasoning", summary=[], encrypted_content="E"),
            said("assistant", "done"),
        )
    )
    check(t)
    kinds = [(kind_of(e), e["ctxdSource"]["lines"]) for e in t.entries]
    assert kinds == [
        ("custom", [1]),
        ("user", [2]),
        ("assistant", [3, 5, 7]),
        ("custom", [4]),
        ("custom", [6]),
        ("toolResult", [8]),
        ("assistant", [9, 10]),
    ]
    first = t.entries[2]["message"]["content"]
    assert [b["type"] for b in first] == ["thinking", "text", "toolCall"]
    assert first[0]["thinking"] == "raw"
    assert by_id(t)["00000006"]["customType"] == "codex.response_item.web_search_call"
    assert_results_follow_calls(t)


def test_compacted_becomes_a_compaction_and_the_chain_continues() -> None:
    history = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "kept request"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "bridge summary"}]},
        {"type": "compaction", "encrypted_content": "X"},
    ]
    t = map_codex(
        jsonl(
            meta(),
            said("user", "long task"),
            said("assistant", "working"),
            tokens(90000, 0, 500),
            rec("compacted", {"message": "The summary.", "replacement_history": history}),
            event(type="context_compacted"),
            said("user", "continue"),
            rec("compacted", {"message": "", "replacement_history": history}),
            rec("compacted", {}),
        )
    )
    check(t)
    c1, c2, c3 = [e for e in t.entries if e["type"] == "compaction"]
    assert c1["summary"] == "The summary." and c1["tokensBefore"] == 90500
    assert c1["firstKeptEntryId"] == c1["id"] == "00000005"
    assert c1["details"] == {"source": "codex", "replacementHistory": 3}
    assert c2["summary"] == "user: kept request\n\nuser: bridge summary\n\n[compaction: encrypted]"
    assert c3["summary"] == "" and c3["details"]["replacementHistory"] == 0
    entries = by_id(t)
    assert entries["00000006"]["parentId"] == c1["id"] and entries["00000007"]["parentId"] == "00000006"
    assert [e["id"] for e in path_to_root(t, t.leaf_id)] == [e["id"] for e in t.entries]


def test_compaction_context_in_ctxd(tmp_path: Path) -> None:
    t = map_codex(
        jsonl(
            meta(),
            said("user", "old"),
            said("assistant", "old answer"),
            rec("compacted", {"message": "S"}),
            said("user", "new"),
        )
    )
    ctx = ctxd_context(t, tmp_path)
    assert ctx.diagnostics == []
    assert [m.role for m in ctx.messages] == ["compactionSummary", "user"]


def test_messages_roles_and_images() -> None:
    pixel = "data:image/png;base64,iVBORw0KGgo="
    t = map_codex(
        jsonl(
            meta(),
            item(type="message", role="developer", content=[{"type": "input_text", "text": "rules"}]),
            item(type="message", role="system", content="plain"),
            item(
                type="message",
                role="user",
                content=[
                    {"type": "input_text", "text": "see"},
                    {"type": "input_image", "image_url": pixel},
                    {"type": "input_image", "image_url": "https://x/y.png"},
                ],
            ),
            item(type="message", role="assistant", content=[{"type": "refusal", "refusal": "no"}]),
            item(type="message", role="tool", content=[]),
        )
    )
    check(t)
    dev, system, user, assistant, odd = t.entries[1:]
    assert dev["message"] == {
        "role": "system",
        "content": [{"type": "text", "text": "rules"}],
        "timestamp": 1778580000000,
        "codexRole": "developer",
    }
    assert system["message"]["content"] == [{"type": "text", "text": "plain"}]
    assert user["message"]["content"] == [
        {"type": "text", "text": "see"},
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        {"type": "text", "text": "[image: https://x/y.png]"},
    ]
    assert assistant["message"]["content"] == [{"type": "text", "text": "no"}]
    assert odd["type"] == "custom" and odd["customType"] == "codex.response_item.message"


def test_bad_lines_partial_lines_and_unknown_types() -> None:
    body = jsonl(
        meta(),
        '{"timestamp": "x", "type": "response_item", "payload": {"type": "mess',
        '"just a string"',
        rec("brand_new_kind", {"anything": 1}),
        rec("response_item", "not an object"),
        said("user", "still here"),
    )
    t = map_codex(body + b'{"timestamp": "2026-05-12T10:00:09.000Z", "type": "resp')
    check(t)
    assert [n for n, _ in t.diagnostics] == [2, 3]
    assert t.diagnostics[0][1].startswith("invalid JSON") and t.diagnostics[1][1].startswith("not a JSON object")
    assert [kind_of(e) for e in t.entries] == ["custom", "custom", "custom", "user"]
    assert t.entries[1]["customType"] == "codex.brand_new_kind" and t.entries[1]["data"]["payload"] == {"anything": 1}
    assert t.entries[2]["customType"] == "codex.response_item"
    assert t.lines == [1, 4, 5, 6]


def test_legacy_rollout_layout() -> None:
    t = map_codex(
        jsonl(
            {"id": "legacy-1", "timestamp": "2025-05-01T10:00:00.000Z", "instructions": None, "git": {"branch": "dev"}},
            {"record_type": "state"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "function_call", "name": "shell", "arguments": '{"command": ["ls"]}', "call_id": "c1"},
            {"type": "function_call_output", "call_id": "c1", "output": '{"output": "a", "metadata": {}}'},
        ),
        "/x/rollout-2025-05-01T10-00-00-0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl",
    )
    check(t)
    assert t.header["id"] == "legacy-1" and t.header["gitBranch"] == "dev"
    assert t.header["timestamp"] == "2025-05-01T10:00:00.000Z"
    assert [kind_of(e) for e in t.entries] == ["custom", "custom", "user", "assistant", "toolResult"]
    assert t.entries[1]["customType"] == "codex.state"
    assert t.entries[4]["message"]["toolName"] == "shell"
    assert all(e["timestamp"] == "2025-05-01T10:00:00.000Z" for e in t.entries)


def test_header_falls_back_to_the_path() -> None:
    t = map_codex(
        jsonl(said("user", "hi")), "/x/rollout-2025-05-01T10-00-00-0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl"
    )
    assert t.header["id"] == "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
    assert t.header["timestamp"] == T0 and t.header["cwd"] == ""
    assert map_codex(b"").header["id"] == "" and map_codex(b"").leaf_id is None


def test_counts_after_a_compaction_do_not_reach_back_to_older_messages() -> None:
    t = map_codex(
        jsonl(
            meta(),
            said("user", "q"),
            said("assistant", "a (no count: an older Codex)"),
            rec("compacted", {"message": "S"}),
            tokens(0, 0, 0, total=4777),
        )
    )
    assert "usage" not in t.entries[2]["message"]
    assert t.entries[3]["tokensBefore"] == 0 and t.entries[4]["usage"]["totalTokens"] == 4777
