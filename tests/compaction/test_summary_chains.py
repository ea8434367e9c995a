"""A failure told as a chain: what failed (each finding of the run), what the agent said while it was open (the
cause it named, the approaches it tried and dropped, the one it chose), the final form of what it changed, and
the check that then passed; a decision said while a failure was open names that failure."""

from __future__ import annotations

from typing import Any

from test_summarizers_offline import asst, call, result, task, text, user

from ctxd.compaction.reading.chains import brief_fix, edit_gist, finding_lines, fix_text, said_about
from ctxd.compaction.summary import OfflineSummarizer, SummaryRequest

LINT_OUT = (
    "Checking 1 source file ...\n\n"
    "  Design\n"
    "| [D] Nested widget path should be imported at the top of the module.\n"
    "|       src/gauge/meter.lang:40:7 #(Gauge.Meter.probe)\n\n"
    "  Readability\n"
    "| [R] Prefer an implicit guard over an explicit guard block.\n"
    "|       src/gauge/meter.lang:39:5 #(Gauge.Meter.probe)\n\n"
    "Please report incorrect results.\n"
)


def _clash() -> list[dict[str, Any]]:
    meter = "/proj/src/gauge/meter.lang"
    return [
        user("Add a probe to the gauge meter and keep the linter clean."),
        asst(call("w", "write", path=meter, content="module Gauge.Meter\n  fn probe(x) -> Widgets.Dial.read(x)\n")),
        result("w", "write", "Successfully wrote 60 bytes"),
        asst(call("l1", "bash", command="quill lint --strict src/gauge/meter.lang")),
        result("l1", "bash", LINT_OUT, error=True),
        asst(
            text(
                "The linter wants the import, but the compiler reports an import used only inside a guard block "
                "as unused. I'll use the import with an explicit guard block instead."
            ),
            call("e1", "edit", path=meter, oldText="  fn probe", newText="  import Widgets.Dial\n  fn probe"),
        ),
        result("e1", "edit", "Successfully replaced text"),
        asst(call("l2", "bash", command="quill lint --strict src/gauge/meter.lang")),
        result("l2", "bash", LINT_OUT, error=True),
        asst(
            text(
                "The explicit guard block still triggers the readability finding. Rather than fight both checks, "
                "I'll keep the full path and silence the import finding on that one line."
            ),
            call(
                "e2",
                "edit",
                path=meter,
                oldText="  import Widgets.Dial\n",
                newText="  # lint:allow-next-line ImportUsage\n",
            ),
        ),
        result("e2", "edit", "Successfully replaced text"),
        asst(call("l3", "bash", command="quill lint --strict src/gauge/meter.lang")),
        result("l3", "bash", "Checking 1 source file ...\n14 mods/funs, found no issues.\n"),
        asst(text("The linter is clean now.")),
    ]


def build(messages: list[dict[str, Any]]) -> str:
    return OfflineSummarizer(scale=False).build(SummaryRequest(messages=messages))


def test_a_fixed_failure_tells_its_findings_the_approaches_tried_the_final_form_and_the_passing_check() -> None:
    block = task(build(_clash()), 1)
    problem = next(line for line in block.splitlines() if line.startswith("- Problem: `quill lint"))
    # every finding of the failed run, not only its first line
    assert "Nested widget path should be imported" in problem
    assert "Prefer an implicit guard over an explicit guard block" in problem
    # the cause the agent named, the approach it dropped and the one it chose, in order
    assert "reports an import used only inside a guard block as unused" in problem
    dropped = problem.index("explicit guard block instead")
    chosen = problem.index("keep the full path and silence the import finding")
    assert dropped < chosen
    # the final form of the change (its last edit, not the dropped one) and the check that then passed
    assert "`# lint:allow-next-line ImportUsage`" in problem
    assert "import Widgets.Dial" not in problem
    assert "passed: ran `quill lint --strict src/gauge/meter.lang`" in problem


def test_finding_lines_are_the_other_findings_of_a_run_each_once() -> None:
    first = "[D] Nested widget path should be imported at the top of the module."
    assert finding_lines(LINT_OUT, first) == ["[R] Prefer an implicit guard over an explicit guard block."]
    assert finding_lines("error: disk full\nerror: disk full\n", "error: disk full") == []


