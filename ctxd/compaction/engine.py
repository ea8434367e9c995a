"""Running a compaction: plan, ask the summariser (with fallbacks), write one complete entry.

The entry is the child of the leaf that was summarised, captured when the compaction started,
whatever happened to the leaf meanwhile (pi #9178).  Nothing is written unless a whole summary
exists: a failure or a cancellation leaves the file as it was.  When the model fails, ctxd falls
back (seed 002): first a model call on a pruned input, then keeping the last N turns verbatim with
the offline summariser's digest of the rest.  ``details`` records how the summary was made: it is
the ledger the editors show.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs

from ctxd.compaction.cut.plan import CompactionPlan, NothingToCompact, plan_compaction
from ctxd.compaction.ledger.at_cut import PlanFacts, ledger_before, plan_ledger, plan_where, plans_before
from ctxd.compaction.ledger.goal import session_goal
from ctxd.compaction.ledger.mustkeep import FactSheet, patch_summary, strip_patch
from ctxd.compaction.reading.fileops import format_file_blocks
from ctxd.compaction.settings import CompactionSettings
from ctxd.compaction.summary import (
    OfflineSummarizer,
    Progress,
    Summarizer,
    SummarizerError,
    SummaryRequest,
    SummaryResult,
    create_summarizer,
)
from ctxd.compaction.summary.prune import prune_messages
from ctxd.context.rules import timestamp_ms
from ctxd.context.tokens import estimate_total, js_len
from ctxd.errors import CancelledError, CompactionError
from ctxd.redact import redact
from ctxd.store.files import iso_timestamp
from ctxd.tree.session import Session

SUMMARY_ALLOWANCE_TOKENS = 1_500
"""Expected size of a new summary, for a dry run's ``estimatedTokensAfter``."""
MAX_LEDGER_FACTS = 60
"""The ledger lists at most this many of the facts a summary lacked (the count is always exact)."""
PROMPT_FACT_CHARS = 8_000
"""The fact sheet given to a model summariser up front is rendered within this many characters."""


def fact_sheet(session: Session, plan: CompactionPlan) -> tuple[FactSheet, str | None]:
    """What a summary of ``plan``'s range must keep, and the session's first request when it lies before the
    range (the goal a summary must state, see :mod:`ctxd.compaction.ledger.goal`)."""
    made = session_facts(session, plan)
    return made.sheet, made.goal


def session_facts(session: Session, plan: CompactionPlan) -> PlanFacts:
    """:func:`fact_sheet` with the session's fact ledger: the previous compaction's carried, this range added."""
    previous = None
    if plan.previousCompactionId is not None:
        previous = ledger_before(session, plan.previousCompactionId)
    goal = previous.goal if previous is not None and previous.goal else session_goal(session, plan)
    plans = plans_before(session, plan.previousCompactionId)
    return plan_ledger(plan, goal, previous, plan_where(session, plan), plans)


Facts = Callable[[CompactionPlan], Awaitable[PlanFacts]]
"""A plan's fact sheet, the goal before its range and the ledger (a session's compaction reads the session)."""


async def facts_of_messages(plan: CompactionPlan) -> PlanFacts:
    """The facts of the plan's messages alone (a client's messages: no session to read a goal from)."""
    return plan_ledger(plan, None, None)


PATCH_TARGET_SHARE = 0.10
"""Facts the ledger carried from earlier ranges may bring a summary up to this share of what it summarises: the
share the offline summary takes (:data:`ctxd.compaction.summary.offline.SHARE`)."""
MIN_CARRIED_CHARS = 300
"""Carried facts always get this much room: the most important (the user's constraints and stated facts, open
errors) come first."""


