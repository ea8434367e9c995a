"""Turning pi AgentMessages into plain text for a summariser, and cutting text and conversations to size.

Owns the transcript format the model summariser reads (``[User]: ...``, ``[Injected by the agent (kind), not
the user]: ...`` for what an agent put into a user turn, ``[Assistant]: ...``,
``[Assistant tool calls]: name(key=value, ...)``, ``[Tool result]: ...``), middle truncation, and the
chunk planner that packs serialised messages into pieces that fit a character budget.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ctxd.formats.injected import split_user_text
from ctxd.formats.lazy_re import lazy_compile

TOOL_RESULT_CHARS = 2000
"""Tool results and shell output are cut to this many characters (head and tail kept)."""
INJECTED_CHARS = 1000
"""Text an agent injected into a user turn is cut to this many characters for a model summariser."""
TOOL_ARG_CHARS = 1000
"""Each tool-call argument value is cut to this many characters (file bodies add little to a summary)."""


OMITTED_RE = lazy_compile(r"\s*\[\.\.\.\d+ chars omitted\.\.\.\]\s*")
"""The marker :func:`middle_truncate` puts where it cut a text, with the spaces around it."""


def middle_truncate(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, keeping its head and tail around an omission marker."""
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    omitted = len(text) - limit
    for _ in range(3):  # the marker's own length changes how much is omitted; converge in a few steps
        marker = f" [...{omitted} chars omitted...] "
        keep = limit - len(marker)
        if keep < 2:
            return text[:limit]
        omitted = len(text) - keep
    head = (keep + 1) // 2
    tail = keep - head
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")


def content_text(content: Any, *, images: bool = True) -> str:
    """The text of a message ``content`` (a string or a list of blocks); images become ``[image]``."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    if len(content) == 1 and type(content[0]) is dict and content[0].get("type") == "text":
        text = content[0].get("text")
        return text if isinstance(text, str) else ""
    parts: list[str] = []
    for block in content:
        if type(block) is not dict and not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
        elif kind == "image" and images:
            parts.append("[image]")
    return "\n".join(parts)


def _arg_value(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        text = repr(value)
    return middle_truncate(text, TOOL_ARG_CHARS)


def format_tool_call(name: str, arguments: Any) -> str:
    """``name(key=value, ...)`` with JSON values, each cut to :data:`TOOL_ARG_CHARS`."""
    if isinstance(arguments, Mapping):
        args = ", ".join(f"{k}={_arg_value(v)}" for k, v in arguments.items())
    elif arguments is None:
        args = ""
    else:
        args = _arg_value(arguments)
    return f"{name}({args})"


def _assistant_parts(message: Mapping[str, Any]) -> list[str]:
    content = message.get("content")
    thinking: list[str] = []
    texts: list[str] = []
    calls: list[str] = []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for block in content:
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str) and block["text"].strip():
                texts.append(block["text"])
            elif kind == "thinking" and isinstance(block.get("thinking"), str) and block["thinking"].strip():
                thinking.append(block["thinking"])
            elif kind == "toolCall":
                calls.append(format_tool_call(str(block.get("name") or "?"), block.get("arguments")))
    parts: list[str] = []
    if thinking:
        parts.append("[Assistant thinking]: " + "\n".join(thinking))
    if texts:
        parts.append("[Assistant]: " + "\n".join(texts))
    if calls:
        parts.append("[Assistant tool calls]: " + "; ".join(calls))
    stop = message.get("stopReason")
    if stop == "error":
        error = message.get("errorMessage")
        parts.append("[Assistant error]: " + (str(error) if error else "the model call failed"))
    elif stop == "aborted":
        parts.append("[Assistant]: (response aborted)")
    elif stop == "length" and not calls:
        parts.append("[Assistant]: (response cut off at the output limit)")
    return parts


def _bash_text(message: Mapping[str, Any]) -> str:
    command = str(message.get("command") or "")
    output = middle_truncate(str(message.get("output") or "").rstrip(), TOOL_RESULT_CHARS)
    lines = [f"$ {command}"]
    if output:
        lines.append(output)
    if message.get("cancelled"):
        lines.append("(cancelled)")
    elif isinstance(message.get("exitCode"), int) and message["exitCode"] != 0:
        lines.append(f"(exit code {message['exitCode']})")
    if message.get("truncated"):
        lines.append("(output was truncated)")
    return "\n".join(lines)


def serialize_message(message: Mapping[str, Any]) -> str:
    """One AgentMessage as transcript text; "" for messages with nothing to say."""
    role = message.get("role")
    if role == "user":
        text = content_text(message.get("content"))
        if not text.strip():
            return ""
        marked = message.get("ctxdInjected")
        split = split_user_text(text, marked if isinstance(marked, str) else None)
        if not split.injected:
            return f"[User]: {text}"
        # What an agent injected is context for the summary, never the user's request or constraint.
        parts = [
            f"[Injected by the agent ({kind}), not the user]: {middle_truncate(t, INJECTED_CHARS)}"
            for kind, t in split.injected
        ]
        if split.own.strip():
            parts.append(f"[User]: {split.own}")
        return "\n\n".join(parts)
    if role == "assistant":
        return "\n\n".join(_assistant_parts(message))
    if role == "toolResult":
        text = middle_truncate(content_text(message.get("content")), TOOL_RESULT_CHARS)
        label = "[Tool result (error)]" if message.get("isError") else "[Tool result]"
        return f"{label}: {text}"
    if role == "bashExecution":
        return "[User shell]: " + _bash_text(message)
    if role in ("custom", "hookMessage"):
        text = content_text(message.get("content"))
        kind = message.get("customType")
        return f"[Context{f' ({kind})' if kind else ''}]: {text}" if text.strip() else ""
    if role == "system":
        text = content_text(message.get("content"))
        return f"[System]: {text}" if text.strip() else ""
    if role == "compactionSummary":
        return f"[Earlier summary]: {message.get('summary') or ''}"
    if role == "branchSummary":
        return f"[Summary of another branch]: {message.get('summary') or ''}"
    text = content_text(message.get("content"))
    return f"[{role}]: {text}" if text.strip() else ""


def serialize_messages(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    """Non-empty transcript pieces, one per message that has something to say."""
    pieces: list[str] = []
    for message in messages:
        piece = serialize_message(message)
        if piece:
            pieces.append(piece)
    return pieces


SEPARATOR = "\n\n"


def serialize_conversation(messages: Iterable[Mapping[str, Any]]) -> str:
    return SEPARATOR.join(serialize_messages(messages))


def plan_chunks(pieces: Sequence[str], budget_chars: int, start: int = 0) -> list[tuple[int, int]]:
    """Half-open index ranges over ``pieces[start:]``, each as long as fits ``budget_chars``.

    A piece longer than the budget forms a chunk of its own (the caller cuts it to size).
    """
    ranges: list[tuple[int, int]] = []
    i = start
    n = len(pieces)
    budget = max(1, budget_chars)
    while i < n:
        size = len(pieces[i])
        j = i + 1
        while j < n and size + len(SEPARATOR) + len(pieces[j]) <= budget:
            size += len(SEPARATOR) + len(pieces[j])
            j += 1
        ranges.append((i, j))
        i = j
    return ranges


def chunk_text(pieces: Sequence[str], begin: int, end: int, budget_chars: int) -> str:
    """The transcript of ``pieces[begin:end]``, middle-truncated to ``budget_chars`` if needed."""
    return middle_truncate(SEPARATOR.join(pieces[begin:end]), budget_chars)
