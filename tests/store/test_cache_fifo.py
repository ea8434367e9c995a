"""A FIFO (or another non-regular file) at the persistent index path or the listing cache path is a
cache miss, logged, never waited on and left in place: ``ctxd context``, ``ctxd sessions`` and
``session/open`` answer (issue 19, item 6).  Each runs as a real subprocess with a bound."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from helpers.factories import assistant, chain, user, write

from ctxd.store import index_cache

BOUND = 30


def ctxd(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXD_")}
    env["XDG_CACHE_HOME"] = str(cache)
    return subprocess.run(
        [sys.executable, "-P", "-m", "ctxd", *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=BOUND
    )


@pytest.fixture
def session(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "root"
    (root / "--p--").mkdir(parents=True)
    return root, write(root / "--p--" / "s.jsonl", chain(user, assistant, user, assistant))


def fifo_at(path: str | None) -> str:
    assert path is not None
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    os.mkfifo(path, 0o600)
    return path


def index_fifo(cache: Path, session_path: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return fifo_at(index_cache.cache_path(session_path, create=True))


def test_a_fifo_at_the_index_path_is_a_miss(
    tmp_path: Path, session: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    fifo = index_fifo(cache, session[1], monkeypatch)
    out = ctxd("context", session[1], "--json", cache=cache)
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)["messages"]) == 4
    assert os.path.exists(fifo) and not os.path.isfile(fifo)  # left alone, not written through


def test_a_fifo_at_the_listing_cache_path_is_a_miss(tmp_path: Path, session: tuple[Path, str]) -> None:
    cache = tmp_path / "cache"
    fifo = fifo_at(str(cache / "ctxd" / "listing"))
    for _ in range(2):  # the second run finds the FIFO left in place again
        out = ctxd("sessions", "--root", str(session[0]), "--json", cache=cache)
        assert out.returncode == 0, out.stderr
        assert [s["path"] for s in json.loads(out.stdout)["sessions"]] == [session[1]]
    assert "not a regular file" in out.stderr
    assert os.path.exists(fifo) and not os.path.isfile(fifo)
