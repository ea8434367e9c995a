"""``ctxd stats``, run as a real subprocess: unicode blocks on a terminal (a pseudo-terminal here),
plain ASCII when stdout is a pipe or with ``--ascii``, and ``--json`` with the daemon's fields."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from conftest import REPO
from test_cli import ctxd

from ctxd.context.composition import composition
from ctxd.tree.session import Session

SESSION = REPO / "tests" / "data" / "pi" / "large-session.jsonl"


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXD_") and k != "NO_COLOR"}
    return {**env, "CTXD_CONFIG": str(tmp / "none.json"), "XDG_CACHE_HOME": str(tmp / "cache"), "TERM": "xterm"}


def test_on_a_pipe_it_is_plain_ascii(tmp_path: Path) -> None:
    for args in ([], ["--ascii"]):
        done = ctxd("stats", str(SESSION), "--top", "3", *args, env=_env(tmp_path))
        assert done.returncode == 0, done.stderr
        out = done.stdout
        assert out.isascii(), [c for c in out if not c.isascii()][:5]
        lines = out.splitlines()
        bar = next(line for line in lines if line.startswith("  [") and line.endswith("]"))
        assert len(bar) == 2 + 72 + 2 and "|" in bar and "R" in bar  # the window, the threshold, tool results
        assert "context 177,657 of 200,000 tokens (88.8%)" in out
        assert "R tool results         64,613" in out
        assert "tool results by tool: read 41,085, bash 19,829, edit 3,643, write 56" in out
        assert "   1. cc07254b   line 28      toolResult read" in out and "   4." not in out
        assert "timeline: 88 turns, 0 compactions" in out


def test_on_a_terminal_it_draws_unicode_blocks_in_colour(tmp_path: Path) -> None:
    primary, secondary = pty.openpty()
    with subprocess.Popen(
        [sys.executable, "-m", "ctxd", "stats", str(SESSION), "--top", "2"],
        stdout=secondary,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=_env(tmp_path),
    ) as proc:
        os.close(secondary)
        chunks = []
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the other end closed (Linux reports EIO)
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=60) == 0
    os.close(primary)
    out = b"".join(chunks).decode()
    assert "\x1b[31m█\x1b[0m" in out  # tool results: red blocks
    assert "│" in out and "░" in out  # the threshold and the reserve
    assert any(c in out for c in "▁▂▃▄▅▆▇█")
    assert "tool results by tool: read 41,085" in out


def test_json_is_the_composition(tmp_path: Path) -> None:
    done = ctxd("stats", str(SESSION), "--json", "--window", "100000", env=_env(tmp_path))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    expected = composition(Session.open(str(SESSION)), window=100_000, threshold=100_000 - 16_384, reserve=16_384)
    assert data.pop("revision")  # names this process's kept context
    want = {"session": str(SESSION), **expected.to_json()}
    del want["revision"]
    assert data == want
    assert sum(data["parts"].values()) == data["estimatedTokens"]


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    done = ctxd("stats", str(tmp_path / "nope.jsonl"), env=_env(tmp_path))
    assert done.returncode == 2 and "no such session file" in done.stderr and "Traceback" not in done.stderr
