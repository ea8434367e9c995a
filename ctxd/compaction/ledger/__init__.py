"""The fact ledger: one model of a session's must-keep facts, carried from compaction to compaction.

A compaction's fact sheet (:mod:`ctxd.compaction.ledger.mustkeep`) says what a summary of *one* range must keep. The
ledger is what the whole session must keep: the facts of every summarised range, accumulated, each with its
kind, text, where it was first and last seen (entry id and/or line, time where known, and which compaction), and
a status: ``open``, ``resolved`` (an error fixed) or ``superseded`` (a request replaced by a later one, a
constraint the user took back, a plan replaced). The goal is the session's first genuine request and never
changes. How a ledger moves on by one range is :mod:`ctxd.compaction.ledger.update`.

Where it is stored: ``details.ctxd.ledger`` of a compaction entry (ctxd's own compactions and the ones the pi
extension writes), and the session's notes in ctxd's state dir for agents whose compactions ctxd only
watches (Claude Code). Its JSON is camelCase (:meth:`Ledger.to_json`); reading never fails: a damaged ledger
reads as None and the caller seeds a new one from the summary, as for a compaction made before ledgers.
"""

from __future__ import annotations

import datetime
import functools
from typing import Any

import attrs

from ctxd.compaction.ledger.mustkeep import KINDS, Fact, FactSheet

STATUSES = ("open", "resolved", "superseded")
VERSION = 1


@attrs.define
class Seen:
    """Where a fact was seen: any of these may be unknown (an agent's messages without entries)."""

    compaction: int = 0
    """Which compaction of the session (1 = the first) summarised the range it was seen in; 0: not yet compacted."""
    entryId: str | None = None
    line: int | None = None
    """1-based line of the entry in the session file (the header is line 1)."""
    time: str | None = None
    """ISO 8601 time of the message, when it has one."""


@attrs.define
class LedgerFact:
    kind: str
    """One of :data:`ctxd.compaction.ledger.mustkeep.KINDS`."""
    text: str
    probes: list[str]
    """As a fact sheet's: the fact is in a summary if any probe occurs in it."""
    firstSeen: Seen = attrs.field(factory=Seen)
    lastSeen: Seen = attrs.field(factory=Seen)
    status: str = "open"
    """``open``, ``resolved`` or ``superseded`` (:data:`STATUSES`)."""
    why: str | None = None
    """What resolved or superseded it (the later request, the sentence taking a constraint back)."""
    key: str | None = None
    """For an error of a command or a file: what a later success must match to resolve it."""

    @property
    def is_open(self) -> bool:
        return self.status == "open"

    def fact(self, *, carried: bool = False) -> Fact:
        """The fact as a fact sheet's; ``carried``: from an earlier range than the one being summarised."""
        return Fact(self.kind, self.text, tuple(self.probes), key=self.key, carried=carried)


def _rank(kind: str) -> int:
    return KINDS.index(kind) if kind in KINDS else len(KINDS)


@attrs.define
class Ledger:
    goal: str | None = None
    """The session's first genuine request, in the user's words (it never changes)."""
    compactions: int = 0
    """How many compactions the ledger has taken in."""
    facts: list[LedgerFact] = attrs.field(factory=list)
    """Oldest first; the goal is among them (kind ``goal``) once known."""
    version: int = VERSION

    def open_facts(self) -> list[LedgerFact]:
        """The open facts, most important first (by kind; within a kind, newest first)."""
        found = [(i, f) for i, f in enumerate(self.facts) if f.is_open]
        found.sort(key=lambda pair: (_rank(pair[1].kind), -pair[0]))
        return [f for _, f in found]

    def sheet(self) -> FactSheet:
        """The open facts as a fact sheet (what every later summary must keep)."""
        return FactSheet(tuple(f.fact() for f in self.open_facts()))

    def render(self, max_chars: int, *, heading: str) -> str:
        """The open facts as markdown within ``max_chars`` (see :meth:`FactSheet.render`)."""
        return self.sheet().render(max_chars, heading=heading)

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(STATUSES, 0)
        for fact in self.facts:
            out[fact.status] = out.get(fact.status, 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)  # fields in their order, as cattrs unstructures them (no cattrs import)

    @staticmethod
    def from_json(value: Any) -> Ledger | None:
        """The ledger ``value`` holds, or None when it is missing or not a ledger (facts that do not read are
        skipped, not the whole ledger)."""
        if not isinstance(value, dict) or not isinstance(value.get("facts"), list):
            return None
        facts: list[LedgerFact] = []
        for item in value["facts"]:
            fact = _well_formed(item)
            if fact is None:  # anything else goes through cattrs, as it always did
                import cattrs

                try:
                    fact = _converter().structure(item, LedgerFact)
                except (cattrs.BaseValidationError, TypeError, ValueError, AttributeError):
                    continue
            if fact.status in STATUSES and fact.probes and all(isinstance(p, str) and p for p in fact.probes):
                facts.append(fact)
        goal = value.get("goal")
        compactions = value.get("compactions")
        return Ledger(
            goal=goal if isinstance(goal, str) and goal.strip() else None,
            compactions=compactions if isinstance(compactions, int) and compactions >= 0 else 0,
            facts=facts,
        )


_SEEN_FIELDS = {"compaction": int, "entryId": str, "line": int, "time": str}
_FACT_FIELDS = {"status": str, "why": str, "key": str}


def _well_formed(item: Any) -> LedgerFact | None:
    """A ledger fact as ctxd writes them, read without cattrs (a hook's start-up pays for every import); None
    for anything else (then cattrs reads it). Gives what cattrs gives for such an item."""
    if not isinstance(item, dict) or type(item.get("kind")) is not str or type(item.get("text")) is not str:
        return None
    probes = item.get("probes")
    if type(probes) is not list or any(type(p) is not str for p in probes):
        return None
    seen: list[Seen] = []
    for key in ("firstSeen", "lastSeen"):
        value = item.get(key, {})
        if type(value) is not dict:
            return None
        for name, kind in _SEEN_FIELDS.items():
            if name in value and value[name] is not None and type(value[name]) is not kind:
                return None
        if value.get("compaction", 0) is None:
            return None
        seen.append(Seen(**{name: value[name] for name in _SEEN_FIELDS if name in value}))
    for name, kind in _FACT_FIELDS.items():
        if name in item and type(item[name]) is not kind and (name == "status" or item[name] is not None):
            return None
    rest = {name: item[name] for name in _FACT_FIELDS if name in item}
    return LedgerFact(item["kind"], item["text"], list(probes), seen[0], seen[1], **rest)


@functools.cache
def _converter() -> Any:
    import cattrs

    converter = cattrs.Converter(omit_if_default=False)

    def strict_str(value: Any, _: Any) -> str:
        if not isinstance(value, str):
            raise TypeError(f"expected a string, got {type(value).__name__}")
        return value

    converter.register_structure_hook(str, strict_str)
    return converter


def iso_time(value: Any) -> str | None:
    """A message's ``timestamp`` (ms since the epoch, or ISO text) as ISO 8601 UTC."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        try:
            moment = datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)
        except (OverflowError, OSError, ValueError):
            return None
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return None
