"""The persistent index: what reading a session file found, kept in the user's cache directory so
that opening the file again reads only what was appended since.

One cache file per session file, under ``$XDG_CACHE_HOME/ctxd/index`` (default ``~/.cache``), named
by a hash of the session's real path; never next to the session. Directories are 0700 and files
0600, written whole to a temporary name and renamed. ``CTXD_INDEX_CACHE=0`` turns it off.

A cache file holds the file's identity when it was written (path, device, inode, size, mtime, the
header line, a hash of the last 4 KB indexed) and the index: entry ids, byte offsets, lengths and
line numbers, the heads a line alone cannot give back, recovered bodies, diagnostics, and what the
layers above add (``extra``: the tree, token estimates). Heads are not stored: they are decoded from
the file's lines when asked for (:mod:`ctxd.store.heads`).

It is used only when every check holds: the cache's own checksum and format, the same path, device
and inode (not replaced), a size at least the indexed end (not truncated), the same header line and
the same last indexed bytes (not rewritten), and, when the size did not change, the same mtime.
Otherwise the file is read in full (and the cache written again). A corrupt or stale cache costs a
full read, never a wrong answer.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import zlib
from array import array
from typing import TYPE_CHECKING, Any

import msgspec

from ctxd.formats.codec import CURRENT_VERSION, LineHead
from ctxd.store.scan import Diagnostic

if TYPE_CHECKING:
    from ctxd.store.reader import SessionReader

FORMAT = 2
MAGIC = b"ctxd-index\x00"
CHECK = 4
"""The payload's CRC-32 (it guards against damage, not against someone who can write the user's cache)."""
DIGEST = 16
TAIL = 4096
"""Bytes before the indexed end whose hash must not have changed."""
MIN_ENTRIES = 2000
"""Smaller files are read whole every time (it takes a few milliseconds)."""
MAX_HEADER_LINE = 1 << 16


class Saved(msgspec.Struct, array_like=True):
    format: int
    path: str
    dev: int
    ino: int
    size: int
    mtime_ns: int
    end: int
    next_line: int
    header_line: bytes
    tail: bytes
    header: Any
    version: int
    count: int
    ids: list[str]
    id_index: memoryview
    offsets: memoryview
    lengths: memoryview
    lines: memoryview
    heads: list[tuple[int, LineHead]]
    bodies: list[tuple[int, Any]]
    checked: memoryview
    pin_entries: list[int]
    diagnostics: list[tuple[str, int, str, str, str | None, str | None]]
    extra: dict[str, Any]


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Saved)


def enabled() -> bool:
    return os.environ.get("CTXD_INDEX_CACHE", "1") not in ("0", "false", "no", "off")


def cache_dir(create: bool = False) -> str | None:
    """The folder of the index cache, or None when it cannot be used safely (not ours, not private)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(base):
        return None  # the XDG spec: a relative path is invalid
    folder = os.path.join(base, "ctxd", "index")
    try:
        if create:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        for part in (os.path.dirname(folder), folder):
            st = os.lstat(part)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
                return None
            if stat.S_IMODE(st.st_mode) != 0o700:
                os.chmod(part, 0o700)
    except OSError:
        return None
    return folder


def cache_path(path: str, create: bool = False) -> str | None:
    folder = cache_dir(create)
    if folder is None:
        return None
    key = hashlib.sha256(os.path.realpath(path).encode("utf-8", "surrogateescape")).hexdigest()[:40]
    return os.path.join(folder, key + ".idx")


def _tail_hash(fd: int, start: int, end: int) -> bytes | None:
    first = max(start, end - TAIL)
    data = os.pread(fd, end - first, first)
    if len(data) != end - first:
        return None
    return hashlib.blake2b(data, digest_size=DIGEST).digest()


