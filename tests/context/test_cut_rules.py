"""Which tool outputs ctxd cuts and how (ctxd.context.cut_rules), and the log cut that keeps head, errors, tail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxd.context.cut_rules import DEFAULT_LIMIT, NEVER, asks_whole, rule, skipped_tools
from ctxd.context.truncate import MIN_KEEP, truncate_log
from ctxd.service.claude_cuts import cut_tool_output, note_prompt
from ctxd.service.claude_state import marker


def _log(n: int, errors: dict[int, str]) -> str:
    return "".join(errors.get(i, f"[{i:05d}] compiling module {i}") + "\n" for i in range(n))


def test_edits_writes_and_subagent_answers_are_never_cut() -> None:
    for tool in ("Edit", "MultiEdit", "Write", "NotebookEdit", "Task", "Agent", "edit", "write", "apply_patch"):
        assert tool in NEVER and rule(tool, {}, 1_000) is None
    assert {"Edit", "Write", "Task"} <= set(skipped_tools(DEFAULT_LIMIT))


def test_a_read_that_names_a_range_is_never_cut_and_a_whole_file_read_is_cut_at_its_head() -> None:
    assert rule("Read", {"file_path": "/a", "offset": 100}, 1_000) is None
    assert rule("read", {"path": "a", "limit": 50}, 1_000) is None
    whole = rule("Read", {"file_path": "/a"}, 1_000)
    assert whole is not None and whole.style == "head" and "offset and limit" in (whole.hint or "")
    for tool in ("Grep", "Glob", "WebFetch", "WebSearch", "mcp__github__get_file"):
        cut = rule(tool, {}, 1_000)
        assert cut is not None and cut.style == "head"


def test_shell_outputs_keep_head_errors_and_tail() -> None:
    for tool in ("Bash", "BashOutput", "bash", "exec_command"):
        cut = rule(tool, {"command": "make"}, 1_000)
        assert cut is not None and cut.style == "log"


def test_bash_is_skipped_only_while_the_limit_reaches_claudes_own_preview() -> None:
    assert "Bash" in skipped_tools(30_000) and "Bash" not in skipped_tools(29_999)
    assert "Bash" not in skipped_tools(30_000, agent="pi")


def test_a_cut_log_keeps_its_first_lines_its_error_lines_and_its_end() -> None:
    text = _log(5_000, {1_234: "src/a.c:12: error: 'x' undeclared", 3_000: "Traceback (most recent call last):"})
    cut = truncate_log(text, 8_000)
    assert len(cut) <= 8_000
    assert cut.startswith("[00000] compiling module 0\n")
    assert cut.endswith("[04999] compiling module 4999\n")
    assert "src/a.c:12: error: 'x' undeclared\nTraceback (most recent call last):\n" in cut
    assert "[ctxd truncated this tool result: " in cut and "2 error lines of the cut part kept below" in cut
    assert "[02500] compiling module 2500" not in cut
    assert truncate_log(text, len(text)) == text
    assert len(truncate_log("x" * 50_000, 10)) >= MIN_KEEP  # never below MIN_KEEP, even without newlines


@pytest.mark.parametrize(
    ("prompt", "whole"),
    [
        ("Show me the full output of the test run", True),
        ("Read the WHOLE FILE and summarise it", True),
        ("Please don't truncate anything", True),
        ("cat the log, ctxd:whole", True),
        ("Fix the failing test", False),
        ("Make the output complete before you commit", False),
    ],
)
def test_a_prompt_asking_for_whole_output_is_recognised(prompt: str, whole: bool) -> None:
    assert asks_whole(prompt) is whole


def _post(tool: str, response: Any, tool_input: Any = None) -> dict[str, Any]:
    return {"session_id": "s", "tool_name": tool, "tool_input": tool_input or {}, "tool_response": response}


def test_claudes_bash_is_cut_only_below_its_own_preview(tmp_path: Path) -> None:
    notes = str(tmp_path / "claude" / "s.json")
    small = {"stdout": _log(1_000, {}), "stderr": ""}  # ~27,000 characters
    out, note = cut_tool_output(_post("Bash", small), 5_000, notes)
    cut = json.loads(out)["hookSpecificOutput"]["updatedToolOutput"]
    assert len(cut["stdout"]) <= 5_000 and cut["stdout"].endswith("[00999] compiling module 999\n")
    assert note.startswith("PostToolUse: Bash output cut from ")
    big = {"stdout": _log(3_000, {}), "stderr": ""}  # over 30,000: Claude Code previews it itself
    assert cut_tool_output(_post("Bash", big), 5_000, notes) == ("", "")
    assert cut_tool_output(_post("Edit", {"originalFile": "y" * 90_000}), 5_000, notes) == ("", "")
    ranged = {"type": "text", "file": {"filePath": "/a", "content": "z\n" * 40_000}}
    assert cut_tool_output(_post("Read", ranged, {"file_path": "/a", "limit": 40_000}), 5_000, notes) == ("", "")
    assert cut_tool_output(_post("Read", ranged, {"file_path": "/a"}), 5_000, notes)[0]


def test_after_a_prompt_asking_for_whole_output_nothing_is_cut_until_the_next_prompt(tmp_path: Path) -> None:
    notes = str(tmp_path / "claude" / "s.json")
    read = _post("Read", {"type": "text", "file": {"filePath": "/a", "content": "z\n" * 40_000}})
    note_prompt(notes, "Show me the whole file")
    assert Path(marker(notes, "whole")).exists()
    out, note = cut_tool_output(read, 5_000, notes)
    assert out == "" and "kept whole (the prompt asked for it)" in note
    note_prompt(notes, "Now fix it")
    assert not Path(marker(notes, "whole")).exists()
    assert cut_tool_output(read, 5_000, notes)[0]
