"""Planning a compaction: a pure function of the session, the leaf and the settings.

pi 1.5.2's ``prepareCompaction`` over the session projection (``ctxd.context.project``, context edits
applied): the boundary starts after the previous compaction's projected summary; walk back from the
newest entry summing every entry's estimates until ``keepRecentTokens``; cut at the nearest valid cut
point at or after there (never a tool result); step back over entries that show no messages; if the
cut entry does not itself start a turn, the turn is split and its prefix summarised separately.
System messages are prompt state and are never summarised. The plan writes nothing and calls no
model: it is the dry run.
"""

from __future__ import annotations

from typing import Any

import attrs

from ctxd.compaction.fileops import extract_file_ops, file_lists
from ctxd.context.build import Context, context_size, pinned_tokens
from ctxd.context.project import ProjectedEntry, Projection, entry_tokens, project
from ctxd.context.rules import current_system_message, is_cut_point, starts_turn
from ctxd.context.tokens import estimate_tokens
from ctxd.tree.session import Session


@attrs.define
class CompactionPlan:
    leafId: str
    firstKeptEntryId: str
    firstKeptLine: int
    isSplitTurn: bool
    turnStartLine: int | None
    messagesToSummarize: list[dict[str, Any]]
    turnPrefixMessages: list[dict[str, Any]]
    tokensBefore: int
    estimatedTokensAfter: int
    previousSummary: str | None
    previousCompactionId: str | None
    readFiles: list[str]
    modifiedFiles: list[str]
    summarizeEntryIds: list[str]
    turnPrefixEntryIds: list[str]
    keptMessages: int
    systemMessage: dict[str, Any] | None = None
    """The prompt state at the leaf (pi's current system message), carried by the compaction entry."""

    def to_json(self, *, with_messages: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "leafId": self.leafId,
            "firstKeptEntryId": self.firstKeptEntryId,
            "firstKeptLine": self.firstKeptLine,
            "isSplitTurn": self.isSplitTurn,
            "turnStartLine": self.turnStartLine,
            "messagesToSummarize": len(self.messagesToSummarize),
            "turnPrefixMessages": len(self.turnPrefixMessages),
            "tokensBefore": self.tokensBefore,
            "estimatedTokensAfter": self.estimatedTokensAfter,
            "keptMessages": self.keptMessages,
            "previousCompactionId": self.previousCompactionId,
            "readFiles": self.readFiles,
            "modifiedFiles": self.modifiedFiles,
            "summarizeEntryIds": self.summarizeEntryIds,
            "turnPrefixEntryIds": self.turnPrefixEntryIds,
        }
        if with_messages:
            out["messages"] = {"summarize": self.messagesToSummarize, "turnPrefix": self.turnPrefixMessages}
        return out


class NothingToCompact(Exception):
    """The leaf is already a compaction, or there is nothing before the kept part."""


def plan_compaction(
    session: Session,
    *,
    keep_recent_tokens: int,
    leaf_id: str | None = None,
    context: Context | None = None,
    summary_tokens: int = 0,
    cut_at: str | None = None,
) -> CompactionPlan:
    """The compaction pi 1.5.2 would prepare at ``leaf_id`` (default: the leaf).

    ``summary_tokens`` is the expected size of the new summary, for ``estimatedTokensAfter``.
    ``cut_at`` forces the first kept entry (a valid cut point after the boundary) instead of the
    token walk.
    Raises NothingToCompact when there is nothing to summarise.
    """
    file, tree = session.file, session.tree
    tree.update()
    leaf = file.require(leaf_id) if leaf_id is not None else file.leaf_index()
    if leaf is None:
        raise NothingToCompact("the session is empty")
    heads = file.heads
    if heads[leaf].type == "compaction":
        raise NothingToCompact("the leaf is already a compaction")
    projection = project(file, tree, leaf)
    entries = projection.entries
    prev, start = boundary(projection, heads)
    tokens_before = (
        context.contextTokens
        if context is not None
        else context_size(file, tree, heads[leaf].id, estimates=session.estimates).tokens
    )
    sizes = [sum(entry_tokens(e, session.estimates)) for e in entries]
    found = find_cut_point(projection, heads, sizes, start, keep_recent_tokens, cut_at=cut_at)
    if found is None:
        raise NothingToCompact("no valid cut point on the path")
    cut, turn_start, split = found.firstKept, found.turnStart, found.isSplitTurn
    if not heads[entries[cut].index].id:
        raise NothingToCompact("the first kept entry has no id")
    history_end = turn_start if split and turn_start is not None else cut

    to_summarize, summarize_ids = _collect(entries[start:history_end], heads)
    prefix, prefix_ids = _collect(entries[history_end:cut], heads) if split else ([], [])
    if not to_summarize and not prefix:
        raise NothingToCompact("everything on the path would be kept")

    previous_summary = None
    previous_details: dict[str, Any] | None = None
    if prev is not None:
        prev_body = projection.bodies[prev]
        previous_summary = str(prev_body.get("summary", "")) or None
        details = prev_body.get("details")
        if isinstance(details, dict) and not prev_body.get("fromHook"):
            previous_details = details
    ops = extract_file_ops([*to_summarize, *prefix])
    read_files, modified_files = file_lists(ops, previous_details)

    # The context after it: the prompt state and the summary, then the kept messages (system
    # messages among them are shown only through the prompt state).
    kept = [m for e in entries[cut:] for m in e.messages if m.get("role") != "system"]
    system = current_system_message(m for e in entries for m in e.messages)
    after = summary_tokens + (estimate_tokens(system) if system is not None else 0)
    after += sum(
        t
        for e in entries[cut:]
        for m, t in zip(e.messages, entry_tokens(e, session.estimates), strict=True)
        if m.get("role") != "system"
    )
    first = entries[cut].index
    # Pinned messages the new summary replaces are carried after it (ctxd.context.pins).
    after += pinned_tokens(file, tree, first, [e.index for e in entries[cut:]])
    return CompactionPlan(
        leafId=heads[leaf].id or "",
        firstKeptEntryId=heads[first].id or "",
        firstKeptLine=file.lines[first],
        isSplitTurn=split,
        turnStartLine=file.lines[entries[turn_start].index] if split and turn_start is not None else None,
        messagesToSummarize=to_summarize,
        turnPrefixMessages=prefix,
        tokensBefore=tokens_before,
        estimatedTokensAfter=after,
        previousSummary=previous_summary,
        previousCompactionId=heads[prev].id if prev is not None else None,
        readFiles=read_files,
        modifiedFiles=modified_files,
        summarizeEntryIds=summarize_ids,
        turnPrefixEntryIds=prefix_ids,
        keptMessages=len(kept),
        systemMessage=system,
    )