def test_said_about_takes_the_cause_and_the_choice_not_narration() -> None:
    said = said_about(
        "Let me check the file. The cause is that the cache key ignores the locale. "
        "I'll switch to a key built from both the path and the locale."
    )
    assert said == [
        "The cause is that the cache key ignores the locale.",
        "I'll switch to a key built from both the path and the locale.",
    ]
    assert said_about("Let me look at the config.") == []


def test_an_edits_gist_is_the_first_lines_it_adds() -> None:
    assert edit_gist({"old_string": "a = 1\nb = 2\n", "new_string": "a = 1\nb = 3\nc = 4\n"}) == "b = 3; c = 4"
    assert edit_gist({"edits": [{"oldText": "x", "newText": "x"}, {"oldText": "p()", "newText": "qq(1)"}]}) == "qq(1)"
    assert edit_gist({"content": "end\n}\n"}) == ""


def test_a_decision_said_while_a_failure_was_open_names_it_and_is_not_told_twice() -> None:
    messages = _clash()
    summary = build(messages)
    decisions = [line for line in task(summary, 1).splitlines() if line.startswith("- Decision:")]
    assert not any("explicit guard block instead" in line for line in decisions)  # the chain tells it
    messages[5] = asst(
        text(
            "The linter wants the import, but the compiler reports an import used only inside a guard block as "
            "unused. I'll use the import with an explicit guard block instead. We won't vendor the dial widget, "
            "because its licence forbids changes."
        ),
        *messages[5]["content"][1:],
    )
    decisions = [line for line in task(build(messages), 1).splitlines() if line.startswith("- Decision:")]
    assert any(
        "won't vendor the dial widget" in line
        and "(when `quill lint --strict src/gauge/meter.lang` had failed: [D] Nested widget path" in line
        for line in decisions
    ), decisions


def test_an_earlier_summarys_chain_condensed_keeps_the_choice_the_final_form_and_the_check() -> None:
    first = build(_clash())
    later: list[dict[str, Any]] = []
    for n in range(8):
        later += [
            user(f"Now add the unit conversion number {n} to the gauge, as a table of factors for each scale."),
            asst(call(f"c{n}", "write", path=f"/proj/src/gauge/unit{n}.lang", content=f"fn unit{n}(x) -> x * {n}\n")),
            result(f"c{n}", "write", "Successfully wrote"),
            asst(text(f"Added unit {n} with a factor table, because the spec lists {n} scales with their factors.")),
        ]
    summary = OfflineSummarizer(max_tokens=1_200, scale=False).build(
        SummaryRequest(messages=later, previous_summary=first)
    )
    problem = next(line for line in task(summary, 1).splitlines() if line.startswith("- Problem: "))
    assert "(also " not in problem  # condensed: the block lost detail
    assert "-> fixed: Rather than fight both checks, I'll keep the full path" in problem  # the approach that stood
    assert "explicit guard block instead" not in problem  # not the one dropped
    assert "then changed meter.lang (`# lint:allow-next-line ImportUsage`)" in problem
    assert problem.endswith("passed: ran `quill lint --strict src/gauge/meter.lang`")


def test_a_fix_tells_what_it_changed_before_the_other_runs_and_in_brief_keeps_the_choice() -> None:
    tried = [
        "The cause is a stale cache key.",
        "I'll try clearing the cache instead.",
        "I'll switch to a versioned key.",
    ]
    steps = ["ran `make build`", "changed cache.py (`KEY = f'{name}:v2'`)", "ran `make check`"]
    how = fix_text(tried, steps, "ran `make check`")
    assert how == (
        "tried: The cause is a stale cache key. / I'll try clearing the cache instead.; chose: I'll switch to a "
        "versioned key.; then changed cache.py (`KEY = f'{name}:v2'`), ran `make build`; passed: ran `make check`"
    )
    assert brief_fix(how, 200) == (
        "I'll switch to a versioned key.; then changed cache.py (`KEY = f'{name}:v2'`), ran `make build`; "
        "passed: ran `make check`"
    )


def test_a_failure_with_several_findings_left_open_is_carried_to_the_next_summary() -> None:
    messages = _clash()[:5]  # the lint run failed with two findings; nothing fixed it
    first = build(messages)
    assert 'Still failing: `quill lint --strict src/gauge/meter.lang` failed: "[D] Nested widget path' in first
    later = [user("Also add a docstring to the probe."), asst(text("Added the docstring."))]
    second = OfflineSummarizer(scale=False).build(SummaryRequest(messages=later, previous_summary=first))
    state = second.split("\n## ", 1)[0]
    assert "Still failing: `quill lint --strict src/gauge/meter.lang`" in state
