"""A compaction plan's facts with the session's ledger: what its summary must keep and the ledger to store.

Both compaction paths that write an entry's ``details`` use it: ctxd's own (:mod:`ctxd.compaction.engine`, the
previous ledger read from the previous compaction entry, where each message lies read from the session) and
an agent's (:mod:`ctxd.compaction.external`, the previous ledger handed over in ``previousDetails``, times read
from the messages). The Claude Code hooks use :mod:`ctxd.compaction.ledger.update` directly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ctxd.compaction.ledger import Ledger, Seen, iso_time
from ctxd.compaction.ledger.mustkeep import FactSheet
from ctxd.compaction.ledger.update import absorb, advance, seed
from ctxd.tree.session import Session

if TYPE_CHECKING:
    from ctxd.compaction.cut.plan import CompactionPlan


@attrs.frozen
class PlanFacts:
    sheet: FactSheet
    """What the summary must keep: the range's facts and the ledger's open ones."""
    goal: str | None
    """The session's first request when it lies before the range (the summariser is told it)."""
    ledger: Ledger
    """The ledger once this compaction is written (``details.ctxd.ledger``)."""
    plan_base: dict[str, str] = attrs.field(factory=dict)
    """The plan documents as the previous compaction left them (the summariser applies the range's edits)."""
    plans: dict[str, str] = attrs.field(factory=dict)
    """The plan documents once this range is summarised (``details.ctxd.plans``, for the next compaction)."""
    where: list[Seen | None] = attrs.field(factory=list)
    """Where each message of the plan (summarised, then the turn prefix) lies, when known (entry id, line)."""


def previous_plans(details: Any) -> dict[str, str]:
    """The plan documents in a compaction entry's ``details`` (``details.ctxd.plans``); {} when it has none."""
    ctxd = details.get("ctxd") if isinstance(details, Mapping) else None
    plans = ctxd.get("plans") if isinstance(ctxd, Mapping) else None
    if not isinstance(plans, Mapping):
        return {}
    return {k: v for k, v in plans.items() if isinstance(k, str) and isinstance(v, str)}


def plans_before(session: Session, compaction_id: str | None) -> dict[str, str]:
    """The plan documents the compaction ``compaction_id`` carried; {} when there is none."""
    if compaction_id is None:
        return {}
    index = session.file.index.get(compaction_id)
    if index is None:
        return {}
    return previous_plans(next(iter(session.file.entries([index])), {}).get("details"))


def previous_ledger(details: Any) -> Ledger | None:
    """The ledger in a compaction entry's ``details`` (``details.ctxd.ledger``), None when it has none."""
    ctxd = details.get("ctxd") if isinstance(details, Mapping) else None
    return Ledger.from_json(ctxd.get("ledger")) if isinstance(ctxd, Mapping) else None


MAX_LOOKBACK = 50
"""Compactions looked through, newest first, for the newest one with a ledger."""


def ledger_before(session: Session, compaction_id: str) -> Ledger | None:
    """The ledger of the compaction ``compaction_id``; if it has none (made before ledgers, or by the agent
    when ctxd was not there), the newest ledger of an earlier compaction on its path with the must-keep facts
    of the summaries since seeded into it; for an opencode session, whose compactions never hold one, the
    ledger replayed from its messages (:mod:`ctxd.compaction.ledger.replay`); None when there is none."""
    file = session.file
    index = file.index.get(compaction_id)
    if index is None:
        return None
    path = session.tree.path_to_root(index)  # from the root down
    found = [i for i in reversed(path) if file.heads[i].type == "compaction"][:MAX_LOOKBACK]
    later: list[str] = []
    for body in file.entries(found):
        ledger = previous_ledger(body.get("details"))
        if ledger is not None:
            for summary in reversed(later):  # oldest first
                absorb(ledger, seed(summary), ledger.compactions + 1)
                ledger.compactions += 1
            return ledger
        text = body.get("summary")
        later.append(text if isinstance(text, str) else "")
    if file.header.get("agent") == "opencode":  # opencode keeps every message: the ledger is replayed from them
        from ctxd.compaction.ledger.replay import carry

        replayed = carry(session)
        return replayed.ledger if replayed.through == compaction_id else None
    return None


def message_where(messages: Sequence[Mapping[str, Any]], entry_ids: Sequence[str] = ()) -> list[Seen | None]:
    """Where each message was seen, from what it carries (its time) and ``entry_ids`` when given (parallel)."""
    ids = list(entry_ids) if len(entry_ids) == len(messages) else []
    return [
        Seen(entryId=(ids[i] or None) if ids else None, time=iso_time(m.get("timestamp")))
        for i, m in enumerate(messages)
    ]


def plan_where(session: Session, plan: CompactionPlan) -> list[Seen | None]:
    """Where each message of ``plan`` (summarised, then the turn prefix) lies in the session: entry id, line,
    time."""
    messages = [*plan.messagesToSummarize, *plan.turnPrefixMessages]
    ids = [*plan.summarizeEntryIds, *plan.turnPrefixEntryIds]
    out = message_where(messages, ids)
    file = session.file
    for seen in out:
        if seen is not None and seen.entryId is not None:
            index = file.index.get(seen.entryId)
            if index is not None:
                seen.line = file.lines[index]
    return out


def plan_ledger(
    plan: CompactionPlan,
    goal: str | None,
    previous: Ledger | None,
    where: Sequence[Seen | None] = (),
    plans: Mapping[str, str] | None = None,
) -> PlanFacts:
    """The facts of ``plan`` with ``previous`` carried (see :func:`ctxd.compaction.ledger.update.advance`). The
    files its messages read and changed are facts of the body; the plan's file lists, with earlier compactions'
    files, are not: every summary ends with them as ``<read-files>``/``<modified-files>`` blocks, and naming them
    twice would only make the summary bigger."""
    advanced = advance(
        previous,
        [*plan.messagesToSummarize, *plan.turnPrefixMessages],
        where=where,
        previous_summary=plan.previousSummary,
        goal=goal,
        plans=plans,
    )
    known = previous.goal if previous is not None else None
    return PlanFacts(advanced.sheet, known or goal, advanced.ledger, dict(plans or {}), advanced.plans, list(where))
