"""The README's install lines, as a new user runs them: ``pipx install`` of the wheel in a fresh HOME whose PATH
holds only the system tools, then ``ctxd setup claude-code`` (a dry run first, then for real), ``ctxd doctor``
and ``--uninstall``, with the real Claude Code from npm as the agent."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from claude_code.harness import claude_binary

from .conftest import REPO, Installed, installed_plugins, readme_install_lines, tool_dir

SETTINGS = b'{\n    "theme": "dark",\n    "permissions": {"allow": ["Bash(ls)"]}\n}\n'
"""A user's Claude Code settings, in a layout Claude Code itself would not write (so a rewrite shows)."""


def test_the_install_line_gives_a_working_ctxd_without_the_clone(installed: Installed) -> None:
    version = installed.run("--version").stdout.strip()
    assert version == "ctxd 0.1.0"
    # The command pipx made runs ctxd from pipx's venv (the wheel), not from this checkout.
    where = subprocess.run(
        [str(installed.ctxd.resolve().parent / "python"), "-c", "import ctxd; print(ctxd.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        env=installed.env(),
        cwd=installed.home,
    ).stdout
    assert str(REPO) not in where and "/pipx/venvs/ctxd/" in where


def test_ctxd_setup_claude_code_dry_run_then_real_then_uninstall(installed: Installed, tmp_path: Path) -> None:
    claude = claude_binary()
    config = tmp_path / "claude"
    config.mkdir()
    (config / "settings.json").write_bytes(SETTINGS)
    data = tmp_path / "data"
    env = installed.env(
        PATH=f"{tool_dir(tmp_path, 'claude', [claude])}:{installed.env()['PATH']}",
        CLAUDE_CONFIG_DIR=str(config),
        XDG_DATA_HOME=str(data),
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
    )
    (setup_line,) = [line for line in readme_install_lines() if line.startswith("ctxd setup")]
    assert setup_line == "ctxd setup claude-code"

    dry = installed.run("setup", "claude-code", "--dry-run", env=env).stdout
    assert "would run: " in dry and "plugin marketplace add" in dry and "plugin install ctxd@ctxd-setup" in dry
    assert not data.exists() and (config / "settings.json").read_bytes() == SETTINGS

    done = subprocess.run(["sh", "-c", setup_line], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    copy = data / "ctxd" / "integrations" / "claude-code"
    assert f"wrote the plugin to {copy} (ctxd.path: {installed.ctxd.resolve()})" in done.stdout
    assert "ran: " in done.stdout and "changed " in done.stdout
    assert (copy / "ctxd.path").read_text().strip() == str(installed.ctxd.resolve())
    # Nothing installed refers to the clone: moving or deleting it changes nothing.
    for path in [*copy.rglob("*"), *(config / "plugins").rglob("*")]:
        if path.is_file():
            assert str(REPO) not in path.read_text(errors="replace"), path

    again = installed.run("setup", "claude-code", env=env).stdout
    assert again.startswith("Claude Code: nothing to change"), again

    doctor = installed.run("doctor", "--json", env=env)
    report = json.loads(doctor.stdout)
    assert report["ok"] is True, report
    assert {c["check"] for c in report["checks"]} >= {"ctxd command", "daemon", "plugin", "plugin version", "hook"}

    # The plugin installed a second time from the clone's marketplace: doctor says the hooks would run twice.
    def claude_cli(*args: str) -> None:
        subprocess.run([claude, *args], env=env, cwd=tmp_path, capture_output=True, check=True, timeout=120)

    claude_cli("plugin", "install", "ctxd", "--marketplace", str(REPO))
    twice = installed.run("doctor", env=env, check=False)
    assert twice.returncode == 1 and "FAIL claude-code: other ctxd plugins: ctxd@ctxd" in twice.stdout
    assert "fix: claude plugin uninstall ctxd@ctxd" in twice.stdout
    claude_cli("plugin", "uninstall", "ctxd@ctxd")
    claude_cli("plugin", "marketplace", "remove", "ctxd")

    removed = installed.run("setup", "claude-code", "--uninstall", env=env).stdout
    assert "ran: " in removed and "restore " in removed
    assert (config / "settings.json").read_bytes() == SETTINGS
    assert not copy.exists()
    listed = subprocess.run([claude, "plugin", "list", "--json"], env=env, capture_output=True, text=True, check=True)
    assert installed_plugins(listed.stdout) == []
    assert installed.run("doctor", env=env).stdout.startswith("no integration is installed")


def test_without_litellm_everything_offline_works_and_model_work_says_how_to_get_it(
    installed: Installed, tmp_path: Path
) -> None:
    """The wheel installs without its ``llm`` extra: the demo and compaction run (offline summariser); a model
    asked for falls back and says how to install litellm; exact token counts refuse instead of estimating."""
    assert (
        "litellm"
        not in subprocess.run(
            [str(installed.ctxd.resolve().parent / "python"), "-m", "pip", "list"],
            capture_output=True,
            text=True,
            env=installed.env(),
            cwd=installed.home,
        ).stdout
    )
    demo = installed.run("demo", env=installed.env(TMPDIR=str(tmp_path)))
    assert "compacted" in demo.stdout or "compaction" in demo.stdout
    session = tmp_path / "s.jsonl"
    session.write_bytes(next((REPO / "tests" / "data" / "pi").glob("*.jsonl")).read_bytes())
    compacted = installed.run("compact", str(session), "--model", "openai/gpt-4o-mini", "--keep-recent-tokens", "10")
    assert "compacted: entry " in compacted.stdout and "(offline)" in compacted.stdout
    assert "litellm is not installed: install ctxd with its llm extra (pip install 'ctxd[llm]'" in compacted.stderr
    counted = installed.run("context", str(session), "--count-model", "gpt-4o", check=False)
    assert counted.returncode == 2 and "exact token counts need litellm" in counted.stderr
