"""Mechanical fallbacks when a summariser fails (seed 002): prune the input, keep the last turns."""

from __future__ import annotations

from typing import Any

from ctxd.context.truncate import truncate_text

OVERSIZED_BLOCK_CHARS = 8_000


def prune_messages(messages: list[dict[str, Any]], *, block_chars: int = OVERSIZED_BLOCK_CHARS) -> list[dict[str, Any]]:
    """Copies without thinking, empty blocks, images, and with oversized text cut to ``block_chars``;
    messages left empty are dropped. Tool calls stay (their results refer to them)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            text = content.strip()
            if not text and m.get("role") in ("user", "custom", "toolResult"):
                continue
            out.append({**m, "content": truncate_text(content, block_chars)})
            continue
        if not isinstance(content, list):
            out.append(m)
            continue
        blocks: list[Any] = []
        for b in content:
            if not isinstance(b, dict):
                continue
            kind = b.get("type")
            if kind in ("thinking", "image"):
                continue
            if kind == "text":
                text = str(b.get("text", ""))
                if not text.strip():
                    continue
                blocks.append({**b, "text": truncate_text(text, block_chars)})
            else:
                blocks.append(b)
        if not blocks and m.get("role") not in ("toolResult",):
            continue
        out.append({**m, "content": blocks})
    return out
