"""``ctxd mcp`` (a real process, the SDK's client) with anchors: a search hit in a pi v1 file names its entry as
``L<line>``, ``expand`` reads it by that, by an id's first 8 characters and by ranges of them, an ambiguous prefix
is an error naming the candidates, and the server's instructions and tool descriptions say how."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from conftest import reference
from helpers.factories import header, user, write
from mcp import ClientSession, StdioServerParameters, stdio_client

from ctxd.compaction.recall import RECALL_HINT

from .harness import mcp_env, tool_text


async def test_mcp_expand_reads_anchors_and_the_tools_say_how(tmp_path: Path) -> None:
    root, cwd = tmp_path / "root", tmp_path / "work"
    cwd.mkdir()
    v1 = root / "v1" / "before-compaction.jsonl"
    v1.parent.mkdir(parents=True)
    shutil.copyfile(reference("pi", "before-compaction.jsonl"), v1)
    ambiguous = root / "p" / "ambiguous.jsonl"
    ambiguous.parent.mkdir()
    entries = [user(None, "first", id="feedface01"), user("feedface01", "second", id="feedface02")]
    write(ambiguous, entries, header(id="sess-ambiguous", cwd=str(cwd)))
    env = mcp_env(tmp_path, root)
    params = StdioServerParameters(command=sys.executable, args=["-m", "ctxd", "mcp"], env=env, cwd=str(cwd))
    async with stdio_client(params) as (read, write_), ClientSession(read, write_) as session:
        info = await session.initialize()
        assert info.instructions is not None and RECALL_HINT in info.instructions
        tools = {t.name: t.description or "" for t in (await session.list_tools()).tools}
        assert "L<line>" in tools["search_history"]
        assert "first 8" in tools["expand"] and "L<line>" in tools["expand"]

        found = tool_text(
            await session.call_tool(
                "search_history", {"query": '"AgentSession looks like a good idea"', "session": str(v1)}
            )
        )
        assert f"{v1}:13  user  entry L13  session " in found
        one = tool_text(await session.call_tool("expand", {"entry_id": "L13", "session": str(v1)}))
        assert "line 13" in one and "AgentSession looks like a good idea" in one
        ranged = tool_text(
            await session.call_tool("expand", {"from_entry_id": "L13", "to_entry_id": "L15", "session": str(v1)})
        )
        assert ranged.startswith("range in ") and "line 15" in ranged

        second = tool_text(await session.call_tool("expand", {"entry_id": "feedface02", "session": str(ambiguous)}))
        assert "second" in second
        bad = await session.call_tool("expand", {"entry_id": "feedface", "session": str(ambiguous)})
        assert bad.is_error
        assert "feedface01 (line 2)" in bad.content[0].text and "feedface02 (line 3)" in bad.content[0].text
