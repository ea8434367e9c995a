"""pi 1.5.2's session projection: the entries a context is made of, each with the messages it shows.

``buildContextEntries`` + ``buildSessionProjection`` (session-manager.ts): on the path from the root
to the leaf, the latest compaction comes first, then the entries from its ``firstKeptEntryId`` up to
it (system messages left out: the compaction's ``systemMessage`` carries the prompt state), then
every entry after it. Each entry keeps its messages after the latest context edit that targets it.
Context building, the context size and compaction planning all read this one projection, and
``projected_estimate`` is pi's ``estimateProjectedContextTokens`` over it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ctxd.context.rules import (
    USAGE_INVALIDATORS,
    apply_edit,
    current_system_message,
    entry_messages,
    is_system,
    may_yield,
)
from ctxd.context.tokens import ContextEstimate, estimate_context, estimate_tokens
from ctxd.store.session_file import SessionFile
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


def project(session: SessionFile, tree: TreeIndex, leaf: int) -> Projection:
    """The projection at ``leaf``: reads the bodies of the entries that may contribute."""
    path = context_path(tree, leaf)
    heads = session.heads
    wanted = [
        i
        for k, i in enumerate(path.indices)
        if heads[i].type == "context_edit" or (may_yield(heads[i]) and not (k > 0 and heads[i].type == "compaction"))
    ]
    bodies = dict(zip(wanted, session.entries(wanted), strict=True))
    edits: dict[str, Any] = {}
    for i in path.indices:
        if heads[i].type == "context_edit":
            body = bodies[i]
            edits[str(body.get("targetId", ""))] = body.get("replacement")
    entries: list[ProjectedEntry] = []
    for k, i in enumerate(path.indices):
        head = heads[i]
        if head.type == "compaction" and k > 0:
            # An older compaction inside the kept range: its summary was folded into the newest one.
            entries.append(ProjectedEntry(i, [], True, False))
            continue
        found = bodies.get(i)
        messages = entry_messages(found) if found is not None else []
        visible = bool(messages)
        edited = head.id is not None and head.id in edits
        if edited:
            messages = apply_edit(messages, edits[head.id or ""])
        entries.append(ProjectedEntry(i, messages, visible, edited))
    return Projection(path, entries, bodies)


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


def projected_estimate(
    projection: Projection, heads: list[Any], messages: list[Mapping[str, Any]], tokens: list[int], owners: list[int]
) -> ContextEstimate:
    """pi's ``estimateProjectedContextTokens``: the last valid usage plus what follows it, unless a
    compaction or context edit on the path came after that usage; then the current system message
    plus every other message, estimated.

    ``messages``/``tokens``/``owners``: the projection's messages, their estimates, and the position
    in ``projection.entries`` each came from.
    """
    estimate = estimate_context(list(messages), tokens)
    if estimate.lastUsageIndex is not None:
        k = owners[estimate.lastUsageIndex]
        # Entries before ``after`` precede the compaction on the path; from there on, path order.
        later = projection.entries[k + 1 :]
        if k >= projection.path.after and not any(heads[e.index].type in USAGE_INVALIDATORS for e in later):
            return estimate
    return system_and_rest(messages, tokens)


def system_and_rest(messages: list[Mapping[str, Any]], tokens: list[int]) -> ContextEstimate:
    """The estimate without trusted usage: the current system message once, plus every other message."""
    system = current_system_message(messages)
    total = estimate_tokens(system) if system is not None else 0
    total += sum(t for m, t in zip(messages, tokens, strict=True) if m.get("role") != "system")
    return ContextEstimate(total, 0, total, None)
