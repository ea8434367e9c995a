"""An opencode database that appears after the daemon started (opencode's first run) is announced: its sessions
get ``session/didCreate``, whether it was written before or after the watch of its folder began."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest
from opencode.rows import DATA, SESSION

from ctxd.service import protocol as p

from .harness import start_ctxd

pytestmark = pytest.mark.asyncio


async def test_a_database_that_appears_later_has_its_sessions_announced(tmp_path: Path) -> None:
    root = tmp_path / "pi"
    root.mkdir()
    folder = tmp_path / "data" / "opencode"
    db = folder / "opencode.db"
    options = {"roots": [str(root)], "opencodeDatabases": [str(db)], "watch": True, "autoCompact": False}
    async with start_ctxd(options) as ctxd:
        notes = ctxd.notes  # type: ignore[attr-defined]
        await asyncio.sleep(2.5)  # the watch of the roots is live; the database's folder is not there yet
        folder.mkdir(parents=True)
        shutil.copyfile(DATA, db)  # written whole, before any watch of its folder can begin
        created = await notes.wait(p.DID_CREATE, lambda c: "#" in c["session"], timeout=20)
        assert created["session"] == f"{os.path.realpath(db)}#{SESSION}"
