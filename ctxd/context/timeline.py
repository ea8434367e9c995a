"""How a context grew: its size after each turn on the path to the leaf, and where it was compacted,
branched or overflowed.

One walk down the path from the root: a turn starts with input (a user, bash, custom or branch
summary message, as pi's ``isTurnStartMessage``) and its size is the last trusted usage since the
latest compaction plus the estimates of what followed it (``source: "usage"``), or the estimates
alone (``"estimate"``: every message since that compaction, its summary and the kept messages).
A compaction is a point of its own: its ``tokensBefore`` (what the entry records) and its
``tokensAfter`` (ctxd's ledger, ``details.ctxd``, or the estimate of the summary, the carried prompt
and the kept messages). The last turn's size is the context's size now (the caller passes it).

The walk is kept with the session (``derived["timeline"]``) and continued after an append: when
every entry added since extends the path (bookkeeping entries aside), only those are walked.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from ctxd.context.answers import trusted_usage
from ctxd.context.rules import TURN_START_ROLES, USAGE_INVALIDATORS, is_overflow_message, is_system, may_yield
from ctxd.context.size import estimate_entries
from ctxd.context.tokens import estimate_tokens
from ctxd.formats.codec import MessageHead
from ctxd.tree.index import NONE
from ctxd.tree.session import Session

__all__ = ["Marker", "TimelinePoint", "timeline"]


@attrs.define
class TimelinePoint:
    turn: int
    """1-based turn number (a compaction has the number of the turn it follows)."""
    entryId: str
    """The last entry of the turn, or the compaction."""
    tokens: int
    source: Literal["usage", "estimate", "compaction"]
    kind: Literal["turn", "compaction"] = "turn"


@attrs.define
class Marker:
    kind: Literal["compaction", "branch", "overflow"]
    at: int
    """Index of the point it belongs to."""
    entryId: str
    tokensBefore: int | None = None
    tokensAfter: int | None = None
    trigger: str | None = None
    summarizer: str | None = None
    detail: str | None = None
    """For a branch: how many other branches leave there, or that a branch summary came back;
    for an overflow: the error's text (cut)."""


@attrs.define
class _Walk:
    """The walk down one path, to be continued from ``leaf``."""

    generation: int
    relinks: int
    duplicates: int
    """Entries the id index does not lead to: when it changes, an id may name another entry."""
    count: int
    leaf: int = NONE
    points: list[TimelinePoint] = attrs.field(factory=list)
    markers: list[Marker] = attrs.field(factory=list)
    running: int = 0
    """Estimated size now (since the latest compaction)."""
    usage: tuple[int, int] | None = None
    """(trusted usage, ``running`` when it came), since the latest compaction."""
    total: int = 0
    """Sum of the non-system estimates down the path (never reset)."""
    before: dict[int, int] = attrs.field(factory=dict)
    """Entry index -> ``total`` before it (for the kept part of a compaction)."""
    turn: int = 0
    turn_end: int = NONE
    """The last entry of the open turn (NONE: no turn yet)."""

    def size(self) -> tuple[int, Literal["usage", "estimate"]]:
        if self.usage is not None:
            return self.usage[0] + self.running - self.usage[1], "usage"
        return self.running, "estimate"


def timeline(session: Session, leaf: int, now: int | None) -> tuple[list[TimelinePoint], list[Marker]]:
    """The points and markers of the path to ``leaf`` (``now``: the context's size, for the last turn)."""
    file, tree = session.file, session.tree
    walk = session.derived.get("timeline")
    key = (file.generation, tree.relinks, len(file.heads) - len(file.index))
    new: list[int] | None = None
    if isinstance(walk, _Walk) and (walk.generation, walk.relinks, walk.duplicates) == key:
        new = _extension(session, walk, leaf)
    if walk is None or not isinstance(walk, _Walk) or new is None:
        walk = _Walk(*key, count=0)
        new = tree.path_to_root(leaf)
    _advance(session, walk, new)
    walk.leaf, walk.count = leaf, len(file)
    session.derived["timeline"] = walk
    points, markers = list(walk.points), list(walk.markers)
    if walk.turn_end != NONE:
        tokens, source = walk.size()
        points.append(TimelinePoint(walk.turn, tree.id_of(walk.turn_end), tokens, source))
        if now is not None:
            points[-1].tokens = now  # the open turn ends at the leaf: its size is the context's
    return points, markers


def _down(session: Session, top: int, leaf: int) -> list[int]:
    out = []
    i = leaf
    while i != top and i != NONE:
        out.append(i)
        i = session.tree.parent[i]
    return out


def _extension(session: Session, walk: _Walk, leaf: int) -> list[int] | None:
    """The entries from ``walk.leaf`` (exclusive) down to ``leaf``, when every entry added since the
    walk either lies there or is bookkeeping; else None (walk again)."""
    tree = session.tree
    if walk.leaf == leaf and walk.count == len(session.file):
        return []
    if walk.leaf == NONE or tree.depth[leaf] < tree.depth[walk.leaf]:
        return None
    if len(_branches(session, walk.leaf)) > 1:
        return None  # the walked leaf became a branch point: its marker is new
    segment = _down(session, walk.leaf, leaf)
    if len(segment) != tree.depth[leaf] - tree.depth[walk.leaf]:
        return None  # walk.leaf is not on the path
    added = set(range(walk.count, len(session.file)))
    if not added.issuperset(segment) or any(not tree.is_bookkeeping(i) for i in added.difference(segment)):
        return None
    segment.reverse()
    return segment


