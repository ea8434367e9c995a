"""Moving a session's fact ledger on by one summarised range (any path: ctxd's compaction, an agent's through
``compact/summarize``, Claude Code's watched by the hooks).

:func:`advance` takes the previous ledger (or, for a session whose last compaction has none, seeds one from that
summary's ``## Goal`` / ``## Must keep`` sections and any ctxd block re-injected into the transcript), scans the
range once, and returns the new ledger and the fact sheet the new summary is checked against: the range's own
facts (as before ledgers) plus every fact still open from earlier ranges. What the range says changes earlier
facts: a later request supersedes the previous one, a newer plan the old one, a user sentence taking a
constraint back supersedes it, and an error is resolved by a later success of the same command or file, or by a
text saying it was fixed that names it. The goal stays the first request ever recorded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from ctxd.compaction.ledger import Ledger, LedgerFact, Seen
from ctxd.compaction.ledger.mustkeep import Fact, FactSheet, must_keep_facts, sheet_of, text_probes
from ctxd.compaction.reading.agent_plans import documents, latest_plan, plan_source
from ctxd.compaction.reading.facts import Facts, scan
from ctxd.compaction.reading.mining import same_subject, short
from ctxd.compaction.summary.serialize import content_text
from ctxd.formats.injected import CTXD_MARK, ctxd_blocks

MAX_CLOSED = 60
"""Resolved and superseded facts kept (the newest): history, not what a summary must keep."""
MAX_OPEN = {"file-read": 60, "command": 60, "decision": 8, "file-modified": 150, "stated": 60, "error": 60}
"""Open facts kept per kind for the kinds that grow with every range (the newest): a bound for sessions of
thousands of ranges (the ledger is written into every compaction entry, so it stays under about 100 KB);
every other open fact stays. The file lists themselves are carried whole in ``details``. Decisions: the newest
eight."""
_SUPERSEDED_BY_NEWER = ("request", "next")
"""Kinds of which only the newest range's facts are current."""
_RESOLVABLE = ("constraint", "correction", "stated")
_OF_THEIR_RANGE = ("command",)
"""Kinds a later summary need not keep: the commands that matter are named by the summary of the range that ran
them (:func:`ctxd.compaction.summary.commands.mattering`), as the offline summary lists them; a later run
updates the fact, and a failure is carried as an ``error`` until a success resolves it. The ledger keeps them
(``session/facts``); search and expand recover the runs."""


@attrs.frozen
class Advanced:
    ledger: Ledger
    sheet: FactSheet
    """What the new summary must keep: the range's facts and every open fact carried from earlier ranges."""
    plans: dict[str, str] = attrs.field(factory=dict)
    """The plan documents as the range left them (see :func:`ctxd.compaction.reading.agent_plans.documents`)."""


def seed(summary: str | None, goal: str | None = None, blocks: Iterable[str] = ()) -> Ledger:
    """A ledger for a session whose latest compaction has none: the facts its summary lists as must-keep (and
    its goal), the facts of ctxd blocks re-injected after it, and ``goal`` when the session's first request is
    known."""
    ledger = Ledger(goal=goal)
    texts = [t for t in (summary, *blocks) if t]
    sheet = must_keep_facts([], previous_summary="\n\n".join(texts), goal=goal) if texts or goal else FactSheet()
    for fact in sheet.facts:
        if fact.kind == "goal" and ledger.goal is None:
            ledger.goal = fact.text
        ledger.facts.append(LedgerFact(fact.kind, fact.text, list(fact.probes), key=fact.key))
    return ledger


def absorb(ledger: Ledger, other: Ledger, number: int) -> None:
    """Add to ``ledger`` the facts of ``other`` (seeded from a summary or a block) it lacks, seen in compaction
    ``number``; the goal stays ``ledger``'s."""
    known = {(_family(f.kind), f.probes[0]) for f in ledger.facts}
    for fact in other.facts:
        family = (_family(fact.kind), fact.probes[0])
        if fact.kind != "goal" and family not in known:
            fact.firstSeen = fact.lastSeen = Seen(compaction=number)
            ledger.facts.append(fact)
            known.add(family)
    ledger.goal = ledger.goal or other.goal


