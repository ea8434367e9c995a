"""Claude Code transcripts mapped onto pi v3 entries: real files from the reference set, then one small
hand-written file per rule."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from transcript_helpers import (
    TS,
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

from ctxd.formats.injected import injected_kind
from ctxd.formats.transcripts import claude_subagent_files, map_claude

REAL = ["incremental-turn-1.jsonl", "incremental-turn-2.jsonl", "session-9eda1058.jsonl", "session-624a4a58.jsonl"]


def mapped(name: str) -> tuple[Path, Any]:
    path = ref_or_skip("claude", name)
    return path, map_claude(path.read_bytes(), str(path))


def kind_of(entry: dict[str, Any]) -> str:
    return f"message:{role(entry)}" if entry["type"] == "message" else entry["type"]


def expected_kinds(objs: list[tuple[int, dict[str, Any]]]) -> Counter[str]:
    """Entry kinds a Claude file should map to, counted straight from its lines."""
    counts: Counter[str] = Counter()
    responses: set[str] = set()
    boundary_pending = False
    queued = delivered = 0
    for _, o in objs:
        t, m = o.get("type"), o.get("message")
        if t == "queue-operation":  # the user's words typed during a turn, taken in: a user message
            content = o.get("content")
            if o.get("operation") == "enqueue" and isinstance(content, str) and not content.lstrip().startswith("<"):
                queued += 1
            elif o.get("operation") == "remove" and queued:
                queued -= 1
                delivered += 1
        if t == "assistant" and isinstance(m, dict) and delivered and o.get("isSidechain") is not True:
            counts["message:user"] += delivered
            delivered = 0
        if t == "assistant" and isinstance(m, dict):
            if m.get("id") not in responses:
                counts["message:assistant"] += 1
            responses.add(m.get("id"))
        elif t == "user" and isinstance(m, dict):
            if o.get("isCompactSummary"):
                counts["compaction"] += 0 if boundary_pending else 1
                boundary_pending = False
            elif o.get("isMeta"):
                counts["custom"] += 1
            elif isinstance(m["content"], list):
                results = [b for b in m["content"] if b.get("type") == "tool_result"]
                counts["message:toolResult"] += len(results)
                if len(results) < len(m["content"]) or not results:
                    counts["message:user"] += 1
            else:
                counts["message:user"] += 1
        elif t == "system" and o.get("subtype") == "compact_boundary":
            counts["compaction"] += 1
            boundary_pending = True
        elif t == "summary":
            counts["session_info"] += 1
        else:
            counts["custom"] += 1
    return counts


# --- real files ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", REAL)
def test_real_file_is_a_valid_pi_tree(name: str) -> None:
    path, t = mapped(name)
    assert t.kind == "claude"
    assert t.diagnostics == []
    assert_valid_tree(t)
    assert_pi_shapes(t)
    # every line is served by exactly one entry: nothing dropped, nothing doubled
    assert all_source_lines(t) == [n for n, _ in raw_objects(path)]
    # one tree: the only root is the first entry
    assert [e["id"] for e in t.entries if e["parentId"] is None] == [t.entries[0]["id"]]
    assert t.leaf_id is not None


@pytest.mark.parametrize("name", REAL)
def test_real_file_kinds_and_roles_match_the_raw_lines(name: str) -> None:
    path, t = mapped(name)
    assert Counter(kind_of(e) for e in t.entries) == expected_kinds(raw_objects(path))


@pytest.mark.parametrize("name", REAL)
def test_real_file_merges_one_entry_per_api_response(name: str) -> None:
    path, t = mapped(name)
    lines: dict[str, list[dict[str, Any]]] = {}
    for _, o in raw_objects(path):
        if o.get("type") == "assistant":
            lines.setdefault(o["message"]["id"], []).append(o)
    assistants = [e for e in t.entries if role(e) == "assistant"]
    assert len(assistants) == len(lines)
    assert [e["message"]["responseId"] for e in assistants] == list(lines)  # file order of first lines
    for entry in assistants:
        group = lines[entry["message"]["responseId"]]
        msg = entry["message"]
        assert entry["id"] == group[0]["uuid"]
        assert len(msg["content"]) == sum(len(o["message"]["content"]) for o in group)
        kinds = [b["type"] for o in group for b in o["message"]["content"]]
        assert [b["type"] for b in msg["content"]] == [
            {"tool_use": "toolCall", "redacted_thinking": "thinking"}.get(k, k) for k in kinds
        ]
        last = group[-1]["message"]
        u = last["usage"]
        assert msg["usage"] == {
            "input": u["input_tokens"],
            "output": u["output_tokens"],
            "cacheRead": u["cache_read_input_tokens"],
            "cacheWrite": u["cache_creation_input_tokens"],
            "totalTokens": u["input_tokens"]
            + u["output_tokens"]
            + u["cache_read_input_tokens"]
            + u["cache_creation_input_tokens"],
        }
        assert msg["model"] == last["model"]
        raw_stop = [o["message"]["stop_reason"] for o in group if o["message"]["stop_reason"]]
        has_call = "toolCall" in [b["type"] for b in msg["content"]]
        want = {"end_turn": "stop", "tool_use": "toolUse"}.get(raw_stop[-1]) if raw_stop else None
        assert msg["stopReason"] == (want or ("toolUse" if has_call else "stop"))
        assert entry["ctxdSource"]["lines"] == [
            n for n, o in raw_objects(path) if o.get("uuid") in {g["uuid"] for g in group}
        ]


@pytest.mark.parametrize("name", REAL)
def test_real_file_tool_results_hang_under_their_calls(name: str) -> None:
    path, t = mapped(name)
    assert_results_follow_calls(t)
    results = {e["message"]["toolCallId"]: e["message"] for e in t.entries if role(e) == "toolResult"}
    raw = [
        b for _, o in raw_objects(path) if o.get("type") == "user" for b in _blocks(o) if b.get("type") == "tool_result"
    ]
    assert len(results) == len(raw)
    for block in raw:
        got = results[block["tool_use_id"]]
        assert got["isError"] == bool(block.get("is_error"))
        content = block.get("content")
        texts = [content] if isinstance(content, str) else [c["text"] for c in content if c["type"] == "text"]
        assert [b["text"] for b in got["content"] if b["type"] == "text"] == texts


def _blocks(o: dict[str, Any]) -> list[dict[str, Any]]:
    content = o["message"]["content"]
    return content if isinstance(content, list) else []


@pytest.mark.parametrize("name", REAL)
def test_real_file_keeps_uuids_and_user_text(name: str) -> None:
    path, t = mapped(name)
    index = by_id(t)
    for _, o in raw_objects(path):
        if o.get("type") == "user" and not o.get("isCompactSummary") and isinstance(o["message"]["content"], str):
            entry = index[o["uuid"]]
            if o.get("isMeta"):
                assert entry["type"] == "custom" and entry["customType"] == "claude.user.meta" and entry["data"] == o
            else:
                expected = {
                    "role": "user",
                    "content": o["message"]["content"],
                    "timestamp": entry["message"]["timestamp"],
                }
                kind = injected_kind(o["message"]["content"])
                if kind is not None:  # Claude Code injected it: marked, never the user's words
                    expected["ctxdInjected"] = kind
                assert entry["message"] == expected
        if (
            o.get("type") in ("system", "file-history-snapshot", "queue-operation")
            and o.get("subtype") != "compact_boundary"
        ):
            assert any(e["type"] == "custom" and e["data"] == o for e in t.entries)


@pytest.mark.parametrize("name", REAL)
def test_real_file_builds_a_ctxd_context(name: str, tmp_path: Path) -> None:
    _, t = mapped(name)
    ctx = ctxd_context(t, tmp_path)
    assert ctx.diagnostics == []
    assert ctx.model and ctx.model.startswith("anthropic/claude-")
    assert ctx.messages and ctx.contextTokens > 0
    roles = {m.role for m in ctx.messages}
    assert roles <= {"user", "assistant", "toolResult", "compactionSummary"}


def test_real_header() -> None:
    path, t = mapped("session-624a4a58.jsonl")
    first = next(o for _, o in raw_objects(path) if "sessionId" in o)
    assert t.header["id"] == first["sessionId"] == "624a4a58-b34c-462d-a70d-13421c8125a8"
    assert t.header["cwd"] == first["cwd"]
    assert t.header["agent"] == "claude"
    assert t.header["cliVersion"] == first["version"] and t.header["gitBranch"] == first["gitBranch"]
    assert t.header["model"] == "claude-sonnet-4-5-20250929"
    assert t.header["timestamp"] == next(o["timestamp"] for _, o in raw_objects(path) if "timestamp" in o)


def test_real_compaction_links_the_chain_across_the_boundary(tmp_path: Path) -> None:
    path, t = mapped("session-624a4a58.jsonl")
    objs = dict(raw_objects(path))
    boundary_line = next(n for n, o in objs.items() if o.get("subtype") == "compact_boundary")
    boundary, summary = objs[boundary_line], objs[boundary_line + 1]
    assert summary["isCompactSummary"] is True
    compactions = [e for e in t.entries if e["type"] == "compaction"]
    assert len(compactions) == 1
    c = compactions[0]
    assert c["id"] == boundary["uuid"]
    assert c["tokensBefore"] == boundary["compactMetadata"]["preTokens"] == 155979
    assert c["summary"] == summary["message"]["content"]
    assert c["summary"].startswith("This session is being continued")
    assert c["firstKeptEntryId"] == c["id"]
    assert c["details"] == {"trigger": "auto", "preTokens": 155979, "source": "claude"}
    assert c["ctxdSource"]["lines"] == [boundary_line, boundary_line + 1]
    assert c["parentId"] == boundary["logicalParentUuid"]
    # the summary line is part of the compaction, not a user message
    assert summary["uuid"] not in by_id(t)
    # the entries after it chain from it, and the leaf's path runs through it back to the first entry
    after = objs[boundary_line + 2]
    assert by_id(t)[after["uuid"]]["parentId"] == c["id"]
    path_ids = [e["id"] for e in path_to_root(t, t.leaf_id)]
    assert c["id"] in path_ids and path_ids[0] == t.entries[0]["id"]
    assert objs[2]["uuid"] in path_ids  # before the boundary
    # ctxd's context at the leaf: the summary, then only what follows the compaction
    ctx = ctxd_context(t, tmp_path)
    assert ctx.diagnostics == []
    assert ctx.compactionId == c["id"]
    assert ctx.messages[0].role == "compactionSummary"
    assert ctx.messages[0].message["summary"] == c["summary"]
    position = {e["id"]: i for i, e in enumerate(t.entries)}
    assert all(position[m.entryId] > position[c["id"]] for m in ctx.messages[1:])
    assert ctx.messages[1].entryId == after["uuid"]


@pytest.mark.parametrize("kind", ["claude", "codex"])
def test_incremental_turn_1_is_a_prefix_of_turn_2(kind: str) -> None:
    from ctxd.formats.transcripts import map_codex

    mapper = map_claude if kind == "claude" else map_codex
    one_path, two_path = ref_or_skip(kind, "incremental-turn-1.jsonl"), ref_or_skip(kind, "incremental-turn-2.jsonl")
    one_bytes, two_bytes = one_path.read_bytes(), two_path.read_bytes()
    assert two_bytes.startswith(one_bytes)
    one, two = mapper(one_bytes), mapper(two_bytes)
    assert 0 < len(one.entries) < len(two.entries)
    head = two.entries[: len(one.entries)]
    assert [(e["id"], e["parentId"], e["type"]) for e in one.entries] == [
        (e["id"], e["parentId"], e["type"]) for e in head
    ]
    assert one.lines == two.lines[: len(one.lines)]
    assert one.header["id"] == two.header["id"]
    # and growing the file byte by byte never reorders or renames what was already mapped
    step = max(1, len(two_bytes) // 97)
    previous: list[str] = []
    for end in range(0, len(two_bytes) + 1, step):
        ids = [e["id"] for e in mapper(two_bytes[:end]).entries]
        assert ids[: len(previous)] == previous
        previous = ids


# --- hand-written files, one rule each -------------------------------------------------------------


def line(kind: str, uuid: str | None, parent: str | None, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind, "parentUuid": parent, "isSidechain": False, "sessionId": "s-1"}
    out.update({"cwd": "/proj", "version": "2.1.0", "gitBranch": "main", "timestamp": TS})
    if uuid is not None:
        out["uuid"] = uuid
    out.update(kw)
    return out


def user(uuid: str, parent: str | None, content: Any, **kw: Any) -> dict[str, Any]:
    return line("user", uuid, parent, message={"role": "user", "content": content}, **kw)


def usage(inp: int = 10, out: int = 5, read: int = 100, write: int = 20) -> dict[str, Any]:
    return {
        "input_tokens": inp,
        "output_tokens": out,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
    }


def asst(
    uuid: str, parent: str | None, mid: str, *blocks: dict[str, Any], stop: str | None = None, **kw: Any
) -> dict[str, Any]:
    message = {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": kw.pop("model", "claude-x"),
        "content": list(blocks),
        "stop_reason": stop,
        "usage": kw.pop("usage", usage()),
    }
    return line("assistant", uuid, parent, message=message, **kw)


def text(s: str) -> dict[str, Any]:
    return {"type": "text", "text": s}


def call(cid: str, name: str = "Read", **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": cid, "name": name, "input": args}


def result(cid: str, content: Any = "ok", **kw: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": cid, "content": content, **kw}


def check(t: Any) -> None:
    assert_valid_tree(t)
    assert_pi_shapes(t)


def test_lines_of_one_response_merge_into_one_assistant_entry() -> None:
    t = map_claude(
        jsonl(
            user("u1", None, "go"),
            asst("a1", "u1", "msg_1", {"type": "thinking", "thinking": "hmm", "signature": "sig"}, usage=usage(out=1)),
            asst("a2", "a1", "msg_1", text("reading")),
            asst("a3", "a2", "msg_1", call("t1", file_path="/x"), stop="tool_use", usage=usage(out=50)),
            user("r1", "a3", [result("t1")]),
            asst("a4", "r1", "msg_2", text("done"), stop="end_turn"),
        )
    )
    check(t)
    assert [e["id"] for e in t.entries] == ["u1", "a1", "r1", "a4"]
    merged = by_id(t)["a1"]
    assert merged["message"]["content"] == [
        {"type": "thinking", "thinking": "hmm", "thinkingSignature": "sig"},
        {"type": "text", "text": "reading"},
        {"type": "toolCall", "id": "t1", "name": "Read", "arguments": {"file_path": "/x"}},
    ]
    assert merged["message"]["usage"] == {
        "input": 10,
        "output": 50,
        "cacheRead": 100,
        "cacheWrite": 20,
        "totalTokens": 180,
    }
    assert merged["message"]["stopReason"] == "toolUse"
    assert merged["message"]["responseId"] == "msg_1"
    assert merged["message"]["provider"] == "anthropic" and merged["message"]["api"] == "anthropic-messages"
    assert merged["ctxdSource"] == {"lines": [2, 3, 4], "kind": "assistant"}
    assert by_id(t)["r1"]["parentId"] == "a1"  # its parentUuid named the merge's last line
    assert by_id(t)["a4"]["message"]["stopReason"] == "stop"
    assert t.leaf_id == "a4"


@pytest.mark.parametrize(
    ("raw", "blocks", "want"),
    [
        ("end_turn", [text("x")], "stop"),
        ("tool_use", [call("c")], "toolUse"),
        ("max_tokens", [text("x")], "length"),
        ("stop_sequence", [text("x")], "stop"),
        ("something_new", [text("x")], "stop"),
        (None, [call("c")], "toolUse"),
        (None, [text("x")], "stop"),
    ],
)
def test_stop_reasons(raw: str | None, blocks: list[dict[str, Any]], want: str) -> None:
    t = map_claude(jsonl(user("u", None, "q"), asst("a", "u", "m", *blocks, stop=raw)))
    assert by_id(t)["a"]["message"]["stopReason"] == want


def test_api_errors_and_synthetic_messages_carry_no_usage() -> None:
    t = map_claude(
        jsonl(
            user("u", None, "q"),
            asst("a", "u", "m1", text("API Error: overloaded"), model="<synthetic>", isApiErrorMessage=True),
            user("u2", "a", "again"),
            asst("b", "u2", "m2", text("No response requested."), stop="stop_sequence", model="<synthetic>"),
        )
    )
    check(t)
    err = by_id(t)["a"]["message"]
    assert err["stopReason"] == "error" and err["errorMessage"] == "API Error: overloaded" and "usage" not in err
    assert "usage" not in by_id(t)["b"]["message"]
    assert "model" not in t.header  # only real models name the session's model


def test_tool_results_are_parented_to_the_call_and_chained() -> None:
    t = map_claude(
        jsonl(
            user("u1", None, "go"),
            asst("a1", "u1", "m1", call("t1")),
            asst("a2", "a1", "m1", call("t2", "Bash", command="ls"), stop="tool_use"),
            # one line with two results and a text the user typed alongside
            user(
                "r",
                "a2",
                [result("t1", [text("one"), text("more")]), result("t2", "boom", is_error=True), text("note")],
            ),
            asst("a3", "r", "m2", text("ok"), stop="end_turn"),
        )
    )
    check(t)
    entries = by_id(t)
    assert [e["id"] for e in t.entries] == ["u1", "a1", "r", "r.1", "r.2", "a3"]
    first, second, note = entries["r"], entries["r.1"], entries["r.2"]
    assert first["parentId"] == "a1" and second["parentId"] == "r" and note["parentId"] == "r.1"
    assert first["message"] == {
        "role": "toolResult",
        "toolCallId": "t1",
        "toolName": "Read",
        "content": [text("one"), text("more")],
        "isError": False,
        "timestamp": first["message"]["timestamp"],
    }
    assert second["message"]["toolName"] == "Bash" and second["message"]["isError"] is True
    assert second["message"]["content"] == [text("boom")]
    assert note["message"]["role"] == "user" and note["message"]["content"] == [text("note")]
    assert entries["a3"]["parentId"] == "r.2"  # the line's uuid stands for its last entry
    assert all(e["ctxdSource"]["lines"] == [4] for e in (first, second, note))
    assert_results_follow_calls(t)


def test_interleaved_calls_and_results_of_one_response_stay_one_chain() -> None:
    t = map_claude(
        jsonl(
            user("u1", None, "go"),
            asst("a1", "u1", "m1", call("t1")),
            user("r1", "a1", [result("t1")]),
            asst("a2", "r1", "m1", call("t2")),
            user("r2", "a2", [result("t2")]),
            asst("a3", "r2", "m1", call("t3"), stop="tool_use"),
            user("r3", "a3", [result("t3")]),
            asst("a4", "r3", "m2", text("done"), stop="end_turn"),
        )
    )
    check(t)
    entries = by_id(t)
    assert [b["id"] for b in entries["a1"]["message"]["content"]] == ["t1", "t2", "t3"]
    assert [entries[r]["parentId"] for r in ("r1", "r2", "r3")] == ["a1", "r1", "r2"]
    assert entries["a4"]["parentId"] == "r3"
    assert_results_follow_calls(t)


def test_tool_result_without_parent_goes_under_its_call() -> None:
    t = map_claude(
        jsonl(
            user("u1", None, "go"),
            asst("a1", "u1", "m1", call("t1"), stop="tool_use"),
            user("x", "a1", "typed while the tool ran"),
            user("r1", None, [result("t1")]),
            user("r2", "nowhere", [result("t9")]),
        )
    )
    check(t)
    assert by_id(t)["r1"]["parentId"] == "a1"
    assert (5, "tool_result for unknown tool_use_id 't9'") in t.diagnostics
    assert any(n == 5 and "nowhere" in reason for n, reason in t.diagnostics)


def test_compaction_boundary_and_summary_become_one_compaction() -> None:
    t = map_claude(
        jsonl(
            user("u1", None, "one"),
            asst("a1", "u1", "m1", text("first"), stop="end_turn"),
            line(
                "system",
                "cb",
                None,
                subtype="compact_boundary",
                logicalParentUuid="a1",
                content="Conversation compacted",
                compactMetadata={"trigger": "manual", "preTokens": 4242},
            ),
            user("sum", "cb", "The summary.", isCompactSummary=True, isVisibleInTranscriptOnly=True),
            user("u2", "sum", "two"),
            asst("a2", "u2", "m2", text("second"), stop="end_turn"),
        )
    )
    check(t)
    c = by_id(t)["cb"]
    assert c == {
        "type": "compaction",
        "id": "cb",
        "parentId": "a1",
        "timestamp": TS,
        "summary": "The summary.",
        "firstKeptEntryId": "cb",
        "tokensBefore": 4242,
        "details": {"trigger": "manual", "preTokens": 4242, "source": "claude"},
        "ctxdSource": {"lines": [3, 4], "kind": "system"},
    }
    assert "sum" not in by_id(t)
    assert by_id(t)["u2"]["parentId"] == "cb"
    assert [e["id"] for e in path_to_root(t, t.leaf_id)] == ["u1", "a1", "cb", "u2", "a2"]


def test_compaction_with_summary_blocks_and_no_boundary() -> None:
    t = map_claude(
        jsonl(
            user("u1", None, "one"),
            user("sum", "u1", [text("Part one."), text("Part two.")], isCompactSummary=True),
            user("u2", "sum", "two"),
        )
    )
    check(t)
    c = by_id(t)["sum"]
    assert c["type"] == "compaction" and c["summary"] == "Part one.\nPart two." and c["tokensBefore"] == 0
    assert c["parentId"] == "u1" and by_id(t)["u2"]["parentId"] == "sum"


def test_compaction_boundary_not_yet_followed_by_its_summary() -> None:
    boundary = line(
        "system", "cb", None, subtype="compact_boundary", logicalParentUuid="u1", compactMetadata={"preTokens": 7}
    )
    t = map_claude(jsonl(user("u1", None, "one"), boundary))
    check(t)
    assert by_id(t)["cb"]["summary"] == "" and t.leaf_id == "cb"


def test_titles_become_session_info_without_breaking_the_chain() -> None:
    t = map_claude(
        jsonl(
            {"type": "summary", "summary": "Old title", "leafUuid": "elsewhere"},
            {"type": "file-history-snapshot", "messageId": "u1", "snapshot": {}, "isSnapshotUpdate": False},
            user("u1", None, "hi"),
            {"type": "summary", "summary": "New title", "leafUuid": "u1"},
            asst("a1", "u1", "m1", text("hello"), stop="end_turn"),
        )
    )
    check(t)
    ids = [e["id"] for e in t.entries]
    assert ids == ["00000001", "00000002", "u1", "00000004", "a1"]
    infos = [e for e in t.entries if e["type"] == "session_info"]
    assert [e["name"] for e in infos] == ["Old title", "New title"]
    # a single linear chain: the leading lines come first, the title sits between u1 and a1
    assert [e["parentId"] for e in t.entries] == [None, "00000001", "00000002", "u1", "00000004"]
    assert t.leaf_id == "a1"
    assert infos[0]["timestamp"] == TS  # undated lines take the first timestamp in the file


def test_lines_without_uuid_are_spliced_into_the_main_chain() -> None:
    t = map_claude(
        jsonl(
            user("u1", None, "go"),
            asst("a1", "u1", "m1", call("t1")),
            {"type": "file-history-snapshot", "messageId": "x", "snapshot": {}, "isSnapshotUpdate": True},
            asst("a2", "a1", "m1", call("t2"), stop="tool_use"),
            {"type": "queue-operation", "operation": "enqueue", "timestamp": TS, "content": "later"},
            user("r1", "a2", [result("t1")]),
            user("r2", "r1", [result("t2")]),
        )
    )
    check(t)
    assert [(e["id"], e["parentId"]) for e in t.entries] == [
        ("u1", None),
        ("a1", "u1"),
        ("00000003", "a1"),
        ("00000005", "00000003"),
        ("r1", "00000005"),
        ("r2", "r1"),
    ]
    snapshot, queued = by_id(t)["00000003"], by_id(t)["00000005"]
    assert snapshot["customType"] == "claude.file-history-snapshot" and queued["customType"] == "claude.queue-operation"
    assert_results_follow_calls(t)


def test_what_the_user_typed_while_the_agent_worked_is_a_user_message_before_its_next_response() -> None:
    """Claude Code records a message typed during a turn only as a queue operation: ``enqueue`` with the text,
    ``remove`` when it takes it in. The words are the user's (the agent answers them): they are placed after the
    results the agent was waiting for, before its next response; injected text queued alike is not."""
    notification = "<task-notification><task-id>b1</task-id><status>completed</status></task-notification>"
    t = map_claude(
        jsonl(
            user("u1", None, "Implement the epic"),
            asst("a1", "u1", "m1", call("t1", "Bash", command="git push"), stop="tool_use"),
            {"type": "queue-operation", "operation": "enqueue", "timestamp": TS, "content": "new tasks were added"},
            {"type": "queue-operation", "operation": "remove", "timestamp": TS},
            {"type": "queue-operation", "operation": "enqueue", "timestamp": TS, "content": notification},
            user("r1", "a1", [result("t1")]),
            asst("a2", "r1", "m2", text("I'll take the new tasks too."), stop="end_turn"),
        )
    )
    check(t)
    chain = [e for e in t.entries if e["type"] == "message"]
    roles = [(e["message"]["role"], e["message"].get("content")) for e in chain]
    assert roles[2][0] == "toolResult" and roles[3] == ("user", "new tasks were added")
    assert roles[4][0] == "assistant"
    assert not any(isinstance(c, str) and "task-notification" in c for _, c in roles)
    assert_results_follow_calls(t)


def test_sidechains_branch_off_the_task_call_and_leave_the_main_leaf_alone() -> None:
    prompt = "Explore the repo"
    side = {"isSidechain": True, "agentId": "ag1"}
    t = map_claude(
        jsonl(
            user("u1", None, "explore"),
            asst("a1", "u1", "m1", call("task1", "Task", prompt=prompt, subagent_type="Explore"), stop="tool_use"),
            user("s1", None, prompt, **side),
            asst("s2", "s1", "m-side", text("found it"), stop="end_turn", **side),
            user("s3", None, "an unrelated warmup", **side),
            user("r1", "a1", [result("task1", "report")]),
            asst("a2", "r1", "m2", text("summary"), stop="end_turn"),
        ),
        "/p/session.jsonl",
    )
    check(t)
    entries = by_id(t)
    assert entries["s1"]["parentId"] == "a1"  # matched to the Task call by its prompt
    assert entries["s2"]["parentId"] == "s1"
    assert entries["s3"]["parentId"] is None  # no Task call to hang from: a root of its own
    assert entries["r1"]["parentId"] == "a1"
    assert t.leaf_id == "a2"
    assert [e["id"] for e in path_to_root(t, t.leaf_id)] == ["u1", "a1", "r1", "a2"]


def test_subagent_file_is_all_main_chain_with_its_parent_session(tmp_path: Path) -> None:
    side = {"isSidechain": True, "agentId": "ag1"}
    data = jsonl(user("s1", None, "task", **side), asst("s2", "s1", "m", text("done"), stop="end_turn", **side))
    nested = map_claude(data, str(tmp_path / "sess-1" / "subagents" / "agent-ag1.jsonl"))
    check(nested)
    assert nested.leaf_id == "s2"
    assert nested.header["id"] == "agent-ag1" and nested.header["agentId"] == "ag1"
    assert nested.header["sessionId"] == "s-1"
    assert nested.header["parentSession"] == str(tmp_path / "sess-1.jsonl")
    beside = map_claude(data, str(tmp_path / "agent-ag1.jsonl"))
    assert beside.header["parentSession"] == str(tmp_path / "s-1.jsonl")
    pathless = map_claude(data)
    assert pathless.leaf_id == "s2" and pathless.header["id"] == "agent-ag1"


def test_subagent_files_are_found_in_both_layouts(tmp_path: Path) -> None:
    main = tmp_path / "s-1.jsonl"
    main.write_bytes(jsonl({"type": "summary", "summary": "t", "leafUuid": "x"}, user("u1", None, "hi")))
    (tmp_path / "s-1" / "subagents").mkdir(parents=True)
    newer = [tmp_path / "s-1" / "subagents" / f"agent-{n}.jsonl" for n in ("b", "a")]
    for p in newer:
        p.write_bytes(b"")
    mine = tmp_path / "agent-old.jsonl"
    mine.write_bytes(jsonl(user("x", None, "task", isSidechain=True, agentId="old")))
    other = tmp_path / "agent-other.jsonl"
    other.write_bytes(jsonl(user("y", None, "task", isSidechain=True, agentId="o", sessionId="s-2")))
    (tmp_path / "agent-broken.jsonl").write_bytes(b"{not json\n")
    assert claude_subagent_files(str(main)) == [str(newer[1]), str(newer[0]), str(mine)]
    assert claude_subagent_files(str(mine)) == []
    assert claude_subagent_files(str(tmp_path / "missing" / "x.jsonl")) == []


def test_unknown_types_and_meta_lines_are_kept_as_custom_entries() -> None:
    progress = line("progress", "p1", "u1", data={"type": "hook_progress"}, toolUseID="t")
    future = line("hologram", "h1", "p1", shiny=True)
    hook = line("system", "s1", "h1", subtype="stop_hook_summary", hookCount=1)
    meta = user("m1", "s1", "Caveat: local commands", isMeta=True)
    attachment = line("attachment", "at1", "m1", attachment={"type": "file"})
    t = map_claude(jsonl(user("u1", None, "go"), progress, future, hook, meta, attachment, user("u2", "at1", "next")))
    check(t)
    entries = by_id(t)
    for uuid, obj, custom_type in [
        ("p1", progress, "claude.progress"),
        ("h1", future, "claude.hologram"),
        ("s1", hook, "claude.system.stop_hook_summary"),
        ("m1", meta, "claude.user.meta"),
        ("at1", attachment, "claude.attachment"),
    ]:
        assert entries[uuid]["type"] == "custom"
        assert entries[uuid]["customType"] == custom_type and entries[uuid]["data"] == obj
    assert [e["id"] for e in path_to_root(t, t.leaf_id)] == ["u1", "p1", "h1", "s1", "m1", "at1", "u2"]
    assert t.diagnostics == []


def test_bad_lines_are_reported_and_the_rest_served() -> None:
    t = map_claude(
        jsonl(
            user("u1", None, "one"),
            '{"type": "assistant", "uuid": "a1", "message": {"id": "m1", "conte',
            "[1, 2, 3]",
            "",
            "   ",
            line("assistant", "a2", "u1", message="not an object"),
            user("u2", "a1", "two"),
        )
    )
    check(t)
    reasons = dict(t.diagnostics)
    assert reasons[2].startswith("invalid JSON")
    assert reasons[3].startswith("not a JSON object")
    assert "without a message object" in reasons[6]
    assert "a1 is not in the file" in reasons[7]
    assert sorted(reasons) == [2, 3, 6, 7]
    assert by_id(t)["a2"]["type"] == "custom"
    assert by_id(t)["u2"]["parentId"] == "a2"  # attached to the previous main-chain entry
    assert t.lines == [1, 6, 7]


def test_only_complete_lines_are_mapped() -> None:
    full = jsonl(user("u1", None, "one"), user("u2", "u1", "two"))
    partial = full + b'{"type": "user", "uuid": "u3", "parentUuid": "u2", "mess'
    t = map_claude(partial)
    assert [e["id"] for e in t.entries] == ["u1", "u2"] and t.diagnostics == []
    assert map_claude(full[:-1]).lines == [1]  # the second line lacks its newline: still being written
    assert map_claude(b"").entries == [] and map_claude(b'{"type":"user"').entries == []


def test_duplicate_uuid_is_reported_and_skipped() -> None:
    t = map_claude(jsonl(user("u1", None, "one"), user("u1", None, "again"), user("u2", "u1", "two")))
    check(t)
    assert t.diagnostics == [(2, "duplicate uuid u1; line skipped")]
    assert [e["id"] for e in t.entries] == ["u1", "u2"]


def test_blocks_images_and_odd_content() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "QUJD"}}
    url_image = {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}
    doc = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "A" * 5000}}
    t = map_claude(
        jsonl(
            user("u1", None, [text("look"), image, url_image, doc]),
            asst(
                "a1",
                "u1",
                "m1",
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "server_tool_use", "id": "srv", "name": "web_search", "input": {"query": "q"}},
                call("t1", "Screenshot"),
                stop="tool_use",
            ),
            user("r1", "a1", [result("t1", [image, text("shot")])]),
            line("assistant", "a2", "r1", message={"id": "m2", "role": "assistant", "content": "plain string content"}),
            user("u2", "a2", 42),
        )
    )
    check(t)
    entries = by_id(t)
    content = entries["u1"]["message"]["content"]
    assert content[:3] == [
        text("look"),
        {"type": "image", "data": "QUJD", "mimeType": "image/jpeg"},
        text("[image: https://x/y.png]"),
    ]
    assert content[3]["type"] == "text" and content[3]["text"].startswith("[document: ")  # too big to inline
    blocks = entries["a1"]["message"]["content"]
    assert blocks[0] == {"type": "thinking", "thinking": "", "redacted": True, "thinkingSignature": "opaque"}
    assert blocks[1]["type"] == "text" and blocks[1]["text"].startswith("[server_tool_use] {")
    assert entries["r1"]["message"]["content"][0]["type"] == "image"
    assert entries["a2"]["message"]["content"] == [text("plain string content")]
    assert entries["u2"]["message"]["content"] == []
    assert t.diagnostics == []


def test_timestamps_become_milliseconds() -> None:
    t = map_claude(jsonl(user("u1", None, "x", timestamp="2026-01-07T20:23:23.678Z")))
    assert t.entries[0]["timestamp"] == "2026-01-07T20:23:23.678Z"
    assert t.entries[0]["message"]["timestamp"] == 1767817403678
    assert t.header["timestamp"] == "2026-01-07T20:23:23.678Z"


def test_a_named_main_file_starting_with_a_sidechain_is_not_a_subagent_file() -> None:
    side = {"isSidechain": True, "agentId": "w"}
    data = jsonl(user("w1", None, "Warmup", **side), user("u1", None, "real question"))
    t = map_claude(data, "/p/s-1.jsonl")
    assert t.leaf_id == "u1" and "parentSession" not in t.header and t.header["id"] == "s-1"
    assert by_id(t)["w1"]["parentId"] is None and by_id(t)["u1"]["parentId"] is None
