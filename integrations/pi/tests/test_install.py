"""The README's way in: `pi install <this folder>` loads the extension in every pi session."""

from __future__ import annotations

from pathlib import Path

from fakes.openai_server import FakeOpenAIServer
from pi_harness import EXTENSION, Pi


def test_pi_install_loads_the_extension(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    pi = Pi(tmp_path, llm, with_ctxd=False)  # no -e: only what `pi install` configured
    installed = pi.pi("install", str(EXTENSION))
    assert "Installed" in installed.stdout
    with pi.start():
        pid = pi.daemon_pid()
        since = pi.mark()
        assert pi.command({"type": "prompt", "message": "/ctxd"})["success"]
        status = pi.wait(lambda r: r.get("method") == "notify" and "ctxd-pi" in str(r.get("message")), since=since)
        assert f"ctxd running (pid {pid})" in status["message"]
