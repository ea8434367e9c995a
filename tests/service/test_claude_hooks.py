"""``ctxd hook``'s logic on a transcript Claude Code 2.1.330 wrote (recorded by tests/claude_code), without Claude.

The hooks run in Claude's order: PreCompact, SessionStart(compact), PostCompact, then the next prompt.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import reference

from ctxd.cli.hook import load_settings, run
from ctxd.compaction.recall import RECALL_HINT
from ctxd.compaction.summary.prompts import SHAPE_INSTRUCTIONS
from ctxd.service.claude_facts import transcript_facts
from ctxd.service.claude_hooks import (
    FACTS_HEADING,
    INSTRUCTIONS,
    MAX_AWAITING_CHECKS,
    HookSettings,
    handle,
)

SESSION = "2696e685-97f7-47e2-9b90-766d279ab840"
SUMMARY = (
    "1. Primary Request and Intent: Build a tiny HTTP service in app.py that listens on port 8123.\n"
    "2. Files and Code Sections: /home/dev/service/app.py was created and edited.\n"
    "3. Checks: python3 -m py_compile app.py && echo compiled-ok passed."
)


@pytest.fixture
def settings(tmp_path: Path) -> HookSettings:
    return HookSettings(str(tmp_path / "state"), str(tmp_path / "archive"), tool_output_limit=5_000)


@pytest.fixture
def live(tmp_path: Path) -> Path:
    """The transcript as it was when the user typed /compact (everything before the compact boundary)."""
    data = reference("claude", "claude-2.1.330-compact.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if b'"compact_boundary"' in line)
    path = tmp_path / "claude" / "projects" / "-home-dev-service" / f"{SESSION}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(lines[:cut]))
    return path


def _payload(live: Path, event: str, **extra: Any) -> dict[str, Any]:
    return {
        "session_id": SESSION,
        "transcript_path": str(live),
        "cwd": "/home/dev/service",
        "hook_event_name": event,
        **extra,
    }


def _context(stdout: str) -> str:
    out = json.loads(stdout)["hookSpecificOutput"]
    return str(out["additionalContext"])


def test_precompact_archives_and_asks_the_summary_to_keep_the_facts(live: Path, settings: HookSettings) -> None:
    result = handle("PreCompact", _payload(live, "PreCompact", trigger="manual", custom_instructions=None), settings)
    assert result.stdout.startswith(f"{INSTRUCTIONS} {SHAPE_INSTRUCTIONS}\n\n## Must keep\n")
    assert 'First "## State now"' in result.stdout and "task by task" in result.stdout
    for fact in ("Build a tiny HTTP service", "Also add a /health endpoint", "Never modify config.yaml", "py_compile"):
        assert fact in result.stdout
    assert len(result.stdout) <= settings.instructions_chars
    copy = Path(settings.archive_root) / "claude" / "-home-dev-service" / f"{SESSION}.jsonl"
    assert copy.read_bytes() == live.read_bytes() and stat.S_IMODE(copy.stat().st_mode) == 0o600
    notes = Path(settings.state_dir) / "claude" / f"{SESSION}.json"
    assert stat.S_IMODE(notes.stat().st_mode) == 0o600
    saved = json.loads(notes.read_text())["precompact"]
    assert saved["trigger"] == "manual" and saved["compactions"] == 0
    assert saved["facts"] == transcript_facts(str(live)).sheet.to_json()


def test_after_a_manual_compact_the_missing_facts_wait_for_the_summary_then_go_once(
    live: Path, settings: HookSettings
) -> None:
    handle("PreCompact", _payload(live, "PreCompact", trigger="manual"), settings)
    start = handle("SessionStart", _payload(live, "SessionStart", source="compact"), settings)
    assert start.stdout == "" and "wait for PostCompact" in start.note
    assert handle("UserPromptSubmit", _payload(live, "UserPromptSubmit"), settings).stdout == ""
    post = handle("PostCompact", _payload(live, "PostCompact", trigger="manual", compact_summary=SUMMARY), settings)
    sheet = transcript_facts(str(live)).sheet
    missing = sheet.missing(SUMMARY)
    assert 0 < len(missing) < len(sheet)
    assert post.note == f"PostCompact: the summary lacks {len(missing)} of {len(sheet)} facts"
    prompt = handle("UserPromptSubmit", _payload(live, "UserPromptSubmit", prompt="What is next?"), settings)
    assert json.loads(prompt.stdout)["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    context = _context(prompt.stdout)
    assert context.startswith(FACTS_HEADING + "\n") and context.endswith(f"\n\n{RECALL_HINT}")
    assert context.removesuffix(f"\n\n{RECALL_HINT}") == missing.render(
        settings.facts_chars - len(RECALL_HINT) - 2, heading=FACTS_HEADING
    )
    # What the summary left out ...
    assert "- Latest request: Also add a /health endpoint that answers ok." in context
    assert "- User constraint: Never modify config.yaml: it belongs to the ops team." in context
    assert "python3 -c 'import app; print(app.PORT)'" in context
    # ... and not what it kept.
    assert "Goal" not in context and "/home/dev/service/app.py" not in context and "py_compile" not in context
    assert handle("UserPromptSubmit", _payload(live, "UserPromptSubmit"), settings).stdout == ""
    assert handle("SessionStart", _payload(live, "SessionStart", source="resume"), settings).stdout == ""


def test_a_resumed_session_gets_the_waiting_facts_at_its_start(live: Path, settings: HookSettings) -> None:
    handle("PreCompact", _payload(live, "PreCompact", trigger="manual"), settings)
    handle("SessionStart", _payload(live, "SessionStart", source="compact"), settings)
    handle("PostCompact", _payload(live, "PostCompact", compact_summary=SUMMARY), settings)
    start = handle("SessionStart", _payload(live, "SessionStart", source="resume"), settings)
    assert json.loads(start.stdout)["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert "Never modify config.yaml" in _context(start.stdout)
    assert handle("UserPromptSubmit", _payload(live, "UserPromptSubmit"), settings).stdout == ""


def test_after_an_automatic_compaction_only_the_facts_its_summary_lacks_go_with_the_next_tool_result(
    live: Path, settings: HookSettings
) -> None:
    """Claude Code runs SessionStart(compact) before it writes the summary and goes on at once: the facts wait for
    PostCompact (which has the summary) and go with the first tool result after it, only those the summary lacks."""
    handle("PreCompact", _payload(live, "PreCompact", trigger="auto"), settings)
    start = handle("SessionStart", _payload(live, "SessionStart", source="compact"), settings)
    assert start.stdout == "" and "wait for PostCompact" in start.note
    handle("PostCompact", _payload(live, "PostCompact", trigger="auto", compact_summary=SUMMARY), settings)
    tool = _payload(live, "PostToolUse", tool_name="Bash", tool_input={"command": "ls"}, tool_response="app.py")
    after = json.loads(handle("PostToolUse", tool, settings).stdout)["hookSpecificOutput"]
    assert after["hookEventName"] == "PostToolUse" and "updatedToolOutput" not in after
    context = after["additionalContext"]
    assert context.startswith(FACTS_HEADING + "\n") and "Never modify config.yaml" in context
    assert "Build a tiny HTTP service" not in context and "py_compile" not in context  # the summary has them
    assert context.endswith(RECALL_HINT)
    assert handle("PostToolUse", tool, settings).stdout == ""  # once
    assert handle("UserPromptSubmit", _payload(live, "UserPromptSubmit"), settings).stdout == ""


def test_a_cut_tool_output_and_the_waiting_facts_go_in_one_answer(live: Path, settings: HookSettings) -> None:
    handle("PreCompact", _payload(live, "PreCompact", trigger="auto"), settings)
    handle("SessionStart", _payload(live, "SessionStart", source="compact"), settings)
    handle("PostCompact", _payload(live, "PostCompact", trigger="auto", compact_summary=SUMMARY), settings)
    big = _payload(live, "PostToolUse", tool_name="Read", tool_input={"file_path": "/x"}, tool_response="x\n" * 9_000)
    out = json.loads(handle("PostToolUse", big, settings).stdout)["hookSpecificOutput"]
    assert len(out["updatedToolOutput"]) < 18_000 and "Never modify config.yaml" in out["additionalContext"]


def test_without_postcompact_the_next_prompt_reads_the_summary_from_the_transcript(
    live: Path, settings: HookSettings
) -> None:
    handle("PreCompact", _payload(live, "PreCompact", trigger="manual"), settings)
    assert handle("SessionStart", _payload(live, "SessionStart", source="compact"), settings).stdout == ""
    # No PostCompact (an older Claude Code); the summary is in the transcript by the next prompt.
    shutil.copy(reference("claude", "claude-2.1.330-compact.jsonl"), live)
    prompt = handle("UserPromptSubmit", _payload(live, "UserPromptSubmit", prompt="What is next?"), settings)
    context = _context(prompt.stdout)
    assert context.startswith(FACTS_HEADING + "\n") and "Never modify config.yaml" in context
    assert "Build a tiny HTTP service" not in context
    assert handle("UserPromptSubmit", _payload(live, "UserPromptSubmit"), settings).stdout == ""


def test_a_compaction_whose_summary_never_comes_leaves_nothing_waiting(live: Path, settings: HookSettings) -> None:
    handle("PreCompact", _payload(live, "PreCompact", trigger="manual"), settings)
    handle("SessionStart", _payload(live, "SessionStart", source="compact"), settings)
    pending = Path(settings.state_dir) / "claude" / f"{SESSION}.pending"
    tool = _payload(live, "PostToolUse", tool_name="Bash", tool_response="x")
    for _ in range(MAX_AWAITING_CHECKS - 1):
        assert handle("PostToolUse", tool, settings).stdout == "" and pending.exists()
    last = handle("UserPromptSubmit", _payload(live, "UserPromptSubmit"), settings)
    assert last.stdout == "" and "no facts wait for it any longer" in last.note
    notes = json.loads((Path(settings.state_dir) / "claude" / f"{SESSION}.json").read_text())
    assert "awaiting" not in notes and "awaitingChecks" not in notes and not pending.exists()


def test_without_precompact_the_facts_come_from_the_transcript(live: Path, settings: HookSettings) -> None:
    assert handle("SessionStart", _payload(live, "SessionStart", source="compact"), settings).stdout == ""
    handle("PostCompact", _payload(live, "PostCompact", compact_summary=SUMMARY), settings)
    prompt = handle("UserPromptSubmit", _payload(live, "UserPromptSubmit"), settings)
    assert "Never modify config.yaml" in _context(prompt.stdout)


def test_a_second_compaction_keeps_the_facts_of_the_first_and_the_goal(live: Path, settings: HookSettings) -> None:
    """The facts of the range before the first compaction live in the notes' ledger: the second compaction's
    instructions and check have them, though Claude's summary kept few and the new range never names them."""
    handle("PreCompact", _payload(live, "PreCompact", trigger="manual"), settings)
    handle("SessionStart", _payload(live, "SessionStart", source="compact"), settings)
    handle("PostCompact", _payload(live, "PostCompact", trigger="manual", compact_summary=SUMMARY), settings)
    handle("UserPromptSubmit", _payload(live, "UserPromptSubmit", prompt="What is next?"), settings)
    # Claude wrote the boundary and its summary; the conversation goes on after them.
    shutil.copy(reference("claude", "claude-2.1.330-compact.jsonl"), live)
    second = handle("PreCompact", _payload(live, "PreCompact", trigger="auto"), settings)
    assert "- User constraint: Never modify config.yaml: it belongs to the ops team." in second.stdout
    assert "- Goal: Build a tiny HTTP service in app.py" in second.stdout
    notes = json.loads((Path(settings.state_dir) / "claude" / f"{SESSION}.json").read_text())
    ledger = notes["ledger"]
    assert ledger["compactions"] == 2 and ledger["goal"].startswith("Build a tiny HTTP service in app.py")
    handle("SessionStart", _payload(live, "SessionStart", source="compact"), settings)
    handle("PostCompact", _payload(live, "PostCompact", trigger="auto", compact_summary=SUMMARY), settings)
    prompt = handle("UserPromptSubmit", _payload(live, "UserPromptSubmit"), settings)
    assert "Never modify config.yaml" in _context(prompt.stdout)  # the first range's fact, which the summary lacks


