"""Cutting a structured tool output (Claude Code's ``tool_response``) keeps its shape and seed 004's rules."""

from __future__ import annotations

from ctxd.context.tool_output import output_chars, truncate_output
from ctxd.context.truncate import MIN_KEEP


def _lines(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(1, n + 1))


def test_an_output_within_the_limit_is_left_alone() -> None:
    response = {"stdout": "ok", "stderr": "", "interrupted": False}
    assert truncate_output(response, 10_000) is None
    assert truncate_output("short", 10_000) is None


def test_a_bash_result_keeps_its_keys_and_types_and_is_cut_at_a_newline() -> None:
    stdout = _lines(5_000)
    response = {"stdout": stdout, "stderr": "warning: x", "interrupted": False, "isImage": False}
    cut = truncate_output(response, 8_000)
    assert cut is not None
    assert set(cut) == set(response) and cut["interrupted"] is False and cut["stderr"] == "warning: x"
    head, notice = cut["stdout"].split("\n\n[ctxd truncated this tool result: ")
    assert stdout.startswith(head + "\n")  # cut at a line's end
    assert notice.startswith(f"{len(stdout) - len(head):,} of {len(stdout):,} characters removed")
    assert output_chars(cut) <= 8_000 + len("warning: x")
    assert response["stdout"] == stdout  # the input is not changed


def test_a_read_result_is_cut_inside_its_nested_file_content() -> None:
    response = {"type": "text", "file": {"filePath": "/p/a.py", "content": _lines(20_000), "numLines": 20_000}}
    cut = truncate_output(response, 12_000, hint="Read it again with offset and limit.")
    assert cut is not None
    assert cut["file"]["filePath"] == "/p/a.py" and cut["file"]["numLines"] == 20_000
    assert cut["file"]["content"].endswith("Read it again with offset and limit.]")
    assert len(cut["file"]["content"]) <= 12_000


def test_long_strings_share_the_limit_by_size_and_keep_at_least_min_keep() -> None:
    response = [{"type": "text", "text": "a" * 90_000}, {"type": "text", "text": "b" * 10_000}, "c" * 100]
    cut = truncate_output(response, 20_000)
    assert cut is not None
    assert len(cut[0]["text"]) <= 18_000 and len(cut[0]["text"]) > 17_000
    assert MIN_KEEP <= len(cut[1]["text"]) <= 2_000 + 200
    assert cut[2] == "c" * 100
    assert truncate_output("x" * 50_000, 10_000) is not None
