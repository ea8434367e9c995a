"""Branching: move the leaf (persisted), optionally leaving a summary of the abandoned branch.

pi's rule: from the old leaf back to the deepest common ancestor with the target, take the newest
entries within a token budget (tool results skipped), summarise them, and append a
``branch_summary`` entry as the child of the target, with ``fromId`` = the old leaf and the
branch's file operations in ``details``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import attrs

from ctxd.compaction.engine import Guard, inline, summarizer_for
from ctxd.compaction.reading.fileops import extract_file_ops, file_lists, format_file_blocks
from ctxd.compaction.settings import CompactionSettings
from ctxd.compaction.summary import OfflineSummarizer, Progress, Summarizer, SummarizerError, SummaryRequest
from ctxd.context.rules import entry_message
from ctxd.context.tokens import estimate_tokens
from ctxd.redact import redact
from ctxd.tree.index import NONE
from ctxd.tree.session import Session

BRANCH_RESERVE = 16_384


@attrs.define
class BranchOutcome:
    leafId: str
    previousLeafId: str | None
    summaryEntryId: str | None
    markerId: str | None
    summary: str | None
    summarizedEntries: int
    path: str | None
    readFiles: list[str] = attrs.field(factory=list)
    modifiedFiles: list[str] = attrs.field(factory=list)
    failures: list[str] = attrs.field(factory=list)

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def abandoned_messages(
    session: Session, old_leaf: int, target: int, budget: int
) -> tuple[list[dict[str, Any]], list[str]]:
    """Messages of the branch being left (oldest first), newest kept within ``budget`` tokens."""
    tree = session.tree
    ancestor = tree.common_ancestor(old_leaf, target)
    branch = tree.path_until(old_leaf, ancestor) if ancestor != NONE else tree.path_to_root(old_leaf)
    if ancestor != NONE:
        branch = branch[1:]
    heads = session.file.heads
    wanted = [i for i in branch if heads[i].type in ("message", "custom_message", "branch_summary")]
    picked: list[tuple[dict[str, Any], str]] = []
    used = 0
    for i, body in zip(reversed(wanted), session.file.entries(list(reversed(wanted))), strict=True):
        msg = entry_message(body)
        if msg is None or msg.get("role") == "toolResult":
            continue
        cost = estimate_tokens(msg)
        if used + cost > budget and picked:
            break
        used += cost
        picked.append((msg, heads[i].id or ""))
    picked.reverse()
    return [m for m, _ in picked], [e for _, e in picked]


async def branch(
    session: Session,
    target_id: str,
    *,
    summarize: bool = False,
    settings: CompactionSettings | None = None,
    summarizer: Summarizer | None = None,
    instructions: str | None = None,
    progress: Progress | None = None,
    guard: Guard[Any] = inline,
) -> BranchOutcome:
    """Move the leaf to ``target_id``; with ``summarize``, leave a summary of the branch left.

    Reading and writing the session run inside ``guard`` (the daemon runs them off its loop)."""
    settings = settings or CompactionSettings()
    target = session.file.require(target_id)
    old = session.leaf()
    old_id = session.leaf_id()
    if not summarize or old is None or old == target:
        marker = await guard(lambda: session.move_leaf(target_id)) if old != target else None
        return BranchOutcome(target_id, old_id, None, marker, None, 0, None)
    budget = max(1_000, settings.resolved_window() - BRANCH_RESERVE)
    messages, _ids = await guard(lambda: abandoned_messages(session, old, target, budget))
    if not messages:
        marker = await guard(lambda: session.move_leaf(target_id))
        return BranchOutcome(target_id, old_id, None, marker, None, 0, None)
    chosen = summarizer or summarizer_for(settings)
    request = SummaryRequest(messages=messages, custom_instructions=instructions, kind="branch")
    failures: list[str] = []
    try:
        result = await chosen.summarize(request, progress)
    except SummarizerError as exc:
        # Kept on disk and reported: never a key a provider echoed.
        failures.append(redact(f"{chosen.name}: {exc.reason}"))
        result = await OfflineSummarizer().summarize(request, progress)
    read_files, modified_files = file_lists(extract_file_ops(messages))
    summary = result.text.rstrip() + format_file_blocks(read_files, modified_files)
    entry = {
        "type": "branch_summary",
        "fromId": old_id or "root",
        "summary": summary,
        "details": {
            "readFiles": read_files,
            "modifiedFiles": modified_files,
            "ctxd": {
                "summarizer": result.summarizer,
                "model": result.model,
                "path": result.path if not failures else "fallback-offline",
                "usage": result.usage,
                "cost": result.cost,
                "failures": failures,
                "messagesSummarized": len(messages),
                "at": time.time(),
            },
        },
    }
    (entry_id,) = await guard(lambda: session.append([entry], parent_id=target_id))
    return BranchOutcome(
        leafId=entry_id,
        previousLeafId=old_id,
        summaryEntryId=entry_id,
        markerId=None,
        summary=summary,
        summarizedEntries=len(messages),
        path=result.path if not failures else "fallback-offline",
        readFiles=read_files,
        modifiedFiles=modified_files,
        failures=failures,
    )


def branch_with_summary(session: Session, target_id: str, *, model: str | None = None) -> BranchOutcome:
    """Synchronous form for the CLI."""
    return asyncio.run(branch(session, target_id, summarize=True, settings=CompactionSettings(model=model)))
