"""The daemon serves ctxd's archive of Claude Code transcripts beside the live ones: ``session/list`` pairs them
(``archives`` / ``archiveOf``), an id names the live transcript, a copy opens read-only with its history, and it
stays listed (and browsable) after Claude deletes the live file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import reference

from ctxd.service import protocol as p
from ctxd.store.archive import archive_transcript

from .harness import call, start_ctxd

SESSION = "2696e685-97f7-47e2-9b90-766d279ab840"


async def test_archives_are_listed_with_their_live_transcript_and_outlive_it(tmp_path: Path) -> None:
    pi = tmp_path / "pi"
    pi.mkdir()
    projects = tmp_path / "claude" / "projects"
    live = projects / "-home-dev-service" / f"{SESSION}.jsonl"
    live.parent.mkdir(parents=True)
    shutil.copy(reference("claude", "claude-2.1.330-compact.jsonl"), live)
    archive = tmp_path / "data" / "ctxd" / "archive"
    archive_transcript(str(live), str(archive))
    live.write_bytes(live.read_bytes().split(b"\n", 2)[2])  # rewritten: the first copy is kept aside
    archive_transcript(str(live), str(archive))
    copy = archive / "claude" / "-home-dev-service" / f"{SESSION}.jsonl"
    (earlier,) = (archive / "claude" / "-home-dev-service" / SESSION / "earlier").iterdir()
    options = {
        "roots": [str(pi)],
        "transcriptRoots": [str(projects)],
        "archiveRoots": [str(archive)],
        "watch": True,
        "autoCompact": False,
    }
    async with start_ctxd(options) as client:
        listed = await call(client, p.SESSION_LIST, {})
        assert listed["roots"] == [str(pi), str(projects), str(archive)]
        by_path = {s["path"]: s for s in listed["sessions"]}
        assert set(by_path) == {str(live), str(copy), str(earlier)}
        assert by_path[str(live)]["archives"] == [str(copy), str(earlier)]
        assert by_path[str(live)]["archived"] is False and by_path[str(live)]["archiveOf"] is None
        for path in (copy, earlier):
            assert by_path[str(path)]["archived"] is True and by_path[str(path)]["archiveOf"] == str(live)
            assert by_path[str(path)]["readOnly"] is True and by_path[str(path)]["agent"] == "claude"

        # The session id names the live transcript, not a copy.
        opened = await call(client, p.SESSION_OPEN, {"session": SESSION})
        assert opened["path"] == str(live)
        # The earliest copy holds the history as it was before the rewrite, compaction included.
        ledger = await call(client, p.SESSION_LEDGER, {"session": str(earlier)})
        assert [c["tokensBefore"] for c in ledger["compactions"]] == [12_938]
        tree = await call(client, p.SESSION_TREE, {"session": str(earlier), "collapse": 0})
        assert any(r["type"] == "compaction" for r in tree["rows"])
        ctx = await call(client, p.CONTEXT_BUILD, {"session": str(copy)})
        assert ctx["messages"][0]["role"] == "compactionSummary"
        assert not [d for d in ctx["diagnostics"] if "not in the file" in d["message"]]

        # Claude's cleanup deletes the live transcript: the copies remain, on their own.
        mark = client.notes.mark()  # type: ignore[attr-defined]
        live.unlink()
        await client.notes.wait(p.DID_DELETE, session=str(live), since=mark)  # type: ignore[attr-defined]
        listed = await call(client, p.SESSION_LIST, {})
        assert {s["path"] for s in listed["sessions"]} == {str(copy), str(earlier)}
        assert all(s["archived"] and s["archiveOf"] is None for s in listed["sessions"])
        tree = await call(client, p.SESSION_TREE, {"session": str(copy)})
        assert tree["rows"]


@pytest.mark.parametrize("bad", [["relative/archive"], "not-a-list", [3]])
async def test_archive_roots_are_validated(tmp_path: Path, bad: object) -> None:
    from ctxd.service.config import config_from_json

    problems: list[str] = []
    cfg = config_from_json({"archiveRoots": bad}, problems)
    if bad == ["relative/archive"]:
        assert cfg.archive_roots == [str(Path("relative/archive").resolve())] and not problems
    else:
        assert problems and problems[0].startswith("initializationOptions: archiveRoots: expected a list of paths")
