"""The offline summariser, the transcript serialiser, summary merging and file-operation extraction."""

from __future__ import annotations

import copy
import re
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxd.compaction.fileops import (
    FileOps,
    call_command,
    extract_file_ops,
    file_lists,
    format_file_blocks,
    strip_file_blocks,
)
from ctxd.compaction.summarizers import (
    OfflineSummarizer,
    SummaryRequest,
    create_summarizer,
)
from ctxd.compaction.summarizers.document import merge, parse_summary
from ctxd.compaction.summarizers.serialize import (
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


async def test_offline_result_has_every_section_filled_from_the_conversation() -> None:
    res = await OfflineSummarizer().summarize(SummaryRequest(messages=session()))
    assert (res.summarizer, res.model, res.path, res.calls, res.usage) == ("offline", None, "offline", 0, None)
    out = res.text
    titles = re.findall(r"^##+ (.+)$", out, re.M)
    assert titles[:10] == [
        "Goal",
        "Constraints & Preferences",
        "Progress",
        "Done",
        "In Progress",
        "Blocked",
        "Key Decisions",
        "Next Steps",
        "Critical Context",
    ]
    goal = section(out, "Goal")
    assert "Add a --verbose flag" in goal
    assert "Latest request: Now document it in docs/cli.md" in goal

    constraints = section(out, "Constraints & Preferences")
    assert "You must keep Python 3.8 compatibility." in constraints
    assert "Don't add new dependencies." in constraints
    assert "I prefer short examples and please use British spelling." in constraints
    assert "Windows" not in constraints  # questions are not constraints

    done = subsection(out, "Done")
    assert "Added --verbose using store_true" in done  # the answered request

    in_progress = subsection(out, "In Progress")
    assert "The latest request (see Goal) (interrupted" in in_progress  # Goal states it; not repeated
    assert "`ls docs`" in in_progress  # a tool call without a result
    assert "Abridged History" not in out and "<exchange>" not in out  # the session keeps every exchange

    blocked = subsection(out, "Blocked")
    assert "make lint" in blocked and "E501" in blocked
    assert "pytest" not in blocked  # that failure was fixed by a later successful run

    decisions = section(out, "Key Decisions")
    assert "I decided to use store_true instead of a string." in decisions
    assert "Let me look" not in decisions

    steps = section(out, "Next Steps")
    assert steps.startswith("1. ")
    assert "Next I will fix the lint error" in steps  # the agent's last stated plan
    assert "Check the outcome of `ls docs`" in steps  # an open call
    assert "make lint" not in steps  # a failure is Blocked, not a next step

    critical = section(out, "Critical Context")
    assert "Files modified: docs/cli.md, src/cli.py" in critical
    assert "Files read:" not in critical  # src/cli.py was read, then modified: it is listed once
    assert "Commands that matter (runs, last outcome): `pytest -q` x2 (1 failed, last ok)\n" in critical
    assert "make lint" not in critical  # it failed last: named under Blocked with its error, not listed twice
    assert "Exploration not listed: 1 read-only runs (ls)" in critical  # `ls docs`, run without a result
    assert "`pytest -q` failed (resolved): 1 failed: test_verbose" in critical
    assert "E501" not in critical  # it is Blocked, not repeated
    assert "Newly summarised:" not in critical  # counts a resuming agent does not need


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


def test_model_errors_and_failed_edits_are_blocked_until_resolved() -> None:
    messages = [
        user("Refactor utils"),
        asst(call("e1", "Edit", file_path="/p/utils.py", old_string="a", new_string="b")),
        result("e1", "Edit", "old_string not found in file", error=True),
        asst(stop="error", error="overloaded_error: Overloaded"),
    ]
    blocked = subsection(build(messages), "Blocked")
    assert "Edit /p/utils.py failed: old_string not found in file" in blocked
    assert "Model error: overloaded_error: Overloaded" in blocked
    fixed = [*messages, asst(call("e2", "Edit", file_path="/p/utils.py", old_string="c", new_string="d"), stop="error")]
    fixed.append(result("e2", "Edit", "ok"))
    blocked = subsection(build(fixed), "Blocked")
    assert "utils.py" not in blocked and "Model error" in blocked
    recovered = subsection(build([*fixed, asst(text("All done."))]), "Blocked")
    assert recovered == "- (none)\n\n"  # a later completed answer resolves the model error


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
    assert subsection(out, "Blocked") == "- (none)\n\n"  # grep finding nothing is not a failure
    in_progress = subsection(out, "In Progress")
    assert "The latest request (see Goal)" in in_progress and "stale.py" not in in_progress
    assert "-> First step: update the models." in subsection(out, "Done")


def test_custom_instructions_pull_matching_sentences_into_critical_context() -> None:
    out = build(session(), custom_instructions="Focus on the verbose flag")
    critical = section(out, "Critical Context")
    assert "Requested focus: Focus on the verbose flag" in critical
    assert "On that focus: Added --verbose using store_true." in critical


def test_empty_request_still_renders_every_section() -> None:
    out = build([])
    for title in ("Goal", "Constraints & Preferences", "Progress", "Key Decisions", "Next Steps", "Critical Context"):
        assert f"## {title}\n" in out
    assert "Abridged History" not in out


async def test_create_summarizer_defaults_to_offline_for_branch_summaries() -> None:
    summarizer = create_summarizer(None, total_chars=500)
    res = await summarizer.summarize(SummaryRequest(messages=session(), kind="branch"))
    assert res.summarizer == "offline" and "## Goal" in res.text
    assert isinstance(summarizer, OfflineSummarizer) and summarizer.limits.total_chars == 500


# --- the story: a budget, not a history ------------------------------------------------------------------------


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


def test_the_story_is_the_newest_answers_and_every_request_head_not_a_history() -> None:
    out = OfflineSummarizer().build(SummaryRequest(messages=exchanges(200)))
    assert "<exchange>" not in out and "Abridged History" not in out
    done = subsection(out, "Done")
    assert "Request 199:" in done and "Request 195:" not in done  # only the newest few answers
    requests = next(x for x in section(out, "Critical Context").splitlines() if "Other requests" in x)
    assert "Request 1: update module m1.py | (+" in requests and "Request 198:" in requests  # first, newest
    critical = section(out, "Critical Context")
    assert all(f"src/m{i}.py" in critical for i in range(200))  # every file stays named
    assert all(f"`pytest tests/test_m{i}.py` (ok)" in critical for i in range(200))  # every command that matters
    assert "Exploration not listed: 200 read-only runs (grep)" in critical
    assert "Agent's last answer: Reply 199: rrr" in critical


@pytest.mark.parametrize("count", [60, 200, 600])
def test_a_large_range_gets_a_summary_of_at_most_three_percent(count: int) -> None:
    messages = exchanges(count, reply_chars=400)
    request = SummaryRequest(messages=messages)
    out = OfflineSummarizer().build(request)
    assert len(out) <= 0.03 * OfflineSummarizer.input_chars(request)


def test_story_parts_are_cut_to_their_limits() -> None:
    long_request = "BEGIN " + "q" * 5000 + " END"
    long_reply = "START " + "a" * 9000 + " FINISH"
    out = build([user(long_request), asst(text(long_reply)), user("and now the next thing"), asst(text("ok"))])
    done = subsection(out, "Done")
    item = next(line for line in done.splitlines() if "BEGIN" in line)
    request, answer = item.removeprefix("- [x] ").split(" -> ")
    assert len(request) <= 80 and request.startswith("BEGIN") and request.endswith("…")
    assert len(answer) <= 120 and answer.startswith("START") and "chars omitted" in answer
    assert len(section(out, "Goal")) < 600  # the goal and the latest request, cut


def test_an_old_abridged_history_is_dropped_and_its_quoted_headings_stay_out() -> None:
    old = (
        "## Goal\n- Ship the theme\n\n## Abridged History (newest first)\n<exchange>\nUser: fix it\n"
        "Agent: Done.\n\n## Summary\nFixed the colours.\n</exchange>\n(older exchanges not shown)\n\n"
        "## Must keep\n- Decision: keep the dark theme"
    )
    parsed = parse_summary(old)
    assert parsed is not None and len(parsed.history) == 1
    assert [t for t, _ in parsed.extra] == ["Must keep"]  # "## Summary" was the agent's words, not a section
    out = build(session(), previous_summary=old)
    assert "<exchange>" not in out and "## Summary" not in out
    assert "- Decision: keep the dark theme" in section(out, "Must keep")


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


def test_previous_summary_is_merged_not_replaced() -> None:
    out = build(session(), previous_summary=PREVIOUS)
    assert "<read-files>" not in out and "<modified-files>" not in out
    goal = section(out, "Goal")
    assert "Port the billing service to Rust" in goal
    assert "set up the cargo workspace" not in goal  # the stale latest request is replaced
    assert "Later request: Add a --verbose flag" in goal
    assert "Latest request: Now document it" in goal
    assert "Never use unsafe code." in section(out, "Constraints & Preferences")
    assert "You must keep Python 3.8 compatibility." in section(out, "Constraints & Preferences")
    done = subsection(out, "Done")
    assert done.index("Created the cargo workspace") < done.index("src/cli.py")
    assert "(earlier) Porting invoice.rs" in subsection(out, "In Progress")
    assert "**Serde over hand-written parsing**" in section(out, "Key Decisions")
    assert "The old service lives in legacy/billing.py" in section(out, "Critical Context")
    assert "Deploy with `make ship`." in section(out, "Deployment Notes")
    assert out.count("## Goal") == 1


def test_unstructured_previous_summary_is_kept_verbatim() -> None:
    out = build(session(), previous_summary="We migrated the database to Postgres 16 and fixed the pool size.")
    assert "We migrated the database to Postgres 16" in section(out, "Earlier Summary")


def test_rolling_offline_summaries_carry_lasting_facts_and_drop_carried_state() -> None:
    first = build(exchanges(3))
    second = build(exchanges(6)[27:], previous_summary=first)
    critical = section(second, "Critical Context")
    assert all(f"src/m{i}.py" in critical for i in range(3, 6))  # the files of its range
    assert "src/m0.py" not in critical  # an earlier range's: in the <read-files> blocks every summary ends with
    third = build([user("one more thing")], previous_summary=second)
    in_progress = subsection(third, "In Progress")
    assert "(earlier)" not in in_progress  # the earlier latest request had been answered
    critical = section(third, "Critical Context")
    assert (
        critical.count("Commands that matter (runs, last outcome):") == 1 and critical.count("Newly summarised:") == 0
    )
    assert "src/m5.py" in critical  # derived facts from the earlier summary survive when nothing replaces them
    fourth = build(session(), previous_summary=build([user("a"), asst(call("q", "bash", command="x"))]))
    assert subsection(fourth, "In Progress").count("(earlier)") == 2
    fifth = build([user("b")], previous_summary=fourth)
    assert "(earlier) (earlier)" not in fifth
    assert "(earlier) a" not in fifth  # carried once, then dropped
    older = first.replace("Commands that matter (runs, last outcome):", "Commands (runs, outcome):")
    sixth = section(build(exchanges(6)[27:], previous_summary=older), "Critical Context")
    assert "Commands (runs, outcome):" not in sixth  # an earlier layout's list gives way to the new one


def test_parse_and_merge_are_lenient_about_model_written_summaries() -> None:
    parsed = parse_summary("Intro\n## Goal\nShip it\n## Progress\n* [x] built\n  with care\n## Next Steps\n1) test")
    assert parsed is not None
    assert (parsed.goal, parsed.done, parsed.next_steps) == (["Ship it"], ["built with care"], ["test"])
    assert parse_summary("just prose") is None
    merged = merge(parsed, parsed)
    assert merged.done == ["built with care"] and merged.goal == ["Ship it"]


def test_turn_prefix_gets_its_own_part() -> None:
    prefix = [
        user("Rename the config loader and update callers"),
        asst(text("I'll use grep to find callers."), call("p1", "Grep", pattern="load_config")),
        result("p1", "Grep", "a.py\nb.py"),
        asst(call("p2", "MultiEdit", file_path="a.py", edits=[])),
        result("p2", "MultiEdit", "ok"),
    ]
    out = build(session(), turn_prefix=prefix)
    turn = section(out, "Turn Context (split turn)")
    assert "Request: the latest request (see Goal)" in turn  # stated once, in the Goal
    assert "Changed so far: 1 file, the latest a.py" in turn
    assert "Agent's latest note: I'll use grep to find callers." in turn
    assert "Latest request: Rename the config loader" in section(out, "Goal")
    assert "see Turn Context" in subsection(out, "In Progress")


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
    best = float("inf")
    for _ in range(2):
        start = time.process_time()
        out = summarizer.build(request)
        best = min(best, time.process_time() - start)
    assert best < 1.0, f"offline summary of 100k messages took {best:.2f}s of CPU"
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
