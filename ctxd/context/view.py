"""What a person sees of a session tree: one row per entry (role, preview, tokens, labels, marks),
long linear runs collapsed, big trees paged. The CLI renders these rows; the daemon sends them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ctxd.context.pins import is_pinned
from ctxd.context.rules import entry_message
from ctxd.context.tokens import estimate_tokens
from ctxd.tree.index import NONE
from ctxd.tree.session import Session

PREVIEW_CHARS = 100
TEXT_CAP = 256
"""Free text a row or a payload carries (a name, a title, a label, a type) is cut to this many
characters, ending in "…": a 10 MB name must not travel with every listing. The whole text stays
available from the entry itself (``session/entry``)."""


def cap(text: str | None, limit: int = TEXT_CAP) -> str | None:
    """``text`` cut to ``limit`` characters (ending in "…"), or as it is if it fits."""
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


@attrs.define
class TreeNode:
    id: str
    parentId: str | None
    line: int
    type: str
    role: str
    preview: str
    tokens: int
    labels: list[str]
    childCount: int
    onActivePath: bool
    isLeaf: bool
    depth: int
    """Indentation depth in the rendered tree (branch points indent; linear runs do not)."""
    timestamp: str | None = None
    pinned: bool = False
    """Pinned: compactions carry it verbatim after their summary (see ctxd.context.pins)."""

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define
class CollapsedRun:
    """``count`` entries of a linear run, not shown; expand from ``firstId`` to ``lastId``."""

    parentId: str
    firstId: str
    lastId: str
    count: int
    tokens: int | None
    """Their estimated tokens, or None when they have not been read yet."""
    depth: int
    onActivePath: bool

    def to_json(self) -> dict[str, Any]:
        return {"type": "collapsed", **attrs.asdict(self)}


Row = TreeNode | CollapsedRun


def one_line(text: str, limit: int = PREVIEW_CHARS) -> str:
    # Only the head is looked at: a preview of a 10 MB text costs what a preview of 400 chars does.
    head = text[: limit * 4 + 16]
    flat = " ".join(head.split())
    if len(flat) > limit:
        return flat[: limit - 1] + "…"
    return flat if len(head) == len(text) else flat + "…"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for b in content:
            if isinstance(b, Mapping):
                if b.get("type") == "text":
                    parts.append(str(b.get("text", "")))
                elif b.get("type") == "image":
                    parts.append("[image]")
        return " ".join(parts)
    return ""


def preview(entry: Mapping[str, Any]) -> tuple[str, str]:
    """(role, one-line preview) for an entry."""
    kind = str(entry.get("type", ""))
    if kind == "message":
        m = entry.get("message") or {}
        role = cap(str(m.get("role", "?")), PREVIEW_CHARS) or "?"
        if role == "assistant":
            content = m.get("content") or []
            text = _text(content)
            calls = [
                f"{b.get('name')}({one_line(str(b.get('arguments', {})), 40)})"
                for b in content
                if isinstance(b, Mapping) and b.get("type") == "toolCall"
            ]
            if m.get("errorMessage"):
                text = f"[{m.get('stopReason', 'error')}] {m.get('errorMessage')} {text}"
            thinks = any(isinstance(b, Mapping) and b.get("type") == "thinking" for b in content)
            shown = text.strip() or ("thinking…" if thinks and not calls else "")
            if calls:
                shown = (shown + " " if shown else "") + "→ " + ", ".join(calls)
            return role, one_line(shown)
        if role == "toolResult":
            mark = "✗ " if m.get("isError") else ""
            return role, one_line(f"{mark}{m.get('toolName', '')}: {_text(m.get('content'))}")
        if role == "bashExecution":
            return role, one_line(f"$ {m.get('command', '')} (exit {m.get('exitCode')})")
        if role == "system":
            return role, one_line(_text(m.get("content")) or "system prompt update")
        injected = m.get("ctxdInjected")  # an agent's text in a user turn (ctxd.formats.injected): say so
        mark = f"[injected {one_line(injected, 40)}] " if isinstance(injected, str) and injected else ""
        return role, one_line(mark + _text(m.get("content")))
    if kind == "compaction":
        tokens = entry.get("tokensBefore", 0)
        shown = f"{tokens:,}" if isinstance(tokens, int | float) and not isinstance(tokens, bool) else "?"
        return "compaction", one_line(f"compacted {shown} tokens: {entry.get('summary', '')}")
    if kind == "branch_summary":
        return "branchSummary", one_line(f"branch summary: {entry.get('summary', '')}")
    if kind == "custom_message":
        return "custom", one_line(f"[{entry.get('customType', '')}] {_text(entry.get('content'))}")
    if kind == "model_change":
        return kind, one_line(f"model → {entry.get('provider', '')}/{entry.get('modelId', '')}")
    if kind == "thinking_level_change":
        return kind, one_line(f"thinking → {entry.get('thinkingLevel', '')}")
    if kind == "label":
        return kind, one_line(f"label {entry.get('targetId', '')} = {entry.get('label')!r}")
    if kind == "session_info":
        return kind, one_line(f"name = {entry.get('name')!r}")
    if kind == "context_edit":
        action = "hide" if entry.get("replacement") is None else "replace"
        return kind, one_line(f"{action} {entry.get('targetId', '')}")
    if kind == "custom":
        return kind, one_line(f"[{entry.get('customType', '')}]")
    if kind == "usage":
        return kind, one_line(f"{entry.get('kind', '')} {entry.get('model', '')}")
    rest = str({k: v for k, v in entry.items() if k not in ("id", "parentId")})
    return cap(kind, PREVIEW_CHARS) or "?", one_line(rest)


def node(
    session: Session, i: int, depth: int, active: set[int], leaf: int | None, entry: dict[str, Any] | None = None
) -> TreeNode:
    entry = session.file.entry(i) if entry is None else entry
    role, text = preview(entry)
    msg = entry_message(entry)
    tokens = session.estimates.get(i)
    if tokens is None:
        tokens = estimate_tokens(msg) if msg is not None else 0
        session.estimates[i] = tokens
    label = session.tree.label_of(i)
    return TreeNode(
        id=session.tree.id_of(i),
        parentId=entry.get("parentId"),
        line=session.file.lines[i],
        type=cap(str(entry.get("type", "")), PREVIEW_CHARS) or "",
        role=role,
        preview=text,
        tokens=tokens,
        labels=[cap(label) or ""] if label else [],
        childCount=len(_visible_children(session, i)),
        onActivePath=i in active,
        isLeaf=i == leaf,
        depth=depth,
        timestamp=entry.get("timestamp"),
        pinned=is_pinned(session.file, session.tree.id_of(i)),
    )


def _visible_children(session: Session, i: int) -> list[int]:
    """Children, with ctxd's leaf markers and pin entries replaced by their own children (bookkeeping)."""
    out: list[int] = []
    stack = list(reversed(session.tree.child_ids(i)))
    while stack:
        c = stack.pop()
        if session.tree.is_bookkeeping(c):
            stack.extend(reversed(session.tree.child_ids(c)))
        else:
            out.append(c)
    return out


