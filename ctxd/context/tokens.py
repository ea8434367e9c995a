"""Token counting: pi's chars/4 estimator, and exact counts through litellm's bundled tokenizers.

pi measures characters as JavaScript does (UTF-16 code units), so a non-BMP character counts twice;
matching that is what makes ctxd's estimates equal pi's to the token.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

IMAGE_CHARS = 4800
"""pi estimates an image as 4800 characters (1200 tokens)."""


def js_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units, as JavaScript's ``String.length``."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le")) // 2


def js_json(value: Any) -> str:
    """``JSON.stringify(value)`` for JSON-compatible values (compact separators, no ASCII escaping)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _blocks_chars(content: Any, *, images: bool) -> int:
    if isinstance(content, str):
        return js_len(content)
    chars = 0
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if kind == "text":
                text = block.get("text")
                if isinstance(text, str):
                    chars += js_len(text)
            elif kind == "image" and images:
                chars += IMAGE_CHARS
    return chars


def message_chars(message: Mapping[str, Any]) -> int:
    """Characters pi counts for one AgentMessage (see pi's ``estimateTokens``)."""
    role = message.get("role")
    if role == "user":
        # pi 1.5.2 counts only the text of user messages; images there are not estimated.
        return _blocks_chars(message.get("content"), images=False)
    if role == "assistant":
        chars = 0
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if not isinstance(block, Mapping):
                    continue
                kind = block.get("type")
                if kind == "text":
                    chars += js_len(str(block.get("text") or ""))
                elif kind == "thinking":
                    chars += js_len(str(block.get("thinking") or ""))
                elif kind == "toolCall":
                    chars += js_len(str(block.get("name") or ""))
                    chars += js_len(js_json(block.get("arguments", {})))
        elif isinstance(content, str):
            chars += js_len(content)
        return chars
    if role in ("toolResult", "custom", "hookMessage"):
        return _blocks_chars(message.get("content"), images=True)
    if role == "bashExecution":
        return js_len(str(message.get("command") or "")) + js_len(str(message.get("output") or ""))
    if role in ("branchSummary", "compactionSummary"):
        return js_len(str(message.get("summary") or ""))
    if role == "system":
        # Not in pi's estimator (1.5.2 system messages patch the prompt); count what is sent.
        chars = _blocks_chars(message.get("content"), images=True)
        sections = message.get("sections")
        if isinstance(sections, Mapping):
            chars += sum(js_len(v) for v in sections.values() if isinstance(v, str))
        for key in ("toolsAdded", "toolsRemoved"):
            if message.get(key):
                chars += js_len(js_json(message[key]))
        return chars
    return 0


def estimate_tokens(message: Mapping[str, Any]) -> int:
    """pi's estimate for one message: ``ceil(chars / 4)``."""
    return math.ceil(message_chars(message) / 4)


def estimate_total(messages: Iterable[Mapping[str, Any]]) -> int:
    return sum(estimate_tokens(m) for m in messages)


def usage_tokens(usage: Mapping[str, Any]) -> int:
    """Context size recorded by a usage block: ``totalTokens``, else the sum of its parts."""
    total = usage.get("totalTokens")
    if isinstance(total, int | float) and total:
        return int(total)
    return int(
        sum(v for k in ("input", "output", "cacheRead", "cacheWrite") if isinstance(v := usage.get(k, 0), int | float))
    )


def has_valid_usage(message: Mapping[str, Any]) -> bool:
    """An assistant message whose usage pi trusts (not aborted, not an error)."""
    return (
        message.get("role") == "assistant"
        and isinstance(message.get("usage"), Mapping)
        and message.get("stopReason") not in ("aborted", "error")
    )


def context_tokens(
    messages: list[Mapping[str, Any]], estimates: list[int] | None = None, *, trusted_from: int = 0
) -> int:
    """pi's context size: the last trusted usage plus estimates of every message after it.

    Usage recorded before ``trusted_from`` is ignored: an assistant message kept verbatim by a
    compaction reported the size of the context *before* that compaction.
    """
    if estimates is None:
        estimates = [estimate_tokens(m) for m in messages]
    for i in range(len(messages) - 1, trusted_from - 1, -1):
        if has_valid_usage(messages[i]):
            return usage_tokens(messages[i]["usage"]) + sum(estimates[i + 1 :])
    return sum(estimates)