def patch_budget(plan: CompactionPlan) -> int:
    """Characters the ``## Must keep`` patch may take: an eighth of what is summarised, 600 to 12,000."""
    chars = 4 * estimate_total([*plan.messagesToSummarize, *plan.turnPrefixMessages])
    chars += len(plan.previousSummary or "")
    return max(600, min(12_000, chars // 8))


def carried_budget(plan: CompactionPlan, summary: str) -> int:
    """Characters the facts the ledger carried from earlier ranges may take in the patch of ``summary`` (as it
    will be written): what :data:`PATCH_TARGET_SHARE` of what is summarised leaves, at least
    :data:`MIN_CARRIED_CHARS`, at most :func:`patch_budget`. They are shown most important first and the rest
    counted; all stay open in the ledger (``session/facts``) and are checked again by the next compaction."""
    chars = 4 * estimate_total([*plan.messagesToSummarize, *plan.turnPrefixMessages])
    chars += len(plan.previousSummary or "")
    room = int(chars * PATCH_TARGET_SHARE) - len(summary)
    return min(patch_budget(plan), max(MIN_CARRIED_CHARS, room))


@attrs.define
class HookDecision:
    """What a client's ``compact/willRun`` hook answered."""

    cancel: bool = False
    summary: str | None = None


Hook = Callable[[CompactionPlan], Awaitable[HookDecision | None]]
T = TypeVar("T")
Guard = Callable[[Callable[[], T]], Awaitable[T]]
"""Runs a piece of session work (planning, writing) under the caller's lock, maybe off the loop."""


async def inline(fn: Callable[[], T]) -> T:
    return fn()


@attrs.define
class CompactionOutcome:
    entryId: str
    leafId: str
    firstKeptEntryId: str
    tokensBefore: int
    tokensAfter: int
    summary: str
    trigger: str
    path: str
    """How the summary was made: model, model-chunked, offline, hook, fallback-prune, fallback-keep-last-turns."""
    summarizer: str
    model: str | None
    durationMs: int
    usage: dict[str, int] | None
    cost: float | None
    failures: list[str]
    plan: CompactionPlan

    def to_json(self) -> dict[str, Any]:
        out = attrs.asdict(self, recurse=False)
        out["plan"] = self.plan.to_json()
        return out


def summarizer_for(settings: CompactionSettings, *, context_window: int | None = None) -> Summarizer:
    """The summariser ``settings`` name; ``context_window`` is the model's window when known."""
    if not settings.model:
        return OfflineSummarizer(max_tokens=settings.summary_limit())
    return create_summarizer(
        settings.model,
        api_base=settings.api_base,
        api_key=settings.api_key,
        max_output_tokens=settings.output_limit(),
        timeout=settings.timeout_seconds,
        retries=max(0, settings.max_attempts - 1),
        context_window=context_window,
    )


def dry_run(session: Session, settings: CompactionSettings, *, leaf_id: str | None = None) -> CompactionPlan:
    """The plan for a compaction now: writes nothing, calls no model."""
    window = settings.resolved_window()
    plan = plan_compaction(session, keep_recent_tokens=settings.keep_recent(window), leaf_id=leaf_id)
    allowance = SUMMARY_ALLOWANCE_TOKENS
    if plan.previousSummary:
        allowance = max(allowance, (js_len(plan.previousSummary) + 3) // 4)
    plan.estimatedTokensAfter += allowance
    return plan


MUST_KEEP_HEADING = "## What this compaction must keep"
PREVIEW_FACT_CHARS = 12_000


def dry_run_with_facts(
    session: Session, settings: CompactionSettings, *, leaf_id: str | None = None
) -> tuple[CompactionPlan, FactSheet]:
    """:func:`dry_run` and what the compaction must keep."""
    plan = dry_run(session, settings, leaf_id=leaf_id)
    return plan, fact_sheet(session, plan)[0]


def dry_run_json(session: Session, settings: CompactionSettings, *, leaf_id: str | None = None) -> dict[str, Any]:
    """The dry run's JSON: the plan, plus ``mustKeep`` (the fact sheet: ``[{kind, text, probes}]``) and
    ``mustKeepText`` (it as markdown, for a preview)."""
    plan, sheet = dry_run_with_facts(session, settings, leaf_id=leaf_id)
    out = plan.to_json()
    out["mustKeep"] = sheet.to_json()
    out["mustKeepText"] = sheet.render(PREVIEW_FACT_CHARS, heading=MUST_KEEP_HEADING)
    return out


async def compact(
    session: Session,
    settings: CompactionSettings,
    *,
    trigger: str = "manual",
    leaf_id: str | None = None,
    instructions: str | None = None,
    summarizer: Summarizer | None = None,
    progress: Progress | None = None,
    hook: Hook | None = None,
    clock: Callable[[], float] = time.monotonic,
    guard: Guard[Any] = inline,
) -> CompactionOutcome:
    """Compact the session at ``leaf_id`` (default: the leaf now) and return what was written.

    The summariser runs outside ``guard``; reading the session and writing the entry run inside.
    """
    started = clock()
    leaf = leaf_id or session.leaf_id()
    if leaf is None:
        raise CompactionError("the session is empty: nothing to compact", path=session.path)
    window = settings.resolved_window()
    try:
        plan = await guard(
            lambda: plan_compaction(session, keep_recent_tokens=settings.keep_recent(window), leaf_id=leaf)
        )
    except NothingToCompact as exc:
        raise CompactionError(f"nothing to compact: {exc}", path=session.path, leafId=leaf) from exc
    _report(progress, "planned", 0.05)

    result: SummaryResult | None = None
    path = ""
    if hook is not None:
        decision = await hook(plan)
        if decision is not None and decision.cancel:
            raise CancelledError("the client's compact/willRun hook cancelled the compaction")
        if decision is not None and decision.summary:
            result = SummaryResult(decision.summary, "hook", None, "hook")
            path = "hook"

    instructions = instructions or settings.custom_instructions

    async def replan(current: CompactionPlan) -> CompactionPlan:
        replanned: CompactionPlan = await guard(lambda: _keep_last_turns(session, current, settings.keep_last_turns))
        return replanned

    made = await summarize_plan(
        plan,
        settings,
        trigger=trigger,
        instructions=instructions,
        summarizer=summarizer,
        progress=progress,
        result=result,
        path=path,
        replan=replan,
        facts=lambda p: guard(lambda: session_facts(session, p)),
        started=started,
        clock=clock,
    )
    plan, summary, details, result = made.plan, made.summary, made.details, made.result
    duration_ms, path, failures = int(details["ctxd"]["durationMs"]), made.path, made.failures
    # As pi 1.5.2's appendCompaction: the prompt state at the leaf travels with the compaction (the
    # new context shows it before the summary; system messages in the kept part are not shown).
    stamp = iso_timestamp(session.file.clock())
    system = {**plan.systemMessage, "timestamp": timestamp_ms(stamp)} if plan.systemMessage is not None else None
    entry: dict[str, Any] = {
        "type": "compaction",
        "summary": summary,
        "firstKeptEntryId": plan.firstKeptEntryId,
        "tokensBefore": plan.tokensBefore,
        "details": details,
    }
    if result.usage:
        entry["usage"] = pi_usage(result.usage, result.cost)
    if system is not None:
        entry["timestamp"] = stamp
        entry["systemMessage"] = system

    def write() -> str:
        # One complete line, parented at the leaf that was summarised.
        (new_id,) = session.append([entry], parent_id=leaf)
        return new_id

    entry_id = await guard(write)
    tokens_after = int(details["ctxd"]["tokensAfter"])
    _report(progress, "written", 1.0)
    return CompactionOutcome(
        entryId=entry_id,
        leafId=leaf,
        firstKeptEntryId=plan.firstKeptEntryId,
        tokensBefore=plan.tokensBefore,
        tokensAfter=tokens_after,
        summary=summary,
        trigger=trigger,
        path=path,
        summarizer=result.summarizer,
        model=result.model,
        durationMs=duration_ms,
        usage=result.usage,
        cost=result.cost,
        failures=failures,
        plan=plan,
    )


def plan_lines(plan: CompactionPlan, made: PlanFacts) -> tuple[list[int] | None, list[int] | None]:
    """The line of each of the plan's messages in the session file, then of its turn prefix (0 where unknown;
    None when not known at all), read where its facts were: a summary can name its entries as ``L<line>``."""
    count = len(plan.messagesToSummarize)
    lines = [(seen.line or 0) if seen is not None else 0 for seen in made.where]
    if len(lines) != count + len(plan.turnPrefixMessages):
        return None, None
    return lines[:count], lines[count:]


@attrs.define
class Summarized:
    """A summary made for a plan, before anything is written: the text (file blocks appended), the
    ``details`` ledger, and how it was made."""

    plan: CompactionPlan
    summary: str
    details: dict[str, Any]
    result: SummaryResult
    path: str
    failures: list[str]


async def summarize_plan(
    plan: CompactionPlan,
    settings: CompactionSettings,
    *,
    trigger: str,
    instructions: str | None,
    summarizer: Summarizer | None = None,
    progress: Progress | None = None,
    result: SummaryResult | None = None,
    path: str = "",
    replan: Callable[[CompactionPlan], Awaitable[CompactionPlan]] | None = None,
    facts: Facts = facts_of_messages,
    started: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Summarized:
    """Summarise ``plan`` with ``settings``' summariser and its fallbacks; write nothing.

    ``result`` is a summary already made (a hook's).  When the model fails twice, ``replan`` gives
    the plan that keeps the last turns verbatim (a session's compaction); without it (a client's
    messages, which cannot be re-cut) the offline digest covers the same messages.  Every summary,
    however made, is checked against ``facts`` (the must-keep fact sheet) and patched with what it lacks;
    the summariser gets the previous summary without the earlier patches the ledger carries
    (:func:`ctxd.compaction.ledger.mustkeep.strip_patch`).
    """
    started = clock() if started is None else started
    window = settings.resolved_window()
    made = await facts(plan)
    sheet, goal = made.sheet, made.goal
    failures: list[str] = []
    chosen = summarizer or summarizer_for(settings)
    if result is None:
        file_context = format_file_blocks(plan.readFiles, plan.modifiedFiles).strip() or None
        lines, prefix_lines = plan_lines(plan, made)
        request = SummaryRequest(
            messages=plan.messagesToSummarize,
            previous_summary=strip_patch(plan.previousSummary),
            turn_prefix=plan.turnPrefixMessages,
            custom_instructions=instructions,
            file_context=file_context,
            entry_ids=list(plan.summarizeEntryIds),
            turn_prefix_entry_ids=list(plan.turnPrefixEntryIds),
            cwd=plan.cwd,
            entry_lines=lines,
            turn_prefix_entry_lines=prefix_lines,
            first_request=goal,
            must_keep=sheet.render(PROMPT_FACT_CHARS, heading="") or None,
            plan_texts=made.plan_base or None,
        )
        try:
            result = await chosen.summarize(request, _scaled(progress, 0.05, 0.85))
            path = result.path
        except SummarizerError as exc:
            failures.append(f"{chosen.name}: {exc.reason}")

    if result is None:
        # Fallback 1: the same model on a pruned input (no thinking, no images, oversized text cut).
        _report(progress, "model failed; retrying on a pruned input", 0.6)
        pruned = attrs.evolve(
            request,
            messages=prune_messages(plan.messagesToSummarize),
            turn_prefix=prune_messages(plan.turnPrefixMessages),
        )
        try:
            result = await chosen.summarize(pruned, _scaled(progress, 0.6, 0.85))
            path = "fallback-prune"
        except SummarizerError as exc:
            failures.append(f"{chosen.name} (pruned input): {exc.reason}")

    if result is None or _too_big(result.text, window, settings):
        if result is not None:
            failures.append("summary larger than the target: keeping the last turns instead")
        # Fallback 2: keep the last N turns verbatim; the offline digest covers the rest.
        stage = f"keeping the last {settings.keep_last_turns} turns" if replan else "the offline summariser instead"
        _report(progress, stage, 0.85)
        if replan is not None:
            plan = await replan(plan)
        remade = await facts(plan) if replan is not None else made  # the re-cut plan's facts (checked below)
        lines, prefix_lines = plan_lines(plan, remade)
        offline = OfflineSummarizer(max_tokens=settings.summary_limit())
        result = await offline.summarize(
            SummaryRequest(
                messages=plan.messagesToSummarize,
                previous_summary=strip_patch(plan.previousSummary),
                turn_prefix=plan.turnPrefixMessages,
                custom_instructions=instructions,
                first_request=goal,
                entry_ids=list(plan.summarizeEntryIds),
                turn_prefix_entry_ids=list(plan.turnPrefixEntryIds),
                cwd=plan.cwd,
                entry_lines=lines,
                turn_prefix_entry_lines=prefix_lines,
                plan_texts=made.plan_base or None,
            )
        )
        path = "fallback-keep-last-turns" if replan is not None else "fallback-offline"
        if replan is not None:
            made = remade
            sheet, goal = made.sheet, made.goal

    # Every summary, however made, is checked as it will be written (its file blocks appended: they keep the
    # files of earlier ranges) against the fact sheet, and patched with what it lacks.
    whole = result.text.rstrip() + format_file_blocks(plan.readFiles, plan.modifiedFiles)
    summary, missing = patch_summary(
        whole, sheet, max_chars=patch_budget(plan), carried_chars=carried_budget(plan, whole)
    )
    failures = [redact(f) for f in failures]  # kept on disk and reported: never a key a provider echoed
    duration_ms = int((clock() - started) * 1000)
    details: dict[str, Any] = {
        "readFiles": plan.readFiles,
        "modifiedFiles": plan.modifiedFiles,
        "ctxd": {
            "trigger": trigger,
            "path": path,
            "summarizer": result.summarizer,
            "model": result.model,
            "durationMs": duration_ms,
            "usage": result.usage,
            "cost": result.cost,
            "failures": failures,
            "messagesSummarized": len(plan.messagesToSummarize),
            "turnPrefixMessages": len(plan.turnPrefixMessages),
            "instructions": instructions,
            # The session's goal, for the next compaction (see ctxd.compaction.ledger.goal).
            "goal": made.ledger.goal or goal or next((f.text for f in sheet.facts if f.kind == "goal"), None),
            "mustKeep": {
                "facts": len(sheet),
                "missing": len(missing),
                "patched": [f.to_json() for f in missing.facts[:MAX_LEDGER_FACTS]],
            },
            # The session's fact ledger, carried to the next compaction (see ctxd.compaction.ledger).
            "ledger": made.ledger.to_json(),
            # The plan documents as this range left them: the next compaction applies its edits to them.
            "plans": made.plans,
            # The new context: the summary, then the kept messages (plan.estimatedTokensAfter
            # counts those without a summary allowance here).
            "tokensAfter": (js_len(summary) + 3) // 4 + plan.estimatedTokensAfter,
        },
    }
    return Summarized(plan, summary, details, result, path, failures)


def _too_big(text: str, window: int, settings: CompactionSettings) -> bool:
    """A summary that would not leave room: over the output limit twice, or over the target share."""
    tokens = (js_len(text) + 3) // 4
    limit = settings.output_limit() * 2
    if settings.target_percent:
        limit = min(limit, int(window * settings.target_percent))
    return tokens > limit


def _keep_last_turns(session: Session, plan: CompactionPlan, turns: int) -> CompactionPlan:
    """Keep the last ``turns`` user turns verbatim (seed 002's takeLastTurns), or the planned kept
    part if that is already smaller: the fallback must shrink the context, never grow it."""
    file = session.file
    path = session.tree.path_to_root(file.require(plan.leafId))
    users = [i for i in path if file.heads[i].type == "message" and _role(file.heads[i]) == "user"]
    if len(users) <= turns or file.lines[users[-turns]] <= plan.firstKeptLine:
        return plan
    try:
        return plan_compaction(
            session,
            keep_recent_tokens=0,
            leaf_id=plan.leafId,
            cut_at=file.heads[users[-turns]].id,
        )
    except NothingToCompact:
        return plan


def _role(head: Any) -> str | None:
    return head.message.role if head.message is not None else None


def pi_usage(usage: dict[str, int], cost: float | None) -> dict[str, Any]:
    prompt = int(usage.get("prompt_tokens", usage.get("input", 0)))
    completion = int(usage.get("completion_tokens", usage.get("output", 0)))
    out: dict[str, Any] = {
        "input": prompt,
        "output": completion,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": prompt + completion,
    }
    if cost is not None:  # an unpriced model's cost is unknown, not zero
        out["cost"] = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": cost}
    return out


def _report(progress: Progress | None, stage: str, fraction: float | None) -> None:
    if progress is not None:
        try:
            progress(stage, fraction)
        except Exception:  # progress is best effort
            pass


def _scaled(progress: Progress | None, lo: float, hi: float) -> Progress | None:
    if progress is None:
        return None

    def inner(stage: str, fraction: float | None) -> None:
        _report(progress, stage, None if fraction is None else lo + (hi - lo) * fraction)

    return inner
