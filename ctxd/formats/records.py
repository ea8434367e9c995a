"""Typed records for pi's session format (v3, as written by pi 1.5.2).

Every record keeps the fields it does not know in ``extra``, so a read-modify-write through these
classes loses nothing: ``unstructure(structure(d)) == d`` for any well-formed line.

The store itself indexes raw bytes and decodes bodies on demand; these classes are the typed view
used by the service, the wire and tests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import attrs
import cattrs

THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")
STOP_REASONS = ("stop", "length", "toolUse", "error", "aborted", "pending", "deferred")


@attrs.define(kw_only=True)
class Record:
    """Base of every record: unknown fields live in ``extra`` and are written back unchanged."""

    extra: dict[str, Any] = attrs.field(factory=dict, repr=False)
    present: frozenset[str] | None = attrs.field(default=None, repr=False, eq=False)
    """Known fields the record was read with (None when built in code): only these, and fields
    changed since, are written back, so defaults never appear in a file that did not have them."""


# --- content blocks ---------------------------------------------------------------------------


@attrs.define(kw_only=True)
class TextBlock(Record):
    TAG: ClassVar[str] = "text"
    text: str = ""
    textSignature: str | None = None


@attrs.define(kw_only=True)
class ImageBlock(Record):
    TAG: ClassVar[str] = "image"
    data: str = ""
    mimeType: str = "image/png"


@attrs.define(kw_only=True)
class ThinkingBlock(Record):
    TAG: ClassVar[str] = "thinking"
    thinking: str = ""
    thinkingSignature: str | None = None
    redacted: bool | None = None


@attrs.define(kw_only=True)
class ToolCallBlock(Record):
    TAG: ClassVar[str] = "toolCall"
    id: str = ""
    name: str = ""
    arguments: dict[str, Any] = attrs.field(factory=dict)


@attrs.define(kw_only=True)
class UnknownBlock(Record):
    """A block of a type this version does not know: kept whole in ``extra``."""

    TAG: ClassVar[str] = ""


Block = TextBlock | ImageBlock | ThinkingBlock | ToolCallBlock | UnknownBlock
Content = str | list[Block]


@attrs.define(kw_only=True)
class Cost(Record):
    input: float = 0
    output: float = 0
    cacheRead: float = 0
    cacheWrite: float = 0
    total: float = 0


@attrs.define(kw_only=True)
class Usage(Record):
    input: int = 0
    output: int = 0
    cacheRead: int = 0
    cacheWrite: int = 0
    totalTokens: int = 0
    cost: Cost | None = None


# --- messages (AgentMessage) ------------------------------------------------------------------


@attrs.define(kw_only=True)
class UserMessage(Record):
    TAG: ClassVar[str] = "user"
    content: Content = ""
    timestamp: int | None = None


@attrs.define(kw_only=True)
class AssistantMessage(Record):
    TAG: ClassVar[str] = "assistant"
    content: list[Block] = attrs.field(factory=list)
    api: str | None = None
    provider: str | None = None
    model: str | None = None
    usage: Usage | None = None
    stopReason: str | None = None
    errorMessage: str | None = None
    timestamp: int | None = None


@attrs.define(kw_only=True)
class ToolResultMessage(Record):
    TAG: ClassVar[str] = "toolResult"
    toolCallId: str = ""
    toolName: str = ""
    content: Content = attrs.field(factory=list)
    details: Any = None
    isError: bool = False
    timestamp: int | None = None


@attrs.define(kw_only=True)
class BashExecutionMessage(Record):
    TAG: ClassVar[str] = "bashExecution"
    command: str = ""
    output: str = ""
    exitCode: int | None = None
    cancelled: bool = False
    truncated: bool = False
    fullOutputPath: str | None = None
    excludeFromContext: bool | None = None
    timestamp: int | None = None


@attrs.define(kw_only=True)
class CustomMessage(Record):
    """v3's ``custom`` role (v2 called it ``hookMessage``)."""

    TAG: ClassVar[str] = "custom"
    customType: str = ""
    content: Content = ""
    display: bool = True
    details: Any = None
    timestamp: int | None = None


@attrs.define(kw_only=True)
class SystemMessage(Record):
    """pi 1.5.2: patches the system prompt."""

    TAG: ClassVar[str] = "system"
    content: Content = ""
    sections: dict[str, Any] | None = None
    toolsAdded: list[Any] | None = None
    toolsRemoved: list[Any] | None = None
    timestamp: int | None = None


