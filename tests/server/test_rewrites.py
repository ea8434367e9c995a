"""A session file rewritten in place by another process (same inode) is read again, never taken
for an append: with the watcher on (the change is announced as ``reloaded`` and served at once)
and off (the next request checks the file's mark first and reads it again).
Each rewrite is made by a separate process, as an agent or an editor would."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pytest_lsp import LanguageClient

from ctxd.service import protocol as p

from .harness import append, assistant, call, new_session, start_ctxd, user

REWRITER = """
import os, sys
path, offset, data = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
fd = os.open(path, os.O_WRONLY)  # in place: same inode, nothing truncated
try:
    if offset < 0:
        os.ftruncate(fd, -offset - 1)
        offset = -offset - 1
    os.pwrite(fd, data, offset)
finally:
    os.close(fd)
"""


async def rewrite(path: str, data: bytes, offset: int = 0, truncate_to: int | None = None) -> None:
    """Write ``data`` at ``offset`` from another process (after truncating to ``truncate_to``)."""
    at = offset if truncate_to is None else -truncate_to - 1
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", REWRITER, path, str(at), data.decode())
    assert await proc.wait() == 0


@pytest.fixture(params=[True, False], ids=["watch", "nowatch"])
async def daemon(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[LanguageClient, bool]]:
    watch = bool(request.param)
    async with start_ctxd({"roots": [str(tmp_path)], "watch": watch, "autoCompact": False}) as client:
        yield client, watch


def entry_line(entry_id: str, parent: str | None, message: dict[str, Any]) -> bytes:
    entry = {"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-03-01T09:00:01.000Z"}
    entry["message"] = message
    return json.dumps(entry).encode() + b"\n"


def other_entries(count: int, word: str) -> bytes:
    out = b""
    parent = None
    for i in range(count):
        message = user(f"{word} question {i}") if i % 2 == 0 else assistant(f"{word} answer {i}")
        out += entry_line(f"{word[:4]}{i:04d}", parent, message)
        parent = f"{word[:4]}{i:04d}"
    return out


async def texts(client: LanguageClient, path: str) -> list[str]:
    built = await call(client, p.CONTEXT_BUILD, {"session": path})
    out = []
    for m in built["messages"]:
        content = m["message"]["content"]
        out.append(content if isinstance(content, str) else content[0]["text"])
    return out


async def served_after(client: LanguageClient, watch: bool, path: str, since: int) -> list[str]:
    """The context's texts once the daemon saw the rewrite: with the watcher on, as soon as it
    announces a reload; then (both ways) after an append of the daemon's own, which is last."""
    if watch:
        notes = client.notes  # type: ignore[attr-defined]
        await notes.wait(p.DID_CHANGE, lambda c: c["reloaded"], session=path, since=since)
        before = await texts(client, path)
    await append(client, path, user("after the rewrite"))
    after = await texts(client, path)
    assert after[-1] == "after the rewrite"
    if watch:
        assert after[:-1] == before
    return after[:-1]


async def twenty(client: LanguageClient, tmp_path: Path) -> tuple[str, bytes]:
    path = await new_session(client, cwd=str(tmp_path))
    for i in range(10):
        await append(client, path, user(f"old question {i}"), assistant(f"old answer {i}"))
    assert len(await texts(client, path)) == 20
    with open(path, "rb") as f:
        header = f.readline()
    return path, header


@pytest.mark.parametrize(
    ("count", "word", "truncate_to"),
    [(28, "newer", None), (31, "rewound", 0)],
    ids=["rewritten-longer", "rewound-then-grown"],
)
async def test_rewrite_in_place_that_grows_is_read_again(
    daemon: tuple[LanguageClient, bool], tmp_path: Path, count: int, word: str, truncate_to: int | None
) -> None:
    """The same header and ``count`` other entries written over the 20 (after cutting the file to
    ``truncate_to`` bytes: rewound, then grown), by another process."""
    client, watch = daemon
    notes = client.notes  # type: ignore[attr-defined]
    path, header = await twenty(client, tmp_path)
    mark = notes.mark()
    await rewrite(path, header + other_entries(count, word), truncate_to=truncate_to)
    got = await served_after(client, watch, path, mark)
    assert got == [f"{word} {'question' if i % 2 == 0 else 'answer'} {i}" for i in range(count)]


async def test_same_length_edit_is_read_again(daemon: tuple[LanguageClient, bool], tmp_path: Path) -> None:
    client, watch = daemon
    notes = client.notes  # type: ignore[attr-defined]
    path, _ = await twenty(client, tmp_path)
    data = Path(path).read_bytes()
    at = data.index(b"old question 4")
    mark = notes.mark()
    await rewrite(path, b"NEW", offset=at)  # "old" -> "NEW": same length, same size
    got = await served_after(client, watch, path, mark)
    assert len(got) == 20 and got[8] == "NEW question 4" and got[9] == "old answer 4"
    entry_id = (await call(client, p.CONTEXT_BUILD, {"session": path}))["messages"][8]["entryId"]
    entry = await call(client, p.SESSION_ENTRY, {"session": path, "entryId": entry_id})
    assert entry["entry"]["message"]["content"] == "NEW question 4"


async def test_same_length_edit_is_served_at_once_by_every_method(
    daemon: tuple[LanguageClient, bool], tmp_path: Path
) -> None:
    """Issue 30: with watching off, a message rewritten in place with the same length was served new
    by ``session/entry`` (read from the file) and old by ``context/build`` (its kept context) until
    the next append. Each request now checks the file's mark first: the very next answers agree."""
    client, _ = daemon
    path, _ = await twenty(client, tmp_path)
    built = await call(client, p.CONTEXT_BUILD, {"session": path})
    entry_id = built["messages"][8]["entryId"]
    data = Path(path).read_bytes()
    await asyncio.sleep(0.05)  # a later mtime than the daemon's own last append (coarse clocks)
    await rewrite(path, b"NEW", offset=data.index(b"old question 4"))
    entry = await call(client, p.SESSION_ENTRY, {"session": path, "entryId": entry_id})
    assert entry["entry"]["message"]["content"] == "NEW question 4"
    assert (await texts(client, path))[8:10] == ["NEW question 4", "old answer 4"]
