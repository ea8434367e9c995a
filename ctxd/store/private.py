"""What ctxd keeps for itself in the user's cache, and how it tells that a file only grew.

Kept files live under ``$XDG_CACHE_HOME/ctxd`` (default ``~/.cache/ctxd``): folders 0700 and owned by
the user (a folder that is not is left alone: nothing is kept), files 0600, written whole to a
temporary name and renamed, read only if regular and the user's (opened without blocking: a FIFO
put there is a cache miss, logged, never waited on and never replaced), and framed with a magic string and
a CRC-32 of the payload, so a damaged or foreign file reads as nothing. The CRC guards against damage,
not against someone who can write the user's cache.

:class:`FileMark` is what a reader notes of a file it read up to ``end``: its identity, size, mtime,
ctime and a hash of sampled bytes before ``end`` (:func:`sample_hash`: the first 4 KB, which hold the
header line, the last 4 KB before ``end``, and :data:`SAMPLES` blocks spread evenly between).
:meth:`FileMark.appended_only` then says whether reading on from ``end`` is enough: same device and
inode (not replaced), at least ``end`` bytes (not truncated), no write at all if the size did not
change (mtime and ctime the same: a same-length edit in place is read again), and the same sampled
bytes (not rewritten in place and grown).  When in doubt the file is read again: a wrong index is
worse than a slow one.  An in-place edit that also grows the file and changes none of the sampled
bytes is the one change this cannot see; checking every byte would cost a full read each time.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import time
import zlib

import msgspec

from ctxd.errors import SessionError
from ctxd.store.files import atomic_write

log = logging.getLogger(__name__)

TAIL = 4096
"""Bytes at the start, and before a mark's end, whose hash must not have changed for the file to
count as appended to."""
SAMPLES = 32
"""Blocks of :data:`SAMPLE` bytes, spread evenly over the bytes before a mark's end, that are hashed too."""
SAMPLE = 512
_CRC = 4


def cache_dir(*parts: str, create: bool = False) -> str | None:
    """``$XDG_CACHE_HOME/ctxd/<parts>``, or None when it cannot be used safely (not ours, not a
    folder, a relative ``XDG_CACHE_HOME``). Folders on the way are made 0700 with ``create``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(base):
        return None  # the XDG spec: a relative path is invalid
    folders = [os.path.join(base, "ctxd")]
    for part in parts:
        folders.append(os.path.join(folders[-1], part))
    try:
        if create:
            os.makedirs(folders[-1], mode=0o700, exist_ok=True)
        for folder in folders:
            st = os.lstat(folder)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
                return None
            if stat.S_IMODE(st.st_mode) != 0o700:
                os.chmod(folder, 0o700)
    except OSError:
        return None
    return folders[-1]


def read_kept(path: str, magic: bytes) -> bytes | None:
    """The payload of a kept file, or None if it is missing, not the user's regular file, or damaged."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            log.warning("%s is not a regular file: not used as ctxd's cache", path)
            return None
        if st.st_uid != os.getuid():
            return None
        data = os.pread(fd, st.st_size, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    return unframe(data, magic)


def frame(payload: bytes, magic: bytes) -> bytes:
    return magic + zlib.crc32(payload).to_bytes(_CRC, "big") + payload


def unframe(data: bytes, magic: bytes) -> bytes | None:
    head = len(magic) + _CRC
    if len(data) < head or not data.startswith(magic):
        return None
    payload = data[head:]
    return payload if zlib.crc32(payload).to_bytes(_CRC, "big") == data[len(magic) : head] else None


def write_kept(path: str, payload: bytes, magic: bytes) -> bool:
    """Write a kept file whole (0600, a temporary name renamed over ``path``); False if it cannot be,
    or if something other than a regular file is at ``path`` (it is left alone)."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            log.warning("%s is not a regular file: ctxd's cache is not kept there", path)
            return False
    except FileNotFoundError:
        pass
    except OSError:
        return False
    try:
        atomic_write(path, frame(payload, magic), durable=False)  # a cache: losing it costs a read
    except OSError:
        return False
    return True


def forget_kept(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


class FileMark(msgspec.Struct, array_like=True, frozen=True):
    """A file as it was when read up to ``end`` (see the module)."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    end: int
    tail: bytes
    """:func:`sample_hash` of the bytes before ``end``."""
    ctime_ns: int = -1

    @classmethod
    def take(cls, fd: int, st: os.stat_result, end: int) -> FileMark | None:
        """The mark of the file open as ``fd`` (stat ``st``, taken before it was read), read up to
        ``end``; None if it is shorter than that now."""
        tail = sample_hash(fd, end)
        if tail is None:
            return None
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, end, tail, st.st_ctime_ns)

    @classmethod
    def of_stat(cls, st: os.stat_result) -> FileMark:
        """A mark that knows the file's stat only: it tells that nothing changed, never that the file grew."""
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, -1, b"", st.st_ctime_ns)

    def unchanged(self, st: os.stat_result) -> bool:
        """Nothing written since, by the file's stat alone."""
        now = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        return now == (self.dev, self.ino, self.size, self.mtime_ns, self.ctime_ns)

    def appended_only(self, fd: int, st: os.stat_result) -> bool:
        """Whether the file open as ``fd`` (stat ``st``) is the marked one with at most bytes added
        after ``end``, so that reading on from ``end`` is enough."""
        if self.end < 0 or (st.st_dev, st.st_ino) != (self.dev, self.ino) or st.st_size < self.end:
            return False
        if st.st_size == self.size and not self.unchanged(st):
            return False  # same size, written since: rewritten in place (or touched)
        return sample_hash(fd, self.end) == self.tail


def sample_ranges(end: int) -> list[tuple[int, int]]:
    """The ``(offset, length)`` ranges of ``[0, end)`` a mark hashes (see the module)."""
    if end <= 2 * TAIL + SAMPLES * SAMPLE:
        return [(0, end)]
    ranges = [(0, TAIL)]
    inner = end - 2 * TAIL
    step = inner // SAMPLES
    ranges += [(TAIL + k * step + (step - SAMPLE) // 2, SAMPLE) for k in range(SAMPLES)]
    ranges.append((end - TAIL, TAIL))
    return ranges


def sample_hash(fd: int, end: int) -> bytes | None:
    """A hash of the sampled bytes before ``end`` (and of ``end``); None if the file is shorter."""
    import hashlib  # here: a hook that never samples a file does not load OpenSSL's hashes

    digest = hashlib.blake2b(end.to_bytes(8, "little"), digest_size=16)
    try:
        for offset, length in sample_ranges(end):
            data = os.pread(fd, length, offset)
            if len(data) != length:
                return None
            digest.update(data)
    except OSError:
        return None
    return digest.digest()


SAME_SIZE_POLLS = 5
"""How many times (1 ms apart) a refresh looks again at a file whose mtime changed but not its size."""


def grown_stat(path: str, st: os.stat_result) -> os.stat_result:
    """``path``'s stat once it grew, if it does within a few milliseconds; else ``st``.

    A ``write()`` at the end sets the mtime before the file grows, so a file seen written but not
    grown may be an append under way (then it is read on as one) or an edit in place (then it is
    read again whole)."""
    for _ in range(SAME_SIZE_POLLS):
        time.sleep(0.001)
        try:
            now = os.stat(path)
        except FileNotFoundError as exc:
            raise SessionError("session file disappeared", path=path) from exc
        if now.st_size != st.st_size:
            return now
    return st
