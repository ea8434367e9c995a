"""What may be appended: the known fields of each entry type, checked before anything is written.

Readers (ctxd's and pi's) rely on these shapes; an entry that breaks one would make the session
fail for every later reader, so :meth:`SessionFile.append` refuses the whole batch instead, with
:class:`InvalidEntryError` (-31003) whose ``data.field`` names the culprit
(``entries[0].tokensBefore``, ``messages[1].content[0].text``).  Unknown entry types, unknown
roles and unknown extra fields stay allowed: pi adds them.  ``id``, ``parentId`` and
``timestamp`` may be left out (they are filled in); parents must exist (checked under the lock).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ctxd.errors import InvalidEntryError
from ctxd.formats import depth
from ctxd.formats.depth import MAX_DEPTH

MAX_ID = 256
"""The longest entry id accepted (pi's are 8 characters; imports may bring UUIDs)."""

Check = Callable[[Any], bool]


def _str(v: Any) -> bool:
    return isinstance(v, str)


def _nonempty(v: Any) -> bool:
    return isinstance(v, str) and bool(v)


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _bool(v: Any) -> bool:
    return isinstance(v, bool)


def _obj(v: Any) -> bool:
    return isinstance(v, dict)


def _list(v: Any) -> bool:
    return isinstance(v, list)


def _int_or_null(v: Any) -> bool:
    return v is None or (isinstance(v, int) and not isinstance(v, bool))


_WHAT: dict[Check, str] = {
    _str: "a string",
    _nonempty: "a non-empty string",
    _num: "a number",
    _bool: "a boolean",
    _obj: "an object",
    _list: "a list",
    _int_or_null: "an integer or null",
}


class _Checker:
    def __init__(self, where: str, index: int) -> None:
        self.where = where
        self.index = index

    def fail(self, field: str, message: str) -> InvalidEntryError:
        return InvalidEntryError(f"{field}: {message}", field=field, index=self.index)

    def field(self, obj: dict[str, Any], key: str, check: Check, at: str, *, required: bool = False) -> None:
        if key not in obj:
            if required:
                raise self.fail(f"{at}.{key}", f"is required ({_WHAT[check]})")
            return
        if not check(obj[key]):
            raise self.fail(f"{at}.{key}", f"must be {_WHAT[check]}, not {_kind(obj[key])}")

    def content(self, value: Any, at: str, *, blocks: tuple[str, ...]) -> None:
        """A string, or a list of blocks of the known kinds (unknown block types pass)."""
        if isinstance(value, str):
            return
        if not isinstance(value, list):
            raise self.fail(at, f"must be a string or a list of blocks, not {_kind(value)}")
        for k, block in enumerate(value):
            self.block(block, f"{at}[{k}]", blocks)

    def block(self, block: Any, at: str, known: tuple[str, ...]) -> None:
        if not isinstance(block, dict):
            raise self.fail(at, f"must be an object, not {_kind(block)}")
        self.field(block, "type", _nonempty, at, required=True)
        kind = block["type"]
        if kind not in known:
            return
        if kind == "text":
            self.field(block, "text", _str, at, required=True)
        elif kind == "image":
            self.field(block, "data", _str, at, required=True)
            self.field(block, "mimeType", _str, at)
        elif kind == "thinking":
            self.field(block, "thinking", _str, at, required=True)
        elif kind == "toolCall":
            self.field(block, "id", _nonempty, at, required=True)
            self.field(block, "name", _str, at, required=True)
            self.field(block, "arguments", _obj, at)

    def message(self, m: Any, at: str) -> None:
        if not isinstance(m, dict):
            raise self.fail(at, f"must be an object (an AgentMessage), not {_kind(m)}")
        self.field(m, "role", _nonempty, at, required=True)
        self.field(m, "timestamp", _num, at)
        role = m["role"]
        if role == "user":
            self.field(m, "content", _any, at, required=True)
            self.content(m["content"], f"{at}.content", blocks=("text", "image"))
        elif role == "assistant":
            if "content" in m:
                self.content(m["content"], f"{at}.content", blocks=("text", "thinking", "toolCall"))
            for key in ("provider", "model", "api", "stopReason", "errorMessage"):
                self.field(m, key, _str, at)
            if "usage" in m and m["usage"] is not None:
                self.field(m, "usage", _obj, at)
                for key in ("input", "output", "cacheRead", "cacheWrite", "totalTokens"):
                    self.field(m["usage"], key, _num, f"{at}.usage")
        elif role == "toolResult":
            self.field(m, "toolCallId", _nonempty, at, required=True)
            self.field(m, "toolName", _str, at)
            self.field(m, "isError", _bool, at)
            if "content" in m:
                self.content(m["content"], f"{at}.content", blocks=("text", "image"))
        elif role == "bashExecution":
            self.field(m, "command", _str, at, required=True)
            self.field(m, "output", _str, at)
            self.field(m, "exitCode", _int_or_null, at)
            for key in ("cancelled", "truncated", "excludeFromContext"):
                self.field(m, key, _bool, at)
        elif role in ("custom", "hookMessage"):
            self.field(m, "customType", _str, at)
            self.field(m, "display", _bool, at)
            if "content" in m:
                self.content(m["content"], f"{at}.content", blocks=("text", "image"))
        elif role == "system":
            if "content" in m:
                self.content(m["content"], f"{at}.content", blocks=("text", "image"))
            self.field(m, "sections", _obj, at)
            self.field(m, "toolsAdded", _list, at)
            self.field(m, "toolsRemoved", _list, at)
        elif role in ("compactionSummary", "branchSummary"):
            self.field(m, "summary", _str, at, required=True)

    def entry(self, e: dict[str, Any], at: str, message_at: str) -> None:
        kind = e["type"]
        for key in ("id", "parentId"):
            value = e.get(key)
            if value is None:
                continue  # filled in (id), or a root (parentId)
            if not isinstance(value, str) or not value:
                raise self.fail(f"{at}.{key}", f"must be a non-empty string, not {_kind(value)}")
            if len(value) > MAX_ID or not value.isprintable():
                raise self.fail(f"{at}.{key}", f"must be at most {MAX_ID} printable characters (no newlines)")
        if e.get("id") is not None and e.get("parentId") == e.get("id"):
            raise self.fail(f"{at}.parentId", "an entry cannot be its own parent")
        if "timestamp" in e:
            self.field(e, "timestamp", _str, at)
            if not _iso(e["timestamp"]):
                raise self.fail(f"{at}.timestamp", "must be an ISO-8601 time (2026-01-01T09:00:00.000Z)")
        if kind == "message":
            self.message(e.get("message"), message_at)
        elif kind == "compaction":
            self.field(e, "summary", _str, at, required=True)
            self.field(e, "firstKeptEntryId", _nonempty, at, required=True)
            self.field(e, "tokensBefore", _num, at, required=True)
            self.field(e, "fromHook", _bool, at)
            self.field(e, "systemMessage", _obj, at)
        elif kind == "branch_summary":
            self.field(e, "summary", _str, at, required=True)
            self.field(e, "fromId", _str, at)
            self.field(e, "fromHook", _bool, at)
        elif kind == "label":
            self.field(e, "targetId", _nonempty, at, required=True)
            if e.get("label") is not None:
                self.field(e, "label", _str, at)
        elif kind == "session_info":
            if e.get("name") is not None:
                self.field(e, "name", _str, at)
        elif kind == "context_edit":
            self.field(e, "targetId", _nonempty, at, required=True)
            replacement = e.get("replacement")
            if replacement is not None:
                self.field(e, "replacement", _obj, at)
                if "content" in replacement:
                    self.content(replacement["content"], f"{at}.replacement.content", blocks=("text", "image"))
        elif kind == "model_change":
            self.field(e, "provider", _str, at, required=True)
            self.field(e, "modelId", _nonempty, at, required=True)
        elif kind == "thinking_level_change":
            self.field(e, "thinkingLevel", _nonempty, at, required=True)
        elif kind == "custom":
            self.field(e, "customType", _str, at)
        elif kind == "custom_message":
            self.field(e, "customType", _str, at)
            self.field(e, "display", _bool, at)
            if "content" in e:
                self.content(e["content"], f"{at}.content", blocks=("text", "image"))


def _any(v: Any) -> bool:
    return True


_WHAT[_any] = "any value"


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int | float):
        return f"the number {v!r}"
    if isinstance(v, str):
        return f"the string {v[:40]!r}"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def _iso(value: str) -> bool:
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def check_depth(line: bytes, at: str, index: int) -> None:
    """Refuse an encoded entry nested deeper than MAX_DEPTH (cheap unless it has that many brackets)."""
    if depth.too_deep(line):
        raise _Checker(at, index).fail(at, f"nests deeper than {MAX_DEPTH} levels")


def validate_entries(entries: Sequence[Any], fields: Sequence[tuple[str, str]] | None = None) -> None:
    """Raise InvalidEntryError for the first entry that readers could not take.

    ``fields[i]`` names entry ``i`` and its message in errors (default ``entries[i]`` and
    ``entries[i].message``; the daemon names wrapped messages ``messages[k]``).
    """
    for i, e in enumerate(entries):
        at, message_at = fields[i] if fields is not None else (f"entries[{i}]", f"entries[{i}].message")
        checker = _Checker(at, int(at.rsplit("[", 1)[1].rstrip("]")) if at.endswith("]") else i)
        if not isinstance(e, dict):
            raise checker.fail(at, f"must be an object, not {_kind(e)}")
        kind = e.get("type")
        if not isinstance(kind, str) or not kind or kind == "session":
            raise checker.fail(f"{at}.type", "must be a non-empty string naming an entry type (not 'session')")
        checker.entry(e, at, message_at)
