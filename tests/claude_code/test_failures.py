"""A missing, broken or failing ctxd never breaks Claude Code: its hooks print nothing and exit 0."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from fakes.anthropic_server import FakeAnthropicServer, call, say

from .harness import PLUGIN, ClaudeCode

WRAPPER = PLUGIN / "bin" / "ctxd-hook"


def _conversation(claude: ClaudeCode, anthropic: FakeAnthropicServer) -> None:
    """A tool call, a compaction and a prompt after it: every hook ctxd installs fires."""
    anthropic.summary_text = "<summary>Counted to 3.</summary>"
    anthropic.script(call("Bash", command="seq 1 3"), say("Counted."))
    first = claude.run("Count to 3.")
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.result["result"] == "Counted."
    session = first.result["session_id"]
    compact = claude.run("/compact", resume=session)
    assert compact.returncode == 0, compact.stdout + compact.stderr
    assert compact.result["is_error"] is False
    anthropic.script(say("Still here."))
    last = claude.run("And now?", resume=session)
    assert last.returncode == 0, last.stdout + last.stderr
    assert last.result["result"] == "Still here."
    (result,) = anthropic.of_kind("main")[1].tool_results()
    assert "1\n2\n3" in str(result["content"])
    assert len(anthropic.of_kind("summary")) == 1
    # Not even a warning: Claude Code records (and shows) every hook that exits non-zero or prints junk.
    transcript = claude.transcript(session).read_text()
    for kind in ("hook_non_blocking_error", "hook_blocking_error", "hook_error_during_execution"):
        assert f'"type":"{kind}"' not in transcript, kind


def test_claude_code_works_when_ctxd_is_not_installed(claude: ClaudeCode, anthropic: FakeAnthropicServer) -> None:
    claude.extra_env["PATH"] = "/usr/bin:/bin"  # no ctxd anywhere
    _conversation(claude, anthropic)
    assert not claude.archive.exists()
    summary = anthropic.of_kind("summary")[0]
    assert "ctxd" not in json.dumps(summary.messages[-1])
    assert '"ctxd" not found' in claude.log_text()  # the user's one hint, in ctxd's log


def test_claude_code_works_when_ctxd_crashes(
    claude: ClaudeCode, anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    broken = tmp_path / "broken-ctxd"
    # Exit status 2 is Claude Code's "block": a PreCompact hook exiting 2 would stop the compaction.
    broken.write_text('#!/bin/sh\necho \'{"hookSpecificOutput": garbage\'\necho "Traceback: boom" >&2\nexit 2\n')
    broken.chmod(broken.stat().st_mode | stat.S_IXUSR)
    claude.extra_env["CTXD_BIN"] = str(broken)
    _conversation(claude, anthropic)
    assert "garbage" not in json.dumps([r.body for r in anthropic.requests])
    assert "Traceback: boom" in claude.log_text()  # the wrapper keeps a ctxd's stderr in ctxd's log


def test_claude_code_works_when_every_hook_fails_inside_ctxd(
    claude: ClaudeCode, anthropic: FakeAnthropicServer
) -> None:
    # ctxd's state folder is a file: notes, the log's folder and the archive cannot be written.
    claude.state.rmdir()
    claude.state.write_text("not a folder")
    claude.data.rmdir()
    claude.data.write_text("not a folder")
    _conversation(claude, anthropic)


def _hook(event: str, data: bytes, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ctxd", "hook", event], input=data, capture_output=True, env=env, timeout=60
    )


@pytest.mark.parametrize(
    "data",
    [b"", b"garbage", b"[1, 2]", b'{"session_id": "../../etc", "transcript_path": "/nonexistent.jsonl"}', b"\xff\xfe"],
)
@pytest.mark.parametrize("event", ["PreCompact", "SessionStart", "PostCompact", "PostToolUse", "SessionEnd", "Other"])
def test_a_hook_given_garbage_exits_0_silently_and_logs(tmp_path: Path, event: str, data: bytes) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_DATA_HOME": str(tmp_path / "data")}
    env["HOME"] = str(tmp_path)
    if event == "SessionStart":
        data = data.replace(b'"session_id"', b'"source": "compact", "session_id"')
    done = _hook(event, data, env)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    log = tmp_path / "state" / "ctxd" / "hooks.log"
    if event != "Other" and data != b'{"session_id": "../../etc", "transcript_path": "/nonexistent.jsonl"}':
        assert " error (" in log.read_text()
        assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert not (tmp_path / "etc").exists()


def test_the_wrapper_without_ctxd_exits_0_silently(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run([str(WRAPPER), "PreCompact"], input=b"{}", capture_output=True, env=env, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    log = tmp_path / ".local" / "state" / "ctxd" / "hooks.log"
    assert 'ctxd-hook PreCompact: "ctxd" not found' in log.read_text()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
