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

from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

import attrs

from ctxd.compaction.cut.rows import Rows, file_ops_of, messages_of
from ctxd.compaction.reading.fileops import FileOps, file_lists
from ctxd.context.answers import Context
from ctxd.context.live import live_context
from ctxd.context.live_state import LazyRow, State
from ctxd.context.project import ProjectedEntry, Projection
from ctxd.context.rows import ContextMessage
from ctxd.context.rules import CUT_POINT_ROLES, TURN_START_ROLES
from ctxd.context.size import pinned_tokens
from ctxd.tree.session import Session


@attrs.define
class CompactionPlan:
    leafId: str
    firstKeptEntryId: str
    firstKeptLine: int
    isSplitTurn: bool
    turnStartLine: int | None
    _to_summarize: list[dict[str, Any]] | Rows = attrs.field(alias="messagesToSummarize")
    _turn_prefix: list[dict[str, Any]] | Rows = attrs.field(alias="turnPrefixMessages")
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
    cwd: str | None = None
    """The session's working directory (its header's): the project a summary's paths are relative to."""

    @property
    def messagesToSummarize(self) -> list[dict[str, Any]]:
        """The messages to summarise (decoded when first read: see ``ctxd.compaction.cut.rows``)."""
        found = self._to_summarize = messages_of(self._to_summarize)
        return found

    @property
    def turnPrefixMessages(self) -> list[dict[str, Any]]:
        found = self._turn_prefix = messages_of(self._turn_prefix)
        return found

    def to_json(self, *, with_messages: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "leafId": self.leafId,
            "firstKeptEntryId": self.firstKeptEntryId,
            "firstKeptLine": self.firstKeptLine,
            "isSplitTurn": self.isSplitTurn,
            "turnStartLine": self.turnStartLine,
            "messagesToSummarize": len(self._to_summarize),
            "turnPrefixMessages": len(self._turn_prefix),
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

    It reads the session's kept context (``ctxd.context.live``): the walk back from the leaf
    visits only the kept part, the messages to summarise are slices, and the file operations of
    the summarised range are carried from the previous plan; so a plan costs what changed since.
    """
    file, tree = session.file, session.tree
    tree.update()
    leaf = file.require(leaf_id) if leaf_id is not None else file.leaf_index()
    if leaf is None:
        raise NothingToCompact("the session is empty")
    heads = file.heads
    if heads[leaf].type == "compaction":
        raise NothingToCompact("the leaf is already a compaction")
    st = live_context(session).at_index(leaf)
    projection = st.projection()
    entries = projection.entries
    prev, start = boundary(projection, heads)
    tokens_before = context.contextTokens if context is not None else st.tokens()
    found = find_cut_point(projection, heads, st.sizes(), start, keep_recent_tokens, cut_at=cut_at)
    if found is None:
        raise NothingToCompact("no valid cut point on the path")
    cut, turn_start, split = found.firstKept, found.turnStart, found.isSplitTurn
    if not heads[entries[cut].index].id:
        raise NothingToCompact("the first kept entry has no id")
    history_end = turn_start if split and turn_start is not None else cut

    to_summarize, summarize_ids = _collect(st, start, history_end)
    prefix, prefix_ids = _collect(st, history_end, cut) if split else ([], [])
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
    ops = _summarized_ops(st, start, history_end)
    ops.update(file_ops_of(prefix))
    read_files, modified_files = file_lists(ops, previous_details)

    # The context after it: the prompt state and the summary, then the kept messages (system
    # messages among them are shown only through the prompt state).
    n = len(st.messages)
    kept_from = st.start[cut]
    kept = (n - kept_from) - (len(st.systems) - bisect_left(st.systems, kept_from))
    system, system_tokens = st.system()
    after = summary_tokens + system_tokens + st.cum_other[n] - st.cum_other[kept_from]
    first = entries[cut].index
    # Pinned messages the new summary replaces are carried after it (ctxd.context.pins).
    after += pinned_tokens(file, tree, first, [e.index for e in entries[cut:]])
    return CompactionPlan(
        leafId=heads[leaf].id or "",
        firstKeptEntryId=heads[first].id or "",
        firstKeptLine=file.lines[first],
        isSplitTurn=split,
        turnStartLine=file.lines[entries[turn_start].index] if split and turn_start is not None else None,
        messagesToSummarize=Rows(to_summarize),
        turnPrefixMessages=Rows(prefix),
        tokensBefore=tokens_before,
        estimatedTokensAfter=after,
        previousSummary=previous_summary,
        previousCompactionId=heads[prev].id if prev is not None else None,
        readFiles=read_files,
        modifiedFiles=modified_files,
        summarizeEntryIds=summarize_ids,
        turnPrefixEntryIds=prefix_ids,
        keptMessages=kept,
        systemMessage=system,
        cwd=file.cwd or None,
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
    projection: Projection,
    heads: list[Any],
    sizes: Sequence[int],
    start: int,
    keep: int,
    *,
    cut_at: str | None = None,
) -> CutPoint | None:
    """pi's ``findProjectedCutPoint`` over ``projection.entries[start:]`` (``sizes``: each entry's
    estimate); ``cut_at`` forces the cut onto that entry when it is a valid cut point. None when there
    is no valid cut point (pi then keeps everything from ``start``).

    It looks only as far as it must: back from the newest entry until ``keep`` tokens, then to the
    nearest cut point and turn start."""
    entries = projection.entries
    forced = None
    if cut_at:
        forced = next(
            (
                k
                for k in range(start, len(entries))
                if heads[entries[k].index].id == cut_at and _cut_point(entries[k], heads)
            ),
            None,
        )
    cut = forced if forced is not None else _cut_by_tokens(projection, heads, sizes, start, keep)
    if cut is None:
        return None
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
    return heads[entry.index].type != "compaction" and not CUT_POINT_ROLES.isdisjoint(_roles(entry))


def _turn_start(entry: ProjectedEntry, heads: list[Any]) -> bool:
    """pi's ``isProjectedTurnStart``: the entry shows a message that begins a turn."""
    return heads[entry.index].type != "compaction" and not TURN_START_ROLES.isdisjoint(_roles(entry))


