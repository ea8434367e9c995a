"""The offline summariser, the transcript serialiser, summary merging and file-operation extraction."""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxd.compaction.reading.facts import scan
from ctxd.compaction.reading.fileops import (
    FileOps,
    call_command,
    extract_file_ops,
    file_lists,
    format_file_blocks,
    strip_file_blocks,
)
from ctxd.compaction.summary import (
    OfflineSummarizer,
    SummaryRequest,
    create_summarizer,
)
from ctxd.compaction.summary.document import merge, parse_summary
from ctxd.compaction.summary.serialize import (
    TOOL_RESULT_CHARS,
    middle_truncate,
    plan_chunks,
    serialize_conversation,
    serialize_messages,
)

# --- message builders -------------------------------------------------------------------------------------------


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 1}


def asst(*blocks: dict[str, Any], stop: str = "stop", error: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": list(blocks), "provider": "p", "model": "m"}
    message["stopReason"] = stop
    if error:
        message["errorMessage"] = error
    return message


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}


def result(call_id: str, name: str, output: str, error: bool = False) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": output}],
        "isError": error,
    }


def bash(command: str, output: str = "", code: int = 0) -> dict[str, Any]:
    return {
        "role": "bashExecution",
        "command": command,
        "output": output,
        "exitCode": code,
        "cancelled": False,
        "truncated": False,
    }


FILE_BODY = "".join(f"def handler_{i}(args):\n    return run(args, {i})\n\n" for i in range(200))
"""A file's contents, so that the session is the size of a real one (a tiny range gets a one-line summary)."""


def session() -> list[dict[str, Any]]:
    return [
        user(
            "Add a --verbose flag to the CLI in src/cli.py. You must keep Python 3.8 compatibility. "
            "Don't add new dependencies. Should I worry about Windows?"
        ),
        asst(text("Let me look at the CLI."), call("c1", "read", path="src/cli.py")),
        result("c1", "read", "import argparse\n" + FILE_BODY),
        asst(call("c2", "edit", path="src/cli.py", oldText="a", newText="b")),
        result("c2", "edit", "Successfully replaced text"),
        asst(call("c3", "bash", command="pytest -q")),
        result("c3", "bash", "1 failed: test_verbose\nCommand exited with code 1", error=True),
        asst(
            text("The test fails because the default is wrong. I decided to use store_true instead of a string."),
            call("c4", "edit", path="src/cli.py", oldText="x", newText="y"),
        ),
        result("c4", "edit", "Successfully replaced text"),
        asst(call("c5", "bash", command="pytest -q")),
        result("c5", "bash", "5 passed"),
        asst(text("Added --verbose using store_true. All tests pass.")),
        user("Now document it in docs/cli.md. I prefer short examples and please use British spelling."),
        asst(call("c6", "write", path="docs/cli.md", content="# CLI\n"), call("c7", "bash", command="ls docs")),
        result("c6", "write", "Wrote docs/cli.md"),
        bash("make lint", "docs/cli.md:3: E501 line too long", code=2),
        asst(text("Next I will fix the lint error in docs/cli.md."), stop="aborted"),
    ]


def build(messages: list[dict[str, Any]], **kw: Any) -> str:
    """The full layout, whatever the size (scaling to small inputs has tests of its own)."""
    limits = kw.pop("limits", None)
    return OfflineSummarizer(limits, scale=False).build(SummaryRequest(messages=messages, **kw))


