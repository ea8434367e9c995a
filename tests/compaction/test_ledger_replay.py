"""The ledger of a session its agent compacts while keeping every message (opencode), replayed range by range:
facts of the first range stay must-keep after the third compaction whatever the summaries kept; going on from
kept notes gives what a replay from the start gives; notes of another path, or none, are replayed; the notes'
JSON reads back; ``compact/facts``' answer and notes (0600), and ``session/facts`` for such a session."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from helpers.factories import assistant, compaction, header, tool_result, user, write
from helpers.planted import ERROR, FACTS, GOAL, NEVER, PLANTED, VALIDATE

from ctxd.compaction.engine import dry_run_json
from ctxd.compaction.ledger.replay import Carried, carry, compactions_on_path, upcoming
from ctxd.compaction.settings import CompactionSettings
from ctxd.service.facts import session_facts
from ctxd.service.opencode_facts import carried, compaction_facts
from ctxd.tree.session import Session

SUMMARY = "## Objective\n- Work on the loader goes on; the manifest is deploy/zeta/manifest.toml."
"""Every summary keeps only the path, as opencode's fake one does in tests/opencode/test_ledger.py."""


def opencode_like(path: Path, compactions: int = 3, *, after: int = 1) -> str:
    """A session as ctxd maps opencode's: the goal, the planted facts and the error in messages of their own,
    then ``compactions`` compactions that keep nothing verbatim (firstKeptEntryId is the compaction itself),
    each after a bash call and an answer; ``after`` more user turns follow the last one."""
    entries: list[dict[str, Any]] = []

    def add(make: Any) -> None:
        entries.append(make(entries[-1]["id"] if entries else None))

    for text in (GOAL, PLANTED, ERROR):
        add(lambda p, text=text: user(p, text))
        add(lambda p: assistant(p, "Noted."))
    for n in range(compactions):
        add(lambda p, n=n: assistant(p, "", calls=[(f"call_{n}", "bash", {"command": f"echo check-{n}"})]))
        add(lambda p, n=n: tool_result(p, f"call_{n}", f"check-{n}", name="bash"))
        add(lambda p, n=n: compaction(p, "", summary=SUMMARY, id=f"c{n + 1:07d}"))
        entries[-1]["firstKeptEntryId"] = entries[-1]["id"]
        add(lambda p, n=n: user(p, f"Run step {n + 2} of the loader."))
        add(lambda p: assistant(p, "Done."))
    for n in range(after):
        add(lambda p, n=n: user(p, f"Now document step {n + 1}."))
    return write(path, entries, header(agent="opencode", id="ses_replay"))


def texts(sheet: Any) -> str:
    return "\n".join(f.text for f in sheet.facts)


def test_facts_of_the_first_range_stay_must_keep_after_every_compaction(tmp_path: Path) -> None:
    session = Session.open(opencode_like(tmp_path / "s.jsonl"))
    made = carry(session)
    assert made.compactions == 3 and made.through == "c0000003"
    assert [entry_id for entry_id, _ in compactions_on_path(session)] == ["c0000001", "c0000002", "c0000003"]
    assert made.ledger is not None and made.ledger.goal == GOAL
    # What the third compaction had to keep, though no summary kept more than the path:
    for fact in (NEVER, "make verify-zeta", "ERR_ZETA_4711"):
        assert fact in texts(made.sheet), fact
    missing = made.sheet.missing(SUMMARY)
    assert all(fact in texts(missing) for fact in (NEVER, "make verify-zeta", "ERR_ZETA_4711"))
    # The next compaction's facts: the carried ones and the request since.
    following = upcoming(session, made).sheet
    assert "Now document step 1." in texts(following) and NEVER in texts(following)


