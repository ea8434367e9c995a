"""integrations/claude-code/bin/ctxd-hook, the real POSIX sh wrapper: "nothing to do" decided without Python.

ctxd is reached through a counting ``CTXD_BIN`` (a script that records each start, then runs this environment's
``ctxd``), so a test sees whether Python started at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

WRAPPER = REPO / "integrations" / "claude-code" / "bin" / "ctxd-hook"
SESSION = "wrapper-session"


class Hook:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.counter = tmp / "starts"
        self.ctxd = tmp / "counting-ctxd"
        self.ctxd.write_text(
            f'#!/bin/sh\necho "$*" >>{self.counter}\nexec {Path(sys.executable).parent / "ctxd"} "$@"\n'
        )
        self.ctxd.chmod(0o755)
        self.config = tmp / "config.json"
        self.state = tmp / "state" / "ctxd"
        self.env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp / "home"),
            "XDG_STATE_HOME": str(tmp / "state"),
            "XDG_DATA_HOME": str(tmp / "data"),
            "CTXD_CONFIG": str(self.config),
            "CTXD_BIN": str(self.ctxd),
        }

    def starts(self) -> int:
        return len(self.counter.read_text().splitlines()) if self.counter.exists() else 0

    def __call__(self, event: str, payload: dict[str, Any], **env: str) -> str:
        data = json.dumps({"session_id": SESSION, "hook_event_name": event, **payload}, separators=(",", ":"))
        done = subprocess.run(
            ["/bin/sh", str(WRAPPER), event],
            input=data,
            capture_output=True,
            text=True,
            env={**self.env, **env},
            timeout=60,
            check=True,
        )
        assert done.stderr == ""
        return done.stdout


@pytest.fixture
def hook(tmp_path: Path) -> Hook:
    return Hook(tmp_path)


def _bash(chars: int) -> dict[str, Any]:
    return {"tool_name": "Bash", "tool_input": {"command": "x"}, "tool_response": {"stdout": "l\n" * (chars // 2)}}


def _read(chars: int, **tool_input: Any) -> dict[str, Any]:
    content = "line of a file\n" * (chars // 15)
    response = {"type": "text", "file": {"filePath": "/p/a.py", "content": content}}
    return {"tool_name": "Read", "tool_input": {"file_path": "/p/a.py", **tool_input}, "tool_response": response}


def test_until_ctxd_wrote_its_settings_every_event_starts_ctxd_which_writes_them(hook: Hook) -> None:
    assert hook("PostToolUse", _bash(10)) == ""
    assert hook.starts() == 1
    settings = (hook.state / "hooks.env").read_text()
    assert "ctxd_limit='30000'" in settings and "ctxd_never='|" in settings and "|Edit|" in settings
    assert oct((hook.state / "hooks.env").stat().st_mode & 0o777) == "0o600"


def test_nothing_to_do_starts_no_python(hook: Hook) -> None:
    hook("UserPromptSubmit", {"prompt": "hello"})  # the first run: ctxd writes hooks.env
    first = hook.starts()
    assert hook("PostToolUse", _bash(100)) == ""  # within the limit
    assert hook("PostToolUse", _bash(200_000)) == ""  # Claude Code previews a Bash output over 30,000 itself
    edit = {"tool_name": "Edit", "tool_input": {"new_string": "y" * 90_000}, "tool_response": {"a": "y" * 90_000}}
    assert hook("PostToolUse", edit) == ""  # never cut
    assert hook("UserPromptSubmit", {"prompt": "What is next?"}) == ""  # no facts wait
    assert hook.starts() == first


def test_work_to_do_starts_ctxd_with_the_payload(hook: Hook) -> None:
    hook("UserPromptSubmit", {"prompt": "hello"})
    first = hook.starts()
    out = json.loads(hook("PostToolUse", _read(80_000)))
    content = out["hookSpecificOutput"]["updatedToolOutput"]["file"]["content"]
    assert len(content) <= 30_000 and content.endswith("offset and limit to see the rest.]")
    assert hook.starts() == first + 1
    # A Read of a named range is ctxd's to judge (the wrapper cannot see it cheaply): ctxd starts, cuts nothing.
    assert hook("PostToolUse", _read(80_000, offset=1, limit=9_000)) == ""
    assert hook.starts() == first + 2


def test_the_environments_limit_overrides_the_configs(hook: Hook) -> None:
    hook("UserPromptSubmit", {"prompt": "hello"})
    first = hook.starts()
    out = json.loads(hook("PostToolUse", _bash(20_000), CTXD_TOOL_OUTPUT_LIMIT="6000"))
    assert len(out["hookSpecificOutput"]["updatedToolOutput"]["stdout"]) <= 6_000
    assert hook("PostToolUse", _bash(3_000), CTXD_TOOL_OUTPUT_LIMIT="6000") == ""  # a 4,600-byte payload
    assert hook.starts() == first + 1
    assert hook("PostToolUse", _bash(5_000), CTXD_TOOL_OUTPUT_LIMIT=" 4000") != ""  # not plain digits: ctxd reads it
    assert hook.starts() == first + 2


def test_a_window_claude_code_is_told_cuts_at_its_share(hook: Hook) -> None:
    """CLAUDE_CODE_AUTO_COMPACT_WINDOW (Claude Code passes it to its hooks): a 20,000-character Read output to a
    16,000-token window is cut at 30% of it (19,200 characters); to a 200,000-token window it is not, and no
    Python starts for it."""
    hook("UserPromptSubmit", {"prompt": "hello"})
    first = hook.starts()
    small = json.loads(hook("PostToolUse", _read(20_000), CLAUDE_CODE_AUTO_COMPACT_WINDOW="16000"))
    content = small["hookSpecificOutput"]["updatedToolOutput"]["file"]["content"]
    assert 18_000 < len(content) <= 19_200 and hook.starts() == first + 1
    assert hook("PostToolUse", _read(20_000), CLAUDE_CODE_AUTO_COMPACT_WINDOW="200000") == ""
    assert hook("PostToolUse", _read(16_000), CLAUDE_CODE_AUTO_COMPACT_WINDOW="16000") == ""  # a 17,300-byte payload
    assert hook.starts() == first + 1
    settings = (hook.state / "hooks.env").read_text()
    assert "ctxd_window_fixed='0'" in settings and "ctxd_share_permille='300'" in settings
    # A share in ctxd's config: the wrapper and ctxd alike (16,000 x 0.5 x 4 = 32,000: above the fixed 30,000).
    time.sleep(1.1)
    hook.config.write_text(json.dumps({"toolOutputShare": 0.5}))
    assert hook("PostToolUse", _read(20_000), CLAUDE_CODE_AUTO_COMPACT_WINDOW="16000") == ""
    assert "ctxd_share_permille='500'" in (hook.state / "hooks.env").read_text()
    # A window in ctxd's config wins over Claude Code's.
    time.sleep(1.1)
    hook.config.write_text(json.dumps({"claudeCode": {"contextWindow": 200_000}}))
    assert hook("PostToolUse", _read(20_000), CLAUDE_CODE_AUTO_COMPACT_WINDOW="16000") == ""
    starts = hook.starts()
    assert hook("PostToolUse", _read(20_000), CLAUDE_CODE_AUTO_COMPACT_WINDOW="16000") == ""
    assert hook.starts() == starts  # decided by the wrapper


def test_a_config_edited_since_goes_to_ctxd_which_rewrites_the_settings(hook: Hook) -> None:
    hook("UserPromptSubmit", {"prompt": "hello"})
    first = hook.starts()
    time.sleep(1.1)  # the shell's -nt compares whole seconds on some systems
    hook.config.write_text(json.dumps({"claudeCode": {"toolOutputLimit": 500}}))
    out = hook("PostToolUse", _read(2_000))
    assert "updatedToolOutput" in out and hook.starts() == first + 1
    assert "ctxd_limit='500'" in (hook.state / "hooks.env").read_text()
    assert hook("PostToolUse", _read(150)) == "" and hook.starts() == first + 1


def test_a_prompt_asking_for_whole_output_keeps_the_turns_outputs_whole(hook: Hook) -> None:
    hook("UserPromptSubmit", {"prompt": "hello"})
    first = hook.starts()
    assert hook("UserPromptSubmit", {"prompt": "Show me the full file app.py"}) == ""
    assert (hook.state / "claude" / f"{SESSION}.whole").exists()
    assert hook("PostToolUse", _read(80_000)) == ""
    assert hook.starts() == first
    hook("UserPromptSubmit", {"prompt": "Thanks. Now fix the bug."})
    assert not (hook.state / "claude" / f"{SESSION}.whole").exists()
    assert "updatedToolOutput" in hook("PostToolUse", _read(80_000))


def test_waiting_facts_start_ctxd_for_the_prompt(hook: Hook) -> None:
    hook("UserPromptSubmit", {"prompt": "hello"})
    first = hook.starts()
    notes = hook.state / "claude" / f"{SESSION}.json"
    facts = [{"kind": "User constraint", "text": "Never modify config.yaml.", "probes": ["config.yaml"]}]
    notes.write_text(json.dumps({"pending": {"facts": facts}}))
    (hook.state / "claude" / f"{SESSION}.pending").touch()
    hook("UserPromptSubmit", {"prompt": "next"})
    assert hook.starts() == first + 1
    assert not (hook.state / "claude" / f"{SESSION}.pending").exists()  # handed over: ctxd removed it
    assert hook("UserPromptSubmit", {"prompt": "next"}) == "" and hook.starts() == first + 1


def test_ctxd_is_found_through_the_plugins_ctxd_path(hook: Hook, tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    (plugin / "bin").mkdir(parents=True)
    wrapper = plugin / "bin" / "ctxd-hook"
    wrapper.write_bytes(WRAPPER.read_bytes())
    wrapper.chmod(0o755)
    (plugin / "ctxd.path").write_text(f"{hook.ctxd}\n")
    env = {k: v for k, v in hook.env.items() if k != "CTXD_BIN"}
    data = json.dumps({"session_id": SESSION, "prompt": "hi"})
    subprocess.run([str(wrapper), "UserPromptSubmit"], input=data, text=True, env=env, check=True, timeout=60)
    assert hook.starts() == 1
    env["PATH"] = "/usr/bin:/bin"
    os.unlink(plugin / "ctxd.path")
    (hook.state / "hooks.env").unlink()
    done = subprocess.run([str(wrapper), "UserPromptSubmit"], input=data, text=True, env=env, timeout=60)
    assert done.returncode == 0 and hook.starts() == 1
    assert '"ctxd" not found' in (hook.state / "hooks.log").read_text()


def test_claude_code_runs_the_posttooluse_hook_only_for_tools_ctxd_may_cut() -> None:
    """The matcher (a JavaScript regex, read the same way by Python's re) spares Claude Code the cost of starting
    a hook for a tool ctxd never cuts (about 100 ms each through Claude Code on this machine, bench/hooks_bench.py)."""
    import re

    from ctxd.context.cut_rules import NEVER

    spec = json.loads((REPO / "integrations" / "claude-code" / "hooks" / "hooks.json").read_text())
    (group,) = spec["hooks"]["PostToolUse"]
    matcher = re.compile(group["matcher"])
    claude_never = {tool for tool in NEVER if tool[0].isupper()}
    assert claude_never and not [tool for tool in claude_never if matcher.search(tool)]
    cut_able = ("Read", "Bash", "BashOutput", "Grep", "Glob", "WebFetch", "WebSearch", "mcp__github__get_file", "Edits")
    assert all(matcher.search(tool) for tool in cut_able)


def test_a_damaged_settings_file_leaves_the_decision_to_ctxd(hook: Hook) -> None:
    hook("UserPromptSubmit", {"prompt": "hello"})
    first = hook.starts()
    settings = hook.state / "hooks.env"
    settings.write_text(settings.read_text().replace("ctxd_limit='30000'", "ctxd_limit='lots'"))
    assert hook("PostToolUse", _bash(100)) == ""  # no shell error on stderr (Hook asserts it), ctxd judged it
    assert hook.starts() == first + 1
    assert "ctxd_limit='30000'" in settings.read_text()  # and rewrote the file


def test_waiting_facts_start_ctxd_for_a_tool_result_and_go_with_it(hook: Hook) -> None:
    """After an automatic compaction no prompt comes: the facts its summary lacks go with the next tool result."""
    hook("UserPromptSubmit", {"prompt": "hello"})
    assert hook("PostToolUse", _bash(10)) == ""
    first = hook.starts()
    notes = hook.state / "claude" / f"{SESSION}.json"
    facts = [{"kind": "constraint", "text": "Never modify config.yaml.", "probes": ["config.yaml"]}]
    notes.write_text(json.dumps({"pending": {"facts": facts}}))
    (hook.state / "claude" / f"{SESSION}.pending").touch()
    out = json.loads(hook("PostToolUse", _bash(10)))["hookSpecificOutput"]
    assert out["hookEventName"] == "PostToolUse" and "Never modify config.yaml." in out["additionalContext"]
    assert hook.starts() == first + 1 and not (hook.state / "claude" / f"{SESSION}.pending").exists()
    assert hook("PostToolUse", _bash(10)) == "" and hook.starts() == first + 1
