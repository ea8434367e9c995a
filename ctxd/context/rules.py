"""pi 1.5.2's rules for what entries contribute to context, each in one place.

Which messages an entry yields (``sessionEntryToContextMessages``), what a context edit does to them
(``projectContextEntry``), which messages start a turn or may be cut at (compaction.ts), and the
system prompt state a run of system messages adds up to (pi-ai's ``getCurrentSystemMessage``).
These are pure functions on decoded entries and messages; ``project`` applies them to a session.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from ctxd.formats.codec import LineHead

TURN_START_ROLES = frozenset({"user", "bashExecution", "custom", "branchSummary", "compactionSummary"})
"""pi's ``isTurnStartMessage``: a turn begins with input, not with the model's reply."""
CUT_POINT_ROLES = TURN_START_ROLES | {"assistant"}
"""pi's ``isCutPointMessage``: anything but a tool result (which must follow its call)."""
EDITABLE_ROLES = frozenset({"user", "assistant", "toolResult", "custom"})
"""Roles whose content a context edit replaces; other messages pass through unchanged."""
USAGE_INVALIDATORS = frozenset({"compaction", "context_edit"})
"""Entry types after which earlier usage no longer measures the context."""
MESSAGE_TYPES = frozenset({"message", "custom_message", "branch_summary", "compaction"})
"""Entry types that may yield messages (a branch summary only when its summary is not empty)."""


def may_yield(head: LineHead) -> bool:
    """Whether an entry can contribute messages, from the index alone (no body read)."""
    kind = head.type
    if kind == "message":
        return head.message is not None
    return kind in MESSAGE_TYPES


def is_overflow_message(message: Mapping[str, Any]) -> bool:
    """An assistant error saying the context overflowed (by its text or its error class)."""
    if message.get("role") != "assistant" or message.get("stopReason") != "error":
        return False
    from ctxd.llm import is_overflow_text  # here: reading sessions needs none of ctxd.llm's imports

    error_class = str(message.get("errorType") or message.get("errorName") or "")
    return is_overflow_text(str(message.get("errorMessage") or "")) or "ContextWindowExceeded" in error_class


def is_system(head: LineHead) -> bool:
    """A ``message`` entry holding a system message (prompt state, not conversation)."""
    return head.type == "message" and head.message is not None and head.message.role == "system"


def timestamp_ms(value: Any) -> int | None:
    """``new Date(value).getTime()`` (None for NaN)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None and "T" not in value and " " not in value:
        parsed = parsed.replace(tzinfo=UTC)  # JavaScript reads a date alone as UTC, a date-time as local time
    return int(parsed.timestamp() * 1000)


def compaction_summary(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The compactionSummary message of a compaction entry."""
    return {
        "role": "compactionSummary",
        "summary": entry.get("summary", ""),
        "tokensBefore": entry.get("tokensBefore", 0),
        "timestamp": timestamp_ms(entry.get("timestamp")),
    }


