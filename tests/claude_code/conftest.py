from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.anthropic_server import FakeAnthropicServer

from .harness import ClaudeCode


@pytest.fixture
def anthropic() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
def claude(tmp_path: Path, anthropic: FakeAnthropicServer) -> ClaudeCode:
    """Claude Code with the ctxd plugin loaded from integrations/claude-code (``--plugin-dir``)."""
    from .harness import PLUGIN

    return ClaudeCode(tmp_path, anthropic, plugin_dir=PLUGIN)
