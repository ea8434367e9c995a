"""What the ``ctxd mcp`` tests share: the server's environment and a tool call's text."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from conftest import REPO


def mcp_env(tmp_path: Path, root: Path, **more: str) -> dict[str, str]:
    """The environment of a ``ctxd mcp`` under test: sessions under ``root``, private data and home folders, no
    agent's session variables inherited (they would name the current session), and ``more``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "CTXD_SESSION"))}
    env.update(
        CTXD_ROOTS=str(root),
        CTXD_TRANSCRIPT_ROOTS=str(tmp_path / "none"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        HOME=str(tmp_path / "home"),
        PYTHONPATH=str(REPO),
        **more,
    )
    return env


def tool_text(result: Any) -> str:
    """The text a tool call answered (it must not be an error)."""
    assert not result.is_error, result
    return "\n".join(block.text for block in result.content if block.type == "text")
