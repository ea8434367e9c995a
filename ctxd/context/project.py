"""pi 1.5.2's session projection: the entries a context is made of, each with the messages it shows.

``buildContextEntries`` + ``buildSessionProjection`` (session-manager.ts): on the path from the root
to the leaf, the latest compaction comes first, then the entries from its ``firstKeptEntryId`` up to
it (system messages left out: the compaction's ``systemMessage`` carries the prompt state), then
every entry after it. Each entry keeps its messages after the latest context edit that targets it.
Context building (``ctxd.context.live``, which keeps pi's ``estimateProjectedContextTokens`` over
the projection), the context size and compaction planning all read this one projection.
"""

from __future__ import annotations

from typing import Any

import attrs

from ctxd.context.rules import is_system
from ctxd.context.tokens import estimate_tokens
from ctxd.tree.index import NONE, TreeIndex


@attrs.define
class ContextPath:
    """The entries a context is made of, in pi's order, before any body is read."""

    leaf: int
    compaction: int
    """Index of the latest compaction on the path, or NONE."""
    indices: list[int]
    """Entry indices in projection order: the compaction, the kept entries before it, the rest."""
    after: int
    """Position in ``indices`` of the first entry after the compaction (0 without one)."""
    first_kept_found: bool


def context_path(tree: TreeIndex, leaf: int) -> ContextPath:
    """pi's ``buildContextEntries`` on the index alone."""
    comp = tree.last_compaction[leaf]
    if comp == NONE:
        return ContextPath(leaf, NONE, tree.path_to_root(leaf), 0, True)
    session = tree.session
    first_kept_id = session.heads[comp].firstKeptEntryId
    fk = session.index.get(first_kept_id) if first_kept_id else None
    found = fk is not None and tree.is_ancestor(fk, comp)
    path = tree.path_until(leaf, fk if found and fk is not None else comp)
    pos = path.index(comp)
    heads = session.heads
    kept = [i for i in path[:pos] if not is_system(heads[i])]
    return ContextPath(leaf, comp, [comp, *kept, *path[pos + 1 :]], 1 + len(kept), found)


@attrs.define
class ProjectedEntry:
    index: int
    messages: list[dict[str, Any]]
    """Model-visible messages after context edits (empty for state-only and hidden entries)."""
    visible: bool
    """Whether the entry yields messages before edits (pi's "intrinsically visible")."""
    edited: bool


@attrs.define
class Projection:
    path: ContextPath
    entries: list[ProjectedEntry]
    bodies: dict[int, dict[str, Any]]
    """Decoded bodies of the entries read (those that may yield messages, and context edits)."""

    @property
    def compaction(self) -> int:
        return self.path.compaction


def entry_tokens(entry: ProjectedEntry, estimates: dict[int, int] | None) -> list[int]:
    """Estimates of an entry's projected messages. ``estimates`` caches, per entry index, the
    estimate of the entry's own unedited message (a compaction's summary, not its system message)."""
    if not entry.messages:
        return []
    out = [estimate_tokens(m) for m in entry.messages[:-1]]
    if estimates is None or entry.edited:
        out.append(estimate_tokens(entry.messages[-1]))
    else:
        cached = estimates.get(entry.index)
        if cached is None:
            cached = estimates[entry.index] = estimate_tokens(entry.messages[-1])
        out.append(cached)
    return out
