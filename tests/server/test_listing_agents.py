"""One HOME with a pi session, a Claude Code transcript, a Codex rollout and an opencode database (copies of real
ones from tests/data), each where its agent keeps it: ``ctxd sessions`` lists what the daemon's ``session/list``
lists, named alike (one listing: :mod:`ctxd.service.listing`), ``--agent`` keeps one agent's, ``--json`` too."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LOCAL
from opencode.rows import SESSION

from ctxd.service import protocol as p

from .harness import REPO, call, server_env, start_ctxd

pytestmark = pytest.mark.asyncio(loop_scope="function")

CLAUDE = "5f0c2a1e-7d7b-4c1e-9f43-2b8a3f0e9d11.jsonl"
CODEX = "rollout-2026-11-25T21-29-59-01a2149d-8f0f-74c1-8dfa-7129af1db7c5.jsonl"


def home_of_four(home: Path) -> dict[str, str]:
    """The four agents' sessions under ``home``, and the environment that points every default there."""
    pi = home / ".pi" / "agent" / "sessions" / "--home-me-proj--"
    claude = home / ".claude" / "projects" / "-home-me-service"
    codex = home / ".codex" / "sessions" / "2026" / "11" / "25"
    opencode = home / ".local" / "share" / "opencode"
    for folder in (pi, claude, codex, opencode):
        folder.mkdir(parents=True)
    shutil.copy(LOCAL / "pi" / "before-compaction.jsonl", pi / "2026-01-01T00-00-00-000Z_s.jsonl")
    shutil.copy(LOCAL / "claude" / "claude-2.1.330-compact.jsonl", claude / CLAUDE)
    shutil.copy(LOCAL / "codex" / "rollout-0.169-compactions.jsonl", codex / CODEX)
    shutil.copy(LOCAL / "opencode" / "opencode.db", opencode / "opencode.db")
    # Where each agent keeps its sessions by default (this machine's own settings pointed here).
    return {
        "HOME": str(home),
        "PI_CODING_AGENT_DIR": str(home / ".pi" / "agent"),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "CODEX_HOME": str(home / ".codex"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
    }


def sessions(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "ctxd", "sessions", *args],
        capture_output=True,
        text=True,
        env=server_env(**env),
        cwd=REPO,
        timeout=120,
        check=False,
    )


async def test_ctxd_sessions_lists_every_agent_as_session_list_does(tmp_path: Path) -> None:
    env = home_of_four(tmp_path / "home")
    listed = sessions(env, "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)["sessions"]
    assert sorted(r["agent"] for r in rows) == ["claude", "codex", "opencode", "pi"]
    opencode = next(r for r in rows if r["agent"] == "opencode")
    assert opencode["path"] == f"{os.path.realpath(tmp_path / 'home' / '.local/share/opencode/opencode.db')}#{SESSION}"

    async with start_ctxd({}, **env) as ctxd:  # every setting its default
        served = (await call(ctxd, p.SESSION_LIST, {}))["sessions"]
    keys = ("path", "id", "agent", "name", "title", "entries", "readOnly", "archived")
    assert [{k: r[k] for k in keys} for r in rows] == [{k: r[k] for k in keys} for r in served]

    only = sessions(env, "--agent", "opencode", "--json")
    assert [r["path"] for r in json.loads(only.stdout)["sessions"]] == [opencode["path"]]
    claude = sessions(env, "--agent", "claude-code")
    assert claude.returncode == 0 and claude.stdout.count("\n    ") == 1 and CLAUDE in claude.stdout
    text = sessions(env)
    for row in rows:  # each named as session/list names it, with its agent
        assert f"{row['path']}\n" in text.stdout and f"[{row['agent']}, " in text.stdout
