"""``$/cancelRequest`` on ``session/append``, through a real daemon spoken to byte by byte.

The rule: an append is either answered with its result or not written.  A cancel that reaches an
append still waiting in the session's queue takes it out (-32800, never written); a cancel that
arrives once its write began is answered with the result.  Either way the session's writer keeps
serving the appends after it.  The appends are held up by a final line another process is still
writing (the daemon waits for its newline, up to the tail grace period), as a slow disk would.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest

from ctxd.service import protocol as p

from .harness import RawDaemon, encode, user

pytestmark = pytest.mark.asyncio

GRACE_MS = "1500"
"""The tail grace period: how long the daemon waits for the unfinished line before it appends."""
STARTED = 0.5
"""Well after the writer has begun A (within milliseconds), well before the grace period ends."""
CANCELLED = -32800


async def started(tmp_path: Path) -> RawDaemon:
    daemon = await RawDaemon(CTXD_TAIL_GRACE_MS=GRACE_MS).start()
    answer = await daemon.initialize({"roots": [str(tmp_path)], "watch": False})
    assert "result" in answer, answer
    return daemon


def read_entries(path: str) -> list[dict[str, Any]]:
    """The file's entries (the unfinished line, terminated by the daemon, is not one)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                assert line.startswith('{"type":"message","id":"dead'), line
    return out


def texts(path: str) -> list[str]:
    return [e["message"]["content"] for e in read_entries(path) if e.get("type") == "message"]


def append_request(msg_id: int, path: str, text: str) -> dict[str, Any]:
    params = {"session": path, "messages": [user(text)]}
    return {"jsonrpc": "2.0", "id": msg_id, "method": p.SESSION_APPEND, "params": params}


def cancel(msg_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": msg_id}}


async def with_a_tail_being_written(daemon: RawDaemon) -> str:
    path: str = (await daemon.call(p.SESSION_CREATE, {"cwd": "/cancel"}))["result"]["path"]
    assert "result" in await daemon.call(p.SESSION_APPEND, {"session": path, "messages": [user("before")]})
    with open(path, "ab") as f:  # another process is in the middle of its line
        f.write(b'{"type":"message","id":"dead')
    return path


async def finish(daemon: RawDaemon) -> None:
    assert (await daemon.call("shutdown"))["result"] is None
    daemon.send({"jsonrpc": "2.0", "method": "exit"})
    assert await daemon.wait() == 0
    assert b"InvalidStateError" not in daemon.stderr, daemon.stderr.decode(errors="replace")[-3000:]


async def test_a_cancelled_append_still_queued_is_never_written_and_the_next_is_answered(tmp_path: Path) -> None:
    """A, B, C, then a cancel for B while A waits for the unfinished line: A and C are written and
    answered, B is answered -32800 and is not on disk; the session keeps taking appends."""
    daemon = await started(tmp_path)
    try:
        path = await with_a_tail_being_written(daemon)
        a, b, c = (daemon.next_id() for _ in range(3))
        daemon.send_bytes(
            encode(append_request(a, path, "A"))
            + encode(append_request(b, path, "B"))
            + encode(append_request(c, path, "C"))
            + encode(cancel(b))
        )
        answers = {name: await daemon.response(i, timeout=15) for name, i in (("A", a), ("B", b), ("C", c))}
        assert "result" in answers["A"] and "result" in answers["C"], answers
        assert answers["B"]["error"]["code"] == CANCELLED, answers
        assert texts(path) == ["before", "A", "C"]
        on_disk = {e["id"] for e in read_entries(path)}
        assert set(answers["A"]["result"]["ids"] + answers["C"]["result"]["ids"]) <= on_disk
        later = await daemon.call(p.SESSION_APPEND, {"session": path, "messages": [user("D")]}, timeout=10)
        assert "result" in later, later
        assert texts(path) == ["before", "A", "C", "D"]
        await finish(daemon)
    finally:
        await daemon.close()


async def test_a_cancel_that_arrives_during_the_write_is_answered_with_the_result(tmp_path: Path) -> None:
    """A's write has begun (it waits for the unfinished line) when its cancel arrives: A is written
    and answered with its ids, not -32800; B, queued behind it, is written and answered too."""
    daemon = await started(tmp_path)
    try:
        path = await with_a_tail_being_written(daemon)
        a, b = daemon.next_id(), daemon.next_id()
        daemon.send_bytes(encode(append_request(a, path, "A")) + encode(append_request(b, path, "B")))
        await asyncio.sleep(STARTED)
        daemon.send(cancel(a))
        answer_a = await daemon.response(a, timeout=15)
        answer_b = await daemon.response(b, timeout=15)
        assert "result" in answer_a, answer_a
        assert "result" in answer_b, answer_b
        assert texts(path) == ["before", "A", "B"]
        assert answer_a["result"]["ids"][0] in {e["id"] for e in read_entries(path)}
        await finish(daemon)
    finally:
        await daemon.close()


async def test_every_append_is_answered_with_its_result_exactly_when_it_is_written(tmp_path: Path) -> None:
    """Forty appends, cancels for half of them at scattered moments (queued, being written, done):
    every append is answered; a result exactly when its entry is on disk, -32800 exactly when not."""
    daemon = await started(tmp_path)
    try:
        path = await with_a_tail_being_written(daemon)
        rng = random.Random(19)
        ids = {daemon.next_id(): f"m{i}" for i in range(40)}
        daemon.send_bytes(b"".join(encode(append_request(i, path, text)) for i, text in ids.items()))
        for msg_id in rng.sample(sorted(ids), 20):
            await asyncio.sleep(rng.uniform(0, 0.15))
            daemon.send(cancel(msg_id))
        answers = {text: await daemon.response(i, timeout=15) for i, text in ids.items()}
        written = set(texts(path))
        for text, answer in answers.items():
            if "result" in answer:
                assert text in written, answer
            else:
                assert answer["error"]["code"] == CANCELLED and text not in written, answer
        assert written - set(answers) == {"before"}
        assert [t for t in texts(path) if t != "before"] == [t for t in ids.values() if t in written]  # in order
        await finish(daemon)
    finally:
        await daemon.close()