@attrs.define
class CutPoint:
    """Positions in the projection's entries (pi's ``CutPointResult``)."""

    firstKept: int
    turnStart: int | None
    isSplitTurn: bool


def boundary(projection: Projection, heads: list[Any]) -> tuple[int | None, int]:
    """The previous compaction (entry index, or None) and the first position that may be summarised.

    The previous compaction counts only while its summary is shown (a context edit can hide it)."""
    entries = projection.entries
    if entries and heads[entries[0].index].type == "compaction" and entries[0].messages:
        return entries[0].index, 1
    return None, 0


def find_cut_point(
    projection: Projection, heads: list[Any], sizes: list[int], start: int, keep: int, *, cut_at: str | None = None
) -> CutPoint | None:
    """pi's ``findProjectedCutPoint`` over ``projection.entries[start:]`` (``sizes``: each entry's
    estimate); ``cut_at`` forces the cut onto that entry when it is a valid cut point. None when there
    is no valid cut point (pi then keeps everything from ``start``)."""
    entries = projection.entries
    cut_points = [k for k in range(start, len(entries)) if _cut_point(entries[k], heads)]
    if not cut_points:
        return None
    forced = [k for k in cut_points if heads[entries[k].index].id == cut_at] if cut_at else []
    cut = forced[0] if forced else _cut_by_tokens(projection, heads, sizes, cut_points, start, keep)
    # Keep adjacent entries that show nothing (settings, labels, hidden entries) with the cut.
    while cut > start:
        previous = entries[cut - 1]
        if heads[previous.index].type == "compaction" or previous.messages:
            break
        cut -= 1
    # A turn is split only when the cut entry itself does not start one.
    if _turn_start(entries[cut], heads):
        return CutPoint(cut, None, False)
    turn_start = next((k for k in range(cut, start - 1, -1) if _turn_start(entries[k], heads)), None)
    return CutPoint(cut, turn_start, turn_start is not None)


def _cut_point(entry: ProjectedEntry, heads: list[Any]) -> bool:
    return heads[entry.index].type != "compaction" and is_cut_point(entry.messages)


def _turn_start(entry: ProjectedEntry, heads: list[Any]) -> bool:
    """pi's ``isProjectedTurnStart``: the entry shows a message that begins a turn."""
    return heads[entry.index].type != "compaction" and starts_turn(entry.messages)


def _cut_by_tokens(
    projection: Projection, heads: list[Any], sizes: list[int], cut_points: list[int], start: int, keep: int
) -> int:
    """pi's ``findProjectedCutPoint`` up to the step back over silent entries."""
    entries = projection.entries
    cut = cut_points[0]
    accumulated = 0
    exceeded = False
    for k in range(len(entries) - 1, start - 1, -1):
        if sizes[k] == 0:
            continue
        accumulated += sizes[k]
        if accumulated >= keep:
            exceeded = True
            cut = next((c for c in cut_points if c >= k), cut_points[-1])
            break
    if exceeded and _recovery_omission_suffix(projection, entries[cut + 1 :], heads):
        cut += 1
    return cut


def _recovery_omission_suffix(projection: Projection, suffix: list[ProjectedEntry], heads: list[Any]) -> bool:
    """pi's recovery-omission rule: after the cut, only a failed assistant attempt that a null
    context edit hid (and the edits themselves) follow; then the cut moves one entry on."""

    def visible(e: ProjectedEntry) -> bool:  # pi's isIntrinsicallyVisible
        return heads[e.index].type != "context_edit" and e.visible

    def omitted(e: ProjectedEntry) -> bool:
        return visible(e) and not e.messages

    omitted_ids = {heads[e.index].id for e in suffix if omitted(e)}
    if any(
        heads[e.index].type == "context_edit"
        and projection.bodies[e.index].get("replacement") is not None
        and heads[e.index].targetId not in omitted_ids
        for e in suffix
    ):
        return False  # a replacement of something else: real content changed
    if not any(_role(heads[e.index]) == "assistant" and omitted(e) for e in suffix):
        return False
    return all(heads[e.index].type != "compaction" and (not visible(e) or omitted(e)) for e in suffix)


def _role(head: Any) -> str | None:
    return head.message.role if head.type == "message" and head.message is not None else None


def _collect(entries: list[ProjectedEntry], heads: list[Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The messages to summarise from ``entries`` (pi's ``getMessagesFromProjectedEntryForCompaction``):
    no compaction's, and no system messages (prompt state, carried by the compaction entry)."""
    msgs: list[dict[str, Any]] = []
    ids: list[str] = []
    for e in entries:
        if heads[e.index].type == "compaction":
            continue
        for m in e.messages:
            if m.get("role") != "system":
                msgs.append(m)
                ids.append(heads[e.index].id or "")
    return msgs, ids
