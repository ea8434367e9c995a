"""PostToolUse: an oversized tool output reaches the model cut by ctxd, in the shape Claude Code expects."""

from __future__ import annotations

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
    assert text.startswith("1\n2\n3\n")
    assert "[ctxd truncated this tool result: " in text
    assert len(text) <= LIMIT + 200, len(text)  # the cut part plus Claude's own framing
    assert "\n4000" not in text
    (small,) = main[2].tool_results()
    assert "small output" in str(small["content"]) and "ctxd truncated" not in str(small["content"])
    assert "PostToolUse: Bash output cut from 18,892" in claude.log_text()


def test_without_a_limit_small_outputs_pass_untouched(claude: ClaudeCode, anthropic: FakeAnthropicServer) -> None:
    anthropic.script(call("Bash", command="seq 1 4000"), say("Counted."))
    run = claude.run("Count to 4000.")
    assert run.returncode == 0, run.stderr
    (result,) = anthropic.of_kind("main")[1].tool_results()
    assert "ctxd truncated" not in str(result["content"]) and "\n4000" in str(result["content"])