@attrs.define(kw_only=True)
class CompactionSummaryMessage(Record):
    """Synthesized by context building from a compaction entry."""

    TAG: ClassVar[str] = "compactionSummary"
    summary: str = ""
    tokensBefore: int = 0
    timestamp: int | None = None


@attrs.define(kw_only=True)
class BranchSummaryMessage(Record):
    """Synthesized by context building from a branch_summary entry."""

    TAG: ClassVar[str] = "branchSummary"
    summary: str = ""
    fromId: str = ""
    timestamp: int | None = None


@attrs.define(kw_only=True)
class UnknownMessage(Record):
    TAG: ClassVar[str] = ""


Message = (
    UserMessage
    | AssistantMessage
    | ToolResultMessage
    | BashExecutionMessage
    | CustomMessage
    | SystemMessage
    | CompactionSummaryMessage
    | BranchSummaryMessage
    | UnknownMessage
)

# --- header and entries -----------------------------------------------------------------------


@attrs.define(kw_only=True)
class SessionHeader(Record):
    TAG: ClassVar[str] = "session"
    id: str = ""
    timestamp: str = ""
    cwd: str = ""
    version: int | None = None
    parentSession: str | None = None


@attrs.define(kw_only=True)
class Entry(Record):
    TAG: ClassVar[str] = ""
    id: str = ""
    parentId: str | None = None
    timestamp: str = ""


@attrs.define(kw_only=True)
class MessageEntry(Entry):
    TAG: ClassVar[str] = "message"
    message: Message = attrs.field(factory=UnknownMessage)


@attrs.define(kw_only=True)
class ThinkingLevelChangeEntry(Entry):
    TAG: ClassVar[str] = "thinking_level_change"
    thinkingLevel: str = "off"


@attrs.define(kw_only=True)
class ModelChangeEntry(Entry):
    TAG: ClassVar[str] = "model_change"
    provider: str = ""
    modelId: str = ""


@attrs.define(kw_only=True)
class CompactionEntry(Entry):
    TAG: ClassVar[str] = "compaction"
    summary: str = ""
    firstKeptEntryId: str = ""
    tokensBefore: int = 0
    details: Any = None
    fromHook: bool | None = None
    usage: Usage | None = None
    systemMessage: SystemMessage | Any = None
    """pi >= 0.87: the prompt state at the compaction (shown before the summary in the context)."""


@attrs.define(kw_only=True)
class BranchSummaryEntry(Entry):
    TAG: ClassVar[str] = "branch_summary"
    fromId: str = ""
    summary: str = ""
    details: Any = None
    fromHook: bool | None = None
    usage: Usage | None = None


@attrs.define(kw_only=True)
class CustomEntry(Entry):
    TAG: ClassVar[str] = "custom"
    customType: str = ""
    data: Any = None


@attrs.define(kw_only=True)
class CustomMessageEntry(Entry):
    TAG: ClassVar[str] = "custom_message"
    customType: str = ""
    content: Content = ""
    display: bool = True
    details: Any = None


@attrs.define(kw_only=True)
class LabelEntry(Entry):
    TAG: ClassVar[str] = "label"
    targetId: str = ""
    label: str | None = None


@attrs.define(kw_only=True)
class SessionInfoEntry(Entry):
    TAG: ClassVar[str] = "session_info"
    name: str | None = None


@attrs.define(kw_only=True)
class UsageEntry(Entry):
    TAG: ClassVar[str] = "usage"
    kind: str = ""
    provider: str | None = None
    model: str | None = None
    usage: Usage | None = None
    note: str | None = None


@attrs.define(kw_only=True)
class ContextEditEntry(Entry):
    """pi >= 0.87: replaces an earlier entry's content in context, or hides it (``replacement: null``)."""

    TAG: ClassVar[str] = "context_edit"
    targetId: str = ""
    replacement: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class UnknownEntry(Entry):
    """An entry type this version does not know: shown, never dropped."""


AnyEntry = (
    MessageEntry
    | ThinkingLevelChangeEntry
    | ModelChangeEntry
    | CompactionEntry
    | BranchSummaryEntry
    | CustomEntry
    | CustomMessageEntry
    | LabelEntry
    | SessionInfoEntry
    | UsageEntry
    | ContextEditEntry
    | UnknownEntry
)

