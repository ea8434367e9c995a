"""What a resuming agent reads as "changed and not committed" follows what git was told to throw away
(``git checkout -- .``, ``git restore``, ``git reset --hard``, ``git stash``) and folders removed whole; an
earlier summary's goal read again at a different length is told once."""

from __future__ import annotations

from typing import Any

from test_summarizers_offline import asst, call, result, user

from ctxd.compaction.reading.actions import actions_of
from ctxd.compaction.summary import OfflineSummarizer, SummaryRequest
from ctxd.compaction.summary.document import SummaryDoc, merge, same_text
from ctxd.compaction.summary.serialize import middle_truncate


def build(messages: list[dict[str, Any]]) -> str:
    return OfflineSummarizer(scale=False).build(SummaryRequest(messages=messages))


def state_changed(summary: str) -> str:
    return next(line for line in summary.splitlines() if "Changed and not committed" in line)


def _edits_then(command: str) -> list[dict[str, Any]]:
    return [
        user("Rework the ledger's rounding, then we will see."),
        asst(call("c0", "bash", command="git status --short")),
        result("c0", "bash", ""),
        asst(call("e1", "edit", path="/proj/src/ledger.py", oldText="round(x)", newText="round(x, 2)")),
        result("e1", "edit", "Successfully replaced text"),
        asst(call("w1", "write", path="/proj/src/rounding_notes.md", content="# notes\n")),
        result("w1", "write", "File created successfully at /proj/src/rounding_notes.md"),
        asst(call("w2", "write", path="/proj/src/copies/a.py", content="def a(): ...\n")),
        result("w2", "write", "File created successfully at /proj/src/copies/a.py"),
        user("Actually, revert that; we keep the old rounding."),
        asst(call("r1", "bash", command=command)),
        result("r1", "bash", ""),
        asst(call("t1", "bash", command="pytest -q tests/test_ledger.py")),
        result("t1", "bash", "3 passed in 0.12s"),
    ]


def test_a_discard_takes_the_tracked_changes_out_and_leaves_the_files_git_does_not_track() -> None:
    before = state_changed(build(_edits_then("cd /proj && git status")))
    assert "ledger.py" in before
    for command in (
        "cd /proj && git checkout -- .",
        "cd /proj && git restore src/ledger.py",
        "git reset --hard HEAD",
        "git stash",
    ):
        line = state_changed(build(_edits_then(command)))
        assert "ledger.py" not in line, (command, line)
        assert "rounding_notes.md" in line, (command, line)  # created, untracked: git kept it


def test_a_folder_removed_whole_takes_what_was_made_in_it() -> None:
    kept = state_changed(build(_edits_then("git status")))
    assert "copies" in kept
    line = state_changed(build(_edits_then("cd /proj && git checkout -- . && rm -rf src/copies")))
    assert "copies" not in line, line


def test_commands_that_keep_the_changes_discard_nothing() -> None:
    for command in ("git checkout main", "git restore --staged src/a.py", "git stash list", "git reset HEAD~1"):
        assert not [a for a in actions_of(command, "", True) if a.kind == "discard"], command
    assert [a.text for a in actions_of("git checkout -- src/a.py src/b.py", "", True)] == ["src/a.py src/b.py"]
    assert [a.text for a in actions_of("git reset --hard", "", True)] == [""]
    assert actions_of("git checkout -- .", "error: pathspec", False) == []


def test_one_goal_cut_to_two_lengths_is_told_once() -> None:
    goal = "Read the parser and the renderer in full, then plan how to untangle them. " * 12
    old = SummaryDoc(goal=[middle_truncate(goal, 600)])
    new = SummaryDoc(goal=[middle_truncate(goal, 400), "Later request: and add tests for the renderer"])
    merged = merge(old, new)
    assert merged.goal == [middle_truncate(goal, 600), "Later request: and add tests for the renderer"]
    assert same_text(goal, middle_truncate(goal, 300))
    assert not same_text(goal, middle_truncate("Write the parser first. " + goal, 300))


def test_the_summarisers_former_package_still_gives_their_public_names() -> None:
    from ctxd.compaction import summarizers, summary

    assert summarizers.OfflineSummarizer is summary.OfflineSummarizer
    assert summarizers.create_summarizer is summary.create_summarizer
    assert summarizers.SummaryRequest is summary.SummaryRequest


def test_a_call_the_user_stopped_is_not_a_failure_left_open() -> None:
    for said in ("Command aborted", "[Request interrupted by user for tool use]", "Aborted by user"):
        messages = [
            user("Run the checks on the ledger."),
            asst(call("c1", "bash", command="npm run check")),
            result("c1", "bash", said, error=True),
            user("Stop; we do it later."),
        ]
        summary = build(messages)
        assert "Still failing" not in summary, (said, summary)
    messages[2] = result("c1", "bash", "error TS2304: Cannot find name 'Ledger'.", error=True)
    assert "Still failing: `npm run check`" in build(messages)