def project(
    session: Session,
    *,
    collapse: int = 8,
    keep: int = 2,
    offset: int = 0,
    limit: int | None = None,
) -> tuple[list[Row], int]:
    """Rows of the whole tree in depth-first order, and the total row count before paging.

    A linear run (each entry the only child of the previous one) longer than ``collapse`` shows
    its first ``keep`` and last ``keep`` entries; the active leaf and labelled entries always show.
    ``collapse=0`` shows everything.
    """
    tree = session.tree
    leaf = session.leaf()
    active = set(tree.path_to_root(leaf)) if leaf is not None else set()
    roots = [r for r in tree.roots + tree.orphans if not tree.is_bookkeeping(r)]
    # First the shape (which rows, at which depth), then one batched read of the shown entries.
    specs: list[tuple[int, int, list[int] | None]] = []
    # Each stack item: (entry index, depth).
    stack: list[tuple[int, int]] = [(r, 0) for r in reversed(sorted(roots))]
    total = 0

    def emit(i: int, depth: int, hidden: list[int] | None = None) -> None:
        # Rows outside the page are counted, never built (building one reads its entry).
        nonlocal total
        if total >= offset and (limit is None or len(specs) < limit):
            specs.append((i, depth, hidden))
        total += 1

    while stack:
        start, depth = stack.pop()
        run = [start]
        while True:
            kids = _visible_children(session, run[-1])
            if len(kids) != 1:
                break
            run.append(kids[0])
        shown = _shown_in_run(session, run, collapse, keep, leaf)
        hidden: list[int] = []
        for i in run:
            if i in shown:
                if hidden:
                    emit(hidden[0], depth, list(hidden))
                    hidden.clear()
                emit(i, depth)
            else:
                hidden.append(i)
        kids = _visible_children(session, run[-1])
        child_depth = depth + 1 if len(kids) > 1 else depth
        stack.extend((k, child_depth) for k in reversed(kids))
    shown_entries = [i for i, _, hidden in specs if not hidden]
    bodies = dict(zip(shown_entries, session.file.entries(shown_entries), strict=True))
    rows: list[Row] = [
        _collapsed(session, hidden, depth, active) if hidden else node(session, i, depth, active, leaf, bodies[i])
        for i, depth, hidden in specs
    ]
    return rows, total


def _shown_in_run(session: Session, run: list[int], collapse: int, keep: int, leaf: int | None) -> set[int]:
    if collapse <= 0 or len(run) <= collapse:
        return set(run)
    shown = set(run[:keep]) | set(run[-keep:])
    for i in run:
        head = session.file.heads[i]
        if i == leaf or i in session.tree.labels or head.type in ("compaction", "branch_summary"):
            shown.add(i)
    return shown


def _collapsed(session: Session, hidden: list[int], depth: int, active: set[int]) -> CollapsedRun:
    tree = session.tree
    known = [session.estimates.get(i) for i in hidden]
    tokens = None if None in known else sum(t for t in known if t is not None)
    first = hidden[0]
    return CollapsedRun(
        parentId=tree.id_of(tree.parent[first]) if tree.parent[first] != NONE else "",
        firstId=tree.id_of(first),
        lastId=tree.id_of(hidden[-1]),
        count=len(hidden),
        tokens=tokens,
        depth=depth,
        onActivePath=first in active,
    )


def run_rows(session: Session, from_id: str, limit: int | None = None) -> list[Row]:
    """The linear run starting at ``from_id``, uncollapsed: it and each only child after it, up to
    ``limit`` rows (a collapsed run's entries, without fetching the whole tree)."""
    tree = session.tree
    start = session.file.require(from_id)
    leaf = session.leaf()
    active = set(tree.path_to_root(leaf)) if leaf is not None else set()
    run = [start]
    while limit is None or len(run) < limit:
        kids = _visible_children(session, run[-1])
        if len(kids) != 1:
            break
        run.append(kids[0])
    depth = 0
    bodies = session.file.entries(run)
    return [node(session, i, depth, active, leaf, body) for i, body in zip(run, bodies, strict=True)]
