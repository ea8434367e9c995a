"""The shape ctxd asks every summariser for (litellm's prompt, Codex's and opencode's compaction prompts): the
offline summary's sections, in its order."""

from __future__ import annotations

HEADINGS = (
    "## State now",
    "## Goal",
    "## What the user said",
    "## Constraints & Preferences",
    "## Tasks",
    "## How to build, test and run",
)


def assert_summary_shape(prompt: str) -> None:
    """The state now first (the task under way, uncommitted, failing, blocked, next step), the goal, the user's
    messages and constraints, then task by task (asked, done with commits and checks, errors and their fix or
    still open, decisions with reason, alternative and correction, final state), then the commands."""
    at = [prompt.index(h) for h in HEADINGS]
    assert at == sorted(at), at
    state = prompt[at[0] : at[1]]
    for item in ("Task under way:", "not committed:", "Still failing:", "Blocked:", "Next step:"):
        assert item in state, item
    task = prompt[at[4] : at[5]]
    for item in ("Asked:", "own words", "Done:", "commits", "hash", "checks that passed", "Problem:", "still open"):
        assert item in task, item
    for item in ("Decision:", "reason", "alternative rejected", "correction", "Closed:", "pushed"):
        assert item in task, item
    assert "last outcome" in prompt[at[5] :]
