"""Low-level file helpers: advisory locks, atomic replacement, private creation, ids and clocks."""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

PRIVATE_MODE = 0o600

Clock = Callable[[], float]
"""Seconds since the epoch; tests substitute their own."""


def iso_timestamp(seconds: float) -> str:
    """ISO-8601 UTC with milliseconds, as pi writes them."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(seconds * 1000) % 1000:03d}Z"


def new_entry_id(taken: Callable[[str], bool]) -> str:
    """8 lowercase hex chars, unique among ``taken``."""
    for _ in range(100):
        candidate = secrets.token_hex(4)
        if not taken(candidate):
            return candidate
    return uuid.uuid4().hex


def uuid7(now: float | None = None) -> str:
    """A time-ordered UUID (v7), as pi uses for session ids."""
    ms = int((time.time() if now is None else now) * 1000)
    rand = secrets.randbits(74)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rand >> 62) << 64 | 0b10 << 62 | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


@contextlib.contextmanager
def locked(fd: int) -> Iterator[None]:
    """Hold an exclusive advisory lock (flock) on ``fd``: ctxd writers never interleave."""
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_dir(path: str) -> None:
    fd = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes, *, mode: int = PRIVATE_MODE) -> None:
    """Replace (or create) ``path`` with ``data`` so a crash leaves the old or the new file, whole."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.{secrets.token_hex(3)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path)


def create_private(path: str, data: bytes) -> None:
    """Create ``path`` (it must not exist) readable only by its owner, holding ``data``."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path)
