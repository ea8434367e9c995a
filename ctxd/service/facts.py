"""A session's fact ledger as of now, read-only (``session/facts``, and the MCP tool ``session_facts``).

Where the ledger lives depends on who compacts the session: ``details.ctxd.ledger`` of the newest compaction on
the active path (ctxd's own compactions, and pi's through the extension), or the session's notes in ctxd's state
dir (``<state>/<agent>/<session id>.json``, ``"ledger"``) for agents whose compactions ctxd only watches (Claude
Code; for opencode, whose database keeps every message, the notes are where a replay of its compactions goes
on from: :mod:`ctxd.compaction.ledger.replay`). A compaction without a ledger seeds one from its summary's
``## Goal`` / ``## Must keep`` sections. The messages after the newest compaction are then taken in without
writing anything, so the answer includes what the conversation said since (those facts are seen in compaction
``0``: not compacted yet).
"""

from __future__ import annotations

import json
import os
from typing import Any

from ctxd.compaction.ledger import Ledger
from ctxd.compaction.ledger.at_cut import plans_before, previous_ledger
from ctxd.compaction.ledger.goal import first_request
from ctxd.compaction.ledger.replay import Carried, SinceCompaction, carry, since_compaction
from ctxd.compaction.ledger.update import advance, seed
from ctxd.compaction.reading.fileops import extract_file_ops, file_lists
from ctxd.formats.lazy_re import lazy_compile
from ctxd.service.transcript_ledger import applied_through, caught_up, notes_carried
from ctxd.store.dirs import state_dir as default_state_dir
from ctxd.tree.session import Session

RENDER_CHARS = 9_000
"""The rendered open facts (``text``) are at most this long, as the hooks' re-injected block."""
__all__ = ["SinceCompaction", "facts_json", "notes_ledger", "read_notes", "session_facts", "since_compaction"]
_ID_RE = lazy_compile(r"^[A-Za-z0-9_.-]{1,128}$")
_NOTES_FOLDERS = {"codex": ("codex", "claude")}
"""Where an agent's hooks keep the notes under the state dir, when not in ``<agent>/``
(:mod:`ctxd.service.codex_hooks`)."""


def notes_ledger(state: str, agent: str, session_id: str) -> Ledger | None:
    """The ledger in a session's notes (``<state>/<agent>/<session id>.json``), None when there is none."""
    notes = read_notes(state, agent, session_id)
    return Ledger.from_json(notes.get("ledger")) if notes is not None else None


def notes_path(state: str, agent: str, session_id: str) -> str | None:
    """``<state>/<agent>/<session id>.json`` (Codex's hooks keep Claude Code's notes under a folder of their own,
    ``<state>/codex/claude/``), None when the agent or the id cannot name a file."""
    if not _ID_RE.match(agent) or not _ID_RE.match(session_id) or session_id in (".", ".."):
        return None
    return os.path.join(state, *_NOTES_FOLDERS.get(agent, (agent,)), f"{session_id}.json")


def read_notes(state: str, agent: str, session_id: str) -> dict[str, Any] | None:
    """A session's notes (``<state>/<agent>/<session id>.json``), None when there are none."""
    path = notes_path(state, agent, session_id)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            notes = json.load(f)
    except (OSError, ValueError):
        return None
    return notes if isinstance(notes, dict) else None


def session_facts(path: str, *, state_dir: str | None = None, session: Session | None = None) -> Ledger:
    """The session's ledger now: the stored one (see the module doc) with the messages since its newest
    compaction taken in. Writes nothing."""
    session = session or Session.open(path)
    since = since_compaction(session)
    summary, compaction_id, messages, where = since.summary, since.compaction_id, since.messages, since.where
    header = session.file.header
    agent, session_id = str(header.get("agent") or "pi"), str(header.get("id") or "")
    ledger: Ledger | None = None
    plans: dict[str, str] | None = None
    through: str | None = None
    if agent == "opencode":  # opencode keeps every message: the ledger is replayed from where the notes left it
        replayed = carry(session, Carried.from_json(read_notes(state_dir or default_state_dir(), agent, session_id)))
        ledger, plans = replayed.ledger, replayed.plans
    elif agent != "pi":
        # The hooks' notes, with the compactions they did not take in (all, when the notes are lost) replayed.
        notes = read_notes(state_dir or default_state_dir(), agent, session_id) or {}
        carried = caught_up(session, notes_carried(notes))
        ledger, plans, through = carried.ledger, carried.plans, carried.through
    elif compaction_id is not None:
        plans = plans_before(session, compaction_id)
    if ledger is None and compaction_id is not None and compaction_id in session.file.index:
        details = session.file.entry_by_id(compaction_id).get("details")
        ledger = previous_ledger(details)
        if ledger is None:  # a compaction made before ledgers, or by the agent itself
            ctxd = details.get("ctxd") if isinstance(details, dict) else None
            goal = ctxd.get("goal") if isinstance(ctxd, dict) and isinstance(ctxd.get("goal"), str) else None
            leaf = session.leaf_id()
            goal = goal or (first_request(session, leaf) if leaf else None)
            ledger = seed(summary, goal)
            ledger.compactions = sum(1 for h in session.file.heads if h.type == "compaction")
    if ledger is not None and not messages:
        return ledger
    read, modified = file_lists(extract_file_ops(messages))
    made = advance(
        ledger,
        messages,
        where=where,
        previous_summary=summary if ledger is None else None,
        read_files=read,
        modified_files=modified,
        compaction=0,
        plans=plans,
        plans_from=applied_through(where, through),
    )
    out = made.ledger
    out.compactions = ledger.compactions if ledger is not None else 0
    return out


def facts_json(ledger: Ledger) -> dict[str, Any]:
    """``session/facts``' answer: the ledger's JSON (camelCase), its counts and its open facts rendered."""
    out = ledger.to_json()
    out["counts"] = ledger.counts()
    out["text"] = ledger.render(RENDER_CHARS, heading="## Must keep (session facts)")
    return out
