"""Overflow recovery by truncating oversized tool results, persisted by replaying the branch.

The originals stay untouched: from the parent of the first oversized tool result on the active
path, the rest of the path is appended again as a new branch, with every oversized tool result
cut (seed 004's rule, ``ctxd.context.truncate``) and ids that entries refer to mapped to their
copies.  The new branch's last entry becomes the leaf.
"""

from __future__ import annotations

from typing import Any

import attrs

from ctxd.context.live import live_context
from ctxd.context.truncate import is_oversized, limit_chars, truncate_tool_result
from ctxd.store.files import new_entry_id
from ctxd.store.session_file import LEAF_MARKER
from ctxd.tree.session import Session

ID_FIELDS = ("targetId", "firstKeptEntryId", "fromId")


@attrs.define
class ReplayOutcome:
    truncated: list[str]
    """Ids of the original tool results that were cut."""
    replayed: int
    """Entries appended as the new branch."""
    leafId: str | None
    tokensBefore: int
    tokensAfter: int
    limitChars: int

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def truncate_by_replay(session: Session, context_window: int, *, leaf_id: str | None = None) -> ReplayOutcome:
    """Cut oversized tool results on the active path by replaying it; a no-op when none are."""
    file, tree = session.file, session.tree
    leaf = file.require(leaf_id) if leaf_id else file.leaf_index()
    before = live_context(session).size(leaf_id)
    limit = limit_chars(context_window)
    if leaf is None:
        return ReplayOutcome([], 0, None, 0, 0, limit)
    path = tree.path_to_root(leaf)
    bodies = file.entries(path)
    first = next(
        (k for k, b in enumerate(bodies) if b.get("type") == "message" and is_oversized(b.get("message") or {}, limit)),
        None,
    )
    if first is None:
        return ReplayOutcome([], 0, tree.id_of(leaf), before.tokens, before.tokens, limit)
    parent = bodies[first].get("parentId")
    copies: list[dict[str, Any]] = []
    mapping: dict[str, str] = {}
    truncated: list[str] = []
    for body in bodies[first:]:
        if _is_marker(body):
            continue
        copy = {k: v for k, v in body.items() if k not in ("id", "parentId", "timestamp")}
        # Ids are chosen now so later copies can refer to earlier ones.
        copy["id"] = new_entry_id(lambda c: c in file.index or c in mapping.values())
        mapping[str(body.get("id"))] = copy["id"]
        message = copy.get("message")
        if copy.get("type") == "message" and isinstance(message, dict):
            if is_oversized(message, limit):
                message = copy["message"] = truncate_tool_result(message, limit)
                truncated.append(str(body.get("id")))
            if message.get("role") == "assistant" and "usage" in message:
                # That usage measured the context before truncation: keep it aside, not as usage.
                message = copy["message"] = dict(message)
                message["ctxdOriginalUsage"] = message.pop("usage")
        for key in ID_FIELDS:
            if isinstance(copy.get(key), str) and copy[key] in mapping:
                copy[key] = mapping[copy[key]]
        copy["ctxdReplayOf"] = body.get("id")
        copies.append(copy)
    ids = session.append(copies, parent_id=parent)
    after = live_context(session).size(ids[-1])
    return ReplayOutcome(truncated, len(ids), ids[-1], before.tokens, after.tokens, limit)


def _is_marker(body: dict[str, Any]) -> bool:
    return body.get("type") == "custom" and body.get("customType") == LEAF_MARKER
