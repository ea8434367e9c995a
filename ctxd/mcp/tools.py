"""The MCP server's one object and its three tools (see :mod:`ctxd.mcp`).

Which session a tool reads when the model names none: ``$CTXD_SESSION``, else the session Claude Code
runs the server for (``$CLAUDE_CODE_SESSION_ID``, which Claude Code 2.1.330 gives every stdio MCP
server), else the newest session started in the working directory (``$CLAUDE_PROJECT_DIR`` or the
server's cwd).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from ctxd import __version__
from ctxd.compaction.recall import RECALL_HINT
from ctxd.errors import CtxdError, SessionNotFoundError
from ctxd.service import protocol as p
from ctxd.service.config import load_cli_config
from ctxd.service.history_text import expand_text, search_text
from ctxd.service.methods import TOOLS, call
from ctxd.service.service import Service

log = logging.getLogger(__name__)
SEARCH_WAIT_MS = 5000
"""A tool call waits this long at most for indexing in progress (a model can afford it; a request cannot)."""

INSTRUCTIONS = (
    "ctxd keeps every session's full history. When the conversation summary lacks a detail from earlier "
    "(an exact number, an error message, a command's output, a file's content), search_history finds it "
    f"and expand reads the original messages; session_facts lists what must not be forgotten. {RECALL_HINT}"
)
SEARCH_HELP = (
    "Search the full history of this session (or all sessions), including what earlier compactions summarised "
    "away. Use when the conversation summary lacks a detail from earlier: an exact figure, an error text, a "
    "command or its output, a path, a decision. Returns ranked hits, each with the entry to give expand (an "
    "entry id, or L<line> for a file without ids). query: words or a quoted phrase (SQLite FTS5: OR, NOT, "
    "prefix*). session: a session id or file; default the current session; 'all' for every session. scope "
    "'team': search every session your team published (other people, other machines; needs a team database), "
    "by default all of them, narrowed by project, agent or user; read a team hit with expand and scope 'team'."
)
EXPAND_HELP = (
    "Read the original messages behind a summary or around a search hit. Use after search_history, or when a "
    "summary names entries: entry_id of a compaction gives the messages it summarised; of any other entry, that "
    "entry in full; or give from_entry_id/to_entry_id for a range. Each names an entry by its id, by the first "
    "8 or more characters of it (as summaries write them), or as L<line> (its line in the session file). Long "
    "answers come in pages: pass cursor from the previous answer. scope 'team': read a team hit's session from "
    "the team database (session: the hit's session id)."
)
FACTS_HELP = (
    "The must-keep facts of the current session (goal, latest request, the user's constraints and corrections, "
    "errors, files, commands with their outcome). Use after a compaction, or before finishing a task, to check "
    "that nothing the user asked for was lost."
)


class Tools:
    """The tools' state: one service for the server's lifetime (the same one the daemon's handlers use)."""

    def __init__(self, service: Service) -> None:
        self.service = service

    async def session(self, given: str | None) -> str | None:
        """The session a tool reads: ``given``, or the current one (see the module); None for all."""
        if given and given.strip().lower() == "all":
            return None
        if given:
            return given
        for env in ("CTXD_SESSION", "CLAUDE_CODE_SESSION_ID"):
            if os.environ.get(env):
                return os.environ[env]
        cwd = os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
        newest = await self.service.history.history_newest(cwd)
        if newest is None:
            raise SessionNotFoundError(f"no session was started in {cwd}; name one with session", cwd=cwd)
        return newest

    async def search_history(
        self,
        query: str,
        session: str | None = None,
        limit: int = 10,
        scope: Literal["local", "team"] = "local",
        project: str | None = None,
        agent: str | None = None,
        user: str | None = None,
    ) -> str:
        limit = max(1, min(limit, 50))
        if scope == "team":  # the whole team's history unless a session is named
            team = None if not session or session.strip().lower() == "all" else session
            params = p.HistorySearchParams(query, team, limit, 0, "team", project, agent, user)
        else:
            params = p.HistorySearchParams(query, await self.session(session), limit, SEARCH_WAIT_MS)
        return search_text(await call(self.service, TOOLS["search_history"], params))

    async def expand(
        self,
        entry_id: str | None = None,
        session: str | None = None,
        from_entry_id: str | None = None,
        to_entry_id: str | None = None,
        cursor: str | None = None,
        max_chars: int = 20_000,
        scope: Literal["local", "team"] = "local",
    ) -> str:
        if scope == "team":
            if not session:
                raise SessionNotFoundError("expand with scope team reads one session: name it (the hit's session id)")
            target: str | None = session
        else:
            target = await self.session(session)
        if target is None:
            raise SessionNotFoundError("expand reads one session: name it (a session id or file)")
        params = p.HistoryExpandParams(target, entry_id, from_entry_id, to_entry_id, max(1, max_chars), cursor, scope)
        return expand_text(await call(self.service, TOOLS["expand"], params))

    async def session_facts(self, session: str | None = None) -> str:
        target = await self.session(session)
        if target is None:
            raise SessionNotFoundError("session_facts reads one session: name it (a session id or file)")
        facts = await call(self.service, TOOLS["session_facts"], p.SessionParams(target))
        return str(facts["text"] or f"no must-keep facts found in {facts['session']}")


def _told(tool: Callable[..., Awaitable[str]]) -> Callable[..., Awaitable[str]]:
    """The tool with ctxd's own errors (no such session or entry, bad params) passed to the model as
    they are; anything else is a bug, which the SDK reports without its text."""

    @functools.wraps(tool)
    async def told(*args: Any, **kwargs: Any) -> str:
        try:
            return await tool(*args, **kwargs)
        except (CtxdError, p.InvalidParams) as exc:
            raise ToolError(str(exc)) from exc

    return told


def build(service: Service) -> MCPServer[Any]:
    """The server object with its tools."""
    tools = Tools(service)
    server: MCPServer[Any] = MCPServer("ctxd", instructions=INSTRUCTIONS, version=__version__)
    for name, fn, description in (
        ("search_history", tools.search_history, SEARCH_HELP),
        ("expand", tools.expand, EXPAND_HELP),
        ("session_facts", tools.session_facts, FACTS_HELP),
    ):
        server.add_tool(_told(fn), name=name, description=description, structured_output=False)
    return server


async def _serve() -> None:
    config, problems = load_cli_config()
    service = Service(config)
    for problem in problems:
        log.warning("configuration: %s", problem)
    service.start()  # the first search finds the index warm; publish to the team database, if one is configured
    try:
        await build(service).run_stdio_async()
    finally:
        await service.close()


def run() -> int:
    from ctxd.malloc import limit_arenas

    limit_arenas()  # before any thread: the server runs as long as its agent (see ctxd.malloc)
    try:
        asyncio.run(_serve())
    except KeyboardInterrupt:
        return 130
    return 0