def advance(
    previous: Ledger | None,
    messages: Sequence[Mapping[str, Any]],
    *,
    where: Sequence[Seen | None] = (),
    previous_summary: str | None = None,
    read_files: Sequence[str] = (),
    modified_files: Sequence[str] = (),
    goal: str | None = None,
    compaction: int | None = None,
    plans: Mapping[str, str] | None = None,
    plans_from: int = 0,
) -> Advanced:
    """The ledger after summarising ``messages`` (oldest first), and the fact sheet to check the summary against.

    ``previous`` is the ledger of the previous compaction (None: seed from ``previous_summary``); ``where`` gives,
    per message, where it is in its session (missing entries are unknown); ``goal`` is the session's first
    request when it lies before the range and the previous ledger does not hold it; ``compaction`` numbers this
    compaction (default: the previous ledger's count + 1); ``plans`` are the plan documents as earlier ranges
    left them (the range's edits apply to them); ``plans_from`` is the index of the first message whose calls
    change them (the earlier ones are already in ``plans``: a range that overlaps the previous one, as the
    Claude Code hooks' does, since Claude keeps the newest messages verbatim across a compaction). Nothing is
    modified in place.
    """
    ledger = attrs.evolve(previous, facts=[attrs.evolve(f) for f in previous.facts]) if previous else None
    if ledger is None:
        ledger = seed(previous_summary, goal)
    goal = ledger.goal or goal
    if compaction is not None:
        number = compaction
    else:  # a ledger seeded from an earlier summary: that summary was at least the first compaction
        number = ledger.compactions + 1 if previous is not None else 2 if previous_summary else 1
    facts = scan(messages)
    # The previous summary was read into the ledger (or seeded it): the range alone gives the new facts.
    planned = messages[plans_from:] if plans_from > 0 else messages
    sheet = sheet_of(facts, None, read_files, modified_files, goal, latest_plan(planned, plans))
    if ledger.goal is None:
        ledger.goal = next((f.text for f in sheet.facts if f.kind == "goal"), None)

    def seen(index: int | None) -> Seen:
        found = where[index] if index is not None and 0 <= index < len(where) else None
        return attrs.evolve(found, compaction=number) if found is not None else Seen(compaction=number)

    newest = {f.kind for f in sheet.facts if f.kind in _SUPERSEDED_BY_NEWER}
    by_key = {(_family(f.kind), f.probes[0]): f for f in ledger.facts if f.probes}
    # Facts ctxd re-injected into the range: ctxd's words, carried (kept open) but never the user's.
    absorb(ledger, seed(None, None, _reinjected(messages)), number)
    by_key = {(_family(f.kind), f.probes[0]): f for f in ledger.facts if f.probes}
    carried_before = list(ledger.facts)
    for fact in sheet.facts:
        found = by_key.get((_family(fact.kind), fact.probes[0]))
        where_seen = seen(fact.index)
        status = "resolved" if fact.resolved else "open"
        if found is None:
            found = LedgerFact(fact.kind, fact.text, list(fact.probes), where_seen, where_seen, status, key=fact.key)
            ledger.facts.append(found)
            by_key[(_family(fact.kind), fact.probes[0])] = found
            continue
        if found.kind == "goal":
            continue  # the goal is the first request: where it was first seen is what matters
        found.text, found.lastSeen, found.key = fact.text, where_seen, fact.key or found.key
        found.status, found.why = status, None if status == "open" else found.why
    current = {id(by_key[(_family(f.kind), f.probes[0])]) for f in sheet.facts}
    for old in carried_before:
        if id(old) in current or not old.is_open:
            continue
        if old.kind in newest:
            replacement = next(f for f in sheet.facts if f.kind == old.kind)
            _close(old, "superseded", f"replaced by: {short(replacement.text, 160)}")
        elif old.kind == "error":
            _resolve_error(old, facts)
    for kept in ledger.facts:
        if kept.is_open and kept.kind in _RESOLVABLE:
            _withdraw(kept, facts, number)
        elif kept.is_open and kept.kind == "next" and facts.done_files.get(plan_source(kept.text) or "") == "deleted":
            _close(kept, "resolved", "the plan document was deleted")
    ledger.compactions = max(ledger.compactions, number)
    _trim(ledger)
    check = list(sheet.facts)
    listed = {(_family(f.kind), f.probes[0]) for f in check}
    for carried in ledger.open_facts():
        if carried.kind in _OF_THEIR_RANGE:
            continue
        if (_family(carried.kind), carried.probes[0]) not in listed:
            check.append(carried.fact(carried=True))
    ordered = sorted(enumerate(check), key=lambda pair: (_rank_of(pair[1]), pair[0]))
    gone = [path for path, op in facts.done_files.items() if op == "deleted"]
    return Advanced(ledger, FactSheet(tuple(f for _, f in ordered)), documents(planned, plans, gone))


