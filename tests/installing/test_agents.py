"""Codex and opencode set up by the ctxd that pipx installed from the wheel (the integrations' files come from
the wheel's ``ctxd/bundled``, not this checkout): the same end-to-end scenarios as tests/codex/test_setup.py and
tests/opencode/test_setup.py, with the real Codex and opencode from npm (scripts/versions.env)."""

from __future__ import annotations

from pathlib import Path

from codex.harness import Codex
from codex.test_setup import set_up_and_check as codex_scenario
from fakes.responses_server import FakeResponsesServer
from opencode.test_setup import set_up_and_check as opencode_scenario

from .conftest import Installed


def test_codex_set_up_by_the_installed_ctxd(installed: Installed, tmp_path: Path) -> None:
    with FakeResponsesServer() as responses:
        codex_scenario(Codex(tmp_path, responses), responses, str(installed.ctxd))


def test_opencode_set_up_by_the_installed_ctxd(installed: Installed, tmp_path: Path) -> None:
    opencode_scenario(tmp_path, str(installed.ctxd))
