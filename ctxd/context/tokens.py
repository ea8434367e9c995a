"""Token counting: pi 1.5.2's chars/4 estimator, and the context size pi derives from usage.

This module is pi's ``estimateTokens``, ``calculateContextTokens``, ``getAssistantUsage`` and
``estimateContextTokens`` (core/compaction/compaction.ts) on plain message dicts. pi measures
characters as JavaScript does (UTF-16 code units, so a character outside the BMP counts twice) and
serialises tool-call arguments with ``JSON.stringify``; matching both is what makes ctxd's estimates
equal pi's to the token.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

import attrs
import msgspec

from ctxd.formats.lazy_re import lazy_compile

IMAGE_CHARS = 4800
"""pi estimates an image as 4800 characters (1200 tokens), wherever it counts images at all."""

_SURROGATE = lazy_compile("[\ud800-\udfff]")
_encode = msgspec.json.Encoder().encode
_decode_any = msgspec.json.Decoder().decode


def js_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units, as JavaScript's ``String.length``."""
    if text.isascii():
        return len(text)
    # A lone surrogate (from a JSON "\\udXXX" escape) is one code unit, as in JavaScript.
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def js_truthy(value: Any) -> bool:
    """JavaScript truthiness of a JSON value: ``[]`` and ``{}`` are true; ``""``, ``0``, ``false``, null are not."""
    if isinstance(value, list | dict):
        return True
    return bool(value)


def js_number(value: int | float) -> str:
    """``String(value)`` for a JSON number as JavaScript prints it (``1.0`` -> ``1``, ``1e-7``, ``1e+21``)."""
    if isinstance(value, int) and abs(value) < 10**21:
        return str(value)
    number = float(value)
    if math.isnan(number) or math.isinf(number):
        return "null"
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    # repr() is the shortest round-tripping form, as JavaScript's Number#toString.
    _, digit_tuple, exponent = Decimal(repr(abs(number))).as_tuple()
    all_digits = "".join(map(str, digit_tuple))
    digits = all_digits.rstrip("0") or "0"
    n = len(all_digits) + int(exponent)  # position of the decimal point
    k = len(digits)
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        body = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body


def js_json(value: Any) -> str:
    """``JSON.stringify(value)`` for a JSON value: compact, no ASCII escaping, JavaScript's numbers."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return js_number(value)
    if isinstance(value, str):
        out = json.dumps(value, ensure_ascii=False)
        # JSON.stringify escapes a lone surrogate ("\\ud800"); Python writes it raw.
        return out if value.isascii() else _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", out)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{js_json(str(k))}:{js_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(js_json(v) for v in value) + "]"
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def js_json_len(value: Any) -> int:
    """``JSON.stringify(value).length``; Python's own encoder does the work unless the value holds
    something it writes differently (a float, an integer of 1e21 or more, a lone surrogate)."""
    if not _needs_js_walk(value):
        # msgspec writes what json.dumps(ensure_ascii=False, compact) writes, ten times faster.
        data = _encode(value)
        return len(data) if data.isascii() else js_len(data.decode())
    return js_len(js_json(value))


_DIGITS = bytes(0x30 if 0x30 <= c <= 0x39 else 0x20 for c in range(256))
_LONG_NUMBER = b"0" * 22
"""Enough digits in a row for an integer of 1e21 or more (JavaScript then writes an exponent)."""


def _no_float(_: str) -> Any:
    raise ValueError("a float")


_decode_no_float = msgspec.json.Decoder(float_hook=_no_float).decode


def js_json_len_raw(raw: bytes | msgspec.Raw) -> int:
    """``js_json_len`` of the JSON value written as ``raw`` (see :func:`js_json_len_and_value`)."""
    return js_json_len_and_value(raw)[0]


def js_json_len_and_value(raw: bytes | msgspec.Raw) -> tuple[int, Any]:
    """``js_json_len`` of the JSON value written as ``raw``, and the value, without a Python walk
    over it: msgspec decodes it (refusing floats) and re-encodes it as ``JSON.stringify`` would
    write it when there is no float, no integer of 1e21 or more and no escape that could be a lone
    surrogate (else the walk)."""
    raw = bytes(raw)
    if b"\\u" not in raw and (len(raw) < 22 or _LONG_NUMBER not in raw.translate(_DIGITS)):
        try:
            value = _decode_no_float(raw)
        except (msgspec.ValidationError, ValueError):
            pass
        else:
            data = _encode(value)
            return (len(data) if data.isascii() else js_len(data.decode())), value
    value = _decode_any(raw)
    return js_json_len(value), value


def _needs_js_walk(value: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if not v.isascii() and _SURROGATE.search(v):
                return True
        elif isinstance(v, bool) or v is None:
            continue
        elif isinstance(v, float):
            return True
        elif isinstance(v, int):
            if abs(v) >= 10**21:
                return True
        elif isinstance(v, Mapping):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            stack.extend(v)
    return False


def _text_and_images(content: Any) -> int:
    """pi's ``estimateTextAndImageContentChars``: a string, or text blocks plus 4800 per image block."""
    if isinstance(content, str):
        return js_len(content)
    text, images = text_and_image_chars(content)
    return text + images


