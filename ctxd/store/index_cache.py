"""The persistent index: what reading a session file found, kept in the user's cache directory so
that opening the file again reads only what was appended since.

One cache file per session file, under ``$XDG_CACHE_HOME/ctxd/index`` (default ``~/.cache``), named
by a hash of the session's real path; never next to the session; kept as :mod:`ctxd.store.private`
keeps files (0700 folders, 0600 files written whole, a checksum). ``CTXD_INDEX_CACHE=0`` turns it off.

A cache file holds the session's real path and header line, the file's mark when it was written
(device, inode, size, mtime, ctime, a hash of sampled bytes before the end indexed: the header, the
last 4 KB and blocks spread between: :class:`ctxd.store.private.FileMark`)
and the index: entry ids, byte offsets, lengths and line numbers, the heads a line alone cannot
give back, recovered bodies, diagnostics, and what the layers above add (``extra``: the tree, token
estimates). Heads are not stored: they are decoded from
the file's lines when asked for (:mod:`ctxd.store.heads`).

It is used only when every check holds: the cache's own checksum and format, the same path and
header line, and a file that was only appended to since (:meth:`FileMark.appended_only`).
Otherwise the file is read in full (and the cache written again). A corrupt or stale cache costs a
full read, never a wrong answer.
"""

from __future__ import annotations

import os
from array import array
from typing import TYPE_CHECKING, Any

import msgspec

from ctxd.formats.codec import CURRENT_VERSION, LineHead
from ctxd.store.private import FileMark, cache_dir, forget_kept, read_kept, write_kept
from ctxd.store.scan import Diagnostic

if TYPE_CHECKING:
    from ctxd.store.reader import SessionReader

FORMAT = 4
MAGIC = b"ctxd-index\x00"
MIN_ENTRIES = 2000
"""Smaller files are read whole every time (it takes a few milliseconds)."""
MAX_HEADER_LINE = 1 << 16


class Saved(msgspec.Struct, array_like=True):
    format: int
    path: str
    mark: FileMark
    next_line: int
    header_line: bytes
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


def cache_path(path: str, create: bool = False) -> str | None:
    folder = cache_dir("index", create=create)
    if folder is None:
        return None
    import hashlib  # here: a hook reading a transcript never needs it

    key = hashlib.sha256(os.path.realpath(path).encode("utf-8", "surrogateescape")).hexdigest()[:40]
    return os.path.join(folder, key + ".idx")


def _read(path: str) -> Saved | None:
    cached = cache_path(path)
    payload = None if cached is None else read_kept(cached, MAGIC)
    if payload is None:
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
    if saved.version != CURRENT_VERSION or not saved.mark.appended_only(fd, st):
        return False
    if os.pread(fd, len(saved.header_line), 0) != saved.header_line:
        return False
    n = saved.count
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
    reader._end = saved.mark.end
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
        # The reader's own mark was taken when it read: one taken now could vouch for bytes
        # rewritten since (and never read).
        mark = reader._mark if reader._mark is not None and reader._mark.end == reader._end else None
        if mark is None or not mark.appended_only(fd, st):
            return False
    except OSError:
        return False
    finally:
        if fd >= 0:
            os.close(fd)
    if mark is None:
        return False
    n = len(reader.heads)
    keep = sorted(i for i in reader.keep_heads() if i < n)
    saved = Saved(
        format=FORMAT,
        path=os.path.realpath(reader.path),
        mark=mark,
        next_line=reader._next_line,
        header_line=header_line,
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
    return write_kept(target, _encoder.encode(saved), MAGIC)


def forget(path: str) -> None:
    """Remove the cached index of ``path`` (if any)."""
    cached = cache_path(path)
    if cached is not None:
        forget_kept(cached)
