"""Another process holding a session file's write lock (``flock``), through a real daemon.

The holder is a second real process (``tests/helpers/lock_holder.py``) that takes the lock and keeps it.  Meanwhile
an append waits at most ``appendLockTimeout`` and then fails with -31010 naming the holder (nothing
written); reads of the session are answered at once from the state last read; and ``shutdown`` +
``exit`` finish within a second, the waiting append answered and not written.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.lock_holder import SCRIPT

from ctxd.service import protocol as p

from .harness import RawDaemon, conversation, read_entries, user

pytestmark = pytest.mark.asyncio

STORAGE = -31010


@contextlib.asynccontextmanager
async def lock_held(path: str, seconds: float) -> AsyncIterator[asyncio.subprocess.Process]:
    """A second process holding ``path``'s write lock for ``seconds`` (killed at the end if need be)."""
    holder = await asyncio.create_subprocess_exec(
        sys.executable, SCRIPT, path, str(seconds), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert holder.stdout is not None
        assert await asyncio.wait_for(holder.stdout.readline(), 10) == b"locked\n"
        yield holder
    finally:
        if holder.returncode is None:
            holder.kill()
        await holder.wait()


async def started(tmp_path: Path, **options: Any) -> tuple[RawDaemon, str]:
    daemon = await RawDaemon().start()
    answer = await daemon.initialize({"roots": [str(tmp_path)], "watch": False, **options})
    assert "result" in answer, answer
    path: str = (await daemon.call(p.SESSION_CREATE, {"cwd": "/lock"}))["result"]["path"]
    assert "result" in await daemon.call(p.SESSION_APPEND, {"session": path, "messages": [user("before")]})
    return daemon, path


def texts(path: str) -> list[str]:
    return [e["message"]["content"] for e in read_entries(path) if e.get("type") == "message"]


async def finish(daemon: RawDaemon) -> None:
    assert (await daemon.call("shutdown", timeout=10))["result"] is None
    daemon.send({"jsonrpc": "2.0", "method": "exit"})
    assert await daemon.wait() == 0
    assert b"Traceback" not in daemon.stderr, daemon.stderr.decode(errors="replace")[-3000:]


async def test_an_append_times_out_naming_the_lock_holder(tmp_path: Path) -> None:
    daemon, path = await started(tmp_path, appendLockTimeout=1)
    try:
        size = os.path.getsize(path)
        async with lock_held(path, 60) as holder:
            t0 = time.monotonic()
            answer = await daemon.call(p.SESSION_APPEND, {"session": path, "messages": [user("late")]}, timeout=10)
            waited = time.monotonic() - t0
            error = answer["error"]
            assert error["code"] == STORAGE, answer
            assert error["data"]["lockHolderPid"] == holder.pid
            assert "lock_holder.py" in error["data"]["lockHolder"] and str(holder.pid) in error["message"]
            assert "nothing was written" in error["message"]
            assert 0.9 <= waited < 5, waited
            assert os.path.getsize(path) == size
        # The holder is gone: the same append goes through.
        assert "result" in await daemon.call(p.SESSION_APPEND, {"session": path, "messages": [user("late")]})
        assert texts(path) == ["before", "late"]
        await finish(daemon)
    finally:
        await daemon.close()


async def test_reads_are_answered_while_an_append_waits_for_the_lock(tmp_path: Path) -> None:
    daemon, path = await started(tmp_path, appendLockTimeout=20)
    try:
        async with lock_held(path, 3) as holder:
            waiting = daemon.request(p.SESSION_APPEND, {"session": path, "messages": [user("after the holder")]})
            await asyncio.sleep(0.3)  # the append is waiting for the lock now
            for method in (p.CONTEXT_BUILD, p.SESSION_TREE, p.SESSION_OPEN, p.SESSION_STATS):
                t0 = time.monotonic()
                answer = await daemon.call(method, {"session": path}, timeout=10)
                took = time.monotonic() - t0
                assert "result" in answer, (method, answer)
                assert took < 1.0, (method, took)
            built = (await daemon.call(p.CONTEXT_BUILD, {"session": path}))["result"]
            assert [m["message"]["content"] for m in built["messages"]] == ["before"]  # the state last read
            assert not [m for m in daemon.messages if m.get("id") == waiting]  # still waiting
            assert holder.returncode is None
            answer = await daemon.response(waiting, timeout=15)
        assert "result" in answer, answer
        assert texts(path) == ["before", "after the holder"]
        await finish(daemon)
    finally:
        await daemon.close()


async def test_shutdown_finishes_within_a_second_while_an_append_waits_for_the_lock(tmp_path: Path) -> None:
    daemon, path = await started(tmp_path, appendLockTimeout=30)
    try:
        async with lock_held(path, 60):
            waiting = daemon.request(p.SESSION_APPEND, {"session": path, "messages": [user("never")]})
            await asyncio.sleep(0.3)
            t0 = time.monotonic()
            assert (await daemon.call("shutdown", timeout=10))["result"] is None
            daemon.send({"jsonrpc": "2.0", "method": "exit"})
            assert await daemon.wait(timeout=10) == 0
            took = time.monotonic() - t0
            answer = await daemon.response(waiting, timeout=1)
            assert answer["error"]["code"] == STORAGE and "shutting down" in answer["error"]["message"], answer
            assert took < 1.0, took
        assert texts(path) == ["before"]
    finally:
        await daemon.close()


async def test_reads_are_answered_while_a_compaction_waits_for_the_lock(tmp_path: Path) -> None:
    await _reads_answered_while_waiting(
        tmp_path, 8, lambda path: (p.COMPACT, {"session": path, "keepRecentTokens": 200}), "compaction"
    )


async def test_reads_are_answered_while_a_branch_waits_for_the_lock(tmp_path: Path) -> None:
    def branch(path: str) -> tuple[str, dict[str, object]]:
        first = read_entries(path)[1]["id"]
        return p.BRANCH, {"session": path, "entryId": first, "summarize": True}

    await _reads_answered_while_waiting(tmp_path, 4, branch, "branch_summary")


async def _reads_answered_while_waiting(
    tmp_path: Path, turns: int, work: Callable[[str], tuple[str, dict[str, object]]], written: str
) -> None:
    """``work`` (a compaction or a branch: it reads, then writes) waits for another process's write lock while
    reads of the same session are answered at once; once the lock is free, it writes its entry."""
    daemon, path = await started(tmp_path, appendLockTimeout=20)
    try:
        assert "result" in await daemon.call(p.SESSION_APPEND, {"session": path, "messages": conversation(turns)})
        method, params = work(path)
        async with lock_held(path, 3) as holder:
            waiting = daemon.request(method, params)
            await asyncio.sleep(0.5)  # the work (offline summary: quick) is waiting for the lock now
            for read in (p.CONTEXT_BUILD, p.SESSION_TREE):
                t0 = time.monotonic()
                answer = await daemon.call(read, {"session": path}, timeout=10)
                took = time.monotonic() - t0
                assert "result" in answer, (read, answer)
                assert took < 1.0, (read, took)
            assert not [m for m in daemon.messages if m.get("id") == waiting]
            assert holder.returncode is None
            answer = await daemon.response(waiting, timeout=15)
        assert "result" in answer, answer
        assert read_entries(path)[-1]["type"] == written
        await finish(daemon)
    finally:
        await daemon.close()
