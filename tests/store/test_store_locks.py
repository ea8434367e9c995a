"""The session file's write lock against a second real process holding ``flock``: a bounded wait that
names the holder, a wait that a stop event ends at once, and a lock taken ahead of an append."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import reference
from helpers.lock_holder import SCRIPT

from ctxd.errors import ReadOnlySessionError, SessionError, SessionLockedError
from ctxd.store import locks
from ctxd.store.create import create_session
from ctxd.store.opening import open_session_file
from ctxd.store.session_file import SessionFile


@contextmanager
def lock_held(path: str, seconds: float = 30) -> Iterator[subprocess.Popen[bytes]]:
    holder = subprocess.Popen([sys.executable, SCRIPT, path, str(seconds)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"locked\n"
        yield holder
    finally:
        holder.kill()
        holder.wait()


@pytest.fixture
def sf(tmp_path: Path) -> Iterator[SessionFile]:
    f = SessionFile.open(create_session(str(tmp_path), "/locks"))
    f.lock_timeout = 0.3
    yield f
    f.close()


def test_an_append_gives_up_after_the_timeout_naming_the_holder(sf: SessionFile) -> None:
    size = Path(sf.path).stat().st_size
    with lock_held(sf.path) as holder:
        t0 = time.monotonic()
        with pytest.raises(SessionLockedError) as info:
            sf.append([{"type": "session_info", "name": "late"}])
        assert 0.3 <= time.monotonic() - t0 < 3
    assert info.value.code == -31010
    assert info.value.data["lockHolderPid"] == holder.pid
    assert "lock_holder.py" in info.value.data["lockHolder"]
    assert Path(sf.path).stat().st_size == size
    assert sf.append([{"type": "session_info", "name": "now"}])  # the holder is gone


def test_stop_waiting_ends_a_wait_at_once(sf: SessionFile) -> None:
    sf.lock_timeout = 30
    failed: list[BaseException] = []

    def append() -> None:
        try:
            sf.append([{"type": "session_info", "name": "never"}])
        except SessionError as exc:
            failed.append(exc)

    with lock_held(sf.path):
        worker = threading.Thread(target=append)
        worker.start()
        time.sleep(0.2)
        t0 = time.monotonic()
        sf.stop_waiting()
        worker.join(5)
        assert time.monotonic() - t0 < 0.5
    assert len(failed) == 1 and "shutting down" in str(failed[0])


def test_a_lock_taken_ahead_is_released_by_the_append(sf: SessionFile, tmp_path: Path) -> None:
    sf.take_lock()
    other = SessionFile.open(sf.path)
    other.lock_timeout = 0.2
    with pytest.raises(SessionLockedError):  # held by this process, on sf's descriptor
        other.append([{"type": "session_info", "name": "other"}])
    sf.append([{"type": "session_info", "name": "mine"}])  # finds it taken; releases it
    assert other.append([{"type": "session_info", "name": "other"}])
    sf.take_lock()
    sf.release_lock()
    assert other.append([{"type": "session_info", "name": "again"}])
    other.close()


def test_the_holder_is_unknown_without_a_lock_table(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("x")
    with open(path, "rb") as f:
        assert locks.holder(f.fileno(), locks=str(tmp_path / "no-such-table")) == (None, "unknown")
        table = tmp_path / "locks"
        table.write_text("1: POSIX  ADVISORY  WRITE 1 00:00:1 0 EOF\n")
        assert locks.holder(f.fileno(), locks=str(table)) == (None, "unknown")


def test_another_agents_transcript_is_never_locked(tmp_path: Path) -> None:
    """An append to a read-only transcript fails as read-only (-31013); the daemon's writer asks for
    the lock first, and that must not open the transcript for writing nor lock it."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(reference("claude", "incremental-turn-1.jsonl").read_bytes())
    transcript = open_session_file(str(path))
    assert transcript.read_only
    assert transcript.take_lock(wait=False) and transcript.take_lock()
    assert transcript._append_fd is None
    transcript.release_lock()
    with pytest.raises(ReadOnlySessionError):
        transcript.append([{"type": "session_info", "name": "x"}])
