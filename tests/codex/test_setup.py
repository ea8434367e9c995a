"""Codex set up the way a user sets it up: ``ctxd setup codex --compact-prompt`` into a private HOME /
CODEX_HOME, then real Codex without ``--dangerously-bypass-hook-trust`` and without ctxd on PATH. The
hooks run only because setup recorded Codex's trust for them; Codex compacts with ctxd's prompt; the facts reach
the first request after each compaction; the MCP server's tools reach the model; ``--uninstall`` puts hooks.json
and config.toml back byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from fakes.responses_server import FakeResponsesServer

from ctxd.service.codex_hooks import COMPACT_PROMPT_HEAD, compact_prompt

from . import scenario
from .harness import Codex, ctxd_command, node_bin
from .test_hooks import assert_facts_after_each_compaction

USER_HOOKS = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true", "timeout": 5}]}]}}


def test_codex_set_up_by_ctxd_setup_keeps_the_facts_and_uninstalls_cleanly(
    codex: Codex, responses: FakeResponsesServer
) -> None:
    set_up_and_check(codex, responses, ctxd_command())


def set_up_and_check(codex: Codex, responses: FakeResponsesServer, ctxd: str) -> None:
    """The whole scenario with ``ctxd`` (this checkout's, or the one pipx installed from the wheel)."""

    def setup(codex: Codex, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
        argv = [ctxd, "setup", "codex", *args]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)

    responses.responder = scenario.responder(responses)
    data, state = codex.base / "data", codex.base / "state"
    codex.home.mkdir(parents=True)
    (codex.home / "config.toml").write_text(codex.config())
    (codex.home / "hooks.json").write_text(json.dumps(USER_HOOKS, indent=1) + "\n")
    before = {name: (codex.home / name).read_bytes() for name in ("config.toml", "hooks.json")}
    bare = f"{node_bin()}:/usr/bin:/bin"  # no ctxd here: the hooks run it by its absolute path
    env = dict(HOME=str(codex.base / "home"), CODEX_HOME=str(codex.home), XDG_DATA_HOME=str(data), PATH=bare)
    env["PATH"] += ":" + str(Path(codex.binary).parent)  # `codex` on PATH: setup detects it

    dry = setup(codex, env, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would add ctxd's hooks" in dry.stdout and "would set trust" in dry.stdout
    assert {n: (codex.home / n).read_bytes() for n in before} == before
    done = setup(codex, env, "--compact-prompt")
    assert done.returncode == 0, done.stderr
    assert "set trust for ctxd's hooks" in done.stdout and "[mcp_servers.ctxd]" in done.stdout
    assert "set experimental_compact_prompt_file" in done.stdout
    responses.compaction_marks = (COMPACT_PROMPT_HEAD,)  # Codex now compacts with ctxd's prompt
    again = setup(codex, env)
    assert again.returncode == 0 and "nothing to change" in again.stdout, again.stdout + again.stderr
    hooks = json.loads((codex.home / "hooks.json").read_text())
    assert hooks["hooks"]["Stop"][0] == USER_HOOKS["hooks"]["Stop"][0]  # the user's hook kept, first
    assert all(os.path.isabs(g["hooks"][0]["command"].split()[0]) for e in hooks["hooks"].values() for g in e[-1:])

    codex.write_config = False
    codex.extra_env.update(XDG_DATA_HOME=str(data), XDG_STATE_HOME=str(state), PATH=bare)
    first = codex.exec(scenario.PROMPTS[0])
    assert first.returncode == 0, first.stderr[-2000:]
    second = codex.exec(scenario.PROMPTS[1], resume=True)
    assert second.returncode == 0, second.stderr[-2000:]
    assert first.seconds + second.seconds < 60
    assert_facts_after_each_compaction(codex, responses, data, state)
    compactions = [r for r in responses.model_requests if r.is_compaction]
    assert len(compactions) == 3 and all(r.texts()[-1].strip() == compact_prompt() for r in compactions)
    # Codex started `ctxd mcp` from [mcp_servers.ctxd]: its tools reach the model (once the server is up).
    served = [t for r in responses.model_requests for t in r.body.get("tools", []) if t.get("name") == "mcp__ctxd"]
    assert served and any(tool.get("name") == "search_history" for tool in served[0].get("tools", [])), served

    doctor = subprocess.run(
        [ctxd, "doctor", "--json"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    report = json.loads(doctor.stdout)
    assert doctor.returncode == 0 and report["ok"], doctor.stdout
    assert {c["check"] for c in report["checks"]} >= {"hooks", "hook trust", "hook", "mcp server"}

    gone = setup(codex, env, "--uninstall")
    assert gone.returncode == 0, gone.stderr
    assert {n: (codex.home / n).read_bytes() for n in before} == before
    assert not (data / "ctxd" / "installed" / "codex.json").exists()
    assert not (data / "ctxd" / "integrations" / "codex").exists()  # the prompt's copy


def test_codex_loads_the_config_setup_changed_in_every_shape(codex: Codex) -> None:
    """Real Codex reads config.toml after ``ctxd setup codex`` where the user wrote ``mcp_servers`` inline, as
    dotted keys or as tables (before, an inline table got a second ``[mcp_servers.ctxd]``: "Cannot declare
    ('mcp_servers', 'ctxd') twice"), and lists both servers; ``--uninstall`` gives the bytes back."""
    ctxd = ctxd_command()
    shapes = [
        'mcp_servers = { other = { command = "other-mcp", args = ["a"] } } # inline\n',
        'mcp_servers.other.command = "other-mcp" # dotted\nmcp_servers.other.args = ["a"]\n',
        '# tables\n[mcp_servers.other]\ncommand = "other-mcp"\nargs = ["a"]\n\n[tui]\nnotifications = true\n',
    ]
    env = dict(codex.env(), XDG_DATA_HOME=str(codex.base / "data"))
    for text in shapes:
        codex.home.mkdir(parents=True, exist_ok=True)
        (codex.home / "config.toml").write_text(text)
        done = subprocess.run([ctxd, "setup", "codex"], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        listed = subprocess.run(
            [codex.binary, "mcp", "list", "--json"], env=env, capture_output=True, text=True, timeout=60
        )
        assert listed.returncode == 0, listed.stderr[-2000:]
        servers = {s["name"]: s["transport"] for s in json.loads(listed.stdout)}
        assert servers["ctxd"]["command"] == ctxd and servers["ctxd"]["args"] == ["mcp"], servers
        assert servers["other"]["command"] == "other-mcp", servers
        gone = subprocess.run([ctxd, "setup", "codex", "--uninstall"], env=env, capture_output=True, text=True)
        assert gone.returncode == 0, gone.stderr
        assert (codex.home / "config.toml").read_text() == text
