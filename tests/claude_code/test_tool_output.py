"""PostToolUse: an oversized tool output reaches the model cut by ctxd, in the shape Claude Code expects; a hook
with nothing to do never starts Python."""

from __future__ import annotations

import sys
from pathlib import Path

from fakes.anthropic_server import FakeAnthropicServer, call, say

from .harness import ClaudeCode

LIMIT = 6_000


def test_an_oversized_bash_output_reaches_the_model_truncated(
    claude: ClaudeCode, anthropic: FakeAnthropicServer
) -> None:
    claude.extra_env["CTXD_TOOL_OUTPUT_LIMIT"] = str(LIMIT)
    anthropic.script(
        call("Bash", command="seq 1 4000"),  # 18,893 characters: under Claude's own 30,000, over ctxd's limit
        call("Bash", command="echo small output"),
        say("Counted."),
    )
    run = claude.run("Count to 4000.")
    assert run.returncode == 0, run.stderr
    assert run.result["result"] == "Counted."

    main = anthropic.of_kind("main")
    assert len(main) == 3
    (big,) = main[1].tool_results()
    text = big["content"] if isinstance(big["content"], str) else "".join(b.get("text", "") for b in big["content"])
    assert text.startswith("1\n2\n3\n") and text.rstrip().endswith("\n4000")  # a shell's log: head and tail
    assert "[ctxd truncated this tool result: " in text
    assert len(text) <= LIMIT + 200, len(text)  # the cut part plus Claude's own framing
    assert "\n2000\n" not in text
    (small,) = main[2].tool_results()
    assert "small output" in str(small["content"]) and "ctxd truncated" not in str(small["content"])
    assert "PostToolUse: Bash output cut from 18,892" in claude.log_text()


def test_without_a_limit_small_outputs_pass_untouched(claude: ClaudeCode, anthropic: FakeAnthropicServer) -> None:
    anthropic.script(call("Bash", command="seq 1 4000"), say("Counted."))
    run = claude.run("Count to 4000.")
    assert run.returncode == 0, run.stderr
    (result,) = anthropic.of_kind("main")[1].tool_results()
    assert "ctxd truncated" not in str(result["content"]) and "\n4000" in str(result["content"])


def _counting_ctxd(claude: ClaudeCode) -> Path:
    """CTXD_BIN: a ctxd that records each start (its arguments) in a file, then runs this environment's ctxd."""
    counter = claude.base / "ctxd-starts"
    script = claude.base / "counting-ctxd"
    script.write_text(f'#!/bin/sh\necho "$*" >>{counter}\nexec {Path(sys.executable).parent / "ctxd"} "$@"\n')
    script.chmod(0o755)
    claude.extra_env["CTXD_BIN"] = str(script)
    return counter


def test_with_the_default_limit_a_long_read_reaches_the_model_cut_and_small_calls_start_no_python(
    claude: ClaudeCode, anthropic: FakeAnthropicServer
) -> None:
    starts = _counting_ctxd(claude)
    lines = "".join(f"{i:05d} a line of the generated table, forty wide\n" for i in range(1, 1_501))  # ~67,500
    (claude.project / "table.txt").write_text(lines)
    anthropic.script(
        call("Bash", command="echo small output"),
        call("Read", file_path=str(claude.project / "table.txt")),
        say("Read it."),
    )
    run = claude.run("Read table.txt.")
    assert run.returncode == 0, run.stderr
    main = anthropic.of_kind("main")
    (small,) = main[1].tool_results()
    assert "small output" in str(small["content"]) and "ctxd truncated" not in str(small["content"])
    (read,) = main[2].tool_results()
    text = read["content"] if isinstance(read["content"], str) else "".join(b.get("text", "") for b in read["content"])
    assert "00001 a line of the generated table" in text and "01500 a line" not in text
    assert "[ctxd truncated this tool result: " in text and "Read it again with offset and limit" in text
    assert len(text) < 40_000, len(text)  # 30,000 characters of the file plus Claude's line numbers
    assert "PostToolUse: Read output cut from " in claude.log_text()
    started = starts.read_text().splitlines()
    # SessionStart and SessionEnd always run ctxd (the first writes hooks.env); of the prompt and the two tool
    # calls, only the Read that needed a cut started it.
    assert started.count("hook PostToolUse") == 1, started
    assert "hook UserPromptSubmit" not in started, started


def test_a_prompt_asking_for_the_whole_file_gets_it_whole(claude: ClaudeCode, anthropic: FakeAnthropicServer) -> None:
    starts = _counting_ctxd(claude)
    lines = "".join(f"{i:05d} a line of the generated table, forty wide\n" for i in range(1, 1_501))
    (claude.project / "table.txt").write_text(lines)
    anthropic.script(call("Read", file_path=str(claude.project / "table.txt")), say("Read it."))
    run = claude.run("Show me the whole file table.txt.")
    assert run.returncode == 0, run.stderr
    (read,) = anthropic.of_kind("main")[1].tool_results()
    assert "ctxd truncated" not in str(read["content"]) and "01500 a line" in str(read["content"])
    assert "hook PostToolUse" not in starts.read_text().splitlines()


def test_claude_code_does_not_start_the_hook_for_tools_never_cut(
    claude: ClaudeCode, anthropic: FakeAnthropicServer
) -> None:
    """hooks.json's PostToolUse matcher leaves out Edit, Write, ... (ctxd never cuts them): Claude Code starts no
    hook process for them at all. A copy of the plugin whose wrapper records each start shows it."""
    import shutil

    from .harness import PLUGIN

    plugin = claude.base / "plugin"
    shutil.copytree(PLUGIN, plugin)
    starts = claude.base / "hook-starts"
    real = plugin / "bin" / "ctxd-hook-real"
    (plugin / "bin" / "ctxd-hook").rename(real)
    recorder = plugin / "bin" / "ctxd-hook"
    recorder.write_text(f'#!/bin/sh\necho "$1" >>{starts}\nexec "{real}" "$@"\n')
    recorder.chmod(0o755)
    claude.plugin_dir = plugin
    target = claude.project / "notes.txt"
    anthropic.script(
        call("Write", file_path=str(target), content="first\n"),
        call("Edit", file_path=str(target), old_string="first", new_string="second"),
        call("Bash", command="echo small output"),
        say("Done."),
    )
    run = claude.run("Write notes.txt, edit it, then echo.")
    assert run.returncode == 0, run.stderr
    assert target.read_text() == "second\n"
    assert starts.read_text().splitlines().count("PostToolUse") == 1  # the Bash call's only