def test_going_on_from_notes_equals_a_replay_from_the_start(tmp_path: Path) -> None:
    early = carry(Session.open(opencode_like(tmp_path / "early.jsonl", 1, after=0)))
    assert early.compactions == 1
    full = Session.open(opencode_like(tmp_path / "full.jsonl"))
    # The same entry ids (the factories number them afresh): carry the early notes over by id.
    first_id = compactions_on_path(full)[0][0]
    start = Carried.from_json({**early.to_json(), "through": first_id})
    assert start is not None
    resumed, replayed = carry(full, start), carry(full)
    assert resumed.to_json()["facts"] == replayed.to_json()["facts"]
    assert {f.text for f in resumed.ledger.open_facts()} == {f.text for f in replayed.ledger.open_facts()}  # type: ignore[union-attr]


def test_notes_of_another_path_or_none_are_replayed(tmp_path: Path) -> None:
    session = Session.open(opencode_like(tmp_path / "s.jsonl"))
    replayed = carry(session)
    elsewhere = Carried.from_json({**replayed.to_json(), "through": "not-on-the-path", "compactions": 1})
    assert elsewhere is not None
    assert carry(session, elsewhere).to_json() == replayed.to_json()
    miscounted = Carried.from_json({**replayed.to_json(), "compactions": 2})  # the id is the third on the path
    assert carry(session, miscounted).to_json() == replayed.to_json()
    for damaged in (
        None,
        [],
        {"version": 99},
        {**replayed.to_json(), "ledger": "x"},
        {**replayed.to_json(), "compactions": 0},
    ):
        assert Carried.from_json(damaged) is None
    assert Carried.from_json(json.loads(json.dumps(replayed.to_json()))) == replayed


def test_a_session_without_compactions_has_nothing_carried(tmp_path: Path) -> None:
    session = Session.open(opencode_like(tmp_path / "s.jsonl", 0))
    made = carry(session)
    assert made == Carried()
    assert GOAL in texts(upcoming(session, made).sheet)


def test_compact_facts_keeps_private_notes_and_rebuilds_them(tmp_path: Path) -> None:
    session = Session.open(opencode_like(tmp_path / "s.jsonl"))
    state = str(tmp_path / "state")
    answer = compaction_facts(session, state)
    assert answer["compactions"] == 3 and answer["compactionId"] == "c0000003"
    assert answer["mustKeepText"].startswith("## What this compaction must keep")
    assert answer["missingText"].startswith("## Must keep (ctxd): facts from before the compaction")
    assert all(fact in answer["missingText"] for fact in FACTS[1:])  # the summary holds the path
    notes = tmp_path / "state" / "opencode" / "ses_replay.json"
    assert stat.S_IMODE(os.stat(notes).st_mode) == 0o600 and json.loads(notes.read_text())["compactions"] == 3
    notes.write_text("{damaged")
    assert compaction_facts(session, state) == answer
    assert json.loads(notes.read_text())["through"] == "c0000003"
    assert carried(session, state, save=False) == carry(session)


def test_session_facts_of_an_opencode_session_carries_every_range(tmp_path: Path) -> None:
    path = opencode_like(tmp_path / "s.jsonl")
    ledger = session_facts(path, state_dir=str(tmp_path / "no-state"))
    open_texts = "\n".join(f.text for f in ledger.open_facts())
    assert ledger.goal == GOAL and ledger.compactions == 3
    assert VALIDATE in open_texts and NEVER in open_texts and "ERR_ZETA_4711" in open_texts


def test_a_dry_run_of_an_opencode_session_carries_its_ledger(tmp_path: Path) -> None:
    """``compact`` with ``dryRun`` (``ctxd compact --dry-run``) on such a session: what it must keep holds the
    facts of the first range, as ``compact/facts`` says."""
    session = Session.open(opencode_like(tmp_path / "s.jsonl"))
    plan = dry_run_json(session, CompactionSettings(keep_recent_tokens=0))
    assert all(fact in plan["mustKeepText"] for fact in (NEVER, "make verify-zeta", "ERR_ZETA_4711"))


def test_notes_that_cannot_be_written_leave_the_answer_as_it_is(tmp_path: Path) -> None:
    session = Session.open(opencode_like(tmp_path / "s.jsonl"))
    blocked = tmp_path / "state"
    blocked.write_text("a file where the state folder would be")
    assert compaction_facts(session, str(blocked)) == compaction_facts(session, str(tmp_path / "other"))
