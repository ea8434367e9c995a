"""``ctxd setup codex`` and ``ctxd setup opencode`` on the files alone (the real agents run in tests/codex and
tests/opencode): what the user set is kept and left alone, a file setup cannot read is refused with nothing
written, and ``--uninstall`` after the user changed the files takes out only ctxd's part."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from ctxd.setup import SetupError, setup
from ctxd.setup.base import Context

CTXD = "/opt/ctxd env/bin/ctxd"  # a space: the hook command must quote it


def context(tmp_path: Path, **kw: bool) -> Context:
    env = {"HOME": str(tmp_path / "home"), "CODEX_HOME": str(tmp_path / "codex"), "PATH": "/nonexistent"}
    env |= {"XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    return Context(env, CTXD, **kw)


USER_CONFIG = """model = "gpt-x"
compact_prompt = "mine"

[mcp_servers.ctxd]
command = "/usr/local/bin/ctxd"
args = ["mcp"]
"""


def test_codex_keeps_what_the_user_set_and_uninstalls_byte_for_byte(tmp_path: Path) -> None:
    home = tmp_path / "codex"
    home.mkdir()
    (home / "config.toml").write_text(USER_CONFIG)
    lines = setup("codex", context(tmp_path, compact_prompt=True))
    assert any("already has [mcp_servers.ctxd]" in line for line in lines), lines
    assert any("already sets a compaction prompt" in line for line in lines), lines
    config = tomllib.loads((home / "config.toml").read_text())  # still valid TOML: no key twice
    assert config["mcp_servers"]["ctxd"]["command"] == "/usr/local/bin/ctxd"
    states = config["hooks"]["state"]
    assert len(states) == 5 and all(v["trusted_hash"].startswith("sha256:") for v in states.values())
    hooks = json.loads((home / "hooks.json").read_text())["hooks"]
    assert hooks["PreCompact"][0]["hooks"][0]["command"] == "'/opt/ctxd env/bin/ctxd' hook --agent codex PreCompact"
    assert setup("codex", context(tmp_path))[0].startswith("Codex: nothing to change")
    setup("codex", context(tmp_path), uninstall=True)
    assert (home / "config.toml").read_text() == USER_CONFIG
    assert not (home / "hooks.json").exists()


def test_codex_uninstall_after_the_user_changed_the_files_keeps_their_changes(tmp_path: Path) -> None:
    home = tmp_path / "codex"
    home.mkdir()
    setup("codex", context(tmp_path))
    with open(home / "config.toml", "a") as f:
        f.write('\n[profiles.fast]\nmodel = "small"\n')
    hooks = json.loads((home / "hooks.json").read_text())
    hooks["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "notify-send done"}]})
    (home / "hooks.json").write_text(json.dumps(hooks))
    lines = setup("codex", context(tmp_path), uninstall=True)
    assert any("take ctxd's keys out of" in line for line in lines), lines
    assert tomllib.loads((home / "config.toml").read_text()) == {"profiles": {"fast": {"model": "small"}}}
    left = json.loads((home / "hooks.json").read_text())
    assert left == {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}}


def test_codex_refuses_a_config_it_cannot_read_and_writes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "codex"
    home.mkdir()
    (home / "config.toml").write_text("model = \n")
    with pytest.raises(SetupError, match="not valid TOML"):
        setup("codex", context(tmp_path, compact_prompt=True))
    assert sorted(p.name for p in home.iterdir()) == ["config.toml"]
    assert not (tmp_path / "data").exists()


def test_opencode_keeps_the_users_plugins_and_their_later_changes(tmp_path: Path) -> None:
    folder = tmp_path / "config" / "opencode"
    folder.mkdir(parents=True)
    user = {"plugin": ["opencode-wakatime"], "theme": "dark"}
    (folder / "opencode.json").write_text(json.dumps(user))
    setup("opencode", context(tmp_path))
    settings = json.loads((folder / "opencode.json").read_text())
    copy = tmp_path / "data" / "ctxd" / "integrations" / "opencode"
    assert settings["plugin"] == ["opencode-wakatime", (copy / "src" / "index.ts").as_uri()]
    assert settings["mcp"]["ctxd"] == {"type": "local", "command": [CTXD, "mcp"]}
    index = (copy / "src" / "index.ts").read_text()
    assert json.dumps([CTXD, "serve"]) in index and "../../../clients" not in (copy / "src" / "client.ts").read_text()
    settings["theme"] = "light"
    (folder / "opencode.json").write_text(json.dumps(settings))
    setup("opencode", context(tmp_path), uninstall=True)
    assert json.loads((folder / "opencode.json").read_text()) == {"plugin": ["opencode-wakatime"], "theme": "light"}
    assert not copy.exists()
