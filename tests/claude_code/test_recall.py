"""Recall over MCP in the real Claude Code with the ctxd plugin installed as the README says.

A benchmark's exact figure lives only in a tool result; ``/compact`` summarises it away (the fake summary keeps
the request, not the number). Asked for the figure, the fake model does what a model would: it calls the
plugin's ``search_history`` tool, reads the entry id of the hit, calls ``expand`` on it, and answers. What must
hold: the request after the compaction lacks the figure, both tool answers carry it, and each tool answer
reaches the next request. In ``-p`` mode Claude Code cannot ask for permission, so the run allows the plugin's
MCP server as a user would: ``--allowedTools mcp__plugin_ctxd_ctxd``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fakes.anthropic_server import FakeAnthropicServer, Turn, call, say

from .harness import TOOLS, ClaudeCode

FIGURE = "cold start: 418.7 ms over 25 runs (p95 433.1 ms)"
BENCH = f"print({FIGURE!r})\n"
SUMMARY = (
    "<summary>\n1. Primary Request and Intent: measure the loader's cold start with bench.py.\n"
    "2. Result: the benchmark ran; the loader is fast enough.\n</summary>"
)
SERVER = "mcp__plugin_ctxd_ctxd"
"""Claude Code's name for the plugin's MCP server (its tools are ``SERVER__<tool>``)."""


def _mcp_name(body: dict[str, Any], tool: str) -> str | None:
    """The full name of one of the plugin's MCP tools if the model can call it now: offered in ``tools``, or
    loaded by an earlier ToolSearch (its schema is in the conversation)."""
    names = [t.get("name", "") for t in body.get("tools", []) if isinstance(t, dict)]
    offered = [n for n in names if n.startswith("mcp__") and n.endswith(f"__{tool}")]
    if offered:
        return offered[0]
    loaded = re.findall(rf"mcp__\w+?__{tool}\b", json.dumps(body["messages"]))
    return loaded[0] if loaded else None


def _last_tool_result(body: dict[str, Any]) -> str:
    """The text of the newest tool_result block the request carries ("" without one)."""
    for message in reversed(body["messages"]):
        content = message.get("content")
        blocks = (
            [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
            if isinstance(content, list)
            else []
        )
        if blocks:
            inner = blocks[-1].get("content")
            return inner if isinstance(inner, str) else "\n".join(c.get("text", "") for c in inner or [])
    return ""


@pytest.fixture(scope="module")
def recalled(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with FakeAnthropicServer() as server:
        claude = ClaudeCode(tmp_path_factory.mktemp("claude"), server)
        install = claude.install_plugin()
        assert install.returncode == 0, install.stderr
        (claude.project / "bench.py").write_text(BENCH)
        server.summary_text = SUMMARY
        server.script(call("Bash", command="python3 bench.py"), say("The benchmark ran; the loader is fast enough."))
        first = claude.run("Measure the loader's cold start with bench.py.")
        session = first.result["session_id"]
        compacted = claude.run("/compact", resume=session)
        before = len(server.requests)
        seen: dict[str, str] = {}

        def model(body: dict[str, Any]) -> Turn:
            """The fake model's turn, from what it was sent (as a model decides)."""
            search, expand = _mcp_name(body, "search_history"), _mcp_name(body, "expand")
            if "search" not in seen and search is None:
                # Claude Code defers MCP tools (and says the server is still connecting): load them first.
                seen["toolsearch"] = "asked"
                return call("ToolSearch", query="+ctxd history search expand", max_results=5)
            if "search" not in seen:
                seen["search"] = "asked"
                return call(search or "", query="cold start")
            if "expand" not in seen:
                seen["search"] = _last_tool_result(body)
                hit = re.search(r"toolResult \(Bash\)  entry (\S+)", seen["search"])
                if hit is None or expand is None:  # the test fails on seen; the model ends the turn
                    seen["expand"] = ""
                    return say("I could not find it.")
                seen["expand"] = "asked"
                return call(expand, entry_id=hit.group(1))
            seen["expand"] = _last_tool_result(body)
            return say("The cold start was 418.7 ms over 25 runs.")

        server.script(model, model, model, model)
        asked = claude._run(
            ["-p", "What exactly was the cold start figure?", "--output-format", "json", "--resume", session,
             "--allowedTools", f"{TOOLS} {SERVER}"],
            cwd=claude.project,
            timeout=180,
        )  # fmt: skip
        yield claude, server, [first, compacted, asked], server.requests[before:], seen


def test_the_model_finds_a_dropped_figure_through_the_plugins_mcp_tools(recalled: Any) -> None:
    claude, _, runs, after, seen = recalled
    for run in runs:
        assert run.returncode == 0, (run.stdout, run.stderr, claude.log_text())
    main = [r for r in after if r.kind == "main"]
    # The premise: after the compaction, the figure is not in what the model was sent.
    assert "418.7" not in main[0].text and "bench.py" in main[0].text
    # search_history found the tool result (summarised away), expand read it whole.
    assert "418.7" in seen["search"] and "[summarised away]" in seen["search"], seen
    assert FIGURE in seen["expand"] and "(Bash)" in seen["expand"], seen
    # Each tool answer reached the next request: the search's in the request that expands, the expansion's in
    # the one that answers (the last two; a ToolSearch that loads the deferred tools may come first).
    assert len(main) in (3, 4), [r.text[-300:] for r in main]
    searched, expanded = main[-2], main[-1]
    assert [t.name for t in searched.response.tools] == [f"{SERVER}__expand"]
    assert [t.name for t in main[-3].response.tools] == [f"{SERVER}__search_history"]
    assert "418.7" in searched.text and FIGURE in expanded.text
    assert "418.7" not in "".join(r.text for r in main[: len(main) - 2])
    assert runs[2].result["result"] == "The cold start was 418.7 ms over 25 runs."


def test_the_plugin_declares_the_server_beside_its_hooks(recalled: Any) -> None:
    claude, *_ = recalled
    installed = list(Path(claude.config, "plugins").rglob(".mcp.json"))
    assert installed, "the installed plugin has no .mcp.json"
