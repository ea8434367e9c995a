"""The agents job: what the agents' own compactions ask of ctxd.

- Agents that keep their own session files (pi through its extension): summarise a compaction they prepared
  (``compact/summarize``), a branch they leave (``branch/summarize``), and cut oversized tool results
  (``context/truncate``). None of these opens or writes a session: the agent writes what it is given.
- Agents that summarise themselves (Claude Code, Codex, opencode): the shape ctxd asks of their summary
  (``compact/prompt``), a session's must-keep facts (``session/facts``, also the MCP tool), opencode's facts across
  its own compactions (``compact/facts``, :mod:`ctxd.service.opencode_facts`), and a copy of an opencode session
  in ctxd's archive (``session/archive``, :mod:`ctxd.store.opencode_archive`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxd.compaction.settings import CompactionSettings
from ctxd.context.truncate import is_oversized, truncate_tool_result
from ctxd.errors import SessionError
from ctxd.options import read
from ctxd.service import protocol as p
from ctxd.service.core import Core
from ctxd.service.opencode_facts import AGENT as OPENCODE
from ctxd.service.opencode_facts import compaction_facts
from ctxd.service.registry import OpenSession
from ctxd.store.dirs import archive_root
from ctxd.store.opencode import OpencodeFile
from ctxd.store.opencode_archive import archive_opencode_session

if TYPE_CHECKING:  # the compaction engine loads on first use
    from ctxd.compaction.summary import Progress


def _messages(name: str, messages: list[Any]) -> None:
    """AgentMessages must be objects with a string ``role`` (as session/append requires)."""
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise p.InvalidParams(f"{name}[{i}] must be an object with a string 'role'", f"{name}[{i}]")


class Agents:
    def __init__(self, core: Core) -> None:
        self.core = core
        self.config = core.config

    def _merged(self, settings: dict[str, Any] | None) -> CompactionSettings:
        """The daemon's compaction settings with the caller's over them; a bad value is refused."""
        merged, problems = read(CompactionSettings, settings or {}, source="settings", base=self.config.compaction)
        if problems:
            field = ".".join(part for part in ("settings", problems[0].path) if part)
            raise p.InvalidParams(f"{field}: {problems[0].text}", field)
        return merged

    async def compact_summarize(self, params: p.CompactSummarizeParams, progress: Progress | None = None) -> Any:
        from ctxd.compaction.external import Preparation, compaction_result, summarize_preparation

        if not params.messages and not params.turnPrefix:
            raise p.InvalidParams("nothing to summarise: messages and turnPrefix are empty", "messages")
        _messages("messages", params.messages)
        _messages("turnPrefix", params.turnPrefix)
        ops = params.fileOps
        prep = Preparation(
            messages=params.messages,
            turn_prefix=params.turnPrefix,
            previous_summary=params.previousSummary,
            previous_details=params.previousDetails,
            file_ops={"read": ops.read, "written": ops.written, "edited": ops.edited} if ops else None,
            first_kept_entry_id=params.firstKeptEntryId,
            tokens_before=params.tokensBefore,
            entry_ids=params.entryIds,
            turn_prefix_entry_ids=params.turnPrefixEntryIds,
            previous_ledger=params.previousLedger,
        )
        made = await summarize_preparation(
            prep,
            self._merged(params.settings),
            trigger=params.reason,
            instructions=params.instructions,
            progress=progress,
            model_window=params.modelWindow,
        )
        return compaction_result(made)

    async def branch_summarize(self, params: p.BranchSummarizeParams) -> Any:
        from ctxd.compaction.external import summarize_branch

        outcome = await summarize_branch(
            params.entries,
            self._merged(params.settings),
            instructions=params.instructions,
            reserve_tokens=params.reserveTokens,
            model_window=params.modelWindow,
        )
        return outcome.to_json()

    async def context_truncate(self, params: p.ContextTruncateParams) -> Any:
        if params.contextWindow is not None and params.contextWindow <= 0:
            raise p.InvalidParams("contextWindow must be positive", "contextWindow")
        if params.limitChars is not None and params.limitChars <= 0:
            raise p.InvalidParams("limitChars must be positive", "limitChars")
        from ctxd.context.cut_rules import rule, window_limit

        # A share of the window, at most 30,000 characters: agents pass tool results of up to ~50 KB (pi: 2,000
        # lines or 50 KB), which a limit for the window alone (240,000 for 200,000 tokens) would never cut.
        limit = params.limitChars or window_limit(params.contextWindow, self.config.tool_output_share)
        messages = list(params.messages)
        truncated = []
        for i, m in enumerate(messages):
            how = rule(str(m.get("toolName") or ""), None, limit, agent="") if isinstance(m, dict) else None
            if how is not None and is_oversized(m, limit):
                messages[i] = truncate_tool_result(m, limit, style=how.style, hint=how.hint)
                truncated.append(i)
        return {"messages": messages, "truncated": truncated, "limitChars": limit}

    async def compact_prompt(self, params: p.CompactPromptParams) -> dict[str, Any]:
        """What ctxd asks an agent's own summariser for: ``shape`` (a paragraph to add to its prompt, as Claude
        Code's PreCompact hook and opencode's plugin do) and ``prompt`` (a whole compaction prompt, as Codex's
        ``compact_prompt`` takes it); see :mod:`ctxd.compaction.summary.prompts`."""
        from ctxd.compaction.recall import RECALL_HINT
        from ctxd.compaction.summary.prompts import SHAPE_INSTRUCTIONS, agent_prompt

        return {"shape": SHAPE_INSTRUCTIONS, "prompt": agent_prompt(), "recall": RECALL_HINT}

    async def session_facts(self, params: p.SessionParams) -> dict[str, Any]:
        """The session's fact ledger now (see ctxd.service.facts), read-only."""
        from ctxd.service.facts import facts_json, session_facts

        def work(opened: OpenSession) -> dict[str, Any]:
            ledger = session_facts(opened.session.path, session=opened.session)
            return {"session": opened.session.path, **facts_json(ledger)}

        return await self.core.with_session(params.session, work)

    async def session_archive(self, params: p.SessionParams) -> dict[str, Any]:
        root = archive_root()
        if root not in self.config.archive_roots:  # listed (and readable) from now on
            self.config.archive_roots.append(root)

        def work(opened: OpenSession) -> dict[str, Any]:
            file = opened.session.file
            if not isinstance(file, OpencodeFile):
                raise SessionError("session/archive keeps opencode sessions only", path=opened.session.path)
            try:
                done = archive_opencode_session(file.db, file.opencode_id, root)
            except (OSError, ValueError) as exc:
                raise SessionError(f"cannot archive the session: {exc}", path=opened.session.path) from exc
            return {"session": opened.session.path, "path": done.path, "copied": done.copied, "rotated": done.rotated}

        return await self.core.with_session(params.session, work)

    async def compact_facts(self, params: p.SessionParams) -> dict[str, Any]:
        def work(opened: OpenSession) -> dict[str, Any]:
            session = opened.session
            if session.file.header.get("agent") != OPENCODE:
                raise SessionError("compact/facts serves opencode sessions only", path=session.path)
            return compaction_facts(session)

        return await self.core.with_session(params.session, work)
