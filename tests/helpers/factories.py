"""Tiny entry factories for tests: each returns one pi v3 entry dict."""

from __future__ import annotations

import itertools
from typing import Any

_ids = itertools.count(1)
TS = "2026-03-01T09:00:00.000Z"


def eid() -> str:
    return f"{next(_ids):08x}"


def header(**kw: Any) -> dict[str, Any]:
    return {"type": "session", "version": 3, "id": "sess-1", "timestamp": TS, "cwd": "/proj", **kw}


def entry(kind: str, parent: str | None, **kw: Any) -> dict[str, Any]:
    return {"type": kind, "id": kw.pop("id", None) or eid(), "parentId": parent, "timestamp": TS, **kw}


def user(parent: str | None, text: str = "hello", **kw: Any) -> dict[str, Any]:
    return entry("message", parent, message={"role": "user", "content": text, "timestamp": 1}, **kw)


def usage(total: int) -> dict[str, Any]:
    return {"input": total, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": total}


def assistant(
    parent: str | None,
    text: str = "ok",
    *,
    calls: list[tuple[str, str, dict[str, Any]]] | None = None,
    total: int | None = None,
    stop: str | None = None,
    error: str | None = None,
    model: str = "m1",
    **kw: Any,
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for call_id, name, args in calls or []:
        content.append({"type": "toolCall", "id": call_id, "name": name, "arguments": args})
    msg: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "provider": "prov",
        "model": model,
        "stopReason": stop or ("toolUse" if calls else "stop"),
        "timestamp": 1,
    }
    if total is not None:
        msg["usage"] = usage(total)
    if error is not None:
        msg["errorMessage"] = error
    return entry("message", parent, message=msg, **kw)


def tool_result(
    parent: str | None, call_id: str, text: str = "result", name: str = "read", **kw: Any
) -> dict[str, Any]:
    msg = {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "timestamp": 1,
    }
    return entry("message", parent, message=msg, **kw)


def compaction(parent: str | None, first_kept: str, summary: str = "SUMMARY", tokens: int = 1000, **kw: Any):  # type: ignore[no-untyped-def]
    return entry("compaction", parent, summary=summary, firstKeptEntryId=first_kept, tokensBefore=tokens, **kw)


def write(path: Any, entries: list[dict[str, Any]], hdr: dict[str, Any] | None = None) -> str:
    import json

    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(hdr or header()) + "\n")
        for e in entries:
            f.write(json.dumps(e) + "\n")
    return str(path)


def chain(*makers: Any) -> list[dict[str, Any]]:
    """Build a linear chain: each maker is called with the previous entry's id."""
    out: list[dict[str, Any]] = []
    parent: str | None = None
    for make in makers:
        e = make(parent)
        out.append(e)
        parent = e["id"]
    return out


# --- more message kinds (pi 1.5.2) ----------------------------------------------------------------


def image(mime: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "data": "aGVsbG8=", "mimeType": mime}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def message(parent: str | None, role: str, **fields: Any) -> dict[str, Any]:
    """A ``message`` entry with any role and fields (``timestamp`` 1 unless given)."""
    kw = {k: fields.pop(k) for k in ("id",) if k in fields}
    return entry("message", parent, message={"role": role, "timestamp": 1, **fields}, **kw)


def system(parent: str | None, content: Any = "be brief", **fields: Any) -> dict[str, Any]:
    return message(parent, "system", content=content, **fields)


def bash(parent: str | None, command: str = "ls", output: str = "a\nb", **fields: Any) -> dict[str, Any]:
    return message(
        parent, "bashExecution", command=command, output=output, exitCode=0, cancelled=False, truncated=False, **fields
    )


def custom_message(parent: str | None, content: Any = "remember X", **kw: Any) -> dict[str, Any]:
    return entry(
        "custom_message",
        parent,
        customType=kw.pop("customType", "note"),
        content=content,
        display=kw.pop("display", True),
        **kw,
    )


def branch_summary(parent: str | None, summary: str = "we tried Y", **kw: Any) -> dict[str, Any]:
    return entry("branch_summary", parent, fromId=kw.pop("fromId", "ffffffff"), summary=summary, **kw)


def context_edit(parent: str | None, target: str, replacement: Any = None, **kw: Any) -> dict[str, Any]:
    """``replacement``: None hides the target; otherwise the new content (a string or blocks)."""
    repl = None if replacement is None else {"content": replacement}
    return entry("context_edit", parent, targetId=target, replacement=repl, **kw)


def meta(kind: str, parent: str | None, **kw: Any) -> dict[str, Any]:
    """A state-only entry: model_change, thinking_level_change, label, session_info, custom."""
    defaults: dict[str, dict[str, Any]] = {
        "model_change": {"provider": "prov", "modelId": "m2"},
        "thinking_level_change": {"thinkingLevel": "high"},
        "label": {"targetId": parent, "label": "here"},
        "session_info": {"name": "a name"},
        "custom": {"customType": "state", "data": {"n": 1}},
    }
    return entry(kind, parent, **{**defaults.get(kind, {}), **kw})
