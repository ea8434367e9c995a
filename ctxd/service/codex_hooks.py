"""What ctxd does in Codex's hooks (``ctxd hook --agent codex EVENT``; Codex 0.169 runs Claude-Code-style hooks
from ``$CODEX_HOME/hooks.json`` or ``[hooks]`` in ``config.toml``, once trusted).

The work is Claude Code's (:mod:`ctxd.service.claude_hooks`), called with Codex's differences:

==================  ===========================================================================================
event               what ctxd does
==================  ===========================================================================================
PreCompact          archives the rollout (``<data>/archive/codex/...``), works out the must-keep facts and
                    saves them in the session's notes; prints nothing (Codex does not add a PreCompact hook's
                    output to its compaction prompt: ``compact_prompt`` is the way to change that prompt)
SessionStart        ``compact``: re-injects (``additionalContext``) the facts the new summary lacks, with one
                    sentence on how to read the rest (:data:`ctxd.compaction.recall.RECALL_HINT`); Codex writes
                    the summary into the rollout first and places them as a developer message right after it,
                    in the very next request. A summary it cannot read then (a remote, encrypted compaction)
                    never becomes readable: every fact goes. Other sources: hand over facts still waiting
UserPromptSubmit    hands over facts still waiting
PostCompact         nothing: Codex 0.169 passes no summary (the rollout's ``compacted`` line has it)
PostToolUse         nothing: Codex 0.169 has no ``updatedToolOutput`` (set ``tool_output_token_limit`` instead)
Stop, SessionEnd    archive the rollout
==================  ===========================================================================================

Notes live in ``<state>/codex/claude/<session id>.json`` (Claude Code's notes, under a folder of Codex's own).

:func:`compact_prompt` (``ctxd codex-prompt``) is ctxd's summary format and must-keep guidance as a prompt for
Codex's ``compact_prompt`` / ``experimental_compact_prompt_file``: with a custom provider Codex sends it as the
last user item of its compaction request.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ctxd.compaction.summary.prompts import AGENT_PROMPT_HEAD as COMPACT_PROMPT_HEAD
from ctxd.compaction.summary.prompts import agent_prompt
from ctxd.service import claude_hooks
from ctxd.service.claude_hooks import HookResult, HookSettings

__all__ = ["COMPACT_PROMPT_HEAD", "compact_prompt", "handle"]


def handle(event: str, payload: Mapping[str, Any], settings: HookSettings) -> HookResult:
    """Run ctxd's part of one Codex hook event."""
    # Codex writes its summary into the rollout before SessionStart(compact); one it cannot read then is a
    # remote (encrypted) compaction, which no later hook can read either: every fact goes at once.
    own = settings._replace(state_dir=os.path.join(settings.state_dir, "codex"), archive=False, all_when_unread=True)
    if event == "PreCompact":
        archived = _archive(payload, settings)
        result = claude_hooks.pre_compact(payload, own)
        facts = result.note.removeprefix("PreCompact: archive off; ")
        return HookResult(note=f"PreCompact: {archived}; {facts} saved (nothing printed: Codex ignores it)")
    if event == "SessionStart":
        return claude_hooks.session_start(payload, own)
    if event == "UserPromptSubmit":
        return claude_hooks.user_prompt_submit(payload, own)
    if event in ("Stop", "SessionEnd"):
        return HookResult(note=f"{event}: {_archive(payload, settings)}")
    return HookResult(note=f"{event}: not handled for Codex")


def compact_prompt() -> str:
    """ctxd's compaction prompt for Codex (:func:`ctxd.compaction.summary.prompts.agent_prompt`)."""
    return agent_prompt()


def _archive(payload: Mapping[str, Any], settings: HookSettings) -> str:
    if not settings.archive:
        return "archive off"
    rollout = payload.get("transcript_path")
    if not isinstance(rollout, str) or not rollout:
        return "no transcript_path"
    from ctxd.store.archive import archive_codex_rollout

    results = archive_codex_rollout(rollout, settings.archive_root)
    if not results:
        return "nothing to archive"
    return f"archived {results[0].copied:,} new bytes to {results[0].path}"
