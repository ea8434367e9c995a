"""``compact/facts`` through a real daemon, on a copy of a real opencode database (one compaction by opencode): the
facts its summary lacks and what the next compaction must keep, the session's ledger kept in ctxd's state folder
(0600), the same answer once those notes are gone (replayed from the database, which is never written), and a
session that is not opencode's refused."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

import pytest
from opencode.rows import DATA, SESSION

from ctxd.service import protocol as p

from .harness import call, call_error, new_session, start_ctxd

pytestmark = pytest.mark.asyncio(loop_scope="function")


async def test_compact_facts_of_a_real_opencode_session(tmp_path: Path) -> None:
    db = tmp_path / "opencode" / "opencode.db"
    db.parent.mkdir()
    shutil.copyfile(DATA, db)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    state = tmp_path / "state"
    options = {"roots": [str(tmp_path / "pi")], "transcriptRoots": [], "opencodeDatabases": [str(db)], "watch": False}
    async with start_ctxd(options, XDG_STATE_HOME=str(state)) as ctxd:
        facts = await call(ctxd, p.COMPACT_FACTS, {"session": SESSION})
        assert facts["session"] == f"{os.path.realpath(db)}#{SESSION}"
        assert facts["compactions"] == 1 and facts["compactionId"]
        assert facts["mustKeepText"].startswith("## What this compaction must keep")
        assert "say hello using bash" in facts["mustKeep"][0]["probes"][0]
        # opencode's summary says "Say hello with bash": the goal in the user's words is what it lacks.
        assert [f["kind"] for f in facts["missing"]] == ["goal"]
        assert facts["missingText"].startswith("## Must keep (ctxd): facts from before the compaction")
        notes = state / "ctxd" / "opencode" / f"{SESSION}.json"
        assert stat.S_IMODE(notes.stat().st_mode) == 0o600
        notes.unlink()
        assert await call(ctxd, p.COMPACT_FACTS, {"session": SESSION}) == facts
        assert notes.exists()
        pi = await new_session(ctxd)
        assert (await call_error(ctxd, p.COMPACT_FACTS, {"session": pi})).code == -31010
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
