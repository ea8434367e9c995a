"""Real Claude Code (scripts/versions.env) with ctxd's plugin installed by ``ctxd setup claude-code`` from the
pipx-installed wheel: a turn with tools and a ``/compact`` against the fake Anthropic server, with no ctxd on Claude
Code's PATH (the hook finds ctxd through the copy's ``ctxd.path``); ``--uninstall`` leaves the settings as before."""

from __future__ import annotations

import json
from pathlib import Path

from claude_code.harness import ClaudeCode, claude_binary
from fakes.anthropic_server import FakeAnthropicServer, call, say

from .conftest import SYSTEM_PATH, Installed, installed_plugins, tool_dir

SETTINGS = b'{"model": "claude-sonnet-4-5",\n "env": {"FOO": "bar"}}\n'


def test_a_turn_and_a_compaction_through_the_plugin_ctxd_setup_installed(installed: Installed, tmp_path: Path) -> None:
    with FakeAnthropicServer() as server:
        claude = ClaudeCode(tmp_path, server, extra_env={"PATH": SYSTEM_PATH})  # no ctxd on Claude Code's PATH
        (claude.config / "settings.json").write_bytes(SETTINGS)
        env = {**claude.env(), "PATH": f"{tool_dir(tmp_path, 'claude', [claude_binary()])}:{installed.env()['PATH']}"}
        setup = installed.run("setup", "claude-code", env=env).stdout
        assert "ran: " in setup and "plugin install ctxd@ctxd-setup" in setup

        app = claude.project / "app.py"
        server.summary_text = "<summary>1. Primary Request and Intent: a tiny service in app.py.</summary>"
        server.script(
            call("Write", file_path=str(app), content="PORT = 8123\n"),
            call("Bash", command="python3 -c 'import app; print(app.PORT)'"),
            say("app.py is written."),
        )
        first = claude.run("Build a tiny service in app.py on port 8123. Never modify config.yaml.")
        assert first.returncode == 0, first.stdout + first.stderr
        session = first.result["session_id"]
        compacted = claude.run("/compact", resume=session)
        assert compacted.returncode == 0, compacted.stdout + compacted.stderr
        server.script(say("Next: tests."))
        last = claude.run("What is next?", resume=session)
        assert last.returncode == 0 and last.result["result"] == "Next: tests."

        log = claude.log_text()
        assert f"PreCompact session={session} PreCompact: archived " in log, log
        assert "not found" not in log and "error" not in log, log
        (summary,) = server.of_kind("summary")
        asked = json.dumps(summary.messages[-1])  # ctxd's must-keep facts went into the summarisation request
        assert "ctxd (context keeper)" in asked and "config.yaml" in asked
        assert list(claude.archive.glob(f"claude/*/{session}.jsonl"))

        removed = installed.run("setup", "claude-code", "--uninstall", env=env).stdout
        assert "restore " in removed, removed
        assert (claude.config / "settings.json").read_bytes() == SETTINGS
        listed = claude._run(["plugin", "list", "--json"], cwd=claude.home)
        assert installed_plugins(listed.stdout) == []
