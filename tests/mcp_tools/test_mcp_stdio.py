"""``ctxd mcp`` as a real process, driven by the MCP SDK's own client (stdio_client + ClientSession):
the tools are listed with descriptions that say when to use them, and each one answers from real files."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.factories import assistant, chain, compaction, header, tool_result, user, write
from mcp import ClientSession, StdioServerParameters, stdio_client

from .harness import mcp_env, tool_text

FIGURE = "cold start: 418.7 ms over 25 runs"


def _session(root: Path, cwd: Path) -> tuple[Path, list[dict[str, Any]]]:
    entries = chain(
        lambda p: user(p, "Measure the loader's cold start. Never touch vendor/."),
        lambda p: assistant(p, "Running it", calls=[("c1", "bash", {"command": "make bench"})]),
        lambda p: tool_result(p, "c1", FIGURE, name="bash"),
        lambda p: assistant(p, "Done: it is fast."),
        lambda p: user(p, "Now make it faster"),
    )
    # A compaction that summarised everything before the last request (its summary lost the figure).
    entries.append(compaction(entries[-1]["id"], entries[-1]["id"], summary="The user measured the loader."))
    entries.append(assistant(entries[-1]["id"], "Working on it"))
    path = root / "proj" / "s.jsonl"
    path.parent.mkdir(parents=True)
    write(path, entries, header(id="sess-mcp", cwd=str(cwd)))
    return path, entries


async def test_mcp_session_lists_and_calls_every_tool(tmp_path: Path) -> None:
    root, cwd = tmp_path / "root", tmp_path / "work"
    cwd.mkdir()
    path, entries = _session(root, cwd)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ctxd", "mcp"], env=mcp_env(tmp_path, root), cwd=str(cwd)
    )
    async with stdio_client(params) as (read, write_), ClientSession(read, write_) as session:
        info = await session.initialize()
        assert info.server_info.name == "ctxd"
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"search_history", "expand", "session_facts"}
        for tool in tools.values():
            assert tool.description and "Use " in tool.description  # says when to use it
        assert tools["search_history"].input_schema["required"] == ["query"]

        # No session named: the newest session started in the server's cwd.
        found = tool_text(await session.call_tool("search_history", {"query": "418.7"}))
        assert f"{path}:4  toolResult (bash)  entry {entries[2]['id']}" in found
        assert "[summarised away]" in found and "«418.7»" in found

        behind = tool_text(await session.call_tool("expand", {"entry_id": entries[5]["id"]}))
        assert behind.startswith("compaction in ")
        assert FIGURE in behind and "Never touch vendor/" in behind
        assert "Now make it faster" not in behind  # the first kept entry is not behind the summary

        one = tool_text(await session.call_tool("expand", {"entry_id": entries[2]["id"], "session": "sess-mcp"}))
        assert FIGURE in one

        # Today's fact sheet of the context at the leaf (the fact ledger will add the earlier constraint).
        facts = tool_text(await session.call_tool("session_facts", {}))
        assert "## Must keep" in facts and "Now make it faster" in facts

        everywhere = tool_text(await session.call_tool("search_history", {"query": "loader", "session": "all"}))
        assert "sess-mcp" in everywhere

        bad = await session.call_tool("expand", {"entry_id": "nope"})
        assert bad.is_error and "nope" in bad.content[0].text


async def test_mcp_without_a_session_for_the_cwd_says_so(tmp_path: Path) -> None:
    root, cwd = tmp_path / "root", tmp_path / "elsewhere"
    cwd.mkdir()
    _session(root, tmp_path / "work")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ctxd", "mcp"], env=mcp_env(tmp_path, root), cwd=str(cwd)
    )
    async with stdio_client(params) as (read, write_), ClientSession(read, write_) as session:
        await session.initialize()
        result = await session.call_tool("session_facts", {})
        assert result.is_error and "no session was started in" in result.content[0].text


@pytest.mark.parametrize("env_name", ["CLAUDE_CODE_SESSION_ID", "CTXD_SESSION"])
async def test_mcp_current_session_from_the_environment(tmp_path: Path, env_name: str) -> None:
    root, cwd = tmp_path / "root", tmp_path / "elsewhere"
    cwd.mkdir()
    _session(root, tmp_path / "work")
    env = {**mcp_env(tmp_path, root), env_name: "sess-mcp"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "ctxd", "mcp"], env=env, cwd=str(cwd))
    async with stdio_client(params) as (read, write_), ClientSession(read, write_) as session:
        await session.initialize()
        assert "418.7" in tool_text(await session.call_tool("search_history", {"query": "418.7"}))


def test_mcp_search_answers_every_query(tmp_path: Path) -> None:
    """Issue 30: a query FTS5 rejects reached the model as an internal error. Through the real
    server and the SDK's client, every query is answered: hits, or "no hits"; never an error."""
    import asyncio
    import threading

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    root, cwd = tmp_path / "root", tmp_path / "work"
    cwd.mkdir()
    _session(root, cwd)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ctxd", "mcp"], env=mcp_env(tmp_path, root), cwd=str(cwd)
    )
    loop = asyncio.new_event_loop()
    ready: asyncio.Queue[Any] = asyncio.Queue()
    done = asyncio.Event()

    async def serve() -> None:  # one server for every example, on a loop of its own
        async with stdio_client(params) as (read, write_), ClientSession(read, write_) as session:
            await session.initialize()
            await ready.put(session)
            await done.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),))
    thread.start()
    try:
        session = asyncio.run_coroutine_threadsafe(ready.get(), loop).result(60)

        def search(query: str) -> Any:
            call = session.call_tool("search_history", {"query": query, "session": "all"})
            return asyncio.run_coroutine_threadsafe(call, loop).result(60)

        assert "Measure" in tool_text(search('Measure the "loader'))  # an unmatched quote: plain words
        syntax = st.sampled_from([*'"*()^:-+{},.', "AND", "OR", "NOT", "NEAR", " ", "loader", "\x00"])
        queries = st.text(max_size=30) | st.lists(syntax, max_size=10).map("".join)

        @settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
        @given(query=queries)
        def answered(query: str) -> None:
            tool_text(search(query))  # not an error

        answered()
    finally:
        loop.call_soon_threadsafe(done.set)
        thread.join(60)
        loop.close()
