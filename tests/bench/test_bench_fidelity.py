"""``make bench-fidelity``'s truth, on small hand-made ranges (one case per rule of bench/fidelity_truth.py,
fidelity_text.py, fidelity_shell.py and fidelity_score.py), its independence from ctxd's extractors, and the
bench itself run end to end on the sessions in tests/data and generated ones."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import fidelity_score as fs  # noqa: E402
import fidelity_shell as sh  # noqa: E402
import fidelity_text as tx  # noqa: E402
import fidelity_truth as ft  # noqa: E402

TRUTH_MODULES = ("fidelity_truth", "fidelity_text", "fidelity_shell", "fidelity_score")


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}]}


def bash(call_id: str, command: str) -> dict[str, Any]:
    return call(call_id, "Bash", command=command)


def result(call_id: str, text: str, error: bool = False) -> dict[str, Any]:
    return {"role": "toolResult", "toolCallId": call_id, "content": [{"type": "text", "text": text}], "isError": error}


# --- independence ----------------------------------------------------------------------------------------------


def test_the_truth_imports_nothing_from_ctxd() -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(BENCH)!r}); import " + ", ".join(TRUTH_MODULES) + "; "
        "print([m for m in sys.modules if m == 'ctxd' or m.startswith('ctxd.')])"
    )
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert done.stdout.strip() == "[]"
    for name in TRUTH_MODULES:
        tree = ast.parse((BENCH / f"{name}.py").read_text())
        imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        imported += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [m for m in imported if m.split(".")[0] == "ctxd"], name


# --- key commands ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "probes"),
    [
        # builds, tests, runs, installs: the program's words, without cd, pipes, redirections, wrappers
        ("npm run check", ["npm run check"]),
        ("cd /repo/packages/app && npm run check 2>&1 | tail -20", ["npm run check"]),
        ("pytest -q tests/test_a.py > /tmp/out.txt 2>&1", ["pytest -q tests/test_a.py"]),
        ("FOO=1 timeout 60 cargo test --release", ["cargo test --release"]),
        ("pip install requests", ["pip install requests"]),
        ("./scripts/check.sh --fast", ["./scripts/check.sh --fast"]),
        ("bash -c 'make build && ./run.sh'", ["make build", "./run.sh"]),
        ("cat > /tmp/x.py << 'EOF'\nimport os\nmake all\nEOF\npython3 /tmp/x.py", ["python3 /tmp/x.py"]),
        # git when it changes something
        ('git add -A && git commit -m "Fix the parser"', ["git add -a", "fix the parser"]),  # a commit: its message
        ("git commit -m \"$(cat <<'EOF'\nfeat: add the cache\n\nA body.\nEOF\n)\"", ["feat: add the cache"]),
        ("git commit -am wip", ["git commit -am wip"]),  # a message too short to tell the commit
        ("git checkout -b topic", ["git checkout -b topic"]),
        ("git -C /repo push origin main", ["git -c /repo push origin main"]),
        ("git stash", ["git stash"]),
        ("git tag v1.0", ["git tag v1.0"]),
        # read-only looks and file chores are not key
        ("ls -la src && cat a.py | grep foo", []),
        ("rg -n foo src; find . -name '*.py'; head -20 a.py; tail -5 b.py; wc -l c.py", []),
        ("git status && git log --oneline -5 && git diff HEAD~1 && git show abc", []),
        ("git branch -a; git stash list; git tag", []),
        ("sed -n '1,80p' a.py", []),
        ("npm ls; pip show requests; python3 --version", []),
        ("bd show x-1; bd ready; gh pr view 3", []),
        ("bd update x-1 --status in_progress; bd close x-1 --reason done; gh pr create --fill", []),  # a tracker's
        ("mkdir -p build && cp a b && rm -rf c && sed -i 's/a/b/' f.py && echo done", []),
    ],
)
def test_key_commands(command: str, probes: list[str]) -> None:
    assert sorted(sh.key_commands(command)) == sorted(probes)


def test_a_key_commands_probe_is_its_head_up_to_40_characters() -> None:
    long_add = "git add " + " ".join(f"lib/app/module_{i}.ex" for i in range(20))
    heredoc = "git commit -m \"$(cat <<'EOF'\n" + "feat: " + "word " * 60 + '\n\nbody\nEOF\n)"'
    assert list(sh.key_commands(long_add)) == ["git add lib/app/module_0.ex lib/app/modu"]
    assert list(sh.key_commands(heredoc)) == ["feat: word word word word word word word"]
    assert list(sh.key_commands("cd /repo && make test", root="/repo")) == ["make test"]
    assert list(sh.key_commands("pytest /repo/tests/test_a.py", root="/repo")) == ["pytest tests/test_a.py"]


def test_a_key_command_is_kept_by_its_head_not_by_its_program_alone() -> None:
    command = "cd /repo && git add src/a.py src/b.py && git commit -m 'Fix the parser crash on empty input'"
    truth = ft.range_truth([bash("c1", command), result("c1", "[main 1a2b3c4] Fix")], root="/repo")
    assert set(truth.commands) == {"git add src/a.py src/b.py", "fix the parser crash on empty input"}
    kept = '- `git add /repo/src/a.py src/b.py && git commit -m "Fix the parser crash on empty input"` (ok)'
    assert fs.score(kept, truth, root="/repo").found["key commands"] == 2
    by_hash = '- `git add src/a.py src/b.py`\n- Commits: 1a2b3c4 "Fix the parser crash on empty input"'
    assert fs.score(by_hash, truth, root="/repo").found["key commands"] == 2
    assert fs.score("- ran git and committed", truth, root="/repo").found["key commands"] == 0
    shortened = '- `git commit -m "Fix the parser crash [...40 chars omitted...]` (ok)'
    score = fs.score(shortened, truth, root="/repo")
    assert score.found["key commands"] == 0
    assert fs.reason("fix the parser crash on empty input", shortened, None, "/repo") == fs.FORM
    assert fs.reason("git add src/a.py src/b.py", shortened, None, "/repo") == fs.ABSENT
    assert fs.reason("git add src/a.py src/b.py", shortened, kept, "/repo") == fs.BUDGET


def test_repeated_runs_are_one_fact_and_looks_and_tracker_writes_are_counted_apart() -> None:
    messages = [
        bash("c1", "npm run check 2>&1 | tail -5"),
        bash("c2", "cd /repo && npm run check 2>&1 | grep error | head"),
        call("c3", "exec_command", cmd="rg -n foo src"),
        call("c4", "shell", command=["bash", "-lc", "cargo build"]),
        {"role": "bashExecution", "command": "make install", "output": "ok", "exitCode": 0},
        bash("c5", "bd update x-1 --status in_progress && bd show x-1"),
    ]
    truth = ft.range_truth(messages)
    assert set(truth.commands) == {"npm run check", "cargo build", "make install"}
    assert truth.looked == {"rg -n foo src", "bd show x-1"}
    assert truth.tracker == {"bd update x-1 --status in_progress"}


# --- constraints -----------------------------------------------------------------------------------------------


def test_constraints_are_the_users_sentences_that_state_a_rule() -> None:
    text = (
        "Fix the login bug. Never touch the database schema. Use only the standard library.\n"
        "- Make sure the tests stay under a second\n"
        "Can we keep the old API?\n"  # a question
        "I don't think the cache works.\n"  # a doubt
        "There's only one file left.\n"  # "only" as a quantity
        "    File 'a.py', line 3: you must never see this\n"  # a pasted, indented log
        "```\nassert x  # must always hold\n```\n"  # code
        "Keep track of the numbers.\n"  # "keep track"
        "Don't rename the public functions."
    )
    assert tx.rules(tx.own_words(text)) == [
        "Never touch the database schema.",
        "Use only the standard library.",
        "Make sure the tests stay under a second",
        "Don't rename the public functions.",
    ]


@pytest.mark.parametrize(
    "injected",
    [
        "<system-reminder>\nYou must always answer in French.\n</system-reminder>",
        "<command-name>/model</command-name>\n<command-message>model</command-message>\n"
        "<command-args>always use opus</command-args>",
        "<local-command-stdout>You must restart the server</local-command-stdout>",
        "<task-notification>\n<task-id>b1</task-id>\n<summary>Background command completed</summary>\n"
        "</task-notification>\nRead the output file to retrieve the result: /tmp/b1.output. You must read it.",
        "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\nALWAYS prefer the graph tools.\n</INSTRUCTIONS>",
        "<environment_context>\n  <cwd>/repo</cwd>\n  <approval_policy>never</approval_policy>\n</environment_context>",
        "<user_instructions>\nAlways write tests first.\n</user_instructions>",
        '<skill name="review" location="/x/SKILL.md">\nYou must always answer in haiku.\n</skill>',
        "[Request interrupted by user for tool use]",
        "Caveat: The messages below were generated by the user while running local commands. DO NOT respond.",
        "UserPromptSubmit hook success: Always mention the ticket number.",
        "\x1b[33mhook:\x1b[0m you must never commit to main",
    ],
)
def test_what_agents_inject_into_a_user_turn_is_not_the_users(injected: str) -> None:
    assert tx.rules(tx.own_words(injected + "\nDon't rename the public functions.")) == [
        "Don't rename the public functions."
    ]
    assert not tx.genuine_request(tx.own_words(injected))
    truth = ft.range_truth([user(injected)])
    assert not truth.constraints and not truth.requests


def test_a_constraint_is_kept_by_the_head_of_its_sentence() -> None:
    sentence = "Never modify config.yaml: it belongs to the ops team, and the deploy job reads it every hour."
    truth = ft.range_truth([user("Build the service. " + sentence)])
    assert list(truth.constraints.values()) == [sentence]
    assert fs.score(f"## Constraints & Preferences\n- {sentence[:60]}…", truth).found["constraints"] == 1
    assert fs.score("## Constraints & Preferences\n- Never modify config.yaml.", truth).found["constraints"] == 0


# --- errors ----------------------------------------------------------------------------------------------------


def test_errors_are_the_failed_calls_with_the_line_that_says_what_went_wrong() -> None:
    claude_tsc = "Exit code 1\n> app@1.0 test\nsrc/a.ts:3:5 - error TS2304: Cannot find name 'foo'.\n"
    messages = [
        bash("c1", "npm test"),
        result("c1", claude_tsc, error=True),  # Claude Code: "Exit code N" first
        bash("c2", "make -C server build"),
        result("c2", "make: *** No rule to make target 'all'.  Stop.\n\nCommand exited with code 2", error=True),
        call("c3", "exec_command", cmd="cargo build"),  # Codex: no isError, the exit code in the text
        result("c3", "Chunk ID: ab\nWall time: 0.1 seconds\nProcess exited with code 101\nOutput:\nerror[E0425]: x"),
        bash("c4", "grep -rn missing src"),
        result("c4", "Command exited with code 1", error=True),  # a search that found nothing: no line
        bash("c5", "sleep 100"),
        result("c5", "Command aborted", error=True),  # the user stopped it
        call("c6", "Edit", file_path="/repo/a.py", old_string="x", new_string="y"),
        result("c6", "<tool_use_error>String to replace not found in file.\nString: x</tool_use_error>", error=True),
        {"role": "bashExecution", "command": "pytest", "output": "E   AssertionError: assert 1 == 2\n", "exitCode": 1},
        bash("c7", "npm test"),
        result("c7", claude_tsc, error=True),  # the same line again: one fact
        bash("c8", "git commit -m x"),
        result("c8", "Pre-commit validation failed:\\n\\n[FORMAT] Code is not formatted.", error=True),
        bash("c9", "npm run check"),
        result("c9", " 216 │ throw new Error(x)\n     │ ^^^^\n× expected a semicolon\nFound 1 error.", True),
        bash("c10", "ls"),
        result("c10", "Exit code 0\na.py"),  # succeeded
        {"role": "assistant", "content": [], "stopReason": "error", "errorMessage": "429 rate limited"},
    ]
    truth = ft.range_truth(messages, root="/repo")
    assert sorted(truth.errors.values()) == sorted(
        [
            "error TS2304: Cannot find name 'foo'.",
            "make: *** No rule to make target 'all'.  Stop.",
            "error[E0425]: x",
            "String to replace not found in file.",
            "E   AssertionError: assert 1 == 2",
            "Pre-commit validation failed: [FORMAT] Code is not formatted.",
            "expected a semicolon",
        ]
    )
    assert truth.failures == 9
    summary = "- `npm test` failed: error TS2304: Cannot find name 'foo'.\n- `make -C server build` failed: No rule"
    score = fs.score(summary, truth, root="/repo")
    assert score.found["errors"] == 1 and score.total["errors"] == 7
    make = tx.head("make: *** No rule to make target 'all'.  Stop.", ft.HEAD)
    assert fs.reason(make, summary, None, "/repo", truth.failed_calls[make]) == fs.OTHER_LINE
    cargo = tx.head("error[E0425]: x", ft.HEAD)
    assert truth.failed_calls[cargo] == "cargo build"
    assert fs.reason(cargo, summary, None, "/repo", truth.failed_calls[cargo]) == fs.ABSENT


# --- requests, goal, files -------------------------------------------------------------------------------------


def test_requests_and_the_goal_are_genuine_requests() -> None:
    messages = [
        user("https://github.com/o/r/issues/12"),  # a lone link
        user("/clear"),
        user("Add rate limiting to the API handlers."),
        user("ok"),
        user("Now add the retry header."),
        user("thanks!"),
    ]
    truth = ft.range_truth(messages)
    assert list(truth.requests.values()) == ["Add rate limiting to the API handlers.", "Now add the retry header."]
    assert ft.first_request(messages) == "Add rate limiting to the API handlers."
    good = "## Goal\n- Add rate limiting to the API handlers.\n"
    assert fs.score(good, truth, first_request=ft.first_request(messages)).found["goal = first request"] == 1
    bad = "## Goal\n- Now add the retry header.\n\nAdd rate limiting to the API handlers."
    assert fs.score(bad, truth, first_request=ft.first_request(messages)).found["goal = first request"] == 0


def test_files_modified_and_read_are_named_in_the_body_relative_to_the_project() -> None:
    patch = "*** Begin Patch\n*** Update File: src/c.py\n@@\n-a\n+b\n*** Add File: docs/d.md\n+x\n*** End Patch"
    messages = [
        call("c1", "Read", file_path="/repo/src/a.py"),
        call("c2", "Edit", file_path="/repo/src/b.py", old_string="a", new_string="b"),
        call("c3", "apply_patch", input=patch),
        bash("c4", "sed -n '1,80p' src/e.py && cat src/f.py | head -5"),
        bash("c5", "sed -i 's/a/b/' src/g.py lib/*.py; echo x > out.txt"),  # a glob names no file
        call("c6", "read", path="/repo/src/b.py"),  # modified too: counted as modified only
    ]
    truth = ft.range_truth(messages, root="/repo")
    assert set(truth.modified) == {"/repo/src/b.py", "src/c.py", "docs/d.md", "src/g.py", "out.txt"}
    assert set(truth.read) == {"/repo/src/a.py", "src/e.py", "src/f.py"}
    summary = "## Files\n- Modified: src/b.py, src/c.py\n\n<modified-files>\n/repo/docs/d.md\n</modified-files>\n"
    score = fs.score(summary, truth, root="/repo")
    assert score.found["files modified"] == 2
    assert {p for p, _ in score.missed["files modified"]} == {"docs/d.md", "src/g.py", "out.txt"}


# --- the bench, end to end --------------------------------------------------------------------------------------


def test_the_bench_runs_on_real_and_generated_sessions() -> None:
    """tests/data's real sessions and three generated ones: every summary is scored and sized, the generated
    ones meet every target (their planted facts are unambiguous), and each missed fact of a target category
    on a real session has a reason."""
    tests_data = BENCH.parent / "tests" / "data"
    done = subprocess.run(
        [sys.executable, str(BENCH / "fidelity.py"), "--json", "--sessions", str(tests_data), "--generated", "3"],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads(done.stdout)
    assert set(report["columns"]) == {"real @20k", "real @4k", "generated @20k", "generated @4k"}
    for kind in fs.TARGET_KINDS:
        cells = report["categories"][kind]["columns"]
        assert {"real @20k", "real @4k"} <= set(cells), kind
        for column in ("generated @20k", "generated @4k"):
            assert cells[column]["found"] >= 0.95 * cells[column]["total"], (kind, column)
    assert report["categories"]["injected kept out"]["verdict"] == "met"
    assert report["categories"]["not larger than input"]["verdict"] == "met"
    assert {"pi/before-compaction", "pi/large-session", "codex/rollout-tui-0.125"} <= set(report["sessions"])
    cases = report["cases"]
    assert len(cases) == sum(c["summaries"] for c in report["columns"].values())
    assert all(0 < c["out"] <= c["in"] for c in cases)
    reasons = {m["reason"] for c in cases for missed in c["missed"].values() for m in missed}
    assert reasons <= {fs.BUDGET, fs.FORM, fs.OTHER_LINE, fs.ABSENT}