def _roles(entry: ProjectedEntry | LazyRow) -> list[Any]:
    """The roles of the messages an entry shows (a lazy row's from the index, without decoding it)."""
    if isinstance(entry, LazyRow):
        return [entry.role]
    return [m.get("role") for m in entry.messages]


def _cut_by_tokens(projection: Projection, heads: list[Any], sizes: Sequence[int], start: int, keep: int) -> int | None:
    """pi's ``findProjectedCutPoint`` up to the step back over silent entries: the nearest cut point
    at or after the entry where the newest ``keep`` tokens begin (else the last cut point), or the
    first cut point when the whole range is smaller; None when there is no cut point at all."""
    entries = projection.entries
    n = len(entries)
    accumulated = 0
    for k in range(n - 1, start - 1, -1):
        size = sizes[k]
        if size == 0:
            continue
        accumulated += size
        if accumulated >= keep:
            cut = next((c for c in range(k, n) if _cut_point(entries[c], heads)), None)
            if cut is None:  # none at or after it: the last one before it
                cut = next((c for c in range(k - 1, start - 1, -1) if _cut_point(entries[c], heads)), None)
            if cut is not None and _recovery_omission_suffix(projection, entries[cut + 1 :], heads):
                cut += 1
            return cut
    return next((c for c in range(start, n) if _cut_point(entries[c], heads)), None)


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


def _collect(st: State, a: int, b: int) -> tuple[list[ContextMessage], list[str]]:
    """The rows of the messages to summarise from entries ``a`` to ``b`` (pi's
    ``getMessagesFromProjectedEntryForCompaction``): no compaction's, and no system messages (prompt
    state, carried by the compaction entry). Slices of the kept context when no system message is
    in the range."""
    pa, pb = _message_range(st, a, b)
    systems = st.systems
    first_system = bisect_left(systems, pa)
    if first_system == len(systems) or systems[first_system] >= pb:
        return st.messages[pa:pb], st.ids[pa:pb]
    keep = [p for p in range(pa, pb) if st.messages[p].role != "system"]
    return [st.messages[p] for p in keep], [st.ids[p] for p in keep]


def _message_range(st: State, a: int, b: int) -> tuple[int, int]:
    """Message positions of entries ``a`` to ``b``, leaving out a compaction's (only the first entry
    can show one: older compactions in the kept range show nothing)."""
    n = len(st.entries)
    pa = st.start[a] if a < n else len(st.messages)
    pb = st.start[b] if b < n else len(st.messages)
    if a == 0 and n and st.path.compaction == st.entries[0].index:
        pa = max(pa, st.entry_end(0))
    return pa, max(pa, pb)


@attrs.define
class _OpsSoFar:
    """File operations of the messages from ``origin`` to ``upto``, carried from plan to plan."""

    origin: int
    upto: int
    ops: FileOps


def _summarized_ops(st: State, a: int, b: int) -> FileOps:
    """File operations of the messages to summarise from entries ``a`` to ``b``: what the previous
    plan found, plus the messages since (the summarised range only grows while the session does)."""
    pa, pb = _message_range(st, a, b)
    carried = st.plan_cache
    if not isinstance(carried, _OpsSoFar) or carried.origin != pa or carried.upto > pb:
        carried = st.plan_cache = _OpsSoFar(pa, pa, FileOps())
    if pb > carried.upto:
        carried.ops.update(file_ops_of(st.messages[carried.upto : pb]))
        carried.upto = pb
    out = FileOps()
    out.update(carried.ops)
    return out
