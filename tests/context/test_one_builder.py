"""One context builder: the daemon's (:class:`ctxd.context.live.LiveContext`) answers ``build_context``, the
size of a session nobody keeps a context of when a context edit is on its path, ``ctxd context``, the facts
(``session/facts`` and the hooks) and ``ctxd check``; no second projection answers any of them."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
from helpers.factories import assistant, chain, context_edit, tool_result, user, write

from ctxd.cli import main as cli_main
from ctxd.context import live as live_module
from ctxd.context.build import build_context, context_size
from ctxd.context.check import check_session
from ctxd.service.transcript_ledger import since_compaction
from ctxd.tree.session import Session


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The leaves LiveContext builds at, in order."""
    seen: list[int] = []
    real = live_module.LiveContext._rebuild_now

    def counted(self: Any, leaf: int, old: Any) -> Any:
        seen.append(leaf)
        return real(self, leaf, old)

    monkeypatch.setattr(live_module.LiveContext, "_rebuild_now", counted)
    return seen


def _session(tmp_path: Path, *, edited: bool = False) -> str:
    makers = [
        lambda p: user(p, "read a.py"),
        lambda p: assistant(p, "", calls=[("c1", "read", {"path": "a.py"})], total=500),
        lambda p: tool_result(p, "c1", "print(1)"),
        lambda p: assistant(p, "done", total=600),
    ]
    entries = chain(*makers)
    if edited:
        entries.append(context_edit(entries[-1]["id"], entries[2]["id"], "shorter"))
    return write(tmp_path / "s.jsonl", entries)


def test_every_one_shot_answer_is_built_by_the_daemons_builder(tmp_path: Path, builds: list[int]) -> None:
    path = _session(tmp_path)
    s = Session.open(path)
    ctx = build_context(s.file, s.tree)
    assert builds and ctx.contextTokens > 0
    builds.clear()
    assert since_compaction(Session.open(path)).messages  # session/facts and the hooks
    assert builds
    builds.clear()
    check_session(Session.open(path))
    assert builds
    builds.clear()
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert cli_main(["context", path, "--json"]) == 0
    assert builds and '"contextTokens": ' + str(ctx.contextTokens) in out.getvalue()


def test_a_size_with_a_context_edit_on_the_path_is_built_by_it_too(tmp_path: Path, builds: list[int]) -> None:
    s = Session.open(_session(tmp_path, edited=True))
    size = context_size(s.file, s.tree, estimates=s.estimates)
    assert builds
    assert size.tokens == build_context(s.file, s.tree).contextTokens
