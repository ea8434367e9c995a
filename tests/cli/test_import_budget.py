"""What a fresh ``ctxd`` process imports on its cold paths (issue 23): ``ctxd hook PreCompact`` (Claude Code
starts one per event and waits for it) and ``ctxd context FILE --json`` never load the daemon's, the MCP
server's or the model's libraries, nor cattrs, asyncio or sqlite3, which only other commands need.

Each case runs the CLI in a subprocess on a real transcript and reads ``sys.modules`` when it is done. The
checkout under test is imported whatever the venv's editable install points at."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

DATA = REPO / "tests" / "data"
SCRIPT = """
import json, sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, sys.argv.pop(1))
from ctxd.cli import main
try:
    code = main(sys.argv[1:])
finally:
    sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
"""
NEVER = (
    "psycopg",
    "ctxd.team.driver",
    "pygls",
    "lsprotocol",
    "litellm",
    "mcp",
    "cattrs",
    "asyncio",
    "ssl",
    "socket",
    "subprocess",
    "sqlite3",
    "ctxd.server",
    "ctxd.mcp",
    "ctxd.llm",
    "ctxd.history",
    "ctxd.service.service",
    "ctxd.service.registry",
    "ctxd.store.opencode",
)
NEVER_IN_A_HOOK = (*NEVER, "argparse", "secrets", "ctxd.compaction.cut.plan", "ctxd.store.listing")


def modules_after(args: list[str], tmp_path: Path, stdin: bytes = b"") -> list[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_DATA_HOME": str(tmp_path / "data")}
    env.update({"XDG_CACHE_HOME": str(tmp_path / "cache"), "CTXD_CONFIG": str(tmp_path / "none.json")})
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(REPO), *args], input=stdin, capture_output=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()
    loaded: list[str] = json.loads(done.stderr.decode().rsplit("MODULES ", 1)[1])
    assert any(m.startswith("ctxd.") for m in loaded)
    return loaded


def forbidden(loaded: list[str], never: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == n or m.startswith(n + ".") for n in never))


def test_hook_precompact_imports_only_what_it_needs(tmp_path: Path) -> None:
    transcript = tmp_path / "projects" / "p" / "s.jsonl"
    transcript.parent.mkdir(parents=True)
    shutil.copy(DATA / "claude" / "claude-2.1.330-compact.jsonl", transcript)
    payload = {"session_id": "s", "transcript_path": str(transcript), "cwd": "/tmp", "trigger": "manual"}
    data = json.dumps({"hook_event_name": "PreCompact", **payload}).encode()
    for _ in range(2):  # the second run reads the ledger the first one saved
        loaded = modules_after(["hook", "PreCompact"], tmp_path, data)
        assert "ctxd.compaction.ledger" in loaded  # it did its work (a failed hook imports little)
        assert forbidden(loaded, NEVER_IN_A_HOOK) == []
    notes = json.loads((tmp_path / "state" / "ctxd" / "claude" / "s.json").read_text())
    assert "config.yaml" in json.dumps(notes["ledger"])  # the transcript's facts were taken in


@pytest.mark.parametrize(
    "name", ["pi/large-session.jsonl", "claude/session-9eda1058.jsonl", "codex/rollout-tui-0.125.jsonl"]
)
def test_context_json_imports_only_what_it_needs(tmp_path: Path, name: str) -> None:
    loaded = modules_after(["context", str(DATA / name), "--json"], tmp_path)
    assert "ctxd.context.live" in loaded  # it built the context (a failed command imports little)
    assert forbidden(loaded, NEVER) == []


def test_a_local_search_never_loads_the_team_driver(tmp_path: Path) -> None:
    """``ctxd search`` without ``--team`` (and no team configured) loads neither psycopg nor the publisher."""
    loaded = modules_after(["search", "anything", "--json", "--root", str(tmp_path / "none")], tmp_path)
    assert "ctxd.history.index" in loaded
    assert forbidden(loaded, ("psycopg", "ctxd.team.driver", "ctxd.team.publish", "ctxd.team.query")) == []
