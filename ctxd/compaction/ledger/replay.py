"""The fact ledger of a session its agent compacts on its own while keeping every message (opencode), replayed
range by range from the session itself.

opencode writes its compactions into its database as summary messages and keeps every message from before
them; it has no place for ctxd's ledger (pi's compactions carry it in ``details.ctxd.ledger``, the Claude Code and
Codex hooks keep it in their notes while they watch each compaction). So the ledger of such a session is a
function of the session: range ``k`` is what the ``k``-th compaction on the active path summarised (the messages
after the previous summary, up to the compaction; opencode keeps nothing verbatim across a compaction), and the
ledger after it is :func:`ctxd.compaction.ledger.update.advance` of the ledger before it by that range. A
:class:`Carried` says how far a replay went; :func:`carry` goes on from one (what a caller kept) to the newest
compaction on the path, or starts again from the first when the one it was given is not on the path.

:func:`upcoming` is what the next compaction must keep: the carried ledger moved on by the messages since the
newest compaction. :attr:`Carried.sheet` is what the newest compaction had to keep: the facts its summary is
checked against (and the ones it lacks re-injected).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ctxd.compaction.ledger import Ledger, Seen, iso_time
from ctxd.compaction.ledger.mustkeep import FactSheet
from ctxd.compaction.ledger.update import Advanced, advance
from ctxd.compaction.reading.fileops import extract_file_ops, file_lists
from ctxd.context.build import build_context
from ctxd.tree.session import Session

NOTES_VERSION = 1
"""Bumped when :meth:`Carried.to_json`'s layout changes (older notes are then replayed again)."""


@attrs.frozen
class SinceCompaction:
    """The context at a leaf, split at its newest compaction."""

    summary: str | None
    compaction_id: str | None
    messages: list[dict[str, Any]]
    """The messages after the summary, oldest first."""
    where: list[Seen | None]
    """Where each of ``messages`` lies in the session."""


def since_compaction(session: Session, leaf_id: str | None = None) -> SinceCompaction:
    """The newest compaction's summary in the context at ``leaf_id`` (default: the leaf), and the messages after
    it with where each is."""
    ctx = build_context(session.file, session.tree, leaf_id, estimates=session.estimates)
    summary: str | None = None
    compaction_id: str | None = None
    messages: list[dict[str, Any]] = []
    where: list[Seen | None] = []
    for m in ctx.messages:
        if m.role == "compactionSummary":
            text = m.message.get("summary")
            summary, compaction_id = (text if isinstance(text, str) else None), m.entryId
            messages, where = [], []
        else:
            messages.append(m.message)
            where.append(Seen(entryId=m.entryId, line=m.line, time=iso_time(m.message.get("timestamp"))))
    return SinceCompaction(summary, compaction_id, messages, where)


@attrs.frozen
class Carried:
    """The ledger as the compactions on a session's path up to one of them left it."""

    through: str | None = None
    """The entry id of the newest compaction taken in (None: none yet)."""
    compactions: int = 0
    ledger: Ledger | None = None
    plans: dict[str, str] = attrs.field(factory=dict)
    """The plan documents as the ranges taken in left them (see :mod:`ctxd.compaction.reading.agent_plans`)."""
    sheet: FactSheet = attrs.field(factory=FactSheet)
    """What the compaction ``through`` had to keep: its range's facts and every open fact carried to it."""

    def to_json(self) -> dict[str, Any]:
        return {
            "version": NOTES_VERSION,
            "through": self.through,
            "compactions": self.compactions,
            "ledger": self.ledger.to_json() if self.ledger is not None else None,
            "plans": dict(self.plans),
            "facts": self.sheet.to_json(),
        }

    @staticmethod
    def from_json(value: Any) -> Carried | None:
        """What :meth:`to_json` wrote, or None for anything else (then the session is replayed from the start)."""
        if not isinstance(value, Mapping) or value.get("version") != NOTES_VERSION:
            return None
        through, count, facts = value.get("through"), value.get("compactions"), value.get("facts")
        if not isinstance(through, str) or not isinstance(count, int) or count < 1 or not isinstance(facts, list):
            return None
        ledger = Ledger.from_json(value.get("ledger"))
        if ledger is None:
            return None
        plans = value.get("plans")
        kept = (
            {k: v for k, v in plans.items() if isinstance(k, str) and isinstance(v, str)}
            if isinstance(plans, Mapping)
            else {}
        )
        items = [item for item in facts if isinstance(item, Mapping)]
        return Carried(through, count, ledger, kept, FactSheet.from_json(items))


def compactions_on_path(session: Session) -> list[tuple[str, str | None]]:
    """``(entry id, parent id)`` of each compaction on the active path, oldest first."""
    file, tree = session.file, session.tree
    tree.update()
    leaf = file.leaf_index()
    if leaf is None:
        return []
    heads = file.heads
    found = [i for i in tree.path_to_root(leaf) if heads[i].type == "compaction"]
    return [(entry_id, heads[i].parentId) for i in found if (entry_id := heads[i].id) is not None]


def carry(session: Session, start: Carried | None = None) -> Carried:
    """The ledger as every compaction on the active path left it, going on from ``start`` when its compaction is
    on the path (else from the first compaction)."""
    found = compactions_on_path(session)
    ids = [entry_id for entry_id, _ in found]
    carried = Carried()
    if start is not None and start.through in ids and ids.index(start.through) + 1 == start.compactions:
        carried = start
    for number, (entry_id, parent) in enumerate(found[carried.compactions :], carried.compactions + 1):
        since = since_compaction(session, parent) if parent is not None else SinceCompaction(None, None, [], [])
        made = _advance(carried, since, number)
        carried = Carried(entry_id, number, made.ledger, made.plans, made.sheet)
    return carried


def upcoming(session: Session, carried: Carried) -> Advanced:
    """The facts the next compaction must keep: ``carried`` (as :func:`carry` returned it for ``session``) moved
    on by the messages since the newest compaction."""
    return _advance(carried, since_compaction(session), carried.compactions + 1)


def _advance(carried: Carried, since: SinceCompaction, number: int) -> Advanced:
    previous_summary = since.summary if carried.ledger is None else None
    return advance_since(carried.ledger, carried.plans, since, number, previous_summary=previous_summary)


def advance_since(
    ledger: Ledger | None,
    plans: Mapping[str, str] | None,
    since: SinceCompaction,
    number: int,
    *,
    previous_summary: str | None,
    goal: str | None = None,
    plans_from: int = 0,
) -> Advanced:
    """``ledger`` (and the plan documents ``plans``) moved on by the messages of ``since`` as compaction ``number``:
    the range's file operations are facts of its body (see :func:`ctxd.compaction.ledger.update.advance`)."""
    read, modified = file_lists(extract_file_ops(since.messages))
    return advance(
        ledger,
        since.messages,
        where=since.where,
        previous_summary=previous_summary,
        read_files=read,
        modified_files=modified,
        goal=goal,
        compaction=number,
        plans=plans,
        plans_from=plans_from,
    )
