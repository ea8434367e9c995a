"""The MCP tools with ``scope: "team"``, through a real ``ctxd mcp`` driven by the MCP SDK's client: a model on
one machine finds what an agent on another machine did, and reads it in full."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from conftest import REPO
from mcp import ClientSession, StdioServerParameters, stdio_client

from .conftest import Cluster, TeamDb
from .helpers import indexed, publisher, session


def _text(result: Any) -> str:
    assert not result.is_error, result
    return "\n".join(block.text for block in result.content if block.type == "text")


async def test_search_history_and_expand_with_the_team_scope(tmp_path: Path, cluster: Cluster, team_db: TeamDb) -> None:
    from ctxd.team import driver, migrate

    carol, carol_pw = cluster.role("carol")
    conn = driver.connect(team_db.dsn())
    migrate.grant(conn, carol, ["*"])
    conn.close()
    other = tmp_path / "ci"
    session(other / "sessions", "/srv/ci/parser", "sess-ci", "segfault in the arena allocator, fixed by -O1")
    pub = publisher(indexed(other, other / "sessions"), team_db.dsn(), user="ci", machine="runner-3")
    pub.run()
    pub.close()
    root, cwd = tmp_path / "root", tmp_path / "work"
    cwd.mkdir()
    session(root, str(cwd), "sess-here", "why does the allocator crash?")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "CTXD_"))}
    env.update(
        CTXD_ROOTS=str(root),
        CTXD_TRANSCRIPT_ROOTS=str(tmp_path / "none"),
        CTXD_CONFIG=str(tmp_path / "none.json"),
        CTXD_TEAM_DSN=team_db.dsn(carol),
        XDG_DATA_HOME=str(tmp_path / "data"),
        HOME=str(tmp_path / "home"),
        PYTHONPATH=str(REPO),
        PGPASSFILE="",
        PGPASSWORD=carol_pw,
    )
    params = StdioServerParameters(command=sys.executable, args=["-m", "ctxd", "mcp"], env=env, cwd=str(cwd))
    async with stdio_client(params) as (read, write_), ClientSession(read, write_) as mcp:
        await mcp.initialize()
        tools = {t.name: t for t in (await mcp.list_tools()).tools}
        assert "scope" in tools["search_history"].input_schema["properties"]
        found = _text(await mcp.call_tool("search_history", {"query": "arena allocator", "scope": "team"}))
        assert "session sess-ci" in found and "ci@runner-3  project parser" in found and "«allocator»" in found
        narrowed = _text(
            await mcp.call_tool("search_history", {"query": "allocator", "scope": "team", "user": "nobody"})
        )
        assert narrowed == "no matches for 'allocator'"
        local = _text(await mcp.call_tool("search_history", {"query": "allocator"}))
        assert "sess-here" in local and "sess-ci" not in local  # the local scope: this machine's sessions
        whole = _text(await mcp.call_tool("expand", {"session": "sess-ci", "scope": "team"}))
        assert whole.startswith("range in ") and "fixed by -O1" in whole and "--- toolResult (bash)" in whole
