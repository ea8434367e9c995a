"""Low-level file helpers: safe opening, advisory locks, atomic replacement, private creation, ids
and clocks.

Only regular files are ever opened: a FIFO would block the opener forever, a device (``/dev/zero``)
would be read without end.  So every open uses ``O_NONBLOCK`` (a FIFO opens without waiting for a
writer) and checks with ``fstat`` that it got a regular file before reading a byte.  Directories
ctxd creates are private (0700, every level it creates), files 0600.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ctxd.errors import SessionError
from ctxd.store import locks
from ctxd.store.dirs import makedirs_private

if TYPE_CHECKING:
    import threading

PRIVATE_MODE = 0o600

Clock = Callable[[], float]
"""Seconds since the epoch; tests substitute their own."""


def iso_timestamp(seconds: float) -> str:
    """ISO-8601 UTC with milliseconds, as pi writes them."""
    from datetime import UTC, datetime  # imported when used: a hook's start-up pays for every import

    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(seconds * 1000) % 1000:03d}Z"


def new_entry_id(taken: Callable[[str], bool]) -> str:
    """8 lowercase hex chars, unique among ``taken``."""
    for _ in range(100):
        candidate = os.urandom(4).hex()  # what secrets.token_hex does, without importing it (hashlib, random)
        if not taken(candidate):
            return candidate
    import uuid

    return uuid.uuid4().hex


def uuid7(now: float | None = None) -> str:
    """A time-ordered UUID (v7), as pi uses for session ids."""
    ms = int((time.time() if now is None else now) * 1000)
    rand = int.from_bytes(os.urandom(10)) >> 6  # 74 random bits, as secrets.randbits(74)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rand >> 62) << 64 | 0b10 << 62 | (rand & ((1 << 62) - 1))
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"  # str(uuid.UUID(int=value))


@contextlib.contextmanager
def locked(
    fd: int, *, timeout: float | None = None, stop: threading.Event | None = None, path: str = ""
) -> Iterator[None]:
    """Hold an exclusive advisory lock (flock) on ``fd``: ctxd writers never interleave. The wait
    for it is bounded by ``timeout`` and ``stop`` (see :mod:`ctxd.store.locks`)."""
    locks.acquire(fd, timeout=timeout, stop=stop, path=path)
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


@contextlib.contextmanager
def replacing(path: str, *, mode: int = PRIVATE_MODE, durable: bool = True) -> Iterator[int]:
    """A descriptor on a new file that replaces ``path`` whole when the block ends without an error;
    an error (or a crash) leaves the old file, or none, and no temporary file behind.  ``durable``:
    the file and its folder are synced before and after the rename (a crash then keeps the new file)."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.{os.urandom(3).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        yield fd
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path)


def atomic_write(path: str, data: bytes, *, mode: int = PRIVATE_MODE, durable: bool = True) -> None:
    """Replace (or create) ``path`` with ``data`` so a crash leaves the old or the new file, whole."""
    with replacing(path, mode=mode, durable=durable) as fd:
        write_all(fd, data)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path: str, flags: int = os.O_RDONLY) -> int:
    """A descriptor on ``path`` if it is a regular file (symlinks followed); SessionError if it is
    anything else, and OSError if it cannot be opened.  Never blocks on a FIFO."""
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise SessionError(f"{_kind(mode)}, not a regular file: refusing to open it", path=path)
    return fd


def open_session_fd(path: str) -> int:
    """A read-only descriptor on the session file ``path`` (a regular file), or SessionError saying why not."""
    try:
        return open_regular(path)
    except FileNotFoundError as exc:
        raise SessionError("no such session file", path=path) from exc
    except OSError as exc:
        raise SessionError(f"cannot read: {exc.strerror}", path=path) from exc


def is_regular(path: str) -> bool:
    """Whether ``path`` is a regular file (following symlinks), without opening it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def read_bounded(fd: int, limit: int, offset: int = 0) -> bytes:
    """At most ``limit`` bytes from ``offset`` (fewer at the end of the file)."""
    chunks: list[bytes] = []
    while limit > 0:
        chunk = os.pread(fd, min(limit, 1 << 22), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        limit -= len(chunk)
    return b"".join(chunks)


def create_private(path: str, data: bytes) -> None:
    """Create ``path`` (it must not exist) readable only by its owner, holding ``data``."""
    makedirs_private(os.path.dirname(os.path.abspath(path)))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path)


def complete_chunks(fd: int, start: int, size: int = 1 << 23) -> Iterator[tuple[bytes, int]]:
    """The file's complete lines from ``start`` on, as chunks of whole lines (about ``size`` bytes each,
    more when a line spans chunks), each with the offset after it; a final line without its newline (it
    may still be being written) is left out."""
    pos = start
    rest = b""
    while True:
        chunk = os.pread(fd, size, pos)
        if not chunk:
            return
        pos += len(chunk)
        data = rest + chunk
        cut = data.rfind(b"\n") + 1
        lines, rest = data[:cut], data[cut:]
        if lines:
            yield lines, pos - len(rest)