def test_posttooluse_cuts_what_the_model_reads_and_leaves_edits_alone(live: Path, settings: HookSettings) -> None:
    big = {"stdout": "x\n" * 10_000, "stderr": "", "interrupted": False, "isImage": False}
    result = handle("PostToolUse", _payload(live, "PostToolUse", tool_name="Bash", tool_response=big), settings)
    out = json.loads(result.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "PostToolUse" and set(out["updatedToolOutput"]) == set(big)
    assert len(out["updatedToolOutput"]["stdout"]) <= 5_000
    edit = {"filePath": "/p", "originalFile": "y" * 50_000, "structuredPatch": []}
    assert handle("PostToolUse", _payload(live, "PostToolUse", tool_name="Edit", tool_response=edit), settings) == (
        handle("PostToolUse", _payload(live, "PostToolUse", tool_name="Bash", tool_response={"stdout": "ok"}), settings)
    )
    assert handle("PostToolUse", _payload(live, "PostToolUse", tool_name="Bash"), settings).stdout == ""


def test_sessionend_archives_and_unknown_events_do_nothing(live: Path, settings: HookSettings) -> None:
    assert "archived" in handle("SessionEnd", _payload(live, "SessionEnd", reason="other"), settings).note
    assert handle("Notification", _payload(live, "Notification"), settings).stdout == ""
    off = settings._replace(archive=False)
    assert handle("SessionEnd", _payload(live, "SessionEnd"), off).note == "SessionEnd: archive off"


def test_settings_come_from_ctxds_config_and_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"claudeCode": {"toolOutputLimit": 9000, "factsChars": 4000, "archive": False}}))
    env = {"CTXD_CONFIG": str(config), "XDG_STATE_HOME": str(tmp_path / "s"), "XDG_DATA_HOME": str(tmp_path / "d")}
    got = load_settings(env)
    assert (got.tool_output_limit, got.facts_chars, got.archive) == (9000, 4000, False)
    assert got.state_dir == str(tmp_path / "s" / "ctxd") and got.archive_root == str(
        tmp_path / "d" / "ctxd" / "archive"
    )
    assert load_settings({**env, "CTXD_TOOL_OUTPUT_LIMIT": "1234"}).tool_output_limit == 1234
    config.write_text(json.dumps({"claudeCode": {"toolOutputLimit": -3, "contextWindow": 20_000}}))
    assert load_settings(env).tool_output_limit == 24_000  # seed 004 for a small window: window x 0.3 x 4
    config.write_text(json.dumps({"claudeCode": {"toolOutputLimit": -3, "contextWindow": 100_000}}))
    assert load_settings(env).tool_output_limit == 30_000  # cut_rules.DEFAULT_LIMIT: Claude's own Bash preview size
    config.write_text("not json")
    assert load_settings(env).tool_output_limit == 30_000 and load_settings(env).archive is True