def section(summary: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", summary, re.S | re.M)
    assert match, f"no section {title!r} in:\n{summary}"
    return match.group(1)


def subsection(summary: str, title: str) -> str:
    match = re.search(rf"^### {re.escape(title)}\n(.*?)(?=^##|\Z)", summary, re.S | re.M)
    assert match, f"no subsection {title!r}"
    return match.group(1)


# --- the structured summary ---------------------------------------------------------------------------------


def task(summary: str, number: int) -> str:
    """The block of task ``T<number>``."""
    match = re.search(rf"^### T{number} · (.*?)(?=^### |^## |\Z)", summary, re.S | re.M)
    assert match, f"no task T{number} in:\n{summary}"
    return match.group(1)


async def test_offline_result_tells_the_state_the_goal_and_each_task() -> None:
    res = await OfflineSummarizer().summarize(SummaryRequest(messages=session()))
    assert (res.summarizer, res.model, res.path, res.calls, res.usage) == ("offline", None, "offline", 0, None)
    out = res.text
    titles = re.findall(r"^## (.+)$", out, re.M)
    assert titles == [
        "State now",
        "Goal",
        "What the user said (oldest first)",
        "Constraints & Preferences",
        "Tasks (oldest first)",
        "How to build, test and run",
        "Recall",
    ]  # no "Files": every changed file is named in its task, and no file was only read
    state = section(out, "State now")
    assert state.startswith('- Task: T2 "Now document it in docs/cli.md." [interrupted]')  # the state first
    assert "Still failing: `make lint` (run by the user) failed" in state and "E501" in state
    assert "pytest" not in state  # that failure was fixed by a later successful run
    assert "No result recorded for `ls docs`" in state  # a call without a result: what the agent was doing
    assert "Next I will fix the lint error" in state  # the agent's last stated plan
    assert "Add a --verbose flag" in section(out, "Goal")
    said = section(out, "What the user said (oldest first)")
    assert said.index("Add a --verbose flag") < said.index("Now document it in docs/cli.md")

    constraints = section(out, "Constraints & Preferences")
    assert "You must keep Python 3.8 compatibility." in constraints
    assert "Don't add new dependencies." in constraints
    assert "I prefer short examples and please use British spelling." in constraints
    assert "Windows" not in constraints  # questions are not constraints

    first = task(out, 1)
    assert first.startswith("Add a --verbose flag to the CLI in src/cli.py. [done]")
    assert "Files: modified src/cli.py" in first
    assert "`pytest -q` x2 ok (5 passed), after 1 failed" in first  # the check and its outcome line
    assert '`pytest -q` failed: "1 failed: test_verbose" -> fixed' in first  # the problem and that it was fixed
    # the decision made while the test failed is told in that failure's chain, before what fixed it
    fixed = next(line for line in first.splitlines() if line.startswith("- Problem: `pytest -q` failed"))
    assert "I decided to use store_true instead of a string.; then changed cli.py; passed: ran `pytest -q`" in fixed
    assert "Let me look" not in first  # narration is not a decision
    second = task(out, 2)
    assert "Files: modified docs/cli.md" in second and "E501" in second and "still open" in second
    assert "Abridged History" not in out and "<exchange>" not in out  # the session keeps every exchange

    commands = section(out, "How to build, test and run")
    assert "`pytest -q` x2 (1 failed, last ok): 5 passed" in commands
    assert "`make lint` (failed)" in commands
    assert "ls docs" not in commands  # read-only exploration is not a command that matters
    assert "Files: modified docs/cli.md" in second


def test_offline_output_is_deterministic_and_does_not_mutate_input() -> None:
    messages = session()
    before = copy.deepcopy(messages)
    first = build(messages, previous_summary="## Goal\n- Earlier goal", custom_instructions="focus on verbose")
    second = build(
        copy.deepcopy(messages), previous_summary="## Goal\n- Earlier goal", custom_instructions="focus on verbose"
    )
    assert first == second
    assert (
        first.encode()
        == build(messages, previous_summary="## Goal\n- Earlier goal", custom_instructions="focus on verbose").encode()
    )
    assert messages == before


def test_model_errors_and_failed_edits_still_fail_until_something_fixes_them() -> None:
    messages = [
        user("Refactor utils"),
        asst(call("e1", "Edit", file_path="/p/utils.py", old_string="a", new_string="b")),
        result("e1", "Edit", "old_string not found in file", error=True),
        asst(stop="error", error="overloaded_error: Overloaded"),
    ]
    state = section(build(messages), "State now")
    assert 'Still failing: Edit /p/utils.py failed: "old_string not found in file"' in state
    assert 'Still failing: The model failed: "overloaded_error: Overloaded"' in state
    fixed = [*messages, asst(call("e2", "Edit", file_path="/p/utils.py", old_string="c", new_string="d"), stop="error")]
    fixed.append(result("e2", "Edit", "ok"))
    state = section(build(fixed), "State now")
    assert "utils.py failed" not in state and "The model failed" in state
    recovered = build([*fixed, asst(text("All done."))])
    assert "Still failing" not in recovered  # a later completed answer: the model works again
    assert "The model failed" in task(recovered, 1) and "-> fixed" in task(recovered, 1)  # told as it happened


def test_acknowledgements_and_stale_open_calls_are_not_reported_as_current_work() -> None:
    messages = [
        user("/model"),
        user("Migrate the settings loader to pydantic v2"),
        asst(call("old", "read", path="stale.py")),  # never answered, then the user moved on
        asst(call("g", "bash", command="grep -rn legacy_loader src")),
        result("g", "bash", "(no output)\n\nCommand exited with code 1", error=True),
        user("ok"),
        asst(text("## Plan\nFirst step: update the models.")),
    ]
    out = build(messages)
    assert section(out, "Goal") == "- Migrate the settings loader to pydantic v2\n\n"
    assert "Still failing" not in out  # grep finding nothing is not a failure
    state = section(out, "State now")
    assert "stale.py" not in state  # the agent moved on: a stale call is not current work
    assert "[answered]" in state
    assert "/model" not in section(out, "What the user said (oldest first)")  # a slash command is not the user's words


def test_custom_instructions_pull_matching_sentences_into_a_section_of_their_own() -> None:
    out = build(session(), custom_instructions="Focus on the verbose flag")
    focus = section(out, "Requested focus")
    assert "Requested focus: Focus on the verbose flag" in focus
    assert "Added --verbose using store_true." in focus


def test_an_empty_range_says_so_in_one_line() -> None:
    out = build([])
    assert out.count("\n") == 1 and "nothing to summarise" in out


async def test_create_summarizer_defaults_to_offline_for_branch_summaries() -> None:
    summarizer = create_summarizer(None, total_chars=500)
    res = await summarizer.summarize(SummaryRequest(messages=session(), kind="branch"))
    assert res.summarizer == "offline" and "## Goal" in res.text
    assert isinstance(summarizer, OfflineSummarizer) and summarizer.limits.total_chars == 500


# --- size: what the agents' own summaries take ------------------------------------------------------------------


def exchanges(count: int, *, reply_chars: int = 50) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(count):
        messages.append(user(f"Request {i}: update module m{i}.py"))
        messages.append(asst(call(f"r{i}", "read", path=f"src/m{i}.py"), call(f"w{i}", "write", path=f"src/m{i}.py")))
        messages.append(result(f"r{i}", "read", "contents " + FILE_BODY[: 40 * reply_chars]))
        messages.append(result(f"w{i}", "write", "ok"))
        messages.append(asst(call(f"b{i}", "bash", command=f"pytest tests/test_m{i}.py")))
        messages.append(result(f"b{i}", "bash", "passed"))
        messages.append(asst(call(f"g{i}", "bash", command=f"grep -rn m{i} src | head -5")))
        messages.append(result(f"g{i}", "bash", f"src/m{i}.py:1: m{i}"))
        messages.append(asst(text(f"Reply {i}: " + "r" * reply_chars)))
    return messages


def test_many_tasks_keep_the_newest_whole_and_name_the_oldest() -> None:
    out = OfflineSummarizer().build(SummaryRequest(messages=exchanges(200)))
    assert len(out) <= 20_000
    tasks = section(out, "Tasks (oldest first)")
    assert "### T200 · Request 199: update module m199.py [answered]" in tasks  # the newest task, whole
    assert "### Earlier tasks (" in tasks and "Request 0: update module m0.py" in tasks  # the oldest, by name
    commands = section(out, "How to build, test and run")
    assert "`pytest tests/test_m199.py` (ok): passed" not in commands or "more commands" not in commands
    assert "`grep -rn" not in commands  # read-only exploration is only counted
    assert "Reply 199" in out  # the agent's last answer


@pytest.mark.parametrize("count", [60, 200, 600])
def test_a_summary_takes_a_tenth_of_its_input_at_most_and_never_more_than_its_maximum(count: int) -> None:
    messages = exchanges(count, reply_chars=400)
    request = SummaryRequest(messages=messages)
    out = OfflineSummarizer().build(request)
    assert len(out) <= 0.1 * OfflineSummarizer.input_chars(request) + 200
    assert len(out) <= 20_000
    assert len(OfflineSummarizer(max_tokens=2_000).build(request)) <= 8_000


def test_long_requests_and_replies_are_cut() -> None:
    long_request = "BEGIN " + "q" * 5000 + " END"
    long_reply = "START " + "a" * 9000 + " FINISH"
    out = build([user(long_request), asst(text(long_reply)), user("and now the next thing"), asst(text("ok"))])
    assert len(section(out, "Goal")) < 700  # the goal, cut
    said = section(out, "What the user said (oldest first)")
    assert said.count("q") < 500 and "and now the next thing" in said
    assert "a" * 2000 not in out


def test_an_old_abridged_history_is_dropped_and_its_quoted_headings_stay_out() -> None:
    old = (
        "## Goal\n- Ship the theme\n\n## Abridged History (newest first)\n<exchange>\nUser: fix it\n"
        "Agent: Done.\n\n## Summary\nFixed the colours.\n</exchange>\n(older exchanges not shown)\n\n"
        "## Must keep\n- Decision: keep the dark theme"
    )
    parsed = parse_summary(old)
    assert parsed is not None and [t for t, _ in parsed.extra] == ["Must keep"]  # "## Summary" was the agent's
    out = build(session(), previous_summary=old)
    assert "<exchange>" not in out and "## Summary" not in out
    assert "- Decision: keep the dark theme" in section(out, "Must keep")
    assert "Ship the theme" in section(out, "Goal")


# --- merging an earlier summary --------------------------------------------------------------------------------

PREVIOUS = """## Goal
- Port the billing service to Rust
- Latest request: set up the cargo workspace

## Constraints & Preferences
- Never use unsafe code.

## Progress
### Done
- [x] Created the cargo workspace

### In Progress
- [ ] Porting invoice.rs

### Blocked
- (none)

## Key Decisions
- **Serde over hand-written parsing**: less code to maintain.

## Next Steps
1. Port invoice.rs

## Critical Context
- The old service lives in legacy/billing.py

## Deployment Notes
Deploy with `make ship`.

<read-files>
legacy/billing.py
</read-files>

<modified-files>
Cargo.toml
</modified-files>"""


def test_an_earlier_layouts_summary_is_merged_not_replaced() -> None:
    out = build(session(), previous_summary=PREVIOUS)
    assert "<read-files>" not in out and "<modified-files>" not in out
    goal = section(out, "Goal")
    assert goal.startswith("- Port the billing service to Rust")
    assert "Never use unsafe code." in section(out, "Constraints & Preferences")
    assert "You must keep Python 3.8 compatibility." in section(out, "Constraints & Preferences")
    earlier = task(out, 0)  # the earlier layout's progress, read as the work before
    assert "Done: Created the cargo workspace" in earlier
    assert "Was under way: Porting invoice.rs" in earlier
    assert "Decision: **Serde over hand-written parsing**: less code to maintain." in earlier
    assert "Add a --verbose flag" in task(out, 1)  # this range's tasks come after it
    assert "The old service lives in legacy/billing.py" in section(out, "Earlier context")
    assert "Deploy with `make ship`." in section(out, "Deployment Notes")
    assert out.count("## Goal") == 1 and out.index("## State now") < out.index("## Goal")


def test_unstructured_previous_summary_is_kept_verbatim() -> None:
    out = build(session(), previous_summary="We migrated the database to Postgres 16 and fixed the pool size.")
    assert "We migrated the database to Postgres 16" in section(out, "Earlier Summary")


def git_session(start: int, count: int, *, commit: bool) -> list[dict[str, Any]]:
    """Tasks that change a file each; the last one commits when ``commit``."""
    messages: list[dict[str, Any]] = []
    for i in range(start, start + count):
        messages.append(user(f"Request {i}: update module m{i}.py"))
        messages.append(asst(call(f"w{i}", "write", path=f"/w/proj/src/m{i}.py", content=f"def f{i}():\n    pass\n")))
        messages.append(result(f"w{i}", "write", "ok"))
        messages.append(asst(text(f"Updated m{i}.py: " + "r" * 300)))
    if commit:
        messages.append(user("commit it"))
        messages.append(asst(call("c", "bash", command="git add -A && git commit -m 'update modules'")))
        messages.append(result("c", "bash", "[main 1a2b3c4] update modules\n 3 files changed"))
    return messages


def test_rolling_summaries_keep_every_task_and_carry_what_is_not_committed() -> None:
    status = [asst(call("s", "bash", command="git status")), result("s", "bash", "modified: src/m0.py")]
    first = build([*git_session(0, 3, commit=False), *status], cwd="/w/proj")
    assert "Changed and not committed: src/m0.py, src/m1.py, src/m2.py" in section(first, "State now")
    second = build(git_session(3, 2, commit=False), previous_summary=first)
    assert all(f"Request {i}:" in second for i in range(5))  # every task, the earlier range's too
    assert [int(n) for n in re.findall(r"^### T(\d+)", second, re.M)] == [1, 2, 3, 4, 5]
    state = section(second, "State now")
    assert "src/m0.py" in state and "src/m4.py" in state  # not committed in either range
    third = build(git_session(5, 1, commit=True), previous_summary=second)
    state = section(third, "State now")
    assert "Changed and not committed: nothing" in state  # the commit took everything
    assert "committed 1a2b3c4" in task(third, 6)  # "commit it" goes on with the task under way
    assert third.count("## State now") == 1 and third.count("### T1 ·") == 1


def test_a_task_the_earlier_summary_left_under_way_goes_on_in_its_block() -> None:
    first = build(
        [
            user("Port invoice.rs and make the tests pass"),
            asst(call("w", "write", path="/w/proj/src/invoice.rs", content="fn total() {}\n")),
            result("w", "write", "ok"),
            asst(call("t", "bash", command="cargo test")),
            result("t", "bash", "test result: FAILED. 1 passed; 1 failed\nexit code 101", error=True),
        ]
    )
    assert "Still failing: `cargo test` failed" in section(first, "State now")
    second = build(
        [
            asst(text("The rounding is wrong because totals use f32; switching to rust_decimal instead.")),
            asst(call("e", "edit", path="/w/proj/src/invoice.rs", oldText="f32", newText="Decimal")),
            result("e", "edit", "ok"),
            asst(call("t2", "bash", command="cargo test")),
            result("t2", "bash", "test result: ok. 2 passed; 0 failed"),
        ],
        previous_summary=first,
    )
    assert "### T2" not in second  # the range went on with T1: no new task
    block = task(second, 1)
    assert "Port invoice.rs" in block and "edited" not in block
    assert "test result: ok. 2 passed; 0 failed" in block
    assert "Still failing" not in second  # the earlier failure was fixed by the later run


def test_parse_and_merge_are_lenient_about_model_written_summaries() -> None:
    parsed = parse_summary("Intro\n## Goal\nShip it\n## Progress\n* [x] built\n  with care\n## Next Steps\n1) test")
    assert parsed is not None
    assert parsed.goal == ["Ship it"]
    assert parsed.tasks[0].lines == ["Done: built with care", "Next step then: test"]
    assert parse_summary("just prose") is None
    merged = merge(parsed, parsed)
    assert merged.goal == ["Ship it"] and len(merged.tasks) == 2


def test_a_split_turn_is_the_task_under_way() -> None:
    prefix = [
        user("Rename the config loader and update callers"),
        asst(text("I'll use grep to find callers."), call("p1", "Grep", pattern="load_config")),
        result("p1", "Grep", "a.py\nb.py"),
        asst(call("p2", "MultiEdit", file_path="a.py", edits=[])),
        result("p2", "MultiEdit", "ok"),
    ]
    out = build(session(), turn_prefix=prefix)
    state = section(out, "State now")
    assert state.startswith('- Task: T3 "Rename the config loader and update callers" [under way]')
    assert "The latest turn goes on in the messages kept after this summary." in state
    assert "Files: modified a.py" in task(out, 3)


# --- speed ----------------------------------------------------------------------------------------------------


def test_offline_handles_100k_messages_quickly() -> None:
    messages: list[dict[str, Any]] = []
    for t in range(10_000):
        messages.append(user(f"Request {t}: please update module m{t % 50}.py; you should avoid globals."))
        for k in range(4):
            cid = f"c{t}_{k}"
            if k % 2:
                messages.append(
                    asst(text("I'll use pytest because it is simpler."), call(cid, "bash", command="pytest"))
                )
                messages.append(result(cid, "bash", "ok " * 50, error=t % 7 == 0))
            else:
                messages.append(asst(call(cid, "edit", path=f"src/m{t % 50}.py", oldText="a" * 50, newText="b")))
                messages.append(result(cid, "edit", "Successfully replaced text"))
        messages.append(asst(text(f"Done with request {t}.")))
    assert len(messages) == 100_000
    summarizer = OfflineSummarizer()
    request = SummaryRequest(messages=messages)

    def best_of_two(work: Callable[[], object]) -> float:
        best = float("inf")
        for _ in range(2):
            start = time.process_time()
            work()
            best = min(best, time.process_time() - start)
        return best

    # One pass over the messages reads every fact (facts.scan): the whole summary, which also tells each task's
    # story, may take at most a little more than twice that pass, and never seconds more on this machine.
    scan_only = best_of_two(lambda: scan(messages))
    out = ""

    def build_it() -> None:
        nonlocal out
        out = summarizer.build(request)

    whole = best_of_two(build_it)
    assert whole < 2.5 * scan_only, f"the summary took {whole:.2f}s of CPU, the facts' pass {scan_only:.2f}s"
    assert whole < 5.0, f"offline summary of 100k messages took {whole:.2f}s of CPU"
    assert "Request 9999" in out and len(out) < 40_000


# --- serialisation ------------------------------------------------------------------------------------------


@given(st.text(st.characters(blacklist_characters="["), max_size=400), st.integers(min_value=0, max_value=300))
def test_middle_truncate_keeps_head_and_tail_within_the_limit(value: str, limit: int) -> None:
    cut = middle_truncate(value, limit)
    assert len(cut) <= limit
    if len(value) <= limit:
        assert cut == value
    elif limit >= 40:
        assert "chars omitted" in cut
        head, tail = cut.split(" [...", 1)[0], cut.rsplit("...] ", 1)[1]
        assert value.startswith(head) and value.endswith(tail)
        assert len(head) >= len(tail) >= len(head) - 1 and len(head) > 0


def test_transcript_labels_and_tool_result_cut() -> None:
    messages = [
        user("hi"),
        asst(
            {"type": "thinking", "thinking": "pondering"},
            text("on it"),
            call("x", "read", path="a.py", limit=10),
            call("y", "bash", command="ls"),
        ),
        result("x", "read", "z" * 5000),
        result("y", "bash", "boom", error=True),
        bash("git status", "clean", code=1),
        {"role": "custom", "customType": "note", "content": "remember this", "display": True},
        {"role": "compactionSummary", "summary": "old summary", "tokensBefore": 5},
        {
            "role": "user",
            "content": [{"type": "text", "text": "see"}, {"type": "image", "data": "AAA", "mimeType": "x"}],
        },
    ]
    transcript = serialize_conversation(messages)
    assert "[User]: hi" in transcript
    assert "[Assistant thinking]: pondering" in transcript
    assert "[Assistant]: on it" in transcript
    assert '[Assistant tool calls]: read(path="a.py", limit=10); bash(command="ls")' in transcript
    assert "[Tool result (error)]: boom" in transcript
    assert "[User shell]: $ git status\nclean\n(exit code 1)" in transcript
    assert "[Context (note)]: remember this" in transcript
    assert "[Earlier summary]: old summary" in transcript
    assert "[User]: see\n[image]" in transcript
    piece = serialize_messages([messages[2]])[0]
    assert len(piece) == len("[Tool result]: ") + TOOL_RESULT_CHARS


@given(st.lists(st.integers(min_value=0, max_value=120), max_size=40), st.integers(min_value=1, max_value=300))
def test_plan_chunks_covers_pieces_in_order_within_budget(sizes: list[int], budget: int) -> None:
    pieces = ["x" * n for n in sizes]
    ranges = plan_chunks(pieces, budget)
    assert [i for a, b in ranges for i in range(a, b)] == list(range(len(pieces)))
    for a, b in ranges:
        assert b > a
        assert b - a == 1 or len("\n\n".join(pieces[a:b])) <= budget


# --- file operations ----------------------------------------------------------------------------------------

CODEX_PATCH = """*** Begin Patch
*** Add File: new/mod.rs
+fn main() {}
*** Update File: src/lib.rs
@@
-a
+b
*** Delete File: old.rs
*** End Patch"""

UNIFIED = """--- a/web/app.js
+++ b/web/app.js
@@ -1 +1 @@
-x
+y
--- /dev/null
+++ b/web/new.js
@@ -0,0 +1 @@
+z
"""


def test_file_ops_are_recognised_across_agents() -> None:
    calls = [
        call("1", "read", path="pi/read.ts"),
        call("2", "write", path="pi/write.ts", content=""),
        call("3", "edit", path="pi/edit.ts"),
        call("4", "Read", file_path="cc/Read.py"),
        call("5", "Write", file_path="cc/Write.py"),
        call("6", "Edit", file_path="cc/Edit.py"),
        call("7", "MultiEdit", file_path="cc/Multi.py"),
        call("8", "NotebookEdit", notebook_path="nb/book.ipynb"),
        call("9", "read_file", filePath="g/read_file.go"),
        call("10", "write_file", file_path="g/write_file.go"),
        call("11", "edit_file", target_file="cursor/edit_file.ts"),
        call("12", "create_file", path="x/created.txt"),
        call("13", "delete_file", path="x/deleted.txt"),
        call("14", "apply_patch", input=CODEX_PATCH),
        call("15", "apply_patch", patch=UNIFIED),
        call("16", "str_replace_based_edit_tool", command="view", path="ed/viewed.md"),
        call("17", "str_replace_based_edit_tool", command="str_replace", path="ed/replaced.md"),
        call("18", "str_replace_based_edit_tool", command="create", path="ed/created.md"),
        call("19", "view", path="v/viewed.c"),
        call("20", "mcp__filesystem__read_file", path="mcp/read.txt"),
        call("21", "shell", command=["apply_patch", "*** Begin Patch\n*** Update File: codex/shell.rs\n"]),
        call("22", "grep", pattern="x", path="not/a/read.txt"),
    ]
    ops = extract_file_ops(
        [
            user("go"),
            asst(*calls),
            user(
                "ignored",
            ),
            result("1", "read", "x"),
        ]
    )
    assert ops.read == {"pi/read.ts", "cc/Read.py", "g/read_file.go", "ed/viewed.md", "v/viewed.c", "mcp/read.txt"}
    assert ops.written == {"pi/write.ts", "cc/Write.py", "g/write_file.go"}
    assert ops.edited == {
        "pi/edit.ts",
        "cc/Edit.py",
        "cc/Multi.py",
        "nb/book.ipynb",
        "cursor/edit_file.ts",
        "src/lib.rs",
        "web/app.js",
        "ed/replaced.md",
        "codex/shell.rs",
    }
    assert ops.created == {"x/created.txt", "new/mod.rs", "web/new.js", "ed/created.md"}
    assert ops.deleted == {"x/deleted.txt", "old.rs"}


def test_commands_are_recognised_across_agents() -> None:
    assert call_command("bash", {"command": "ls -la"}) == "ls -la"
    assert call_command("Bash", {"command": "npm test", "timeout": 5}) == "npm test"
    assert call_command("shell", {"command": ["bash", "-lc", "cargo build"]}) == "cargo build"
    assert call_command("shell", {"command": ["git", "commit", "-m", "a b"]}) == "git commit -m 'a b'"
    assert call_command("exec_command", {"cmd": "make"}) == "make"
    assert call_command("run_terminal_cmd", {"command": "go test ./..."}) == "go test ./..."
    assert call_command("read", {"command": "ls"}) is None
    assert call_command("bash", {"command": 3}) is None


def test_file_lists_follow_pis_rule_and_merge_previous_details() -> None:
    ops = FileOps(read={"a.py", "b.py", "z.py"}, written={"b.py"}, edited={"c.py"}, created={"d.py"})
    read, modified = file_lists(ops)
    assert (read, modified) == (["a.py", "z.py"], ["b.py", "c.py", "d.py"])
    previous = {"readFiles": ["old.py", "c.py", 7], "modifiedFiles": ["a.py", "e.py"]}
    read, modified = file_lists(ops, previous)
    assert read == ["old.py", "z.py"]
    assert modified == ["a.py", "b.py", "c.py", "d.py", "e.py"]
    assert file_lists(FileOps(), None) == ([], [])


def test_file_blocks_format_and_strip() -> None:
    blocks = format_file_blocks(["a.py", "b.py"], ["c.py"])
    assert blocks == "\n\n<read-files>\na.py\nb.py\n</read-files>\n\n<modified-files>\nc.py\n</modified-files>"
    assert format_file_blocks([], ["c.py"]) == "\n\n<modified-files>\nc.py\n</modified-files>"
    assert format_file_blocks([], []) == ""
    assert strip_file_blocks("## Goal\nx" + blocks) == "## Goal\nx"
    assert strip_file_blocks("no blocks here") == "no blocks here"
