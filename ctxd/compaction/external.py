"""Summaries of messages a client hands over: an agent's own compaction preparation (pi's
``session_before_compact``) or the branch it is leaving (pi's ``session_before_tree``).

Nothing is read from or written to a session file: the agent owns the file and writes the entry
itself.  The summary is made exactly as for ctxd's own compactions (``summarize_plan``: the
summariser with its chunking, the pruned-input retry, the offline fallback, the file lists) and
``details`` carries the same ledger (``details.ctxd``), so that ``session/ledger`` reads the entry
the agent writes as one of ctxd's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from ctxd.compaction.cut.plan import CompactionPlan
from ctxd.compaction.engine import Summarized, pi_usage, summarize_plan, summarizer_for
from ctxd.compaction.ledger import Ledger
from ctxd.compaction.ledger.at_cut import PlanFacts, message_where, plan_ledger, previous_ledger, previous_plans
from ctxd.compaction.ledger.update import absorb, seed
from ctxd.compaction.reading.fileops import FileOps, extract_file_ops, file_lists, format_file_blocks
from ctxd.compaction.settings import CompactionSettings
from ctxd.compaction.summary import (
    OfflineSummarizer,
    Progress,
    Summarizer,
    SummarizerError,
    SummaryRequest,
)
from ctxd.context.rules import entry_message
from ctxd.context.tokens import estimate_tokens, js_len


@attrs.define
class Preparation:
    """What an agent decided to compact (pi's ``CompactionPreparation``, made JSON)."""

    messages: list[dict[str, Any]]
    """The messages the summary replaces, oldest first."""
    turn_prefix: list[dict[str, Any]] = attrs.field(factory=list)
    """The start of a turn split by the cut (its tail stays verbatim)."""
    previous_summary: str | None = None
    previous_details: Mapping[str, Any] | None = None
    """The previous compaction's ``details``: its file lists carry over."""
    file_ops: Mapping[str, Iterable[str]] | None = None
    """``{"read", "written", "edited"}``: the agent's own file tracking, merged with ctxd's."""
    first_kept_entry_id: str = ""
    tokens_before: int = 0
    entry_ids: list[str] = attrs.field(factory=list)
    """The entry ids of ``messages`` when the agent sends them (where the ledger's facts were seen)."""
    turn_prefix_entry_ids: list[str] = attrs.field(factory=list)
    previous_ledger: Mapping[str, Any] | None = None
    """An earlier compaction's ledger, used when ``previous_details`` has none (see :func:`carried_ledger`)."""


def plan_from_preparation(prep: Preparation) -> CompactionPlan:
    """The plan ctxd would have made, from what the agent prepared (file lists merged)."""
    ops = extract_file_ops([*prep.messages, *prep.turn_prefix])
    given = prep.file_ops or {}
    ops.update(
        FileOps(
            read=set(_strings(given.get("read"))),
            written=set(_strings(given.get("written"))),
            edited=set(_strings(given.get("edited"))),
        )
    )
    read_files, modified_files = file_lists(ops, prep.previous_details)
    replaced = sum(estimate_tokens(m) for m in [*prep.messages, *prep.turn_prefix])
    if prep.previous_summary:
        replaced += (js_len(prep.previous_summary) + 3) // 4
    return CompactionPlan(
        leafId="",
        firstKeptEntryId=prep.first_kept_entry_id,
        firstKeptLine=0,
        isSplitTurn=bool(prep.turn_prefix),
        turnStartLine=None,
        messagesToSummarize=prep.messages,
        turnPrefixMessages=prep.turn_prefix,
        tokensBefore=prep.tokens_before,
        # What stays verbatim, estimated from the agent's figure (the summary is added later).
        estimatedTokensAfter=max(0, prep.tokens_before - replaced),
        previousSummary=prep.previous_summary,
        previousCompactionId=None,
        readFiles=read_files,
        modifiedFiles=modified_files,
        summarizeEntryIds=list(prep.entry_ids) if len(prep.entry_ids) == len(prep.messages) else [],
        turnPrefixEntryIds=list(prep.turn_prefix_entry_ids)
        if len(prep.turn_prefix_entry_ids) == len(prep.turn_prefix)
        else [],
        keptMessages=0,
    )


async def summarize_preparation(
    prep: Preparation,
    settings: CompactionSettings,
    *,
    trigger: str,
    instructions: str | None = None,
    summarizer: Summarizer | None = None,
    progress: Progress | None = None,
    model_window: int | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Summarized:
    """The summary and ledger for an agent's compaction; writes nothing.

    ``model_window`` is the summarising model's window when the caller knows it (chunks are sized
    to it); without it litellm's model map decides.  The must-keep check applies; the session's goal
    comes from the previous compaction's ledger when ctxd made it (else the range or the previous
    summary holds it)."""
    started = clock()
    chosen = summarizer or summarizer_for(settings, context_window=model_window)
    ledger = (prep.previous_details or {}).get("ctxd")
    goal = ledger.get("goal") if isinstance(ledger, Mapping) and isinstance(ledger.get("goal"), str) else None
    previous = carried_ledger(prep)

    async def facts(plan: CompactionPlan) -> PlanFacts:
        where = message_where([*prep.messages, *prep.turn_prefix], [*prep.entry_ids, *prep.turn_prefix_entry_ids])
        plans = previous_plans(prep.previous_details)
        return plan_ledger(plan, (previous.goal if previous else None) or goal, previous, where, plans)

    return await summarize_plan(
        plan_from_preparation(prep),
        settings,
        trigger=trigger,
        instructions=instructions or settings.custom_instructions,
        summarizer=chosen,
        progress=progress,
        facts=facts,
        started=started,
        clock=clock,
    )


def carried_ledger(prep: Preparation) -> Ledger | None:
    """The ledger to carry: the previous compaction's; else an earlier one the agent sent, with the must-keep
    facts of the previous summary (the agent's own, which updated every summary since) seeded into it."""
    previous = previous_ledger(prep.previous_details)
    if previous is not None or prep.previous_ledger is None:
        return previous
    earlier = Ledger.from_json(dict(prep.previous_ledger))
    if earlier is not None and prep.previous_summary:
        earlier.compactions += 1
        absorb(earlier, seed(prep.previous_summary), earlier.compactions)
    return earlier


def compaction_result(made: Summarized) -> dict[str, Any]:
    """What an agent needs to write the entry (pi's ``CompactionResult``) and how it was made."""
    ledger = made.details["ctxd"]
    return {
        "summary": made.summary,
        "firstKeptEntryId": made.plan.firstKeptEntryId,
        "tokensBefore": made.plan.tokensBefore,
        "tokensAfter": ledger["tokensAfter"],
        "details": made.details,
        "usage": pi_usage(made.result.usage, made.result.cost) if made.result.usage else None,
        "path": made.path,
        "summarizer": made.result.summarizer,
        "model": made.result.model,
        "failures": made.failures,
        "durationMs": ledger["durationMs"],
    }


# --- branch summaries ---------------------------------------------------------------------------


def branch_messages(entries: list[dict[str, Any]], budget: int) -> tuple[list[dict[str, Any]], FileOps]:
    """The messages of a branch's entries to summarise, oldest first, the newest kept within
    ``budget`` tokens (tool results skipped: the calls say what they did), as pi prepares them;
    and the file operations of all of them, earlier branch summaries' lists included."""
    ops = FileOps()
    for entry in entries:
        details = entry.get("details")
        if entry.get("type") == "branch_summary" and isinstance(details, Mapping):
            ops.read.update(_strings(details.get("readFiles")))
            ops.edited.update(_strings(details.get("modifiedFiles")))
    picked: list[dict[str, Any]] = []
    used = 0
    for entry in reversed(entries):
        message = entry_message(entry)
        if message is None or message.get("role") == "toolResult":
            continue
        ops.update(extract_file_ops([message]))
        cost = estimate_tokens(message)
        if budget > 0 and used + cost > budget:
            # A summary is worth squeezing in while there is some room.
            if entry.get("type") in ("compaction", "branch_summary") and used < budget * 0.9:
                picked.append(message)
            break
        picked.append(message)
        used += cost
    picked.reverse()
    return picked, ops


@attrs.define
class BranchSummary:
    summary: str
    details: dict[str, Any]
    usage: dict[str, Any] | None
    path: str
    summarizer: str
    model: str | None
    failures: list[str]
    summarizedMessages: int

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


async def summarize_branch(
    entries: list[dict[str, Any]],
    settings: CompactionSettings,
    *,
    instructions: str | None = None,
    reserve_tokens: int | None = None,
    summarizer: Summarizer | None = None,
    progress: Progress | None = None,
    model_window: int | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> BranchSummary:
    """A summary of a branch an agent is leaving (its entries, oldest first); writes nothing."""
    started = clock()
    window = model_window or settings.resolved_window()
    budget = max(1_000, window - (reserve_tokens if reserve_tokens is not None else settings.reserve_tokens))
    messages, ops = branch_messages(entries, budget)
    read_files, modified_files = file_lists(ops)
    chosen = summarizer or summarizer_for(settings, context_window=model_window)
    request = SummaryRequest(messages=messages, custom_instructions=instructions, kind="branch")
    failures: list[str] = []
    try:
        result = await chosen.summarize(request, progress)
        path = result.path
    except SummarizerError as exc:
        failures.append(f"{chosen.name}: {exc.reason}")
        result = await OfflineSummarizer().summarize(request, progress)
        path = "fallback-offline"
    summary = result.text.rstrip() + format_file_blocks(read_files, modified_files)
    details = {
        "readFiles": read_files,
        "modifiedFiles": modified_files,
        "ctxd": {
            "summarizer": result.summarizer,
            "model": result.model,
            "path": path,
            "usage": result.usage,
            "cost": result.cost,
            "failures": failures,
            "messagesSummarized": len(messages),
            "instructions": instructions,
            "durationMs": int((clock() - started) * 1000),
        },
    }
    return BranchSummary(
        summary=summary,
        details=details,
        usage=pi_usage(result.usage, result.cost) if result.usage else None,
        path=path,
        summarizer=result.summarizer,
        model=result.model,
        failures=failures,
        summarizedMessages=len(messages),
    )


def _strings(value: Any) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        return []
    return [v for v in value if isinstance(v, str)]
