"""Disk full: a batch that does not fit is all or nothing on disk and in memory (issue 19, item 3).

Run on a real size-capped tmpfs (2 MB, filled to 12 KB free), which needs root to mount; skipped
with the reason otherwise (CI runs as root).  Every mount is unmounted in teardown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO
from helpers import mounts

from ctxd.errors import SessionError
from ctxd.store.create import create_session
from ctxd.store.reader import Durability
from ctxd.store.session_file import SessionFile

FREE = 12 << 10


@pytest.fixture
def full_tmpfs(tmp_path: Path) -> Iterator[Path]:
    with mounts.tmpfs(tmp_path / "tmpfs") as where:
        yield where


def entries(count: int, size: int, tag: str) -> list[dict[str, object]]:
    text = f"{tag} " + "x" * size
    return [
        {"type": "message", "message": {"role": "user", "content": f"{k} {text}", "timestamp": 1}} for k in range(count)
    ]


def check(path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "ctxd", "check", path], capture_output=True, text=True, cwd=REPO, timeout=60
    )


@pytest.mark.parametrize("durability", [Durability.FLUSH, Durability.FSYNC, Durability.FSYNC_BATCH])
def test_a_batch_that_does_not_fit_is_not_written_at_all(full_tmpfs: Path, durability: Durability) -> None:
    path = create_session(str(full_tmpfs), "/proj", path=str(full_tmpfs / "s.jsonl"))
    sf = SessionFile.open(path, durability=durability)
    first = sf.append(entries(2, 100, "before"))
    size = os.path.getsize(path)
    filler = mounts.fill(full_tmpfs, FREE)[0]
    for _ in range(3):  # each attempt fails the same way, whatever landed before
        with pytest.raises(SessionError) as info:
            sf.append(entries(8, 3 << 10, "batch"))
        assert "No space left" in info.value.message
        assert os.path.getsize(path) == size
        assert len(sf) == 2 and sf.leaf_id() == first[-1]  # nothing of the batch kept in memory either
    assert check(path).returncode == 0
    fresh = SessionFile.open(path)
    assert len(fresh) == 2 and not fresh.diagnostics
    # Room again: the retry lands once, after the entries that were there.
    filler.unlink()
    ids = sf.append(entries(8, 3 << 10, "batch"))
    assert len(sf) == 10 and sf.leaf_id() == ids[-1]
    with open(path, encoding="utf-8") as f:
        lines = [json.loads(x) for x in f]
    assert [e["id"] for e in lines[1:]] == first + ids
    assert check(path).returncode == 0
