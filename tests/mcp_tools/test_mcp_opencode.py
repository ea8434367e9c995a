"""``ctxd mcp`` inside opencode: with no session named, the current session is the newest opencode session
started in the server's cwd (read from opencode's database), and the tools search and expand it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client
from opencode.rows import SESSION, wal_copy

from .harness import mcp_env, tool_text


async def test_mcp_tools_search_and_expand_the_opencode_session_of_the_cwd(tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    db, writer = wal_copy(tmp_path / "opencode")
    writer.execute("UPDATE session SET directory = ? WHERE id = ?", (str(cwd), SESSION))
    writer.close()
    env = mcp_env(tmp_path, tmp_path / "root", CTXD_OPENCODE_DATABASES=str(db))
    params = StdioServerParameters(command=sys.executable, args=["-m", "ctxd", "mcp"], env=env, cwd=str(cwd))
    path = f"{os.path.realpath(db)}#{SESSION}"
    async with stdio_client(params) as (read, write_), ClientSession(read, write_) as session:
        await session.initialize()
        found = tool_text(await session.call_tool("search_history", {"query": "hello-from-bash"}))
        assert f"{path}:2  toolResult (bash)  entry prt_2149fc87a001Bjgr76vw7Ya5ks  session {SESSION}" in found
        assert "[summarised away]" in found
        behind = tool_text(await session.call_tool("expand", {"entry_id": "msg_2149fcf01001Dm7icS9D78B2Oo"}))
        assert behind.startswith(f"compaction in {path}") and "hello-from-bash" in behind
