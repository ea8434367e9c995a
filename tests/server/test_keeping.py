"""A real ``ctxd serve`` that touches many sessions keeps its memory bounded (issue 30): sessions
past ``openSessions`` close, least recently used first, and answer the same when asked again.
(The policy itself, in process: tests/service/test_keeping.py; the long run: ``make bench-soak``.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from helpers.factories import assistant, header, tool_result, user

from ctxd.client import CtxdClient

from .harness import server_env

SESSIONS = 36


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def many(root: Path) -> list[str]:
    """``SESSIONS`` distinct sessions of 600 entries (about 3 MB each), one body under fresh headers."""
    entries: list[dict[str, Any]] = []
    parent = None
    for k in range(200):
        made = [
            user(parent, f"step {k}: read the next file " + "r" * 200),
            assistant(None, "reading", calls=[(f"c{k}", "read", {"path": f"src/f{k}.py"})], total=1000 + k),
            tool_result(None, f"c{k}", f"contents of f{k}.py\n" + "code line\n" * 1300, name="read"),
        ]
        for entry in made:
            entry["parentId"] = parent
            parent = entry["id"]
        entries += made
    body = b"".join(json.dumps(e).encode() + b"\n" for e in entries)
    root.mkdir(parents=True)
    paths = []
    for k in range(SESSIONS):
        path = root / f"s{k:03d}.jsonl"
        path.write_bytes(json.dumps(header(id=f"sess-{k:03d}")).encode() + b"\n" + body)
        paths.append(str(path))
    return paths


async def test_touching_many_sessions_keeps_memory_bounded(tmp_path: Path) -> None:
    paths = many(tmp_path / "root")
    options = {
        "roots": [str(tmp_path / "root")],
        "transcriptRoots": [],
        "archiveRoots": [],
        "opencodeDatabases": [],
        "watch": False,
        "openSessions": {"maxCount": 4, "maxBytes": 16 << 20},
    }
    client = CtxdClient(initialization_options=options, env=server_env(), stderr=subprocess.DEVNULL)
    await client.start()
    try:
        assert client.process is not None
        pid = client.process.pid
        first: dict[str, Any] = {}
        for path in paths[:6]:
            first[path] = await client.request("context/build", {"session": path, "includeMessages": False})
        warm = rss_mb(pid)
        for path in paths[6:]:
            await client.request("context/build", {"session": path})
            await client.request("session/tree", {"session": path})
        grown = rss_mb(pid) - warm
        # 30 more sessions of ~3 MB each: open for ever, they held over 100 MB more (issue 30).
        assert grown < 45, f"RSS grew {grown:.0f} MB over {SESSIONS - 6} more sessions"
        for path in paths[:6]:  # closed long ago: opened again, the same answers
            again = await client.request("context/build", {"session": path, "includeMessages": False})
            assert {**again, "revision": None} == {**first[path], "revision": None}
    finally:
        await client.close()
