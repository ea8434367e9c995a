"""Sessions on disk, their local history index, and a publisher of it, for the team tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.factories import assistant, chain, header, tool_result, user, write

from ctxd.history.index import HistoryIndex
from ctxd.team.publish import Publisher
from ctxd.team.settings import TeamSettings


def session(root: Path, cwd: str, sid: str, *texts: str, ts: str = "2026-11-20T10:00:00.000Z") -> Path:
    """A pi session started in ``cwd`` whose user messages are ``texts`` (each answered, one with a tool call)."""
    makers: list[Any] = []
    for n, text in enumerate(texts):
        makers.append(lambda p, t=text: user(p, t, timestamp=ts))
        if n == 0:
            call = [(f"c{n}", "bash", {"command": "make"})]
            makers.append(lambda p, call=call: assistant(p, "Running it", calls=call, timestamp=ts))
            makers.append(lambda p, n=n: tool_result(p, f"c{n}", f"build output {sid}", name="bash", timestamp=ts))
        makers.append(lambda p, n=n: assistant(p, f"Answer {n} in {sid}", timestamp=ts))
    path = root / sid / f"{sid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    write(path, chain(*makers), header(id=sid, cwd=cwd, timestamp=ts))
    return path


def append(path: Path, *texts: str) -> None:
    last = json.loads(path.read_text().splitlines()[-1])["id"]
    with open(path, "a") as f:
        for text in texts:
            entry = user(last, text)
            f.write(json.dumps(entry) + "\n")
            last = entry["id"]


def indexed(tmp_path: Path, *roots: Path) -> str:
    """The local history index of ``roots`` (filled now); its path."""
    db = str(tmp_path / "data" / "ctxd" / "history.sqlite3")
    index = HistoryIndex(db)
    index.update([str(r) for r in roots])
    index.close()
    return db


def reindex(db: str, *roots: Path) -> None:
    index = HistoryIndex(db)
    index.update([str(r) for r in roots])
    index.close()


def publisher(
    db: str,
    dsn: str,
    projects: list[str] | None = None,
    user: str = "alice",
    machine: str = "m1",
    facts_of: Any = None,
    **kw: Any,
) -> Publisher:
    settings = TeamSettings(dsn=dsn, projects=projects or ["*"], user=user, machine=machine, **kw)
    return Publisher(settings, db, facts_of)