def test_run_prints_once_and_logs(live: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("CTXD_CONFIG", str(tmp_path / "none.json"))
    out = io.StringIO()
    data = json.dumps(_payload(live, "PreCompact", trigger="manual")).encode()
    assert run("PreCompact", io.BytesIO(data), out) == 0
    assert out.getvalue().startswith(INSTRUCTIONS) and out.getvalue().endswith("\n")
    log = (tmp_path / "state" / "ctxd" / "hooks.log").read_text()
    assert f"PreCompact session={SESSION} PreCompact: archived " in log
    out = io.StringIO()
    assert run("PreCompact", io.BytesIO(data.replace(str(live).encode(), b"/nope.jsonl")), out) == 0
    assert out.getvalue() == "" and "FileNotFoundError" in (tmp_path / "state" / "ctxd" / "hooks.log").read_text()


def test_a_hook_imports_neither_the_model_client_nor_the_daemon(live: Path, tmp_path: Path) -> None:
    script = f"""
import io, json, sys
from ctxd.cli.hook import run
for event, extra in [("PostToolUse", {{"tool_name": "Bash", "tool_response": {{"stdout": "x" * 300000}}}}),
                     ("PreCompact", {{"trigger": "manual"}}), ("SessionStart", {{"source": "compact"}}),
                     ("PostCompact", {{"compact_summary": "s"}}), ("UserPromptSubmit", {{}}), ("SessionEnd", {{}})]:
    payload = {{"session_id": "{SESSION}", "transcript_path": {str(live)!r}, **extra}}
    run(event, io.BytesIO(json.dumps(payload).encode()), io.StringIO())
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("litellm", "pygls", "lsprotocol", "watchfiles")
               or m.startswith(("ctxd.server", "ctxd.service.service", "ctxd.llm", "ctxd.compaction.engine")))
print(json.dumps(heavy))
"""
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "s"), "XDG_DATA_HOME": str(tmp_path / "d")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
    assert "error" not in (tmp_path / "s" / "ctxd" / "hooks.log").read_text()


