"""The shape ctxd asks every summariser for (litellm's prompt, Codex's and opencode's compaction prompts)."""

from __future__ import annotations


def assert_summary_shape(prompt: str) -> None:
    """The shape ctxd asks every summariser for, the offline summary's: the state now first (uncommitted, failing,
    blocked, next step), then task by task (asked, done, errors, decisions, final state), then the commands, the
    user's constraints and messages."""
    headings = ("## State now", "## Tasks", "## How to build, test and run", "## User constraints", "## User messages")
    at = [prompt.index(h) for h in headings]
    assert at == sorted(at)
    state = prompt[at[0] : at[1]]
    for item in ("Uncommitted:", "Failing:", "Blocked:", "Next step:"):
        assert item in state
    task = prompt[at[1] : at[2]]
    for item in ("Asked:", "own words", "Done:", "commits", "hash", "Errors:", "still open", "Decisions:", "reason"):
        assert item in task
    assert "Final state:" in task and "pushed" in task
