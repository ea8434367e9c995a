"""A plan a real Claude Code session follows, across two ``/compact`` with the ctxd plugin: the first range writes
PLAN.md and ticks Step 1, the second only ticks Step 2 (an Edit, after a partial Read, which ctxd does not take as
the file's text). The second compaction's instructions, its check and the facts re-injected after it name Step 3
as the plan's next open item: the hooks carried the plan document from the first compaction in their notes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from fakes.anthropic_server import FakeAnthropicServer, RecordedRequest, _texts, call, say

from .harness import ClaudeCode

PLAN = "# Plan\n\n- [ ] Step 1: write the parser\n- [ ] Step 2: add the cache\n- [ ] Step 3: write the docs\n"
SUMMARY = "<summary>The user asked to follow PLAN.md step by step.</summary>"
NEXT = "Next open plan item: "


@attrs.define
class Run:
    claude: ClaudeCode
    server: FakeAnthropicServer
    results: list[dict[str, Any]]

    def summaries(self) -> list[RecordedRequest]:
        return [r for r in self.server.requests if r.kind == "summary"]

    def first_main_after(self, summary: RecordedRequest) -> RecordedRequest:
        requests = self.server.requests
        at = requests.index(summary)
        return next(r for r in requests[at + 1 :] if r.kind == "main")


def _last(request: RecordedRequest) -> str:
    """The text of the request's last user message."""
    users = [m for m in request.messages if m.get("role") == "user"]
    return "\n".join(_texts(users[-1].get("content")))


def _next_items(text: str) -> list[str]:
    return [line.split(NEXT, 1)[1].split(" (plan: ")[0] for line in text.splitlines() if NEXT in line]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    from .harness import PLUGIN

    with FakeAnthropicServer() as server:
        claude = ClaudeCode(tmp_path_factory.mktemp("plans"), server, plugin_dir=PLUGIN)
        plan = str(claude.project / "PLAN.md")
        server.summary_text = SUMMARY

        def tick(step: str) -> Any:
            return call("Edit", file_path=plan, old_string=f"- [ ] {step}", new_string=f"- [x] {step}")

        server.script(
            call("Write", file_path=plan, content=PLAN),
            tick("Step 1: write the parser"),
            say("Step 1 is done."),
            # /compact (1)
            call("Read", file_path=plan, offset=1, limit=3),
            tick("Step 2: add the cache"),
            say("Step 2 is done."),
            # /compact (2)
            say("Going on."),
        )
        prompts = ["Follow the plan in PLAN.md, one step at a time.", "/compact", "Go on.", "/compact", "Next?"]
        results = claude.converse(*prompts, timeout=300)
        yield Run(claude, server, results)


def test_the_plan_file_was_written_and_ticked_by_claude_code(run: Run) -> None:
    text = (run.claude.project / "PLAN.md").read_text()
    assert "- [x] Step 1" in text and "- [x] Step 2" in text and "- [ ] Step 3" in text
    assert len(run.summaries()) == 2 and all(not r.get("is_error") for r in run.results)


def test_each_compaction_names_the_plans_current_next_item(run: Run) -> None:
    first, second = run.summaries()
    # The summarisation request ends with the PreCompact hook's output (its "Additional Instructions").
    assert _next_items(_last(first)) == ["Step 2: add the cache"]
    assert _next_items(_last(second)) == ["Step 3: write the docs"]  # main: Step 2, already ticked
    # Re-injected with the next prompt (the fake summary has no plan); the earlier blocks stay in the history.
    assert _next_items(run.first_main_after(second).text)[-1] == "Step 3: write the docs"
    notes = run.claude.state / "ctxd" / "claude" / f"{run.results[0]['session_id']}.json"
    kept = json.loads(notes.read_text())["plans"]
    assert [path.rsplit("/", 1)[-1] for path in kept] == ["PLAN.md"] and "- [x] Step 2" in next(iter(kept.values()))
