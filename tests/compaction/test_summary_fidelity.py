"""What the offline summary keeps: resolved vs unresolved failures, next steps from the agent's plan (never from
failures), commands compressed not dropped, files read and changed through the shell, Codex's exec sessions,
and a size that scales with what it replaces."""

from __future__ import annotations

from typing import Any

import pytest
from test_summarizers_offline import FILE_BODY, asst, call, result, section, task, text, user

from ctxd.compaction.reading.facts import scan
from ctxd.compaction.reading.shell import command_matters, looks_only, parse_shell
from ctxd.compaction.summary import OfflineSummarizer, SummaryRequest


def build(messages: list[dict[str, Any]], **kw: Any) -> str:
    return OfflineSummarizer(scale=False).build(SummaryRequest(messages=messages, **kw))


def padded(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` after a large file read, so that the range is the size of a real one."""
    return [asst(call("pad", "read", path="src/big.py")), result("pad", "read", FILE_BODY * 3), *messages]


# --- resolution, not history ------------------------------------------------------------------------------------


def test_a_failure_is_resolved_by_a_rerun_that_passed_even_with_other_output_filters() -> None:
    messages = [
        user("Make the build green please"),
        asst(call("a", "bash", command="cd pkg && npm run check 2>&1 | tail -5")),
        result("a", "bash", "src/x.ts(3,1): error TS2304: Cannot find name 'foo'.\nCommand exited with code 2"),
        asst(call("b", "edit", path="pkg/src/x.ts", oldText="foo", newText="bar")),
        result("b", "edit", "ok"),
        asst(call("c", "bash", command="cd pkg && npm run check 2>&1 | grep error")),
        result("c", "bash", "Checked 12 files"),
        asst(text("The build is green.")),
    ]
    out = build(messages)
    assert "Still failing" not in out
    assert "`npm run check` in pkg x2 (1 failed, last ok)" in section(out, "How to build, test and run")
    problem = task(out, 1)
    assert "`npm run check` failed: \"src/x.ts(3,1): error TS2304: Cannot find name 'foo'.\" -> fixed" in problem
    assert "then changed x.ts" in problem  # what fixed it


def test_a_failed_edit_is_resolved_by_a_later_write_of_the_same_file() -> None:
    messages = [
        user("Fix the typo in the README"),
        asst(call("e", "edit", path="README.md", oldText="teh", newText="the")),
        result("e", "edit", "oldText not found in README.md", error=True),
        asst(call("w", "write", path="README.md", content="the end")),
        result("w", "write", "ok"),
        asst(text("Rewrote the README.")),
    ]
    out = build(messages)
    assert "Still failing" not in out and "edit README.md failed" in task(out, 1) and "-> fixed" in task(out, 1)


def test_a_failure_the_agent_says_it_fixed_is_told_as_its_word() -> None:
    messages = [
        user("Run the migration for me"),
        asst(call("m", "bash", command="python manage.py migrate")),
        result("m", "bash", "OperationalError: no such table: users\nCommand exited with code 1", error=True),
        asst(text("I fixed it: the table is created by the 0002 migration, which I ran through the admin.")),
    ]
    out = build(messages)
    state = section(out, "State now")  # the agent's word is told, and is not taken for a fix
    assert "Still failing: `python manage.py migrate` failed" in state
    assert 'it says it is fixed, but nothing ran again since: "I fixed it: the table is created' in state


def test_an_unresolved_failure_still_fails_and_is_never_the_next_step() -> None:
    messages = [
        user("Deploy the staging build"),
        asst(call("d", "bash", command="make deploy ENV=staging")),
        result("d", "bash", "Error: permission denied for role deployer\nCommand exited with code 2", error=True),
        asst(call("s", "bash", command="make status")),  # a different command succeeding resolves nothing
        result("s", "bash", "staging: v41"),
        asst(text("The deploy failed: the deployer role lacks the permission. Next I will ask for the grant.")),
    ]
    state = section(build(messages), "State now")
    assert 'Still failing: `make deploy ENV=staging` failed: "Error: permission denied for role deployer"' in state
    steps = [line for line in state.splitlines() if "Next" in line or "plan" in line]
    assert any("Next I will ask for the grant." in line for line in steps)  # the agent's last stated plan
    assert not any("make deploy" in line for line in steps)  # a failure is what still fails, not a step


def test_the_next_step_comes_from_the_last_exchange_only() -> None:
    messages = [
        user("Write the parser"),
        asst(text("Wrote it. Next I will add the tests for the parser.")),
        user("Now the CLI flag"),
        asst(text("Added the --strict flag.")),
    ]
    state = section(build(messages), "State now")
    assert "add the tests" not in state  # the earlier plan is stale
    assert "wait for the user's next request" in state


def test_a_failure_that_comes_back_after_a_fix_is_still_failing() -> None:
    commit = "git commit -m 'x'"
    hook = "pre-commit: format check failed: 3 files would be reformatted"
    messages = [
        user("Commit the parser"),
        asst(call("c1", "bash", command=commit)),
        result("c1", "bash", f"{hook}\nexit code 1", error=True),
        asst(call("f", "bash", command="make fmt")),
        result("f", "bash", "formatted 3 files"),
        asst(call("c2", "bash", command=commit)),
        result("c2", "bash", "[main 1a2b3c4] x"),
        user("Now commit the lexer too"),
        asst(call("c3", "bash", command="git commit -m 'lexer'")),
        result("c3", "bash", f"{hook}\nexit code 1", error=True),
        asst(text("The hook rejected it again.")),
    ]
    out = build(messages)
    assert "the same failure came back 1 time later" in task(out, 1)
    assert f"Still failing: `git commit -m 'lexer'` failed again (it had been fixed before): \"{hook}\"" in out


# --- commands and files -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "looks"),
    [
        ("ls -la src", True),
        ("grep -rn foo src | head -5", True),
        ("rg -n 'a|b' src --glob '!*.lock'", True),
        ("find . -name '*.py' -type f", True),
        ("sed -n '1,80p' a.py", True),
        ("git log --oneline -n 5 -- a.py", True),
        ("git -C repo status", True),
        ("git branch -a", True),
        ("git stash list", True),
        ("FOO=1 ls 2>/dev/null", True),
        ("cd src && ls; echo ---; cat a.py", True),
        ("echo one", False),  # run for its own sake: nothing in it looks around
        ("npm run check", False),
        ("pytest -q", False),
        ("pip install requests", False),
        ("git commit -m 'x'", False),
        ("git stash", False),
        ("git branch -D old", False),
        ("find . -name '*.pyc' -delete", False),
        ("sed -i 's/a/b/' a.py", False),
        ("echo hi > notes.txt", False),
        ("ls; rm -rf build", False),
        ("cat <<EOF > a.txt", False),
        ('echo "unclosed', False),
    ],
)
def test_read_only_exploration_is_told_from_commands_that_matter(command: str, looks: bool) -> None:
    assert looks_only(command) is looks
    assert command_matters(command, None) is not looks
    assert command_matters(command, False)  # whatever failed last matters


def test_commands_that_matter_are_compressed_by_their_core_and_exploration_is_only_counted() -> None:
    messages: list[dict[str, Any]] = [user("Keep the checks green while you refactor")]
    for i in range(15):
        tail = ("", " 2>&1 | tail -5", " | grep -E 'error|warn' | head -20")[i % 3]
        messages += [
            asst(call(f"c{i}", "bash", command=f"cd packages/app && npm run check{tail}")),
            result(f"c{i}", "bash", "ok"),
        ]
    for i in range(40):
        messages += [asst(call(f"g{i}", "bash", command=f"grep -rn symbol_{i} src")), result(f"g{i}", "bash", "hit")]
    for i in range(12):
        messages += [asst(call(f"p{i}", "bash", command=f"pip install pkg{i}")), result(f"p{i}", "bash", "ok")]
    messages += [
        asst(call("l", "bash", command="ls build/out | head -3")),
        result("l", "bash", "ls: build/out: No such file or directory\nCommand exited with code 2", error=True),
        asst(call("k", "bash", command="git commit -am 'wip' && git log -1")),
        result("k", "bash", "[main 1a2b3c] wip"),
    ]
    out = build(messages)
    commands = section(out, "How to build, test and run")
    assert commands.startswith("- `npm run check` in packages/app x15 (ok)\n")  # once, with its count
    assert all(f"`pip install pkg{i}` (ok)" in commands for i in range(12))  # every distinct one stays
    assert "`ls build/out` (failed)" in commands  # exploration whose last run failed matters
    assert "`git commit -am 'wip' && git log -1` (ok)" in commands  # it changes something
    assert "grep -rn" not in commands
    assert "Exploration not listed: 40 read-only runs (grep)" in commands
    assert "committed 1a2b3c" in task(out, 1)


def test_files_read_and_changed_through_the_shell_are_named() -> None:
    messages = [
        user("Tidy the imports in the ui package"),
        asst(call("r", "exec_command", cmd="sed -n '1,120p' src/ui/theme.ts")),
        result("r", "exec_command", "Chunk ID: 1\nProcess exited with code 0\nOutput:\nexport const x = 1"),
        asst(call("e", "exec_command", cmd="sed -i 's/old/new/' src/ui/menu.ts")),
        result("e", "exec_command", "Process exited with code 0\nOutput:\n"),
        asst(call("n", "bash", command="cat > notes/plan.md << 'EOF'\n# Plan\nEOF")),
        result("n", "bash", ""),
        asst(text("Done.")),
    ]
    out = build(messages)
    files = section(out, "Files")
    assert "Changed:" not in files  # every changed file is named in its task
    assert "Read: src/ui/theme.ts" in files
    assert "sed -n" not in out  # a read through the shell is a file read, not a command
    assert "Files: modified src/ui/menu.ts, notes/plan.md" in task(out, 1)


def test_codex_exec_sessions_report_their_outcome_through_write_stdin() -> None:
    messages = [
        user("Run the test suite"),
        asst(call("x", "exec_command", cmd="npm test")),
        result("x", "exec_command", "Chunk ID: 1\nWall time: 1.0 seconds\nProcess running with session ID 4242\n"),
        asst(call("p", "write_stdin", session_id=4242, chars="")),
        result(
            "p",
            "write_stdin",
            "Chunk ID: 2\nWall time: 9.0 seconds\nProcess exited with code 1\nOutput:\nFAIL src/a.test.ts\n"
            "TypeError: handler is not a function",
        ),
        asst(text("One test fails.")),
    ]
    facts = scan(messages)
    assert [e.text for e in facts.errors] == ["`npm test` failed: TypeError: handler is not a function"]
    assert facts.commands["npm test"].text == "`npm test` (failed)"


@pytest.mark.parametrize(
    ("command", "core", "cwd", "ops", "file_only"),
    [
        ("cd pkg && npm run check 2>&1 | tail -5", "npm run check", "pkg", (), False),
        ("sed -n '1,80p' src/a.ts", "sed -n '1,80p' src/a.ts", None, (("read", "src/a.ts"),), True),
        ("nl -ba src/a.py | sed -n 20,60p", "nl -ba src/a.py", None, (("read", "src/a.py"),), True),
        ("sed -i '' 's/a/b/g' x.ts", "sed -i '' 's/a/b/g' x.ts", None, (("edited", "x.ts"),), True),
        ("echo hi >> log.txt", "echo hi >> log.txt", None, (("written", "log.txt"),), True),
        ("rm -rf build && make", "rm -rf build && make", None, (("deleted", "build"),), False),
        ("grep -rn foo src 2>/dev/null | head -20", "grep -rn foo src", None, (), False),
        ("find . -name '*.pyc' | xargs rm", "find . -name '*.pyc' | xargs rm", None, (), False),
        ("git mv a.py b.py", "git mv a.py b.py", None, (), False),
        ('echo "unclosed', 'echo "unclosed', None, (), False),
    ],
)
def test_shell_commands_are_read_for_their_core_and_file_operations(
    command: str, core: str, cwd: str | None, ops: tuple[tuple[str, str], ...], file_only: bool
) -> None:
    parsed = parse_shell(command)
    assert (parsed.core, parsed.cwd, parsed.ops, parsed.file_only) == (core, cwd, ops, file_only)


# --- size -------------------------------------------------------------------------------------------------------


def test_nothing_to_say_gives_one_line_not_an_empty_skeleton() -> None:
    messages = [{"role": "system", "content": [{"type": "text", "text": "Filesystem sandboxing: workspace-write."}]}]
    out = OfflineSummarizer().build(SummaryRequest(messages=messages))
    assert out.count("\n") == 1 and "##" not in out


def test_a_small_range_gets_a_summary_smaller_than_itself_without_empty_sections() -> None:
    messages = [
        user("Rename get_user to fetch_user across the services package, keep the old name as an alias."),
        asst(call("g", "bash", command="grep -rln get_user services")),
        result("g", "bash", "services/a.py\nservices/b.py\n" * 20),
        asst(text("Renamed it in services/a.py and services/b.py and kept get_user as an alias. " * 4)),
    ]
    request = SummaryRequest(messages=messages)
    out = OfflineSummarizer().build(request)
    assert len(out) < OfflineSummarizer.input_chars(request)
    assert "(none recorded)" not in out and "### Blocked" not in out  # no empty sections
    assert "Rename get_user to fetch_user" in out


def test_a_large_range_states_where_it_stands_first() -> None:
    out = OfflineSummarizer().build(SummaryRequest(messages=padded([user("Look into the parser please")])))
    assert out.startswith("## State now\n") and "## Goal\n- Look into the parser please" in out
