"""Planning a compaction: a pure function of the session, the leaf and the settings.

pi 1.5.2's rules: the boundary starts at the previous compaction's ``firstKeptEntryId`` (not at the
compaction itself, which lost messages in pi 0.58, #2608); walk back from the newest entry summing
estimates until ``keepRecentTokens``; cut at the nearest valid cut point at or after there (never
a tool result); if the cut is not a user message the turn is split and its prefix summarised
separately.  The plan writes nothing and calls no model: it is the dry run.
"""

from __future__ import annotations

from typing import Any

import attrs

from ctxd.compaction.fileops import extract_file_ops, file_lists
from ctxd.context.build import Context, context_size, entry_message
from ctxd.context.tokens import estimate_tokens
from ctxd.tree.index import NONE
from ctxd.tree.session import Session

CUT_ROLES = frozenset({"user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"})
TURN_START_ROLES = frozenset({"user", "bashExecution"})


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
    """The compaction pi 1.5.2 would make at ``leaf_id`` (default: the leaf).

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
    prev = tree.last_compaction[leaf]
    if prev != NONE:
        fk_id = heads[prev].firstKeptEntryId
        fk = file.index.get(fk_id) if fk_id else None
        start = fk if fk is not None and tree.is_ancestor(fk, prev) else prev
        path = tree.path_until(leaf, start)
        if start == prev:
            path = path[1:]
    else:
        path = tree.path_to_root(leaf)
    tokens_before = (
        context.contextTokens
        if context is not None
        else context_size(file, tree, heads[leaf].id, estimates=session.estimates).tokens
    )

    # Bodies of the entries that can contribute (the compaction itself never does: its summary is
    # carried as ``previousSummary``).
    kinds = ("message", "custom_message", "branch_summary")
    wanted = [i for i in path if heads[i].type in kinds]
    messages = {i: entry_message(body) for i, body in zip(wanted, file.entries(wanted), strict=True)}

    def tokens(i: int) -> int:
        cached = session.estimates.get(i)
        if cached is None:
            msg = messages.get(i)
            cached = session.estimates[i] = estimate_tokens(msg) if msg is not None else 0
        return cached

    def role(i: int) -> str | None:
        head = heads[i]
        if head.type == "message":
            return head.message.role if head.message is not None else None
        if head.type == "custom_message":
            return "custom"
        if head.type == "branch_summary":
            return "branchSummary"
        return None

    cut_points = [k for k, i in enumerate(path) if role(i) in CUT_ROLES]
    if not cut_points:
        raise NothingToCompact("no valid cut point on the path")
    cut = cut_points[0]
    accumulated = 0
    forced = [k for k in cut_points if heads[path[k]].id == cut_at] if cut_at else []
    for k in range(len(path) - 1, -1, -1) if not forced else ():
        i = path[k]
        if heads[i].type != "message":
            continue
        accumulated += tokens(i)
        if accumulated >= keep_recent_tokens:
            cut = next((c for c in cut_points if c >= k), cut_points[-1])
            break
    if forced:
        cut = forced[0]
    # Keep settings and other non-message entries just before the cut with it.
    while cut > 0 and heads[path[cut - 1]].type not in ("message", "compaction"):
        cut -= 1

    cut_role = role(path[cut])
    turn_start: int | None = None
    if cut_role != "user":
        for k in range(cut, -1, -1):
            r = role(path[k])
            if r in TURN_START_ROLES or heads[path[k]].type in ("custom_message", "branch_summary"):
                turn_start = k
                break
    split = cut_role != "user" and turn_start is not None
    history_end = turn_start if split and turn_start is not None else cut

    def collect(lo: int, hi: int) -> tuple[list[dict[str, Any]], list[str]]:
        msgs, ids = [], []
        for i in path[lo:hi]:
            msg = messages.get(i)
            if msg is not None and heads[i].type != "compaction":
                msgs.append(msg)
                ids.append(heads[i].id or "")
        return msgs, ids

    to_summarize, summarize_ids = collect(0, history_end)
    prefix, prefix_ids = collect(history_end, cut) if split else ([], [])
    if not to_summarize and not prefix:
        raise NothingToCompact("everything on the path would be kept")

    previous_summary = None
    previous_details: dict[str, Any] | None = None
    if prev != NONE:
        prev_body = file.entry(prev)
        previous_summary = str(prev_body.get("summary", "")) or None
        details = prev_body.get("details")
        if isinstance(details, dict) and not prev_body.get("fromHook"):
            previous_details = details
    ops = extract_file_ops([*to_summarize, *prefix])
    read_files, modified_files = file_lists(ops, previous_details)

    kept = [i for i in path[cut:] if messages.get(i) is not None]
    after = summary_tokens + sum(tokens(i) for i in kept)
    return CompactionPlan(
        leafId=heads[leaf].id or "",
        firstKeptEntryId=heads[path[cut]].id or "",
        firstKeptLine=file.lines[path[cut]],
        isSplitTurn=split,
        turnStartLine=file.lines[path[turn_start]] if split and turn_start is not None else None,
        messagesToSummarize=to_summarize,
        turnPrefixMessages=prefix,
        tokensBefore=tokens_before,
        estimatedTokensAfter=after,
        previousSummary=previous_summary,
        previousCompactionId=heads[prev].id if prev != NONE else None,
        readFiles=read_files,
        modifiedFiles=modified_files,
        summarizeEntryIds=summarize_ids,
        turnPrefixEntryIds=prefix_ids,
        keptMessages=len(kept),
    )