def _read(path: str) -> Saved | None:
    cached = cache_path(path)
    if cached is None:
        return None
    try:
        fd = os.open(cached, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            return None
        data = os.pread(fd, st.st_size, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    head = len(MAGIC) + CHECK
    if len(data) < head or not data.startswith(MAGIC):
        return None
    payload = memoryview(data)[head:]
    if zlib.crc32(payload).to_bytes(CHECK, "big") != data[len(MAGIC) : head]:
        return None
    try:
        saved = _decoder.decode(payload)
    except (msgspec.DecodeError, ValueError, TypeError):
        return None
    return saved if saved.format == FORMAT else None


def _ints(data: bytes | memoryview, count: int) -> array[int] | None:
    values = array("q")
    try:
        values.frombytes(data)
    except ValueError:
        return None
    return values if len(values) == count else None


def restore(reader: SessionReader, fd: int, st: os.stat_result) -> bool:
    """Fill ``reader`` from its cached index if every check holds (see the module); the caller then
    reads what was appended after ``reader._end``. False (reader untouched) otherwise."""
    if not enabled():
        return False
    saved = _read(reader.path)
    if saved is None or saved.path != os.path.realpath(reader.path):
        return False
    if (saved.dev, saved.ino) != (st.st_dev, st.st_ino) or st.st_size < saved.end or saved.version != CURRENT_VERSION:
        return False
    if st.st_size == saved.size and st.st_mtime_ns != saved.mtime_ns:
        return False  # same size, written since: rewritten in place (or touched)
    n = saved.count
    header_len = len(saved.header_line)
    if os.pread(fd, header_len, 0) != saved.header_line or _tail_hash(fd, header_len, saved.end) != saved.tail:
        return False
    offsets, lengths, lines = (_ints(b, n) for b in (saved.offsets, saved.lengths, saved.lines))
    id_index = _ints(saved.id_index, len(saved.ids))
    if offsets is None or lengths is None or lines is None or id_index is None or len(saved.checked) > n:
        return False
    if any(not 0 <= i < n for i, _ in saved.heads) or any(not 0 <= i < n for i, _ in saved.bodies):
        return False
    heads = reader.heads
    list.extend(heads, [None] * n)
    for i, head in saved.heads:
        list.__setitem__(heads, i, head)
    reader.offsets, reader.lengths, reader.lines = offsets, lengths, lines
    reader.index = dict(zip(saved.ids, id_index, strict=True))
    reader._bodies = dict(saved.bodies)
    reader._checked = bytearray(saved.checked)
    reader.pin_entries = [i for i in saved.pin_entries if 0 <= i < n]
    reader.diagnostics = [Diagnostic(*d) for d in saved.diagnostics]
    reader.header = saved.header
    reader.version = saved.version
    reader._header_bytes = saved.header_line[:256]
    reader._end = saved.end
    reader._next_line = saved.next_line
    reader.restored = (n, saved.extra)
    return True


def save(reader: SessionReader, extra: dict[str, Any]) -> bool:
    """Write ``reader``'s index (and ``extra``) to the cache; False if it cannot be written."""
    if not enabled() or reader.version != CURRENT_VERSION:
        return False
    target = cache_path(reader.path, create=True)
    if target is None:
        return False
    fd = -1
    try:
        fd = reader._open_read()
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != reader._identity or st.st_size < reader._end:
            return False  # changed since it was read: the next open reads it again anyway
        header_line = os.pread(fd, MAX_HEADER_LINE, 0).split(b"\n", 1)[0] + b"\n"
        tail = _tail_hash(fd, len(header_line), reader._end)
    except OSError:
        return False
    finally:
        if fd >= 0:
            os.close(fd)
    if tail is None:
        return False
    n = len(reader.heads)
    keep = sorted(i for i in reader.keep_heads() if i < n)
    saved = Saved(
        format=FORMAT,
        path=os.path.realpath(reader.path),
        dev=st.st_dev,
        ino=st.st_ino,
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        end=reader._end,
        next_line=reader._next_line,
        header_line=header_line,
        tail=tail,
        header=reader.header,
        version=reader.version,
        count=n,
        ids=list(reader.index),
        id_index=memoryview(array("q", reader.index.values())).cast("B"),
        offsets=memoryview(reader.offsets).cast("B"),
        lengths=memoryview(reader.lengths).cast("B"),
        lines=memoryview(reader.lines).cast("B"),
        heads=[(i, reader.heads[i]) for i in keep],
        bodies=sorted(reader._bodies.items()),
        checked=memoryview(bytes(reader._checked[:n])),
        pin_entries=list(reader.pin_entries),
        diagnostics=[(d.path, d.line, d.message, d.severity, d.entryId, d.kind) for d in reader.diagnostics],
        extra=extra,
    )
    payload = _encoder.encode(saved)
    data = MAGIC + zlib.crc32(payload).to_bytes(CHECK, "big") + payload
    folder = os.path.dirname(target)
    try:
        tmp_fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".idx")
        try:
            with os.fdopen(tmp_fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o600)
            os.replace(tmp, target)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError:
        return False
    return True


def forget(path: str) -> None:
    """Remove the cached index of ``path`` (if any)."""
    cached = cache_path(path)
    if cached is not None:
        try:
            os.unlink(cached)
        except OSError:
            pass
