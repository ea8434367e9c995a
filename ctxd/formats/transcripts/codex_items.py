"""The pieces of a Codex rollout line, as pi content and messages: content blocks, tool arguments and outputs,
usage, user / developer messages (with what Codex injected marked) and a compaction's replacement history.
Pure functions over one item; the line-by-line mapping is ctxd.formats.transcripts.codex."""

from __future__ import annotations

from typing import Any

from ctxd.formats.injected import mark_injected
from ctxd.formats.transcripts._base import (
    as_dict,
    as_int,
    as_str,
    data_url_image,
    opaque_block,
    parse_json_object,
    to_json_text,
)

TEXT_BLOCKS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})


def codex_usage(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    inp = as_int(value.get("input_tokens"))
    cached = as_int(value.get("cached_input_tokens"))
    out = as_int(value.get("output_tokens"))
    total = as_int(value.get("total_tokens")) or inp + out
    return {"input": max(0, inp - cached), "output": out, "cacheRead": cached, "cacheWrite": 0, "totalTokens": total}


def _block(block: Any) -> dict[str, Any]:
    if isinstance(block, str):
        return {"type": "text", "text": block}
    if not isinstance(block, dict):
        return opaque_block("block", block)
    kind = block.get("type")
    if kind in TEXT_BLOCKS and isinstance(block.get("text"), str):
        return {"type": "text", "text": block["text"]}
    if kind == "refusal" and isinstance(block.get("refusal"), str):
        return {"type": "text", "text": block["refusal"]}
    if kind == "input_image":
        url = block.get("image_url")
        if isinstance(url, str):
            return data_url_image(url) or {"type": "text", "text": f"[image: {url}]"}
    return opaque_block(kind if isinstance(kind, str) and kind else "block", block)


def content_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [_block(b) for b in content]
    return []


def block_texts(items: Any) -> list[str]:
    if not isinstance(items, list):
        return []
    return [b["text"] for b in items if isinstance(b, dict) and isinstance(b.get("text"), str)]


def render_history(items: Any) -> str:
    """A plain rendering of a replacement history: one ``role: text`` paragraph per message."""
    if not isinstance(items, list):
        return ""
    parts: list[str] = []
    for item in items:
        item = as_dict(item)
        kind = item.get("type")
        if kind == "message":
            text = "\n".join(block_texts(item.get("content")))
            if text:
                parts.append(f"{as_str(item.get('role')) or 'unknown'}: {text}")
        elif kind in ("compaction", "compaction_summary"):
            parts.append(f"[{kind}: encrypted]")
    return "\n\n".join(parts)


def harness_kind(item: dict[str, Any]) -> str | None:
    """``codex.<kind>`` when Codex 0.169's metadata says no part of a user message came from the user."""
    meta = as_dict(item.get("internal_chat_message_metadata_passthrough"))
    provenance = [
        as_str(as_dict(as_dict(m).get("provenance")).get("type")) for m in meta.get("content_item_metadata") or []
    ]
    if not provenance or "user" in provenance or None in provenance:
        return None
    kinds = [k for k in meta.get("content_item_kinds") or [] if isinstance(k, str) and k]
    return f"codex.{kinds[0] if kinds else provenance[0]}"


def conversation_message(item: dict[str, Any], blocks: list[dict[str, Any]], ms: int | None) -> dict[str, Any]:
    """A user, developer or system message item as a pi message (developer and system: role system)."""
    role = item.get("role")
    if role != "user":
        return {"role": "system", "content": blocks, "timestamp": ms, "codexRole": role}
    message: dict[str, Any] = {"role": "user", "content": blocks, "timestamp": ms}
    mark_injected(message)
    harness = harness_kind(item)
    if harness is not None and "ctxdInjected" not in message:
        message["ctxdInjected"] = harness
    return message


def retained_items(history: Any, summary: str) -> list[dict[str, Any]]:
    """The user / developer messages of a replacement history other than the summary message (in order)."""
    if not isinstance(history, list):
        return []
    out: list[dict[str, Any]] = []
    for item in history:
        item = as_dict(item)
        if item.get("type") != "message" or item.get("role") not in ("user", "developer", "system"):
            continue
        if summary and "\n".join(block_texts(item.get("content"))) == summary:
            continue
        out.append(item)
    return out


def tool_arguments(payload: dict[str, Any]) -> dict[str, Any]:
    for key in ("arguments", "input", "action"):
        if key not in payload:
            continue
        value = payload[key]
        if isinstance(value, dict):
            return value
        if isinstance(value, str):
            parsed = parse_json_object(value) if key == "arguments" else None
            return parsed if parsed is not None else {"input": value}
        if value is not None:
            return {"input": value}
    return {}


def tool_output(value: Any) -> tuple[list[dict[str, Any]], bool]:
    """Tool output content blocks and whether it reports an error."""
    if isinstance(value, dict):
        blocks = content_blocks(value.get("content"))
        if not blocks and "content" not in value:
            blocks = [{"type": "text", "text": to_json_text(value)}]
        return blocks, value.get("success") is False
    if value is None:
        return [], False
    if isinstance(value, str | list):
        return content_blocks(value), False
    return [{"type": "text", "text": to_json_text(value)}], False
