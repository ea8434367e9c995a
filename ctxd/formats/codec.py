"""Fast line decoding for the index.

Only what the index needs is decoded from each line (type, ids, the message's role and usage, and
the few fields of settings, labels and compactions); message bodies stay on disk and are decoded
on demand.  msgspec skips the rest of each line without building objects for it.
"""

from __future__ import annotations

from typing import Any

import msgspec

CURRENT_VERSION = 3
"""The session format version ctxd writes (pi's v3)."""

Number = int | float


class UsageHead(msgspec.Struct, gc=False, omit_defaults=True):
    # None when absent: pi's calculateContextTokens treats a missing part as NaN (usage not used).
    input: Number | None = None
    output: Number | None = None
    cacheRead: Number | None = None
    cacheWrite: Number | None = None
    totalTokens: Number | None = None


class MessageHead(msgspec.Struct, gc=False, omit_defaults=True):
    role: str = ""
    stopReason: str | None = None
    usage: UsageHead | None = None
    provider: str | None = None
    model: str | None = None
    errorMessage: str | None = None
    toolCallId: str | None = None


class LineHead(msgspec.Struct, gc=False, omit_defaults=True):
    """The indexed part of one line (header or entry)."""

    type: str = ""
    id: str | None = None
    parentId: str | None = None
    message: MessageHead | None = None
    # compaction / branch_summary
    firstKeptEntryId: str | None = None
    firstKeptEntryIndex: int | None = None
    tokensBefore: Number | None = None
    fromId: str | None = None
    # label / context_edit
    targetId: str | None = None
    label: str | None = None
    # session_info
    name: str | None = None
    # settings
    thinkingLevel: str | None = None
    provider: str | None = None
    modelId: str | None = None
    # custom / custom_message
    customType: str | None = None
    # header
    version: int | None = None
    cwd: str | None = None
    timestamp: str | None = None


_head_decoder = msgspec.json.Decoder(LineHead)
_any_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()

decode_head = _head_decoder.decode
"""Decode one line's index head; raises msgspec errors on bad JSON or unexpected field types."""

decode_any = _any_decoder.decode
encode = _encoder.encode


def head_from_dict(obj: dict[str, Any]) -> LineHead:
    """A head for a line whose fields have unexpected types: keep what fits, ignore the rest."""
    head = LineHead()
    for field in LineHead.__struct_fields__:
        value = obj.get(field)
        if field == "message":
            if isinstance(value, dict):
                head.message = _message_head_from_dict(value)
            continue
        if value is None:
            continue
        if field in ("firstKeptEntryIndex", "version"):
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(head, field, value)
        elif field == "tokensBefore":
            if isinstance(value, int | float) and not isinstance(value, bool):
                head.tokensBefore = value
        elif isinstance(value, str):
            setattr(head, field, value)
    return head


def _message_head_from_dict(obj: dict[str, Any]) -> MessageHead:
    msg = MessageHead()
    for key in ("role", "stopReason", "provider", "model", "errorMessage", "toolCallId"):
        value = obj.get(key)
        if isinstance(value, str):
            setattr(msg, key, value)
    usage = obj.get("usage")
    if isinstance(usage, dict):
        u = UsageHead()
        for key in UsageHead.__struct_fields__:
            value = usage.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                setattr(u, key, value)
        msg.usage = u
    return msg


def dumps_line(obj: Any) -> bytes:
    """One JSONL line (with its newline) for ``obj``."""
    return _encoder.encode(obj) + b"\n"
