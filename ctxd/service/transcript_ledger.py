"""A watched session's fact ledger rebuilt from the transcript itself, for compactions ctxd's notes never took in.

The hooks (:mod:`ctxd.service.claude_hooks`) move the ledger on at each PreCompact and keep it in the session's
notes in ctxd's state dir. When those notes are lost (a wiped state dir, another machine) or never saw a
compaction (the plugin installed mid-session, a hook that failed), the transcript still holds what each of those
compactions summarised: Claude Code and Codex append and never rewrite, so the context at a compaction's parent
is what its PreCompact would have read. :func:`caught_up` replays those ranges, oldest first, numbered as the
hooks number them (the compactions with a summary before it, plus one), so the ledger is the one the hooks would
have kept: the same facts with the state present, empty or lost. Only a compaction whose range is not in the file
(a transcript that starts with a summary) is seeded from its summary and the blocks ctxd re-injected, as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ctxd.compaction.ledger import Ledger, Seen
from ctxd.compaction.ledger.goal import first_request
from ctxd.compaction.ledger.replay import SinceCompaction, advance_since, since_compaction
from ctxd.compaction.ledger.update import Advanced, absorb, seed
from ctxd.formats.injected import CTXD_MARK, ctxd_blocks
from ctxd.tree.index import NONE
from ctxd.tree.session import Session

MAX_BLOCK_ENTRIES = 2_000
"""Attachment entries read (the newest) when looking for ctxd's re-injected blocks (only to seed a ledger)."""


@attrs.frozen
class Carried:
    """What the notes keep between compactions: the ledger, the plan documents and the last message applied."""

    ledger: Ledger | None = None
    plans: dict[str, str] | None = None
    through: str | None = None
    """The entry id of the last message taken in (the plan documents hold its calls' changes)."""


def take_in(
    carried: Carried, since: SinceCompaction, number: int, *, goal: str | None = None
) -> tuple[Advanced, Carried]:
    """``carried`` moved on by the messages of ``since`` as compaction ``number``: what the hooks' PreCompact does
    (the range's file operations are facts of the body; ``goal`` only seeds a ledger that has none)."""
    advanced = advance_since(
        carried.ledger,
        carried.plans,
        since,
        number,
        previous_summary=since.summary,
        goal=goal,
        plans_from=applied_through(since.where, carried.through),
    )
    ids = [seen.entryId for seen in since.where if seen is not None and seen.entryId is not None]
    return advanced, Carried(advanced.ledger, advanced.plans, ids[-1] if ids else carried.through)


def caught_up(session: Session, carried: Carried) -> Carried:
    """``carried`` (from the notes; empty when they are lost) moved on by every compaction on the path to the
    leaf that its ledger has not taken in (see the module doc)."""
    file, tree = session.file, session.tree
    leaf = session.leaf()
    if leaf is None:
        return carried
    compactions = [i for i in tree.path_to_root(leaf) if file.heads[i].type == "compaction"]
    done = carried.ledger.compactions if carried.ledger is not None else 0
    summaries = 0
    for index, body in zip(compactions, file.entries(compactions), strict=True):
        number = summaries + 1
        text = body.get("summary")
        summaries += 1 if isinstance(text, str) and text else 0
        if number <= done:
            continue
        parent = tree.parent[index]
        since = since_compaction(session, tree.id_of(parent)) if parent != NONE else None
        if since is None or not since.messages:  # its range is not in the file: what its summary says
            summary = text if isinstance(text, str) else None
            leaf_id = session.leaf_id()
            goal = first_request(session, leaf_id) if leaf_id else None
            found = seed(summary, goal, reinjected_blocks(session))
            if carried.ledger is None:
                ledger = found
            else:
                ledger = attrs.evolve(carried.ledger, facts=[attrs.evolve(f) for f in carried.ledger.facts])
                absorb(ledger, found, number)
            ledger.compactions = max(ledger.compactions, number)
            carried = attrs.evolve(carried, ledger=ledger)
            continue
        _, carried = take_in(carried, since, number)
    return carried


def reinjected_blocks(session: Session) -> list[str]:
    """The blocks of facts ctxd re-injected into the transcript (Claude Code records a hook's
    ``additionalContext`` as an attachment entry), oldest first."""
    heads = session.file.heads
    found = [i for i, head in enumerate(heads) if head.type == "custom"][-MAX_BLOCK_ENTRIES:]
    blocks: list[str] = []
    for body in session.file.entries(found):
        data = body.get("data")
        attachment = data.get("attachment") if isinstance(data, dict) else None
        if not isinstance(attachment, dict) or attachment.get("type") != "hook_additional_context":
            continue
        content = attachment.get("content")
        for text in content if isinstance(content, list) else [content]:
            if isinstance(text, str) and CTXD_MARK in text:
                blocks.extend(ctxd_blocks(text))
    return blocks


def applied_through(where: Sequence[Seen | None], through: str | None) -> int:
    """The index of the first message after the entry ``through`` (its calls are in the notes' plan documents);
    0 when the messages do not hold it."""
    ids = [seen.entryId if seen is not None else None for seen in where]
    return len(ids) - ids[::-1].index(through) if through is not None and through in ids else 0


def notes_carried(notes: Mapping[str, Any]) -> Carried:
    """What a session's notes carry: ``ledger``, ``plans`` and ``plansThrough`` (None for what they lack)."""
    plans, through = notes.get("plans"), notes.get("plansThrough")
    kept = (
        {k: v for k, v in plans.items() if isinstance(k, str) and isinstance(v, str)}
        if isinstance(plans, dict)
        else None
    )
    return Carried(Ledger.from_json(notes.get("ledger")), kept, through if isinstance(through, str) else None)
