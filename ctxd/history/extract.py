"""What the history index keeps of one session entry: its role, its searchable text, its tool.

Pure functions over pi v3 entries (dicts), the shape every session ctxd reads has once read (pi files
as they are, Claude Code and Codex transcripts as :mod:`ctxd.formats.transcripts` maps them). Only
what a person or a model said or saw is text: message content, tool calls (name and arguments), tool
results, compaction and branch summaries, custom messages. Images and thinking are left out.
"""

from __future__ import annotations

from typing import Any

import attrs
import msgspec

MAX_TEXT = 256 * 1024
"""Characters of one entry that are indexed (a tool result of megabytes is indexed by its head)."""

_encode = msgspec.json.Encoder().encode


@attrs.frozen
class Item:
    """One entry as the index keeps it."""

    entry_id: str
    role: str
    """``user``, ``assistant``, ``toolResult``, ``bashExecution``, ``custom``, ``compactionSummary``
    or ``branchSummary``."""
    text: str
    timestamp: str
    tool: str
    """The tool's name for a tool result (and the first tool an assistant message calls), else ""."""


def _blocks_text(content: Any) -> tuple[str, str]:
    """The text of a message's content, and the first tool it calls."""
    if isinstance(content, str):
        return content, ""
    if not isinstance(content, list):
        return "", ""
    parts: list[str] = []
    tool = ""
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "toolCall":
            name = str(block.get("name", ""))
            tool = tool or name
            args = block.get("arguments")
            try:
                shown = args if isinstance(args, str) else _encode(args).decode("utf-8", "replace")
            except (TypeError, msgspec.EncodeError):
                shown = ""
            parts.append(f"[{name}] {shown}")
    return "\n".join(parts), tool


def _timestamp(entry: dict[str, Any]) -> str:
    value = entry.get("timestamp")
    return value if isinstance(value, str) else ""


def item_of(entry: Any) -> Item | None:
    """The indexed form of an entry, or None when it carries no text a search could find."""
    if not isinstance(entry, dict):
        return None
    kind = entry.get("type")
    entry_id = str(entry.get("id") or "")
    tool = ""
    if kind == "message":
        message = entry.get("message")
        if not isinstance(message, dict):
            return None
        role = str(message.get("role") or "")
        if role == "bashExecution":
            text = f"$ {message.get('command', '')}\n{message.get('output', '')}"
            tool = "bash"
        else:
            text, tool = _blocks_text(message.get("content"))
            if role == "toolResult":
                tool = str(message.get("toolName") or "")
    elif kind == "compaction":
        role, text = "compactionSummary", str(entry.get("summary") or "")
    elif kind == "branch_summary":
        role, text = "branchSummary", str(entry.get("summary") or "")
    elif kind == "custom_message":
        role = "custom"
        text, _ = _blocks_text(entry.get("content"))
    else:
        return None
    if not text.strip():
        return None
    return Item(entry_id, role, text[:MAX_TEXT], _timestamp(entry), tool)
