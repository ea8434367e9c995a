"""Which tool outputs ctxd shortens, to what size and how: decided from what each agent passes to its model.

Measured on Claude Code 2.1.330 and pi 0.87.1 (``bench/cuts_bench.py`` prints what these rules save on the real
transcripts in ``tests/data/``):

- Claude Code saves a Bash output over 30,000 characters to a file and sends the model a ~2,000-character
  preview, so ctxd cuts a Bash output only below that size (with a limit under 30,000); above it, Claude's
  own preview is what the model reads, and a cut by ctxd would change nothing.
- Read (Claude Code: up to 25,000 tokens; pi: 2,000 lines or 50 KB), Grep, Glob, WebFetch, WebSearch and MCP
  tools reach the model whole: ctxd's limit applies to them, :data:`DEFAULT_LIMIT` unless configured.
- How much: where the model's window is known, a share of it (:func:`window_limit`: 30% by default, the
  ``toolOutputShare`` setting), at most :data:`DEFAULT_LIMIT`; where it is not, :data:`DEFAULT_LIMIT`. A window
  of 25,000 tokens or more gets the fixed limit; a small model's (16,000 tokens: 19,200 characters) less.
- Never cut: a tool whose output echoes the model's own input or confirms a change (:data:`NEVER`), a
  subagent's answer (``Task``/``Agent``, opencode's ``task``: the whole point of the call), a Read that names a
  range (``offset`` or ``limit``: the model narrowed it already, as the cut's notice asks it to), and any output
  in a turn whose prompt asks to see an output whole (:data:`WHOLE_PROMPT`).
- How: a shell's output (:data:`LOGS`) keeps its head, its tail and the error lines between them
  (:func:`~ctxd.context.truncate.truncate_log`); any other output keeps its head, cut at a line's end, with a
  notice saying how to read the rest.

Standard library only: the Claude Code hook imports this on every tool call it handles.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from ctxd.formats.lazy_re import lazy_compile

DEFAULT_LIMIT = 30_000
"""Characters of one tool output the model gets at most, by default: the size above which Claude Code itself
stops sending a Bash output whole. Also the limit when the model's window is unknown."""
DEFAULT_SHARE = 0.3
"""The share of the model's window one tool output may fill when the window is known (seed 004's)."""
MIN_LIMIT = 2_000
"""A window-relative limit never goes below this many characters (what a cut keeps at least)."""
CHARS_PER_TOKEN = 4
CLAUDE_PREVIEWED = {"Bash": 30_000}
"""Tools whose larger outputs Claude Code 2.1.330 replaces by its own preview, and from which size."""
NEVER = frozenset(
    {
        # Claude Code
        "Edit",
        "MultiEdit",
        "Write",
        "NotebookEdit",
        "TodoWrite",
        "ExitPlanMode",
        "Task",
        "Agent",
        "AskUserQuestion",
        # pi
        "edit",
        "write",
        # Codex
        "apply_patch",
        "update_plan",
        # opencode
        "task",
        "todowrite",
    }
)
"""Tools never cut: their output echoes the model's own input or confirms a change, or is a subagent's answer."""
RANGED = frozenset({"Read", "read", "NotebookRead"})
"""Reads that take ``offset``/``limit``: when the model names a range, it gets that range whole."""
LOGS = frozenset({"Bash", "BashOutput", "bash", "exec_command", "write_stdin", "shell", "local_shell"})
"""Tools whose output is a shell's log: its head, tail and error lines carry the meaning."""
WHOLE_PROMPT = (
    "(whole|full|entire|complete|untruncated|uncut|unabridged) (tool )?(output|file|log|result|text|content)"
    "|(do not|don.t|dont|never|without) (truncat|cut|shorten|trim)|no truncation|ctxd:whole|ctxd:full"
)
"""A prompt matching this (case-insensitive; a POSIX extended regular expression that Python reads the same way)
asks to see tool output whole: nothing is cut until the next prompt."""
_WHOLE = lazy_compile(WHOLE_PROMPT, re.IGNORECASE)


class Cut(NamedTuple):
    limit: int
    """Characters kept at most (strings of a structured output share it by size)."""
    style: Literal["head", "log"]
    hint: str | None = None
    """What the notice tells the model to do to see the rest (None: the generic hint)."""


def window_limit(window: int | None, share: float = DEFAULT_SHARE) -> int:
    """Characters one tool output may keep for a model whose window is ``window`` tokens: ``share`` of it (4
    characters a token), never below :data:`MIN_LIMIT`, never above :data:`DEFAULT_LIMIT`; :data:`DEFAULT_LIMIT`
    when the window is unknown (None or not positive). A 16,000-token window keeps 19,200 characters at the
    default share; a window of 25,000 tokens or more keeps the fixed 30,000."""
    if window is None or window <= 0 or not 0 < share <= 1:
        return DEFAULT_LIMIT
    return max(MIN_LIMIT, min(DEFAULT_LIMIT, int(window * share * CHARS_PER_TOKEN)))


def asks_whole(prompt: str) -> bool:
    """Whether a user's prompt asks to see tool output whole."""
    return _WHOLE.search(prompt) is not None


def previewed_from(tool: str, agent: str) -> int | None:
    """The size from which the agent replaces this tool's output by its own preview (None: it never does)."""
    return CLAUDE_PREVIEWED.get(tool) if agent == "claude" else None


def rule(tool: str, tool_input: Any, limit: int, *, agent: str = "claude") -> Cut | None:
    """How to cut this tool's output for the model, or None when it is never cut.

    ``limit`` is the configured (or default) limit; an agent's own preview (Claude's Bash) is left alone by the
    caller, who knows the output's size (:func:`previewed_from`)."""
    if tool in NEVER:
        return None
    if tool in RANGED and isinstance(tool_input, Mapping) and ("offset" in tool_input or "limit" in tool_input):
        return None
    if tool in LOGS:
        return Cut(limit, "log")
    if tool in RANGED:
        return Cut(limit, "head", "Read it again with offset and limit to see the rest.")
    return Cut(limit, "head")


def skipped_tools(limit: int, *, agent: str = "claude") -> list[str]:
    """The tools whose output is never cut with this limit, whatever its size (the hook's wrapper skips them
    without starting Python)."""
    previewed = [tool for tool, size in CLAUDE_PREVIEWED.items() if agent == "claude" and limit >= size]
    return sorted(NEVER) + previewed