def _advance(session: Session, walk: _Walk, new: list[int]) -> None:
    file, tree = session.file, session.tree
    heads = file.heads
    estimates = session.estimates
    estimate_entries(file, [i for i in new if may_yield(heads[i])], estimates)
    compactions = [i for i in new if heads[i].type == "compaction"]
    bodies = dict(zip(compactions, file.entries(compactions), strict=True))
    for i in new:
        head = heads[i]
        kind = head.type
        walk.before[i] = walk.total
        if kind == "compaction":
            _compaction(session, walk, i, bodies[i])
            continue
        if kind in USAGE_INVALIDATORS:
            walk.usage = None  # a context edit: usage before it no longer measures the context
        if not may_yield(head):
            if walk.turn_end != NONE:
                walk.turn_end = i
            continue
        tokens = estimates.get(i, 0)
        message = head.message
        role = message.role if message is not None else {"custom_message": "custom"}.get(kind, "branchSummary")
        if kind == "branch_summary" and not tokens:
            continue  # an empty branch summary shows nothing
        if role in TURN_START_ROLES:
            _close_turn(walk, tree.id_of)
            walk.turn += 1
        walk.running += tokens
        if not is_system(head):
            walk.total += tokens
        walk.turn_end = i
        at = len(walk.points)
        if kind == "branch_summary":
            walk.markers.append(Marker("branch", at, tree.id_of(i), detail="a branch summary came back"))
        if message is not None and role == "assistant":
            used = trusted_usage(head)
            if used is not None:
                walk.usage = (used, walk.running)
            if _overflowed(message):
                walk.markers.append(Marker("overflow", at, tree.id_of(i), detail=(message.errorMessage or "")[:200]))
        others = _branches(session, i)
        if len(others) > 1:
            n = len(others) - 1
            walk.markers.append(Marker("branch", at, tree.id_of(i), detail=f"{n} other branch{'es' if n > 1 else ''}"))
            # An overflow leaves the context (the compaction starts from the entry before it): it
            # shows as a child of the path that the path does not take.
            for c in others:
                error = heads[c].message
                if error is not None and not tree.is_ancestor(c, new[-1]) and _overflowed(error):
                    walk.markers.append(Marker("overflow", at, tree.id_of(c), detail=(error.errorMessage or "")[:200]))


def _branches(session: Session, i: int) -> list[int]:
    """The children of ``i`` that start a branch: a leaf marker or a pin counts only once something
    follows it (another process continues from the last line, which may be ctxd's leaf marker)."""
    tree = session.tree
    return [c for c in tree.child_ids(i) if not tree.is_bookkeeping(c) or tree.child_ids(c)]


def _overflowed(message: MessageHead) -> bool:
    fields = {"role": message.role, "stopReason": message.stopReason, "errorMessage": message.errorMessage}
    return is_overflow_message(fields)


def _close_turn(walk: _Walk, id_of: Any) -> None:
    if walk.turn_end == NONE:
        return
    tokens, source = walk.size()
    walk.points.append(TimelinePoint(walk.turn, id_of(walk.turn_end), tokens, source))
    walk.turn_end = NONE


def _compaction(session: Session, walk: _Walk, i: int, body: dict[str, Any]) -> None:
    file, tree = session.file, session.tree
    _close_turn(walk, tree.id_of)
    before_now, _ = walk.size()
    summary = session.estimates.get(i, 0)
    system = body.get("systemMessage")
    prompt = estimate_tokens(system) if isinstance(system, dict) else 0
    first = file.index.get(str(body.get("firstKeptEntryId") or ""))
    kept = walk.total - walk.before[first] if first is not None and first in walk.before else 0
    after = summary + prompt + kept
    details = body.get("details")
    ledger = details.get("ctxd") if isinstance(details, dict) else None
    ledger = ledger if isinstance(ledger, dict) else {}
    recorded_before = body.get("tokensBefore")
    recorded_after = ledger.get("tokensAfter")
    tokens_before = _count(recorded_before, before_now)
    tokens_after = _count(recorded_after, after)
    summarizer = ledger.get("summarizer") or ("hook" if body.get("fromHook") else None)
    at = len(walk.points)
    walk.points.append(TimelinePoint(walk.turn, tree.id_of(i), tokens_after, "compaction", "compaction"))
    walk.markers.append(
        Marker(
            "compaction",
            at,
            tree.id_of(i),
            tokensBefore=tokens_before,
            tokensAfter=tokens_after,
            trigger=_text(ledger.get("trigger")),
            summarizer=_text(summarizer),
        )
    )
    walk.running = after
    walk.usage = None


def _count(value: Any, otherwise: int) -> int:
    """A recorded token count, or ``otherwise`` when it is missing or not a count."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else otherwise


def _text(value: Any) -> str | None:
    return value[:200] if isinstance(value, str) else None
