"""The must-keep fact sheet: extraction, the presence check, rendering within a budget, and the patch."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from test_summarizers_offline import asst, bash, session, text, user

from ctxd.compaction.ledger.mustkeep import (
    Fact,
    FactSheet,
    must_keep_facts,
    normalize,
    patch_summary,
)
from ctxd.compaction.summary import OfflineSummarizer, SummaryRequest


def kinds(sheet: FactSheet, kind: str) -> list[str]:
    return [f.text for f in sheet.facts if f.kind == kind]


def test_facts_of_a_session() -> None:
    sheet = must_keep_facts(session())
    assert kinds(sheet, "goal") and kinds(sheet, "goal")[0].startswith("Add a --verbose flag")
    assert kinds(sheet, "request")[0].startswith("Now document it in docs/cli.md")
    constraints = " | ".join(kinds(sheet, "constraint"))
    assert "You must keep Python 3.8 compatibility." in constraints
    assert kinds(sheet, "correction") == ["Don't add new dependencies."]  # it says what not to do
    assert "Should I worry" not in constraints  # a question is not a constraint
    assert set(kinds(sheet, "file-modified")) == {"src/cli.py", "docs/cli.md"}
    commands = kinds(sheet, "command")
    assert "`pytest -q` x2 (1 failed, last ok)" in commands
    assert "`make lint` (failed)" in commands
    errors = kinds(sheet, "error")
    assert errors[0].startswith("`make lint` (run by the user) exited with 2")  # unresolved first
    assert errors[1].startswith("`pytest -q` failed") and errors[1].endswith("(resolved)")  # fixed by a later run
    assert any("fix the lint error" in n for n in kinds(sheet, "next"))
    # Most important first.
    order = [f.kind for f in sheet.facts]
    assert order.index("goal") < order.index("constraint") < order.index("file-modified") < order.index("command")


def test_missing_and_patch_on_a_summary_that_missed_facts() -> None:
    sheet = must_keep_facts(session())
    summary = "## Goal\n- Add a verbose flag.\n\n<modified-files>\nsrc/cli.py\ndocs/cli.md\n</modified-files>"
    missing = sheet.missing(summary)
    # The file lists do not count: files must be named in the body.
    assert {"src/cli.py", "docs/cli.md"} <= set(kinds(missing, "file-modified"))
    patched, reported = patch_summary(summary, sheet, max_chars=4000)
    assert reported == missing
    assert "## Must keep" in patched
    assert patched.rstrip().endswith("</modified-files>")  # the file lists stay last
    assert patched.index("## Must keep") < patched.index("<modified-files>")
    assert not sheet.missing(patched)  # the patched summary keeps everything
    again, none = patch_summary(patched, sheet, max_chars=4000)
    assert again == patched and not none


def test_patch_respects_the_budget_and_keeps_the_most_important() -> None:
    sheet = must_keep_facts(session())
    patched, missing = patch_summary("nothing useful", sheet, max_chars=300)
    section = patched[patched.index("## Must keep") :]
    assert len(section) <= 300
    assert "Goal: Add a --verbose flag" in section
    assert missing.facts and len(missing) == len(sheet)


def test_render_lists_and_counts_what_does_not_fit() -> None:
    facts = tuple(Fact("file-read", f"src/module_{i}.py", (f"src/module_{i}.py",)) for i in range(100))
    rendered = FactSheet((Fact("goal", "Ship it", ("ship it",)), *facts)).render(400)
    assert len(rendered) <= 400
    assert rendered.startswith("## Must keep\n- Goal: Ship it\n- Files read: src/module_0.py; src/module_1.py")
    assert "more" in rendered
    assert FactSheet().render(1000) == ""


def test_normalisation_ignores_markup_case_and_spacing() -> None:
    assert normalize("Run `npm  run\ncheck` **NOW**") == "run npm run check now"
    fact = Fact("command", "`npm run check`", ("npm run check",))
    assert not FactSheet((fact,)).missing("- Ran `npm run check` twice")
    assert FactSheet((fact,)).missing("- Ran the checks")


def test_offline_summary_lacks_nothing_it_must_keep() -> None:
    messages = session()
    summary = OfflineSummarizer().build(SummaryRequest(messages=messages))
    missing = must_keep_facts(messages).missing(summary)
    assert not [f for f in missing.facts if f.kind in ("goal", "request", "file-modified", "constraint")]


def test_injected_text_is_never_the_goal() -> None:
    messages: list[dict[str, Any]] = [
        user(
            "<command-name>/clear</command-name>\n<command-message>clear</command-message>\n<command-args></command-args>"
        ),
        user("<local-command-stdout></local-command-stdout>"),
        user("Rename the config loader to load_settings and keep the old name as an alias."),
        asst(text("Done.")),
    ]
    sheet = must_keep_facts(messages)
    assert kinds(sheet, "goal") == ["Rename the config loader to load_settings and keep the old name as an alias."]
    assert not any("command-name" in f.text for f in sheet.facts)


def test_previous_summary_goal_and_must_keep_are_carried() -> None:
    previous = (
        "## Goal\n- Port the theme system\n\n## Must keep\n- User constraint: Never use rgb indices.\n"
        "- Commands: `npm run check` x3; `git status`\n- Files modified: src/theme.ts"
    )
    sheet = must_keep_facts([user("continue please with the next part"), asst(text("ok"))], previous_summary=previous)
    assert kinds(sheet, "goal")[0] == "Port the theme system"
    assert "Never use rgb indices." in kinds(sheet, "constraint")
    assert "`npm run check` x3" in kinds(sheet, "command")
    assert "`git status`" not in kinds(sheet, "command")  # read-only exploration: not a command that matters
    assert "src/theme.ts" in kinds(sheet, "file-modified")


def test_plan_file_lists_become_facts() -> None:
    sheet = must_keep_facts(
        [user("look at the repo and tell me about it"), asst(text("ok"))],
        read_files=["docs/a.md"],
        modified_files=["src/b.py"],
    )
    assert kinds(sheet, "file-read") == ["docs/a.md"] and kinds(sheet, "file-modified") == ["src/b.py"]


def test_json_round_trip() -> None:
    sheet = must_keep_facts(session())
    assert FactSheet.from_json(sheet.to_json()) == sheet


def test_import_is_cheap() -> None:
    code = (
        "import sys, ctxd.compaction.ledger.mustkeep\n"
        "heavy = [m for m in ('litellm', 'pygls', 'lsprotocol', 'asyncio', 'ctxd.llm') if m in sys.modules]\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"


def test_bash_executions_count_as_commands() -> None:
    messages = [user("run the build and the tests for me"), bash("make", "ok"), bash("make", "boom", code=2)]
    assert kinds(must_keep_facts(messages), "command") == ["`make` x2 (1 failed, last failed)"]
