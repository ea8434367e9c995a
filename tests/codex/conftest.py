from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.responses_server import FakeResponsesServer

from .harness import Codex


@pytest.fixture
def responses() -> Iterator[FakeResponsesServer]:
    with FakeResponsesServer() as server:
        yield server


@pytest.fixture
def codex(tmp_path: Path, responses: FakeResponsesServer) -> Codex:
    return Codex(tmp_path, responses)
