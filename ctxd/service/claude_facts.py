"""The must-keep facts of a Claude Code conversation, read from its transcript (for ``ctxd hook``).

The transcript is mapped like any Claude transcript (read-only) and the facts come from the context ctxd builds at
its leaf: what Claude's next request holds, so what a compaction is about to summarise. They move the session's
fact ledger on (:mod:`ctxd.compaction.ledger.update`): the hooks keep the ledger in the session's notes, so facts
of every earlier range stay must-keep whatever Claude's latest summary kept. Without a ledger (notes lost, a
session compacted before ctxd was installed) the compactions the transcript holds are replayed from it
(:mod:`ctxd.service.transcript_ledger`), so the facts are the same whatever ctxd's state dir holds.

The plan documents the session follows (:mod:`ctxd.compaction.reading.agent_plans`) are carried the same way, as
``details.ctxd.plans`` carries them for ctxd's own compactions: the hooks keep them in the notes with the last
message they took in, since Claude keeps its newest messages verbatim after the summary and the next range
starts with them again; only the calls after that message change the documents once more.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ctxd.compaction.ledger import Ledger
from ctxd.compaction.ledger.mustkeep import FactSheet
from ctxd.compaction.ledger.replay import since_compaction
from ctxd.service.transcript_ledger import (
    MAX_BLOCK_ENTRIES,
    Carried,
    applied_through,
    caught_up,
    notes_carried,
    reinjected_blocks,
    take_in,
)
from ctxd.tree.session import Session

__all__ = [
    "MAX_BLOCK_ENTRIES",
    "TranscriptFacts",
    "applied_through",
    "compaction_summaries",
    "notes_plans",
    "reinjected_blocks",
    "transcript_facts",
]


@attrs.frozen
class TranscriptFacts:
    sheet: FactSheet
    compactions: int
    """Compaction summaries in the transcript (a new one means Claude has written this compaction's summary)."""
    newest_summary: str | None
    """The newest compaction's summary text, if there is one."""
    ledger: Ledger
    """The session's ledger once the compaction about to run has taken the context's facts in."""
    plans: dict[str, str] = attrs.field(factory=dict)
    """The plan documents as the context at the leaf leaves them."""
    through: str | None = None
    """The entry id of the last message taken in (the documents hold its calls' changes)."""


def transcript_facts(
    path: str, ledger: Ledger | None = None, plans: Mapping[str, str] | None = None, through: str | None = None
) -> TranscriptFacts:
    """The fact sheet of the context at the transcript's leaf with ``ledger`` (the session's, from the notes)
    carried, and what the transcript says of its compactions. ``plans`` are the plan documents as the messages
    up to the entry ``through`` left them (both from the notes); the calls of the messages after it change them.
    Compactions the ledger has not taken in (none, when the notes are lost) are replayed from the transcript
    first (:func:`ctxd.service.transcript_ledger.caught_up`)."""
    session = Session.open(path)
    compactions, newest = compaction_summaries(session)
    carried = caught_up(session, Carried(ledger, dict(plans) if plans is not None else None, through))
    advanced, carried = take_in(carried, since_compaction(session), compactions + 1)
    return TranscriptFacts(advanced.sheet, compactions, newest, advanced.ledger, advanced.plans, carried.through)


def notes_plans(notes: Mapping[str, Any]) -> tuple[dict[str, str] | None, str | None]:
    """The plan documents kept in a session's notes (``plans``) and the entry id of the last message applied to
    them (``plansThrough``); None for what the notes lack (notes written before plans were kept)."""
    carried = notes_carried(notes)
    return carried.plans, carried.through


def compaction_summaries(session: Session) -> tuple[int, str | None]:
    """How many compactions with a summary the transcript holds, and the newest one's summary."""
    heads = session.file.heads
    found = [i for i, head in enumerate(heads) if head.type == "compaction"]
    count = 0
    newest: str | None = None
    for body in session.file.entries(found):
        summary = body.get("summary")
        if isinstance(summary, str) and summary:
            count += 1
            newest = summary
    return count, newest
