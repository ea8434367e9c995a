"""Which entries of a session its summaries stand for, and the original messages of a range.

Read from the session itself (the source of truth), never from the index: an entry is *summarised
away* when it lies on the active path but outside the context ctxd builds at the leaf (before the
latest compaction's first kept entry); a compaction stands for the entries on its path from the
previous compaction's first kept entry (or the root) up to its own first kept entry; a branch
summary for the abandoned branch, from where it left the path down to its ``fromId``.
"""

from __future__ import annotations

from typing import Any

import attrs

from ctxd.context.project import context_path
from ctxd.history.anchors import resolve
from ctxd.history.extract import Item, item_of
from ctxd.tree.index import NONE
from ctxd.tree.session import Session

MIN_CHARS = 1000
"""Every expand page carries at least this much text (so that paging always moves on)."""


def summarized_ids(session: Session) -> set[str]:
    """Ids of the entries on the active path that the current context holds only as a summary, and their
    ``L<line>`` anchors (a search hit in a file without ids carries one)."""
    leaf = session.leaf()
    if leaf is None:
        return set()
    projected = context_path(session.tree, leaf)
    if projected.compaction == NONE:
        return set()
    kept = set(projected.indices)
    away = [i for i in session.tree.path_to_root(leaf) if i not in kept]
    return {session.tree.id_of(i) for i in away} | {f"L{session.file.lines[i]}" for i in away}


@attrs.define
class Span:
    """The entries an expand reads, in path order."""

    indices: list[int]
    kind: str
    """``range``, ``entry``, ``compaction`` (the entries behind its summary) or ``branchSummary``."""
    previous_compaction: str | None = None
    """For a compaction: the one before it on its path (expand it to read further back)."""


def _first_kept(session: Session, comp: int) -> int | None:
    """The index of a compaction's first kept entry, if it is on the compaction's path."""
    kept_id = session.file.heads[comp].firstKeptEntryId
    found = session.file.index.get(kept_id) if kept_id else None
    return found if found is not None and session.tree.is_ancestor(found, comp) else None


def compaction_span(session: Session, comp: int) -> Span:
    tree = session.tree
    parent = tree.parent[comp]
    previous = tree.last_compaction[parent] if parent != NONE else NONE
    path = tree.path_to_root(comp)
    start = 0
    if previous != NONE:
        prev_kept = _first_kept(session, previous)
        start = path.index(prev_kept) if prev_kept is not None else path.index(previous) + 1
    kept = _first_kept(session, comp)
    end = path.index(kept) if kept is not None else len(path) - 1
    return Span(path[start:end], "compaction", tree.id_of(previous) if previous != NONE else None)


def span_of(session: Session, entry_id: str | None, from_id: str | None, to_id: str | None) -> Span:
    """What to expand: the entries behind ``entry_id``'s summary (a compaction or a branch summary),
    that entry alone (any other entry), or the path from ``from_id`` (default: the root) down to
    ``to_id`` (default: the leaf). Each is an anchor (:mod:`ctxd.history.anchors`: an id, a unique prefix of
    one, or ``L<line>``). Raises EntryNotFoundError / ValueError (AnchorError) for anchors that do not fit."""
    file, tree = session.file, session.tree
    if entry_id:
        i = resolve(session, entry_id)
        kind = file.heads[i].type
        if kind == "compaction":
            return compaction_span(session, i)
        if kind == "branch_summary":
            from_entry = str(file.entry(i).get("fromId") or "")
            j = file.index.get(from_entry) if from_entry else None
            if j is None:
                return Span([], "branchSummary")
            top = tree.common_ancestor(i, j)
            branch = tree.path_until(j, top)
            return Span(branch[1:] if branch and branch[0] == top else branch, "branchSummary")
        return Span([i], "entry")
    leaf = session.leaf()
    end = resolve(session, to_id, name="toEntryId") if to_id else leaf
    if end is None:
        return Span([], "range")
    if from_id:
        start = resolve(session, from_id, name="fromEntryId")
        if not tree.is_ancestor(start, end):
            raise ValueError(f"fromEntryId {from_id} is not on the path to {tree.id_of(end)}")
        return Span(tree.path_until(end, start), "range")
    return Span(tree.path_to_root(end), "range")


@attrs.define
class Page:
    messages: list[dict[str, Any]]
    total: int
    """Messages in the whole span."""
    next_cursor: str | None
    """Where the next page starts (``"message:offset"``), None when this page ends the span."""


def read_page(session: Session, span: Span, cursor: str | None, max_chars: int) -> Page:
    """The span's messages from ``cursor`` on, their text within ``max_chars`` (at least
    :data:`MIN_CHARS`); a message cut short carries ``truncated`` and the cursor goes on inside it."""
    bodies = session.file.entries(span.indices)
    items = [
        (session.file.lines[i], item)
        for i, body in zip(span.indices, bodies, strict=True)
        if (item := item_of(body)) is not None
    ]
    return paginate(items, cursor, max_chars)


def paginate(
    items: list[tuple[int, Item]], cursor: str | None, max_chars: int, *, base: int = 0, total: int | None = None
) -> Page:
    """The page of ``(line, item)`` messages that starts at ``cursor``. ``items`` may be a slice of the span,
    from its message ``base`` on (``total``: the span's length), as a server answers it."""
    start, offset = parse_cursor(cursor)
    budget = max(MIN_CHARS, max_chars)
    out: list[dict[str, Any]] = []
    next_cursor = None
    for k in range(max(start, base), base + len(items)):
        line, item = items[k - base]
        text = item.text[offset:] if k == start else item.text
        skip = offset if k == start else 0
        message: dict[str, Any] = {
            "entryId": item.entry_id,
            "line": line,
            "role": item.role,
            "timestamp": item.timestamp or None,
            "toolName": item.tool or None,
            "text": text[:budget],
        }
        if skip:
            message["fromChar"] = skip
        out.append(message)
        if len(text) > budget:
            message["truncated"] = True
            next_cursor = f"{k}:{skip + budget}"
            break
        budget -= len(text)
        if budget <= 0 and k + 1 < (base + len(items) if total is None else total):
            next_cursor = f"{k + 1}:0"
            break
    else:
        if total is not None and base + len(items) < total:  # the slice ended before the span did
            next_cursor = f"{base + len(items)}:0"
    return Page(out, base + len(items) if total is None else total, next_cursor)


def parse_cursor(cursor: str | None) -> tuple[int, int]:
    if not cursor:
        return 0, 0
    message, _, offset = cursor.partition(":")
    try:
        return max(0, int(message)), max(0, int(offset or 0))
    except ValueError:
        raise ValueError(f"cursor must be the nextCursor of an earlier answer, not {cursor!r}") from None
