"""The daemon's methods for agents that keep their own session files (pi through its extension):
summarise a compaction they prepared (``compact/summarize``), a branch they leave
(``branch/summarize``), and cut oversized tool results (``context/truncate``).  None of them opens
or writes a session: the agent writes what it is given."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxd.compaction.settings import CompactionSettings
from ctxd.context.truncate import is_oversized, truncate_tool_result
from ctxd.options import read
from ctxd.service import protocol as p
from ctxd.service.base import ServiceBase

if TYPE_CHECKING:  # the compaction engine loads on first use
    from ctxd.compaction.summary import Progress


def _messages(name: str, messages: list[Any]) -> None:
    """AgentMessages must be objects with a string ``role`` (as session/append requires)."""
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise p.InvalidParams(f"{name}[{i}] must be an object with a string 'role'", f"{name}[{i}]")


class Summarizing(ServiceBase):
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