BLOCK_TYPES: dict[str, type[Record]] = {c.TAG: c for c in (TextBlock, ImageBlock, ThinkingBlock, ToolCallBlock)}
MESSAGE_ROLES: dict[str, type[Record]] = {
    c.TAG: c
    for c in (
        UserMessage,
        AssistantMessage,
        ToolResultMessage,
        BashExecutionMessage,
        CustomMessage,
        SystemMessage,
        CompactionSummaryMessage,
        BranchSummaryMessage,
    )
}
ENTRY_TYPES: dict[str, type[Record]] = {
    c.TAG: c
    for c in (
        MessageEntry,
        ThinkingLevelChangeEntry,
        ModelChangeEntry,
        CompactionEntry,
        BranchSummaryEntry,
        CustomEntry,
        CustomMessageEntry,
        LabelEntry,
        SessionInfoEntry,
        UsageEntry,
        ContextEditEntry,
    )
}

# --- conversion -------------------------------------------------------------------------------

R = TypeVar("R", bound=Record)
converter = cattrs.Converter()

# Fields whose values are typed records; everything else passes through as JSON.
_NESTED: dict[str, Callable[[Any], Any]] = {}


def _structure_content(value: Any) -> Any:
    if isinstance(value, list):
        return [_structure_tagged(b, BLOCK_TYPES, UnknownBlock, "type") for b in value]
    return value


def _structure_tagged(value: Any, table: dict[str, type[Record]], unknown: type[Record], tag: str) -> Any:
    if not isinstance(value, dict):
        return value
    cls = table.get(value.get(tag, ""), unknown)
    return _structure_record(value, cls, tag_key=tag if cls is not unknown else None)


def _structure_record(value: dict[str, Any], cls: type[R], tag_key: str | None = None) -> R:
    names = {f.name for f in attrs.fields(cls)} - {"extra", "present"}
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, item in value.items():
        if key == tag_key:
            continue
        if key in names:
            if item is None:
                # Keep an explicit null distinct from an absent field.
                extra[key] = None
                continue
            hook = _NESTED.get(key)
            kwargs[key] = hook(item) if hook else item
        else:
            extra[key] = item
    return cls(extra=extra, present=frozenset(kwargs), **kwargs)


def _unstructure_value(value: Any) -> Any:
    if isinstance(value, Record):
        return unstructure(value)
    if isinstance(value, list):
        return [_unstructure_value(v) for v in value]
    return value


def unstructure(record: Record) -> dict[str, Any]:
    """The JSON object for ``record``: known fields that are set, then ``extra`` as it was read."""
    out: dict[str, Any] = {}
    tag = getattr(type(record), "TAG", "")
    if tag:
        out["role" if type(record) in MESSAGE_ROLES.values() else "type"] = tag
    present = record.present
    for field in attrs.fields(type(record)):
        if field.name in ("extra", "present"):
            continue
        value = getattr(record, field.name)
        if value is None:
            continue
        if present is not None and field.name not in present and value == _default(field):
            continue
        out[field.name] = _unstructure_value(value)
    out.update(record.extra)
    return out


def _default(field: Any) -> Any:
    default = field.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return default.factory()
    return default


_NESTED.update(
    {
        "content": _structure_content,
        "message": lambda v: _structure_tagged(v, MESSAGE_ROLES, UnknownMessage, "role"),
        "systemMessage": lambda v: _structure_tagged(v, MESSAGE_ROLES, UnknownMessage, "role"),
        "usage": lambda v: _structure_record(v, Usage) if isinstance(v, dict) else v,
        "cost": lambda v: _structure_record(v, Cost) if isinstance(v, dict) else v,
    }
)


def structure_entry(value: dict[str, Any]) -> AnyEntry:
    """A typed entry for one decoded line (not the header)."""
    cls = ENTRY_TYPES.get(value.get("type", ""), UnknownEntry)
    return _structure_record(value, cls, tag_key="type" if cls is not UnknownEntry else None)  # type: ignore[return-value]


def structure_header(value: dict[str, Any]) -> SessionHeader:
    return _structure_record(value, SessionHeader, tag_key="type")


def structure_message(value: dict[str, Any]) -> Message:
    return _structure_tagged(value, MESSAGE_ROLES, UnknownMessage, "role")  # type: ignore[no-any-return]


converter.register_structure_hook(SessionHeader, lambda v, _: structure_header(v))
converter.register_unstructure_hook(Record, unstructure)
