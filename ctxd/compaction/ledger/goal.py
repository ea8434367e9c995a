"""The session's goal: its first genuine user request, found on the path from the root.

A compaction summarises the messages after the previous one's kept boundary; the session's first request is
usually long gone from that range (an earlier summary holds it, often paraphrased, or, for a Claude Code or
Codex transcript, in a form ctxd cannot parse). The goal of every summary is that request, in the user's
own words. :func:`session_goal` takes it from the previous compaction's ledger (``details.ctxd.goal``, which
ctxd writes on every compaction), so a chain of compactions costs nothing; only after a compaction made by
another tool does :func:`first_request` read it from the path (skipping what agents inject into user turns
and mere acknowledgements; only user message entries are decoded). Without a previous compaction the range
starts at the root and holds the request itself.
"""

from __future__ import annotations

import weakref
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from ctxd.compaction.reading.facts import user_words
from ctxd.compaction.reading.mining import is_request
from ctxd.tree.index import NONE
from ctxd.tree.session import Session

if TYPE_CHECKING:
    from ctxd.compaction.cut.plan import CompactionPlan

MAX_USER_MESSAGES = 200
"""Give up after this many user messages without a request (an automated session)."""

_FOUND: weakref.WeakKeyDictionary[Any, tuple[int, int, str]] = weakref.WeakKeyDictionary()
"""Per session file: (generation, entry index, words) of the first request found on a trunk (a path from the
root without a branch), which every later leaf of that tree passes through."""


def _cached(session: Session, leaf: int) -> str | None:
    found = _FOUND.get(session.file)
    if found is None or found[0] != session.file.generation:
        return None
    _, index, words = found
    tree = session.tree
    # With one root and no branch above the request, every entry at least as deep descends from it.
    if len(tree.roots) != 1 or tree.depth[leaf] < tree.depth[index] or not _trunk(session, index):
        return None
    return words


def _trunk(session: Session, index: int) -> bool:
    """Whether every entry above ``index`` has one child (so every deeper entry of its tree descends from it)."""
    tree = session.tree
    node = tree.parent[index]
    while node != NONE:
        if len(tree.children.get(node, ())) != 1:
            return False
        node = tree.parent[node]
    return True


def first_request(session: Session, leaf_id: str, *, stop_at: Collection[str] = ()) -> str | None:
    """The user's own words of the first request on the path to ``leaf_id``, or None when there is none
    before an entry of ``stop_at`` (the range being summarised: it will find the request itself)."""
    file, tree = session.file, session.tree
    index = file.index.get(leaf_id)
    if index is None:
        return None
    cached = _cached(session, index)
    if cached is not None:
        return cached
    heads = file.heads
    seen = 0
    for i in tree.path_to_root(index):
        head = heads[i]
        if head.id in stop_at:
            return None
        if head.type != "message" or head.message is None or head.message.role != "user":
            continue
        seen += 1
        if seen > MAX_USER_MESSAGES:
            return None
        message = file.entry(i).get("message")
        if isinstance(message, dict):
            words = user_words(message)
            if is_request(words):
                if _trunk(session, i):
                    _FOUND[session.file] = (file.generation, i, words)
                return words
    return None


def session_goal(session: Session, plan: CompactionPlan) -> str | None:
    """The session's first request when it lies before ``plan``'s range, else None (see the module doc)."""
    if plan.previousCompactionId is None:
        return None
    previous = session.file.entry_by_id(plan.previousCompactionId)
    details = previous.get("details")
    ledger = details.get("ctxd") if isinstance(details, dict) else None
    goal = ledger.get("goal") if isinstance(ledger, dict) else None
    if isinstance(goal, str) and goal.strip():
        return goal
    starts = plan.summarizeEntryIds[:1] or plan.turnPrefixEntryIds[:1]
    return first_request(session, plan.leafId, stop_at=starts) if starts else None
