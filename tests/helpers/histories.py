"""Entries for random session histories (the property tests of the context and its size): one per
kind of thing a session grows with."""

from __future__ import annotations

from typing import Any


def history_entry(op: str, n: int, path: list[str]) -> dict[str, Any] | None:
    """The entry an operation of a random history appends (``n``: its size and which entry of
    ``path`` it names), or None when it has nothing to name yet."""
    text = "x" * n
    pick = path[n % len(path)] if path else None
    usage = {"input": 1000 + n, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1010 + n}
    said = {"role": "assistant", "content": [{"type": "text", "text": text}], "stopReason": "stop", "timestamp": 1}
    if op == "user":
        return {"type": "message", "message": {"role": "user", "content": text, "timestamp": 1}}
    if op == "user_image":
        image = {"type": "image", "data": "aGk=", "mimeType": "image/png"}
        return {"type": "message", "message": {"role": "user", "content": [image], "timestamp": 1}}
    if op == "assistant_usage":
        return {"type": "message", "message": {**said, "usage": usage}}
    if op == "assistant_zero_usage":
        zero = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}
        return {"type": "message", "message": {**said, "usage": zero}}
    if op == "assistant_aborted":
        return {"type": "message", "message": {**said, "usage": usage, "stopReason": "aborted"}}
    if op == "assistant_no_usage":
        return {"type": "message", "message": said}
    if op == "system":
        return {"type": "message", "message": {"role": "system", "content": text, "timestamp": 1}}
    if op == "system_tools":
        tool = {"name": f"t{n % 3}", "description": text}
        key = "toolsRemoved" if n % 2 else "toolsAdded"
        return {"type": "message", "message": {"role": "system", "content": "", key: [tool], "sections": {"s": text}}}
    if op in ("compaction", "compaction_system") and pick is not None:
        entry: dict[str, Any] = {"type": "compaction", "summary": text, "firstKeptEntryId": pick, "tokensBefore": n}
        if op == "compaction_system":
            entry["systemMessage"] = {"role": "system", "content": "kept " + text, "timestamp": 5}
        if n % 3 == 0:
            entry["details"] = {"readFiles": ["r.py"], "modifiedFiles": ["m.py"]}
        return entry
    if op in ("edit_replace", "edit_hide") and pick is not None:
        replacement = {"content": text[:40]} if op == "edit_replace" else None
        return {"type": "context_edit", "targetId": pick, "replacement": replacement}
    if op in ("branch_summary", "empty_branch_summary"):
        return {"type": "branch_summary", "fromId": "x", "summary": text if op == "branch_summary" else ""}
    if op == "custom_message":
        return {"type": "custom_message", "customType": "n", "content": text, "display": True}
    if op == "label" and pick is not None:
        return {"type": "label", "targetId": pick, "label": "l"}
    return None


def rich_entry(op: str, n: int) -> dict[str, Any] | None:
    """Entries with every part a context's composition tells apart (thinking, tool calls, images in
    tool results, shell runs), for the composition's property test; None for another op."""
    if op == "assistant_thinking_call":
        call = {"type": "toolCall", "id": f"c{n}", "name": f"tool{n % 3}", "arguments": {"n": n, "s": "é" * (n % 5)}}
        blocks = [{"type": "thinking", "thinking": "t" * n}, {"type": "text", "text": "a" * (n % 7)}, call]
        said = {"role": "assistant", "content": blocks, "stopReason": "toolUse", "timestamp": 1}
        return {"type": "message", "message": said}
    if op == "tool_result_image":
        content = [{"type": "text", "text": "r" * n}, {"type": "image", "data": "aGk=", "mimeType": "image/png"}]
        result = {"role": "toolResult", "toolCallId": f"c{n}", "toolName": f"tool{n % 3}", "content": content}
        return {"type": "message", "message": {**result, "timestamp": 1}}
    if op == "bash_execution":
        run = {"role": "bashExecution", "command": "ls " * (n % 4), "output": "o" * n, "exitCode": 0, "timestamp": 1}
        return {"type": "message", "message": run}
    return None
