"""Claude Code message content and usage as pi blocks and pi usage."""

from __future__ import annotations

from typing import Any

from ctxd.formats.transcripts._base import (
    as_dict,
    as_int,
    as_str,
    opaque_block,
)

STOP_REASONS = {
    "end_turn": "stop",
    "tool_use": "toolUse",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "refusal": "stop",
}
"""Claude's ``stop_reason`` as pi's ``stopReason``."""


def claude_usage(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    inp = as_int(value.get("input_tokens"))
    out = as_int(value.get("output_tokens"))
    read = as_int(value.get("cache_read_input_tokens"))
    write = as_int(value.get("cache_creation_input_tokens"))
    return {
        "input": inp,
        "output": out,
        "cacheRead": read,
        "cacheWrite": write,
        "totalTokens": inp + out + read + write,
    }


def _image_block(block: dict[str, Any]) -> dict[str, Any]:
    source = as_dict(block.get("source"))
    data = source.get("data")
    if source.get("type") == "base64" and isinstance(data, str):
        return {"type": "image", "data": data, "mimeType": as_str(source.get("media_type")) or "image/png"}
    url = source.get("url")
    if isinstance(url, str):
        return {"type": "text", "text": f"[image: {url}]"}
    return opaque_block("image", block)


def content_block(block: Any) -> dict[str, Any]:
    """A user-side block (user message or tool result content) as a pi text or image block."""
    if isinstance(block, str):
        return {"type": "text", "text": block}
    if not isinstance(block, dict):
        return opaque_block("block", block)
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return {"type": "text", "text": block["text"]}
    if kind == "image":
        return _image_block(block)
    return opaque_block(kind if isinstance(kind, str) and kind else "block", block)


def assistant_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        return []
    out: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, dict):
            out.append(content_block(block))
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            out.append({"type": "text", "text": block["text"]})
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            thinking: dict[str, Any] = {"type": "thinking", "thinking": block["thinking"]}
            if isinstance(block.get("signature"), str):
                thinking["thinkingSignature"] = block["signature"]
            out.append(thinking)
        elif kind == "redacted_thinking":
            redacted: dict[str, Any] = {"type": "thinking", "thinking": "", "redacted": True}
            if isinstance(block.get("data"), str):
                redacted["thinkingSignature"] = block["data"]
            out.append(redacted)
        elif kind == "tool_use":
            args = block.get("input")
            out.append(
                {
                    "type": "toolCall",
                    "id": as_str(block.get("id")) or "",
                    "name": as_str(block.get("name")) or "",
                    "arguments": args if isinstance(args, dict) else ({} if args is None else {"input": args}),
                }
            )
        else:
            out.append(content_block(block))
    return out


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]
        return "\n".join(parts)
    return ""