def text_and_image_chars(content: Any) -> tuple[int, int]:
    """(text, image) characters of a content as ``_text_and_images`` counts them."""
    if isinstance(content, str):
        return js_len(content), 0
    chars = images = 0
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if kind == "text":
                text = block.get("text")
                if isinstance(text, str):
                    chars += js_len(text)
            elif kind == "image":
                images += IMAGE_CHARS
    return chars, images


def _assistant_chars(content: Any) -> int:
    return sum(assistant_chars(content))


def assistant_chars(content: Any) -> tuple[int, int, int]:
    """(text, thinking, tool call) characters of an assistant message's content, as pi counts them."""
    # pi iterates the content as blocks: a string content has no blocks (each character's
    # ``type`` is undefined), so it counts 0; images are never counted here.
    text = thinking = calls = 0
    if not isinstance(content, list):
        return 0, 0, 0
    for block in content:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            text += _str_len(block.get("text"))
        elif kind == "thinking":
            thinking += _str_len(block.get("thinking"))
        elif kind == "toolCall":
            calls += _str_len(block.get("name")) + js_json_len(block.get("arguments", {}))
    return text, thinking, calls


def _system_chars(message: Mapping[str, Any]) -> int:
    # Content text and images, every section's string, and JSON.stringify(toolsAdded) when it is
    # truthy (an empty list counts its 2 characters); toolsRemoved is not counted.
    chars = _text_and_images(message.get("content"))
    sections = message.get("sections")
    if isinstance(sections, Mapping):
        chars += sum(js_len(v) for v in sections.values() if isinstance(v, str))
    added = message.get("toolsAdded")
    if js_truthy(added):
        chars += js_json_len(added)
    return chars


def _str_len(value: Any) -> int:
    return js_len(value) if isinstance(value, str) else 0


def message_chars(message: Mapping[str, Any]) -> int:
    """Characters pi 1.5.2's ``estimateTokens`` counts for one AgentMessage.

    Images (4800 characters each) count in ``user``, ``toolResult``, ``custom`` and ``system``
    messages, never in ``assistant`` or ``bashExecution``. A role pi does not know (``hookMessage``
    in a v3 file, anything else) counts 0.
    """
    role = message.get("role")
    if role in ("user", "toolResult", "custom"):
        return _text_and_images(message.get("content"))
    if role == "assistant":
        return _assistant_chars(message.get("content"))
    if role == "bashExecution":
        return _str_len(message.get("command")) + _str_len(message.get("output"))
    if role in ("branchSummary", "compactionSummary"):
        return _str_len(message.get("summary"))
    if role == "system":
        return _system_chars(message)
    return 0


def estimate_tokens(message: Mapping[str, Any]) -> int:
    """pi's estimate for one message: ``ceil(chars / 4)``."""
    return math.ceil(message_chars(message) / 4)


def estimate_total(messages: Iterable[Mapping[str, Any]]) -> int:
    return sum(estimate_tokens(m) for m in messages)


def usage_tokens(usage: Mapping[str, Any]) -> float:
    """pi's ``calculateContextTokens``: ``totalTokens || input + output + cacheRead + cacheWrite``.

    NaN (as in JavaScript) when ``totalTokens`` is 0 or missing and a part is missing or not a number.
    """
    total = usage.get("totalTokens")
    if _is_number(total) and total:
        return float(total)
    parts = [usage.get(k) for k in ("input", "output", "cacheRead", "cacheWrite")]
    if not all(_is_number(p) for p in parts):
        return math.nan
    return float(sum(parts))  # type: ignore[arg-type]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def valid_usage(message: Mapping[str, Any]) -> int | None:
    """pi's ``getAssistantUsage``: the context size an assistant message's usage reports, or None
    when pi does not use it (not an assistant, aborted, an error, no usage, or a size that is not
    above 0: an all-zero usage is skipped, not trusted as 0)."""
    if message.get("role") != "assistant" or message.get("stopReason") in ("aborted", "error"):
        return None
    usage = message.get("usage")
    if not isinstance(usage, Mapping):
        return None
    tokens = usage_tokens(usage)
    return int(tokens) if tokens > 0 else None  # NaN > 0 is false


@attrs.define
class ContextEstimate:
    """pi's ``ContextUsageEstimate``."""

    tokens: int
    usageTokens: int
    trailingTokens: int
    lastUsageIndex: int | None


def estimate_context(messages: list[Mapping[str, Any]], estimates: list[int] | None = None) -> ContextEstimate:
    """pi's ``estimateContextTokens``: the last valid usage plus estimates of every message after it,
    or the sum of all estimates when no message has a valid usage."""
    if estimates is None:
        estimates = [estimate_tokens(m) for m in messages]
    for i in range(len(messages) - 1, -1, -1):
        used = valid_usage(messages[i])
        if used is not None:
            trailing = sum(estimates[i + 1 :])
            return ContextEstimate(used + trailing, used, trailing, i)
    total = sum(estimates)
    return ContextEstimate(total, 0, total, None)


def context_tokens(messages: list[Mapping[str, Any]], estimates: list[int] | None = None) -> int:
    """``estimateContextTokens(messages).tokens`` (no compaction or edit checks: see ``project``)."""
    return estimate_context(messages, estimates).tokens
