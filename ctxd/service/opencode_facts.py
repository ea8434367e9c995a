"""The facts of an opencode session across opencode's own compactions (``compact/facts``; ctxd's opencode plugin
asks for them before each compaction, after it, and when a session is resumed).

opencode compacts a session itself and keeps no ledger, so ctxd keeps one per session in its notes,
``<state>/opencode/<session id>.json`` (0600; :meth:`ctxd.compaction.ledger.replay.Carried.to_json`): the ledger
as of the newest compaction it has taken in, with the facts that compaction had to keep. Each call goes on from
the notes to the newest compaction on the session's path; notes that are missing, damaged or of another path (a
session reverted in opencode, notes deleted) are rebuilt from the database, which keeps every message after a
compaction (:mod:`ctxd.compaction.ledger.replay`). The database is never written.

``compact/facts`` answers, for the plugin:

- ``mustKeep`` / ``mustKeepText``: what the next compaction must keep (the ledger's open facts and those of the
  messages since the newest compaction), for opencode's compaction prompt;
- ``missing`` / ``missingText``: what the newest compaction's summary lacks of what it had to keep, re-injected
  into every request until the next compaction (so also into a session resumed in a new opencode process).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from ctxd.compaction.ledger.mustkeep import FactSheet
from ctxd.compaction.ledger.replay import Carried, carry, upcoming
from ctxd.service.claude_hooks import FACTS_HEADING
from ctxd.service.facts import RENDER_CHARS, notes_path, read_notes
from ctxd.store.dirs import makedirs_private, state_dir
from ctxd.tree.session import Session

log = logging.getLogger(__name__)
AGENT = "opencode"
MUST_KEEP_HEADING = "## What this compaction must keep"
PROMPT_CHARS = 12_000
"""The facts added to opencode's compaction prompt are rendered within this many characters."""


def carried(session: Session, state: str | None = None, *, save: bool = True) -> Carried:
    """The session's ledger as its newest compaction left it: from its notes, gone on by the compactions since,
    or replayed from the session when the notes do not fit; the notes are rewritten when it changed (``save``)."""
    state = state or state_dir()
    session_id = str(session.file.header.get("id") or "")
    start = Carried.from_json(read_notes(state, AGENT, session_id))
    made = carry(session, start)
    if save and made.compactions and made != start:
        _write_notes(state, session_id, made)
    return made


def _write_notes(state: str, session_id: str, made: Carried) -> None:
    """The notes are a cache: when they cannot be written (a full disk, a read-only folder), the answer stands and
    the next call replays the session again."""
    from ctxd.store.files import atomic_write

    path = notes_path(state, AGENT, session_id)
    if path is None:
        return
    try:
        makedirs_private(os.path.dirname(path))
        atomic_write(path, json.dumps(made.to_json(), ensure_ascii=False).encode("utf-8"))
    except OSError as exc:
        log.warning("cannot keep the fact ledger of opencode session %s in %s: %s", session_id, path, exc)


def compaction_facts(session: Session, state: str | None = None) -> dict[str, Any]:
    """``compact/facts``' answer for an opencode session (see the module doc)."""
    made = carried(session, state)
    following = upcoming(session, made).sheet
    missing = FactSheet()
    if made.through is not None and made.through in session.file.index:
        summary = session.file.entry_by_id(made.through).get("summary")
        missing = made.sheet.missing(summary if isinstance(summary, str) else "")
    return {
        "session": session.path,
        "compactions": made.compactions,
        "compactionId": made.through,
        "mustKeep": following.to_json(),
        "mustKeepText": following.render(PROMPT_CHARS, heading=MUST_KEEP_HEADING),
        "missing": missing.to_json(),
        "missingText": missing.render(RENDER_CHARS, heading=FACTS_HEADING),
    }
