"""Mistakes the offline summary and the must-keep sheet made on real sessions, each pinned by a test that failed
before its fix: text an agent injects taken for the user's words, a pasted log taken for a request, a lone link
not taken for the goal, files named relative to the project taken for missing, and a failure called resolved
while it came back to the end."""

from __future__ import annotations

from typing import Any

from test_summarizers_offline import asst, call, result, section, task, text, user

from ctxd.compaction.ledger.mustkeep import must_keep_facts
from ctxd.compaction.reading.facts import scan
from ctxd.compaction.summary import OfflineSummarizer, SummaryRequest


def build(messages: list[dict[str, Any]]) -> str:
    return OfflineSummarizer(scale=False).build(SummaryRequest(messages=messages))


NOTIFICATION = (
    "<task-notification>\n<task-id>b7b23b2</task-id>\n<output-file>/tmp/claude-1000/tasks/b7b23b2.output"
    '</output-file>\n<status>completed</status>\n<summary>Background command "Run new tests" completed (exit code '
    "0)</summary>\n</task-notification>\nRead the output file to retrieve the result: /tmp/claude-1000/tasks/"
    "b7b23b2.output"
)


def test_the_sentence_claude_code_adds_after_a_task_notification_is_not_the_users() -> None:
    messages = [
        user("Add retries to the uploader and make the tests pass."),
        asst(call("t", "bash", command="pytest -q"), text("Running the tests in the background.")),
        result("t", "bash", "Command running in background with ID: b7b23b2."),
        user(NOTIFICATION),
        asst(text("The background run passed: 31 tests.")),
    ]
    facts = scan(messages)
    assert facts.latest_request == "Add retries to the uploader and make the tests pass."
    sheet = must_keep_facts(messages)
    assert not any("Read the output file" in f.text for f in sheet.facts)
    out = build(messages)
    assert "Read the output file" not in section(out, "What the user said (oldest first)")
    assert "### T2" not in out  # the notification starts no task of its own


def test_a_pasted_log_is_not_the_latest_request() -> None:
    log = "\n".join(
        f"2026-02-12T10:{n:02d}:00Z ERROR worker[{n}] Traceback (most recent call last): KeyError: 'tenant_{n}'"
        for n in range(30)
    )
    messages = [
        user("Find out why the nightly import crashes."),
        asst(text("Can you paste the worker log?")),
        user(log),
        asst(text("The worker looks up a tenant that was deleted.")),
    ]
    facts = scan(messages)
    assert facts.latest_request == "Find out why the nightly import crashes."
    assert facts.reported  # the log's error lines are kept as what the user reported
    sheet = must_keep_facts(messages)
    assert [f.text for f in sheet.by_kind("request")] == [] or all("ERROR worker" not in f.text for f in sheet.facts)


def test_a_first_message_that_is_only_a_link_is_the_goal() -> None:
    link = "https://github.com/acme/billing/issues/482"
    messages = [
        user(link),
        asst(call("v", "bash", command="gh issue view 482"), text("Reading the issue.")),
        result("v", "bash", "title:\tInvoices round totals twice\n--\nTotals are rounded per line and again."),
        user("Make sure to keep the public API unchanged."),
        asst(text("Understood.")),
    ]
    facts = scan(messages)
    assert facts.first_request == link
    goal = must_keep_facts(messages).by_kind("goal")
    assert [f.text for f in goal] == [link]  # the remark that came later is not the goal
    out = build(messages)
    assert section(out, "Goal").startswith(f"- {link}")
    assert "keep the public API unchanged" in section(out, "Constraints & Preferences")


def test_files_named_relative_to_the_project_are_not_missing() -> None:
    root = "/home/dev/projects/billing"
    messages = [
        user("Pin the dialyzer flags and the test config."),
        *[
            m
            for n, path in enumerate(("mix.exs", "config/test.exs", ".dialyzerignore", "lib/billing/invoice.ex"))
            for m in (
                asst(call(f"e{n}", "edit", path=f"{root}/{path}", oldText="a", newText="b")),
                result(f"e{n}", "edit", "ok"),
            )
        ],
    ]
    sheet = must_keep_facts(messages)
    summary = "Changed mix.exs, config/test.exs, .dialyzerignore and lib/billing/invoice.ex."
    missing = [f.text for f in sheet.missing(summary).facts if f.kind == "file-modified"]
    assert missing == []


def test_a_failure_that_recurs_to_the_end_is_not_called_resolved() -> None:
    hook = "Pre-commit validation failed: [DIALYZER] 1 error found"
    messages = [
        user("Commit the tracing helpers."),
        asst(call("c1", "bash", command="git add -A && git commit -m 'feat: tracing'")),
        result("c1", "bash", f"{hook}\nexit code 1", error=True),
        asst(call("f", "edit", path="/p/lib/trace.ex", oldText="a", newText="b")),
        result("f", "edit", "ok"),
        asst(call("c2", "bash", command="git add -A && git commit -m 'feat: tracing'")),
        result("c2", "bash", f"{hook}\nexit code 1", error=True),
        asst(text("The hook still fails: this is a false positive, all tests pass.")),
        asst(call("c3", "bash", command="git commit --no-verify -m 'feat: tracing'")),
        result("c3", "bash", f"{hook}\nexit code 1", error=True),
        asst(text("I'll leave it for now.")),
    ]
    out = build(messages)
    state = section(out, "State now")
    assert f"Still failing: `git add -A && git commit -m 'feat: tracing'` failed 3 times: \"{hook}\"" in state
    assert "(resolved)" not in out and "-> fixed" not in task(out, 1)
    sheet = must_keep_facts(messages)
    errors = sheet.by_kind("error")
    assert errors and not any(f.resolved for f in errors if "DIALYZER" in f.text)
