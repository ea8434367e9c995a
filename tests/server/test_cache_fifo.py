"""``session/open`` and ``session/list`` answer with a FIFO at the persistent index path and at the
listing cache path: a cache miss, never a wait (issue 19, item 6)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctxd.service import protocol as p
from ctxd.store import index_cache

from .harness import append, assistant, call, new_session, start_ctxd, user


async def test_fifos_at_the_cache_paths_are_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    root = tmp_path / "root"
    root.mkdir()
    os.makedirs(cache / "ctxd", mode=0o700)
    os.mkfifo(cache / "ctxd" / "listing", 0o600)
    async with start_ctxd({"roots": [str(root)], "watch": False}, XDG_CACHE_HOME=str(cache)) as client:
        path = await new_session(client, cwd=str(root))
        await append(client, path, user("hi"), assistant("hello"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    fifo = index_cache.cache_path(path, create=True)
    assert fifo is not None
    os.mkfifo(fifo, 0o600)
    async with start_ctxd({"roots": [str(root)], "watch": False}, XDG_CACHE_HOME=str(cache)) as client:
        opened = await call(client, p.SESSION_OPEN, {"session": path}, timeout=20)
        assert opened["entries"] == 2
        listed = await call(client, p.SESSION_LIST, {}, timeout=20)
        assert [s["path"] for s in listed["sessions"]] == [path]
    assert not os.path.isfile(fifo) and not os.path.isfile(cache / "ctxd" / "listing")
