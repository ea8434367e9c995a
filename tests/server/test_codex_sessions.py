"""The daemon serves a Codex 0.169 rollout as Codex writes it (what the editors list and show): it appears
(``session/didCreate``), grows (``session/didChange`` with the new entries), lists with its title beside its
archived copy, and its context after the last compaction is the summary, the kept messages, then the rest."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from conftest import LOCAL

from ctxd.service import protocol as p
from ctxd.store.archive import archive_codex_rollout

from .harness import call, start_ctxd

NAME = "rollout-2026-11-25T21-29-59-01a2149d-8f0f-74c1-8dfa-7129af1db7c5.jsonl"
ROLLOUT = LOCAL / "codex" / "rollout-0.169-compactions.jsonl"


async def watch_is_live(client: Any, root: Path) -> None:
    """Wait (bounded) until the watcher reports a new file: what is written before its watch begins is no event."""
    probe = root / "probe.jsonl"
    for n in range(40):
        mark = client.notes.mark()
        header = {"type": "session", "version": 3, "id": f"probe-{n}", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/"}
        probe.write_text(json.dumps(header) + "\n")
        try:
            await client.notes.wait(p.DID_CREATE, session=str(probe), since=mark, timeout=0.5)
            return
        except AssertionError:
            probe.unlink()
            await asyncio.sleep(0.1)
    raise AssertionError("the daemon's watch never went live")


async def test_a_live_codex_rollout_in_the_daemon(tmp_path: Path) -> None:
    pi = tmp_path / "pi"
    pi.mkdir()
    sessions = tmp_path / "codex" / "sessions"
    live = sessions / "2026" / "11" / "25" / NAME
    live.parent.mkdir(parents=True)
    archive = tmp_path / "data" / "ctxd" / "archive"
    lines = ROLLOUT.read_bytes().splitlines(keepends=True)
    options = {
        "roots": [str(pi)],
        "transcriptRoots": [str(sessions)],
        "archiveRoots": [str(archive)],
        "watch": True,
        "autoCompact": False,
    }
    async with start_ctxd(options) as client:
        await watch_is_live(client, pi)
        mark = client.notes.mark()  # type: ignore[attr-defined]
        live.write_bytes(b"".join(lines[:40]))  # Codex starts the rollout: two compactions so far
        await client.notes.wait(p.DID_CREATE, session=str(live), since=mark, timeout=30)  # type: ignore[attr-defined]
        opened = await call(client, p.SESSION_OPEN, {"session": str(live)})
        mark = client.notes.mark()  # type: ignore[attr-defined]
        with live.open("ab") as f:  # the third compaction and the second turn
            f.write(b"".join(lines[40:]))
        changed = await client.notes.wait(p.DID_CHANGE, session=str(live), since=mark)  # type: ignore[attr-defined]
        assert changed["ids"] and changed["leafId"] != opened["leafId"]

        archive_codex_rollout(str(live), str(archive))
        listed = await call(client, p.SESSION_LIST, {})
        by_path = {s["path"]: s for s in listed["sessions"]}
        copy = archive / "codex" / "2026" / "11" / "25" / NAME
        assert set(by_path) - {str(pi / "probe.jsonl")} == {str(live), str(copy)}
        row = by_path[str(live)]
        assert row["agent"] == "codex" and row["readOnly"] and row["archives"] == [str(copy)]
        assert row["title"] == "Create notes.txt with a greeting. Constraint: never edit README.md."

        ctx = await call(client, p.CONTEXT_BUILD, {"session": str(live)})
        roles = [m["role"] for m in ctx["messages"]]
        assert roles == ["compactionSummary", "system", "user", "user", "user", "assistant", "toolResult", "assistant"]
        assert ctx["contextTokens"] == 1010
        tree = await call(client, p.SESSION_TREE, {"session": str(live), "collapse": 0})
        assert sum(r["type"] == "compaction" for r in tree["rows"]) == 3