def _reinjected(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The blocks of facts ctxd re-injected into user messages of the range."""
    blocks: list[str] = []
    for message in messages:
        if message.get("role") == "user":
            text = content_text(message.get("content"))
            if CTXD_MARK in text:
                blocks.extend(ctxd_blocks(text))
    return blocks


def _family(kind: str) -> str:
    return "request" if kind in ("goal", "request") else kind


def _rank_of(fact: Fact) -> int:
    from ctxd.compaction.ledger.mustkeep import KINDS

    return KINDS.index(fact.kind) if fact.kind in KINDS else len(KINDS)


def _close(fact: LedgerFact, status: str, why: str) -> None:
    fact.status, fact.why = status, why


def _resolve_error(fact: LedgerFact, facts: Facts) -> None:
    """An open error from an earlier range: resolved by a success of its command or file, or a text saying it
    was fixed that names it."""
    key = fact.key or ""
    if key.startswith("cmd:"):
        stat = facts.commands.get(key[4:])
        if stat is not None and stat.last_ok:
            _close(fact, "resolved", f"`{short(stat.command, 120)}` succeeded later")
            return
    elif key.startswith("file:") and key[5:] in facts.done_files:
        _close(fact, "resolved", f"{key[5:]} was written later")
        return
    line = fact.text.split(": ", 1)[-1]
    for _, text in reversed(facts.fixed):
        if same_subject(line, text):
            _close(fact, "resolved", f"said fixed: {short(text, 160)}")
            return


def _withdraw(fact: LedgerFact, facts: Facts, number: int) -> None:
    """A constraint the user took back in this range, after stating it."""
    for index, sentence in facts.withdrawn:
        if fact.lastSeen.compaction == number and not _before(fact, index, facts):
            continue
        if same_subject(fact.text, sentence) and list(text_probes(sentence)[:1]) != fact.probes[:1]:
            _close(fact, "superseded", f"withdrawn: {short(sentence, 160)}")
            return


def _before(fact: LedgerFact, index: int, facts: Facts) -> bool:
    """Whether a fact seen in this range was stated before message ``index`` (by its text's position)."""
    for i, sentence in facts.constraints + facts.stated:
        if sentence == fact.text or list(text_probes(sentence)[:1]) == fact.probes[:1]:
            return i < index
    return True


def _trim(ledger: Ledger) -> None:
    closed = [f for f in ledger.facts if not f.is_open]
    drop = {id(f) for f in closed[:-MAX_CLOSED]} if len(closed) > MAX_CLOSED else set()
    for kind, cap in MAX_OPEN.items():
        of_kind = [f for f in ledger.facts if f.is_open and f.kind == kind]
        if len(of_kind) > cap:
            drop.update(id(f) for f in of_kind[:-cap])
    if drop:
        ledger.facts = [f for f in ledger.facts if id(f) not in drop]