def test_the_pending_marker_exists_exactly_while_facts_wait(live: Path, settings: HookSettings) -> None:
    """The shell wrapper skips UserPromptSubmit and PostToolUse without ``<session>.pending``: it must follow the
    notes (facts waiting to be handed over, or for the summary to check them against)."""
    notes = Path(settings.state_dir) / "claude" / f"{SESSION}.json"
    marker = notes.with_suffix(".pending")

    def agrees() -> bool:
        saved = json.loads(notes.read_text()) if notes.exists() else {}
        return marker.exists() is bool(saved.get("pending") or saved.get("awaiting"))

    steps: list[tuple[str, dict[str, Any]]] = [
        ("UserPromptSubmit", {"prompt": "hi"}),
        ("PreCompact", {"trigger": "manual"}),
        ("SessionStart", {"source": "compact"}),
        ("PostCompact", {"compact_summary": SUMMARY}),
    ]
    for event, extra in steps:
        handle(event, _payload(live, event, **extra), settings)
        assert agrees(), event
    assert marker.exists() and stat.S_IMODE(marker.stat().st_mode) == 0o600
    handle("UserPromptSubmit", _payload(live, "UserPromptSubmit", prompt="next"), settings)
    assert not marker.exists() and agrees()
    # Facts waiting again, then handed over at a resumed session's start.
    for event, extra in steps[1:]:
        handle(event, _payload(live, event, **extra), settings)
    assert marker.exists()
    handle("SessionStart", _payload(live, "SessionStart", source="resume"), settings)
    assert not marker.exists() and agrees()
