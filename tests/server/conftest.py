"""Fixtures: a ``ctxd serve`` subprocess per test module, driven by pytest-lsp.

A module chooses its daemon's ``initializationOptions`` with a ``ctxd_options(root, request)``
function (or a ``CTXD_OPTIONS`` dict); the session root is a fresh temporary directory.  Tests in
the module share the daemon (each works on its own sessions), so modules declare
``pytestmark = pytest.mark.asyncio(loop_scope="module")``.  For a daemon of a test's own, use
:func:`tests.server.harness.start_ctxd`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from fakes.openai_server import FakeOpenAIServer
from pytest_lsp import LanguageClient

from .harness import CONFIG, initialize, shutdown


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeOpenAIServer]:
    """A fake OpenAI server for the module's daemon (litellm with ``openai/x`` and ``apiBase``)."""
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sessions")


def module_options(request: pytest.FixtureRequest, root: Path) -> dict[str, Any]:
    make = getattr(request.module, "ctxd_options", None)
    if make is not None:
        options: dict[str, Any] = make(root, request)
        return options
    options = {"roots": [str(root)], "watch": True}
    options.update(getattr(request.module, "CTXD_OPTIONS", {}))
    return options


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def ctxd(client: LanguageClient, request: pytest.FixtureRequest, root: Path) -> AsyncIterator[None]:
    """The module's daemon, initialised; always shut down (``shutdown`` + ``exit``) afterwards."""
    client.root = str(root)  # type: ignore[attr-defined]
    client.init_result = await initialize(client, module_options(request, root))  # type: ignore[attr-defined]
    yield
    await shutdown(client)
