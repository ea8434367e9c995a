"""The conversation as exchanges (one user message and the agent's work until the next), for the offline
summariser's abridged history and its Done / In Progress lists.

A user message that holds only injected text (a slash-command record, environment context) still starts an
exchange, shown as what it is rather than as the user's words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ctxd.compaction.fileops import call_command, call_file_ops
from ctxd.compaction.shell import parse_shell
from ctxd.compaction.summarizers.facts import Call, Message, injected_kind, user_words


@attrs.define
class Exchange:
    """One user message and the agent's work until the next user message."""

    user: str | None
    modified: dict[str, None] = attrs.field(factory=dict)
    created: dict[str, None] = attrs.field(factory=dict)
    deleted: dict[str, None] = attrs.field(factory=dict)
    viewed: dict[str, None] = attrs.field(factory=dict)
    commands: list[tuple[str, str]] = attrs.field(factory=list)
    """``(command, note)``; the note says who ran it and whether it failed ("" for an agent's success)."""
    response: str | None = None
    status: str | None = None
    """Why there is no final response: "interrupted", "error: ...", or "continues" (the agent was mid-work)."""


def exchange_bounds(messages: Sequence[Message], user_indices: Sequence[int]) -> list[tuple[int, int]]:
    """``[start, end)`` of each exchange; messages before the first user message form their own exchange."""
    bounds: list[tuple[int, int]] = []
    starts = list(user_indices)
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(messages)
        if end > start:
            bounds.append((start, end))
    return bounds


_FILE_KIND = {"written": "modified", "edited": "modified", "created": "created", "deleted": "deleted"}


def build_exchange(messages: Sequence[Message], start: int, end: int, calls: Mapping[str, Call]) -> Exchange:
    """The :class:`Exchange` of ``messages[start:end]``; ``calls`` supplies tool-call outcomes."""
    first = messages[start] if start < end else {}
    user: str | None = None
    if first.get("role") == "user":
        user = user_words(first)
        if not user.strip():
            kind = injected_kind(first)
            user = f"(no words of the user: {kind or 'empty'} record)" if kind else ""
    exchange = Exchange(user=user)
    last_stop: str | None = None
    last_error: str | None = None
    pending_calls = False
    for index in range(start, end):
        message = messages[index]
        role = message.get("role")
        if role == "assistant":
            content = message.get("content")
            texts: list[str] = []
            pending_calls = False
            if isinstance(content, list):
                for block in content:
                    if not isinstance(block, Mapping):
                        continue
                    if block.get("type") == "text" and isinstance(block.get("text"), str) and block["text"].strip():
                        texts.append(block["text"])
                    elif block.get("type") == "toolCall":
                        pending_calls = True
                        call = calls.get(str(block.get("id")))
                        _add_call(exchange, call, str(block.get("name") or "?"), block.get("arguments"))
            if texts:
                exchange.response = "\n".join(texts)
            last_stop = message.get("stopReason") if isinstance(message.get("stopReason"), str) else None
            last_error = str(message.get("errorMessage") or "") if last_stop == "error" else None
        elif role == "bashExecution":
            command = str(message.get("command") or "").strip()
            if command:
                code = message.get("exitCode")
                failed = isinstance(code, int) and code != 0
                exchange.commands.append((command, f"by the user, exit {code}" if failed else "by the user"))
    if pending_calls:
        exchange.response = None
        exchange.status = "continues"
    if last_stop == "aborted":
        exchange.status = "interrupted"
    elif last_stop == "error":
        exchange.status = "error: " + (last_error or "unknown error")
    return exchange


def _add_call(exchange: Exchange, call: Call | None, name: str, arguments: Any) -> None:
    ops = list(call.ops if call is not None else call_file_ops(name, arguments))
    command = call.command if call is not None else call_command(name, arguments)
    if command:
        parsed = parse_shell(command)
        ops.extend(parsed.ops)
        if parsed.file_only:
            command = None
    for op, path in ops:
        if op == "read":
            exchange.viewed[path] = None
        else:
            getattr(exchange, _FILE_KIND[op])[path] = None
    if command:
        exchange.commands.append((command, "failed" if call is not None and call.ok is False else ""))
