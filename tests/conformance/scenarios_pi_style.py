"""Scenarios written as pi writes its lines (key order, fields), and mixed with ctxd's own writer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.factories import (
    chain,
    header,
    image,
    text,
    write,
)
from scenario_kit import SYSTEM_AT_COMPACTION, TOOL, big_assistant, big_user, mixed, raw, x

from ctxd.tree.session import Session

# --- pi-style hand-written lines ---------------------------------------------------------------------


def _lines(*objs: dict[str, Any]) -> str:
    return "".join(json.dumps(o, separators=(",", ":"), ensure_ascii=False) + "\n" for o in objs)


PI_USAGE = {
    "input": 1200,
    "output": 85,
    "cacheRead": 3300,
    "cacheWrite": 0,
    "totalTokens": 4585,
    "cost": {"input": 0.0036, "output": 0.001275, "cacheRead": 0.00099, "cacheWrite": 0, "total": 0.005865},
}


def _pi_assistant(i: str, parent: str, content: list[Any], stop: str = "stop", usage: Any = PI_USAGE) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "usage": usage,
        "stopReason": stop,
        "timestamp": 1772355605000,
    }
    return {"type": "message", "id": i, "parentId": parent, "timestamp": "2026-03-01T09:00:05.000Z", "message": msg}


def _pi(kind: str, i: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "id": i, "parentId": parent, "timestamp": "2026-03-01T09:00:00.000Z", **fields}


def _pi_msg(i: str, parent: str | None, role: str, **fields: Any) -> dict[str, Any]:
    return _pi("message", i, parent, message={"role": role, **fields, "timestamp": 1772355600000})


PI_HEADER = {"type": "session", "version": 3, "id": "019c0000-0000-7000-8000-000000000001",
             "timestamp": "2026-03-01T09:00:00.000Z", "cwd": "/home/dev/proj"}  # fmt: skip


def _pi_session(*objs: dict[str, Any]) -> str:
    return _lines(PI_HEADER, *objs)


EDIT_ARGS = {"path": "src/chart.ts", "oldText": "a", "newText": "b"}


@raw("pi-style", keep=200)
def pi_tool_loop_with_images() -> str:
    return _pi_session(
        _pi("model_change", "a0000001", None, provider="anthropic", modelId="claude-sonnet-4-5"),
        _pi("thinking_level_change", "a0000002", "a0000001", thinkingLevel="medium"),
        _pi_msg("a0000003", "a0000002", "user", content=[text("fix the chart"), image("image/jpeg")]),
        _pi_assistant(
            "a0000004",
            "a0000003",
            [
                {"type": "thinking", "thinking": "Look at the file first.", "thinkingSignature": "EqQB"},
                {"type": "toolCall", "id": "toolu_01", "name": "read", "arguments": {"path": "src/chart.ts"}},
            ],
            stop="toolUse",
        ),
        _pi_msg(
            "a0000005",
            "a0000004",
            "toolResult",
            toolCallId="toolu_01",
            toolName="read",
            content=[text(x(1200, "r"))],
            isError=False,
        ),
        _pi_assistant(
            "a0000006",
            "a0000005",
            [{"type": "toolCall", "id": "toolu_02", "name": "edit", "arguments": EDIT_ARGS}],
            stop="toolUse",
        ),
        _pi_msg("a0000007", "a0000006", "toolResult", toolCallId="toolu_02", toolName="edit",
                content=[text("Successfully replaced text.")], details={"diff": "-a\n+b"}, isError=False),
        _pi_assistant("a0000008", "a0000007", [text("Fixed: the axis now starts at zero.")]),
        _pi("label", "a0000009", "a0000008", targetId="a0000003", label="chart"),
        _pi_msg("a000000a", "a0000009", "user", content=[text("thanks " + x(200))]),
    )  # fmt: skip


@raw("pi-style", keep=100)
def pi_compaction_with_system_and_edit() -> str:
    system_now = {**SYSTEM_AT_COMPACTION, "timestamp": 1772355700000}
    return _pi_session(
        _pi_msg("b0000001", None, "system", content="You are terse.", toolsAdded=[TOOL]),
        _pi_msg("b0000002", "b0000001", "user", content=x(400)),
        _pi_assistant("b0000003", "b0000002", [text(x(400, "y"))]),
        _pi_msg("b0000004", "b0000003", "system", content="Also polite.", sections={"tone": "polite"}),
        _pi_msg("b0000005", "b0000004", "user", content=x(400)),
        _pi_assistant("b0000006", "b0000005", [text(x(400, "y"))]),
        _pi("compaction", "b0000007", "b0000006", summary="## Goal\nfix it", firstKeptEntryId="b0000005",
            tokensBefore=4585, details={"readFiles": [], "modifiedFiles": []}, systemMessage=system_now),
        _pi_msg("b0000008", "b0000007", "user", content=x(400)),
        _pi_assistant("b0000009", "b0000008", [text(x(400, "y"))], usage={**PI_USAGE, "totalTokens": 900}),
        _pi("context_edit", "b000000a", "b0000009", targetId="b0000008", replacement={"content": "short"}),
        _pi_msg("b000000b", "b000000a", "user", content=x(40)),
    )  # fmt: skip


@raw("pi-style", keep=100)
def pi_bash_and_custom_messages() -> str:
    return _pi_session(
        _pi_msg("c0000001", None, "user", content="run the tests"),
        _pi_msg("c0000002", "c0000001", "bashExecution", command="npm test", output=x(800, "o"), exitCode=1,
                cancelled=False, truncated=False),
        _pi("custom_message", "c0000003", "c0000002", customType="reminder", content=x(400, "m"), display=False,
            details={"k": 1}),
        _pi_assistant("c0000004", "c0000003", [text(x(400, "y"))]),
        _pi("custom", "c0000005", "c0000004", customType="ext-state", data={"open": True}),
        _pi("branch_summary", "c0000006", "c0000005", fromId="c0000003", summary=x(400, "s"),
            details={"readFiles": ["a"], "modifiedFiles": []}),
        _pi_msg("c0000007", "c0000006", "user", content="and now?"),
    )  # fmt: skip


@raw("pi-style")
def pi_v2_with_hook_message() -> str:
    v2 = {**PI_HEADER, "version": 2}
    return _lines(
        v2,
        _pi_msg("d0000001", None, "user", content="hi"),
        _pi_msg("d0000002", "d0000001", "hookMessage", customType="hook", content="injected " * 10, display=True),
        _pi_assistant("d0000003", "d0000002", [text("hello")]),
    )


@raw("pi-style", keep=100)
def pi_v1_linear_with_compaction_index() -> str:
    v1 = {"type": "session", "id": "v1-session", "timestamp": "2025-11-20T10:00:00.000Z", "cwd": "/p"}
    usage = {"input": 10, "output": 10, "cacheRead": 0, "cacheWrite": 0}

    def line(n: int, role: str) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": role, "content": x(400), "timestamp": n}
        if role == "assistant":
            msg.update(content=[text(x(400))], usage=usage, stopReason="stop")
        return {"type": "message", "timestamp": f"2025-11-20T10:00:0{n}.000Z", "message": msg}

    # A v1 compaction names its first kept entry by line index (the header is 0).
    comp = {"type": "compaction", "timestamp": "2025-11-20T10:00:04.000Z", "summary": "old summary",
            "firstKeptEntryIndex": 3, "tokensBefore": 300}  # fmt: skip
    lines = [line(1, "user"), line(2, "assistant"), line(3, "user"), comp, line(5, "assistant"), line(6, "user")]
    return _lines(v1, *lines)


@raw("pi-style", keep=100)
def pi_blank_and_malformed_lines() -> str:
    text_ = _pi_session(
        _pi_msg("e0000001", None, "user", content=x(400)),
        _pi_assistant("e0000002", "e0000001", [text(x(400))]),
        _pi_msg("e0000003", "e0000002", "user", content=x(400)),
    )
    lines = text_.splitlines(keepends=True)
    return "".join([lines[0], "\n", lines[1], "{not json\n", *lines[2:]])


# --- mixed: pi-style lines, then ctxd's writer -------------------------------------------------------


@mixed("mixed", keep=150)
def mixed_pi_then_ctxd_appends(d: Path) -> str:
    path = d / "mixed_pi_then_ctxd_appends.jsonl"
    path.write_text(pi_bash_and_custom_messages(), encoding="utf-8")
    s = Session.open(str(path))
    s.append([{"type": "message", "message": {"role": "assistant", "content": [text(x(400))], "stopReason": "stop"}}])
    s.append([{"type": "custom_message", "customType": "ctxd", "content": [text("ctxd"), image()], "display": True}])
    s.append([{"type": "context_edit", "targetId": "c0000002", "replacement": None}])
    s.append([{"type": "message", "message": {"role": "user", "content": x(200), "timestamp": 10}}])
    return str(path)


@mixed("mixed", keep=100)
def mixed_ctxd_then_pi_lines(d: Path) -> str:
    path = d / "mixed_ctxd_then_pi_lines.jsonl"
    s = Session.open(write(path, chain(big_user(400), big_assistant(400, total=1200)), header()))
    last = s.leaf_id()
    s.append([{"type": "message", "message": {"role": "system", "content": "patch", "timestamp": 3}}])
    leaf = s.leaf_id()
    with open(path, "a", encoding="utf-8") as f:
        f.write(_lines(
            _pi_msg("f0000001", leaf, "user", content=[text(x(400)), image()]),
            _pi_assistant("f0000002", "f0000001", [text(x(400))], usage={**PI_USAGE, "totalTokens": 2000}),
            _pi("context_edit", "f0000003", "f0000002", targetId=last, replacement={"content": "tiny"}),
        ))  # fmt: skip
    return str(path)


@mixed("mixed", keep=200)
def mixed_ctxd_compaction_entry_on_pi_lines(d: Path) -> str:
    """A file whose compaction ctxd itself wrote (with the prompt state) over pi-style lines."""
    import asyncio

    from ctxd.compaction.engine import compact
    from ctxd.compaction.settings import CompactionSettings

    path = d / "mixed_ctxd_compaction_entry_on_pi_lines.jsonl"
    path.write_text(pi_compaction_with_system_and_edit(), encoding="utf-8")
    s = Session.open(str(path))
    s.append([{"type": "message", "message": {"role": "system", "content": "late patch", "timestamp": 11}}])
    s.append([{"type": "message", "message": {"role": "user", "content": x(800), "timestamp": 12}}])
    asyncio.run(compact(s, settings=CompactionSettings(keep_recent_tokens=150)))
    s.append([{"type": "message", "message": {"role": "user", "content": "after ctxd's compaction", "timestamp": 13}}])
    return str(path)
