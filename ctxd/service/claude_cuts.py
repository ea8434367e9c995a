"""Claude Code's PostToolUse: the tool output the model reads, cut by :mod:`ctxd.context.cut_rules`.

The same decisions the shell wrapper takes before Python starts (a tool never cut, an output within the limit,
a Bash output Claude Code previews itself, a turn whose prompt asked for whole output) are taken here again, so
``ctxd hook PostToolUse`` run without the wrapper does the same; only here are the finer ones taken (a Read that
names a range, the output's real size in characters).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ctxd.context.cut_rules import asks_whole, previewed_from, rule
from ctxd.service.claude_state import is_whole, set_whole


def note_prompt(notes_path: str | None, prompt: str) -> None:
    """Remember until the next prompt whether this one asks to see tool output whole."""
    if notes_path is not None:
        from ctxd.store.dirs import makedirs_private

        makedirs_private(notes_path.rpartition("/")[0])
        set_whole(notes_path, asks_whole(prompt))


def cut_tool_output(payload: Mapping[str, Any], limit: int, notes_path: str | None) -> tuple[str, str]:
    """(the hook's output, a line for the log): ``updatedToolOutput`` when the output is cut, else nothing."""
    from ctxd.context.tool_output import output_chars, truncate_output

    tool = payload.get("tool_name")
    tool = tool if isinstance(tool, str) else ""
    response = payload.get("tool_response")
    how = rule(tool, payload.get("tool_input"), limit)
    if how is None or response is None:
        return "", ""
    size = output_chars(response)
    if size <= how.limit:
        return "", ""
    previewed = previewed_from(tool, "claude")
    if previewed is not None and size > previewed:
        return "", ""  # Claude Code sends the model its own short preview of this output
    if notes_path is not None and is_whole(notes_path):
        return "", f"PostToolUse: {tool} output of {size:,} characters kept whole (the prompt asked for it)"
    cut = truncate_output(response, how.limit, hint=how.hint, style=how.style)
    if cut is None:
        return "", ""
    out = {"hookSpecificOutput": {"hookEventName": "PostToolUse", "updatedToolOutput": cut}}
    note = f"PostToolUse: {tool} output cut from {size:,} to {output_chars(cut):,} characters (limit {how.limit:,})"
    return json.dumps(out, ensure_ascii=False), note
