"""Migrations v1 -> v2 -> v3, applied to the index heads and to bodies as they are decoded.

v1 entries have no ids: ctxd derives them deterministically from the session id and the line, so
every read of an unmigrated file serves the same ids, and the atomic on-disk migration (done only
before ctxd first writes to the file) keeps them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxd.formats.codec import LineHead


def derived_id(session_id: str, line: int, taken: set[str]) -> str:
    """A stable 8-hex id for the entry on ``line`` of a v1 file."""
    salt = 0
    while True:
        import hashlib  # here: only a migration (rare) needs it

        digest = hashlib.blake2b(f"{session_id}:{line}:{salt}".encode(), digest_size=4).hexdigest()
        if digest not in taken:
            taken.add(digest)
            return digest
        salt += 1


def migrate_heads(version: int, session_id: str, heads: list[LineHead], lines: Sequence[int]) -> None:
    """Give v1 heads ids and a linear chain; map ``firstKeptEntryIndex`` (line index) to ids.

    ``lines`` holds each head's 1-based file line, from which the derived ids are made.
    """
    if version >= 2:
        return
    taken: set[str] = {h.id for h in heads if h.id}
    prev: str | None = None
    for head, line in zip(heads, lines, strict=True):
        if not head.id:
            head.id = derived_id(session_id, line, taken)
        head.parentId = prev
        prev = head.id
    for head in heads:
        index = head.firstKeptEntryIndex
        if head.type == "compaction" and index is not None and not head.firstKeptEntryId:
            # pi's index counts parsed file entries with the header at 0.
            head.firstKeptEntryId = heads[index - 1].id if 1 <= index <= len(heads) else ""


def migrate_body(version: int, body: dict[str, Any], head: LineHead) -> dict[str, Any]:
    """Bring one decoded body to v3, consistent with its (already migrated) head."""
    if version < 2:
        body["id"] = head.id
        body["parentId"] = head.parentId
        if body.get("type") == "compaction" and "firstKeptEntryIndex" in body:
            del body["firstKeptEntryIndex"]
            body["firstKeptEntryId"] = head.firstKeptEntryId or ""
    if version < 3 and body.get("type") == "message":
        message = body.get("message")
        if isinstance(message, dict) and message.get("role") == "hookMessage":
            message["role"] = "custom"
    return body


def migrate_head_roles(version: int, heads: list[LineHead]) -> None:
    if version >= 3:
        return
    for head in heads:
        if head.message is not None and head.message.role == "hookMessage":
            head.message.role = "custom"
