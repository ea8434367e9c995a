"""Pinned messages: never summarised away, carried verbatim right after a compaction's summary until unpinned.

A pin is a ``custom`` entry (``customType: "ctxd.pin"``, ``data: {"targetId", "pinned"}``), which pi skips
when it builds a context. ctxd writes it at the leaf, so it stays on the active branch: pi, which takes the
last line as its leaf, continues from it (a custom entry adds nothing to pi's context), and ctxd's own leaf
is the pin's parent (as for its leaf markers). The latest pin entry for a target, in file order, decides:
pinned or not, on every branch that holds the target.

When a compaction on the path has summarised a pinned message (it lies before the compaction's kept part),
ctxd's context carries it right after the summary, in path order: user, custom, bash and branch-summary
messages as they are; an assistant message with its text and thinking (its tool calls are left out, their
results are not carried with it); a tool result as a ``custom`` message (``ctxd.pinned``) holding its text,
since no call precedes it any more. They count in the context's size and in a compaction plan's
``estimatedTokensAfter``. Agents that build their own context from the file (pi) do not see them.

The pin entries are found by an incremental pass over the index (only new entries are looked at; only pin
entries are decoded), so sessions without pins pay nothing but that pass.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Iterable
from typing import Any

import attrs

from ctxd.context.rules import entry_message
from ctxd.errors import InvalidEntryError
from ctxd.store.session_file import PIN_MARKER, SessionFile
from ctxd.tree.index import NONE, TreeIndex

PINNED_TYPE = "ctxd.pinned"
"""customType of the message a pinned tool result is carried as."""


_VERSIONS = itertools.count(1)


@attrs.define
class _Pins:
    generation: int
    version: int = attrs.field(factory=lambda: next(_VERSIONS))
    """Changes whenever the pinned set may have (a fresh number, never reused)."""
    scanned: int = 0
    """How many of the file's pin entries were read."""
    state: dict[str, bool] = attrs.field(factory=dict)
    """Target entry id -> pinned, from the latest pin entry for it."""
    ancestry: dict[tuple[int, int], bool] = attrs.field(factory=dict)
    """(target, descendant) -> whether the target is on the descendant's path (parents never change)."""


_BY_FILE: weakref.WeakKeyDictionary[SessionFile, _Pins] = weakref.WeakKeyDictionary()


def _pins(session: SessionFile) -> _Pins:
    pins = _BY_FILE.get(session)
    if pins is None or pins.generation != session.generation:
        pins = _BY_FILE[session] = _Pins(session.generation)
    entries = session.pin_entries  # the store notes pin entries as it indexes (no pass over every head)
    if pins.scanned < len(entries):
        found = entries[pins.scanned :]
        pins.scanned = len(entries)
        for body in session.entries(found):
            data = body.get("data")
            if isinstance(data, dict) and isinstance(data.get("targetId"), str):
                pins.state[data["targetId"]] = data.get("pinned", True) is not False
        pins.version = next(_VERSIONS)
    return pins


def version(session: SessionFile) -> int:
    """The pins' state, read up to date, as a number: equal numbers, equal pins (any caller can
    compare it with the one it saw last, whoever read the new pin entries)."""
    return _pins(session).version


def refresh(session: SessionFile) -> bool:
    """Read new pin entries; whether any was found (a size computed before them may be stale)."""
    pins = _BY_FILE.get(session)
    before = (pins.generation, len(pins.state), tuple(pins.state.values())) if pins is not None else None
    pins = _pins(session)
    return before != (pins.generation, len(pins.state), tuple(pins.state.values()))


PINNABLE = frozenset({"message", "custom_message", "branch_summary"})


def pin_entry(session: SessionFile, entry_id: str, pinned: bool = True) -> dict[str, Any]:
    """The pin entry to append at the leaf for ``entry_id`` (a message, custom message or branch summary)."""
    index = session.require(entry_id)
    kind = session.heads[index].type
    if kind not in PINNABLE:
        raise InvalidEntryError(f"only messages can be pinned, not a {kind} entry", path=session.path, entryId=entry_id)
    return {"type": "custom", "customType": PIN_MARKER, "data": {"targetId": entry_id, "pinned": pinned}}


def pinned(session: SessionFile) -> set[str]:
    """The ids of the entries pinned now."""
    return {target for target, on in _pins(session).state.items() if on}


def is_pinned(session: SessionFile, entry_id: str) -> bool:
    return _pins(session).state.get(entry_id, False)


def _on_path(pins: _Pins, tree: TreeIndex, target: int, descendant: int) -> bool:
    key = (target, descendant)
    found = pins.ancestry.get(key)
    if found is None:
        found = pins.ancestry[key] = tree.is_ancestor(target, descendant)
    return found


def carried(
    session: SessionFile, tree: TreeIndex, boundary: int, shown: Iterable[int]
) -> list[tuple[int, dict[str, Any]]]:
    """``(entry index, message)`` of the pinned messages a compaction carries: those on the path to
    ``boundary`` (the compaction's first kept entry, or the compaction itself) that are not among ``shown``
    (entries in the context anyway), in path order."""
    pins = _pins(session)
    if boundary == NONE or not any(pins.state.values()):
        return []
    visible = set(shown)
    targets: list[int] = []
    for target_id, on in pins.state.items():
        index = session.index.get(target_id) if on else None
        if index is not None and index not in visible and _on_path(pins, tree, index, boundary):
            targets.append(index)
    targets.sort(key=lambda i: tree.depth[i])
    out: list[tuple[int, dict[str, Any]]] = []
    for index, body in zip(targets, session.entries(targets), strict=True):
        message = entry_message(body)
        if message is not None:
            shaped = carry(message)
            if shaped is not None:
                out.append((index, shaped))
    return out


def carry(message: dict[str, Any]) -> dict[str, Any] | None:
    """The form a pinned message is carried in after a summary (see the module docstring)."""
    role = message.get("role")
    if role == "assistant":
        content = message.get("content")
        if isinstance(content, list):
            kept = [b for b in content if isinstance(b, dict) and b.get("type") in ("text", "thinking")]
            if not kept:
                return None
            return {**message, "content": kept, "stopReason": "stop"}
        return message
    if role == "toolResult":
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": str(content or "")}]
        texts = [b for b in blocks if isinstance(b, dict) and b.get("type") in ("text", "image")]
        head = {"type": "text", "text": f"[Pinned result of the {message.get('toolName') or 'tool'} call]"}
        return {
            "role": "custom",
            "customType": PINNED_TYPE,
            "content": [head, *texts],
            "display": True,
            "timestamp": message.get("timestamp"),
        }
    if role in ("system", "compactionSummary"):
        return None  # the prompt state and summaries are carried by the compaction itself
    return message
