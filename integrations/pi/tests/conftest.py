"""pi's extension end to end: tests/fakes is importable here too."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[3] / "tests"
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(TESTS), str(HERE)]

from fakes.openai_server import FakeOpenAIServer  # noqa: E402


@pytest.fixture
def llm() -> Iterator[FakeOpenAIServer]:
    """The fake OpenAI-compatible server pi's models.json names (and ctxd reaches through litellm)."""
    with FakeOpenAIServer(default_text="## Goal\nFake summary from the model.") as server:
        yield server