def entry_messages(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The messages an entry yields before context edits (pi's ``sessionEntryToContextMessages``).

    A compaction yields its ``systemMessage`` (the prompt state at the compaction, pi >= 0.87) and
    then its summary; a message with null content gets pi's empty content.
    """
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        if not isinstance(message, dict):
            return []
        if message.get("content") is None:
            role = message.get("role")
            if role == "system":
                return [{**message, "content": ""}]
            if role in ("user", "assistant", "toolResult"):
                return [{**message, "content": []}]
        return [message]
    if kind == "custom_message":
        content = entry.get("content")
        return [
            {
                "role": "custom",
                "customType": entry.get("customType", ""),
                "content": [] if content is None else content,
                "display": entry.get("display", True),
                "details": entry.get("details"),
                "timestamp": timestamp_ms(entry.get("timestamp")),
            }
        ]
    if kind == "branch_summary":
        if not entry.get("summary"):
            return []
        return [
            {
                "role": "branchSummary",
                "summary": entry.get("summary", ""),
                "fromId": entry.get("fromId", ""),
                "timestamp": timestamp_ms(entry.get("timestamp")),
            }
        ]
    if kind == "compaction":
        system = entry.get("systemMessage")
        summary = compaction_summary(entry)
        return [system, summary] if isinstance(system, dict) else [summary]
    return []


def entry_message(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The entry's own message (a compaction's summary), or None; what per-entry estimates measure."""
    found = entry_messages(entry)
    return found[-1] if found else None


def apply_edit(messages: list[dict[str, Any]], replacement: Any) -> list[dict[str, Any]]:
    """pi's ``projectContextEntry`` for an entry with a context edit: a null replacement hides the
    entry; otherwise user, assistant, tool-result and custom messages get the replacement's content
    (a string becomes one text block for assistant and tool results) and other messages stay."""
    if replacement is None:
        return []
    content = replacement.get("content") if isinstance(replacement, Mapping) else None
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role not in EDITABLE_ROLES:
            out.append(message)
            continue
        as_blocks = role in ("assistant", "toolResult") and isinstance(content, str)
        out.append({**message, "content": [{"type": "text", "text": content}] if as_blocks else content})
    return out


Call = tuple[str, Any]
"""One tool call: its name (``str(name or "")``) and its arguments (None when absent)."""


def message_calls(message: Mapping[str, Any]) -> list[Call]:
    """The tool calls a message records, as pi's file lists read them: an assistant's ``toolCall`` blocks,
    and the calls a tool result says its tool made itself (pi 1.5.2's ``nestedCalls``: codemode scripts)."""
    role = message.get("role")
    if role == "assistant":
        content = message.get("content")
        if not isinstance(content, list):
            return []
        blocks = [b for b in content if isinstance(b, Mapping) and b.get("type") == "toolCall"]
    elif role == "toolResult":
        nested = message.get("nestedCalls")
        found = nested.get("calls") if isinstance(nested, Mapping) else None
        if not isinstance(found, list):
            return []
        blocks = [c for c in found if isinstance(c, Mapping)]
    else:
        return []
    return [(str(b.get("name") or ""), b.get("arguments")) for b in blocks]


def _content_text(content: Any) -> str:
    """pi-ai's ``contentText``: a string, or the text blocks joined by newlines."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = (b.get("text") for b in content if isinstance(b, Mapping) and b.get("type") == "text")
    return "\n".join(_js_join_item(t) for t in texts)


def _js_join_item(value: Any) -> str:
    """How ``Array#join`` prints one item: null and undefined as ""."""
    return "" if value is None else value if isinstance(value, str) else str(value)


def _tool_name(tool: Any) -> Any:
    return tool.get("name") if isinstance(tool, Mapping) else None


def current_system_message(messages: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The system prompt state a context's system messages add up to (pi-ai's
    ``getCurrentSystemMessage``): their texts joined by blank lines (images dropped), sections
    merged by name (null removes one), tools added and removed by name. None when there are no
    system messages with a timestamp and no tools."""
    texts: list[str] = []
    sections: dict[str, Any] = {}
    tools: dict[Any, Any] = {}
    timestamp: Any = None
    for message in messages:
        if message.get("role") != "system":
            continue
        if timestamp is None:
            timestamp = message.get("timestamp")
        text = _content_text(message.get("content"))
        if text:
            texts.append(text)
        found = message.get("sections")
        for name, value in found.items() if isinstance(found, Mapping) else ():
            if value is None:
                sections.pop(name, None)
            else:
                sections[name] = value
        for tool in _list(message.get("toolsRemoved")):
            tools.pop(_tool_name(tool), None)
        for tool in _list(message.get("toolsAdded")):
            tools[_tool_name(tool)] = tool
    if timestamp is None and not tools:
        return None
    out: dict[str, Any] = {"role": "system", "content": "\n\n".join(texts)}
    if sections:
        out["sections"] = sections
    if tools:
        out["toolsAdded"] = list(tools.values())
    out["timestamp"] = 0 if timestamp is None else timestamp
    return out


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
