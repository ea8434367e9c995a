"""The persistent index: what reading a session file found, kept in the user's cache directory so
that opening the file again reads only what was appended since.

One cache file per session file, under ``$XDG_CACHE_HOME/ctxd/index`` (default ``~/.cache``), named
by a hash of the session's real path; never next to the session; kept as :mod:`ctxd.store.private`
keeps files (0700 folders, 0600 files written whole, a checksum). ``CTXD_INDEX_CACHE=0`` turns it off.

A cache file holds the session's real path and header line, the file's mark when it was written
(device, inode, size, mtime, ctime, a hash of sampled bytes before the end indexed: the header, the
last 4 KB and blocks spread between: :class:`ctxd.store.private.FileMark`)
and the index: entry ids, byte offsets, lengths and line numbers, the heads a line alone cannot
give back, recovered bodies, diagnostics, where the native scanner found each entry's tool calls
(:mod:`ctxd.store.calls`), and what the layers above add (``extra``: the tree, token estimates).
Heads are not stored: they are decoded from the file's lines when asked for (:mod:`ctxd.store.heads`).

It is used only when every check holds: the cache's own checksum and format, the same path and
header line, and a file that was only appended to since (:meth:`FileMark.appended_only`).
Otherwise the file is read in full (and the cache written again). A corrupt or stale cache costs a
full read, never a wrong answer.
"""

from __future__ import annotations

import os
from array import array
from typing import Any

import attrs
import msgspec

from ctxd.formats.codec import CURRENT_VERSION, LineHead
from ctxd.store.calls import FIELDS, NotedCalls
from ctxd.store.files import open_session_fd
from ctxd.store.private import FileMark, cache_dir, forget_kept, read_kept, write_kept
from ctxd.store.scan import Diagnostic

FORMAT = 5
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
    call_flags: memoryview
    calls: memoryview
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


@attrs.define
class Kept:
    """What a reader's index holds, as kept (see :class:`ctxd.store.reader.SessionReader`)."""

    header: dict[str, Any]
    version: int
    end: int
    """Bytes indexed: the next read starts here."""
    next_line: int
    count: int
    offsets: array[int]
    lengths: array[int]
    lines: array[int]
    index: dict[str, int]
    heads: list[tuple[int, LineHead]]
    """The heads a line alone cannot give back (``SessionReader.keep_heads``)."""
    bodies: dict[int, dict[str, Any]]
    """Bodies served from memory (recovered or repaired when read)."""
    checked: bytearray | bytes
    pin_entries: list[int]
    diagnostics: list[Diagnostic]
    noted_calls: NotedCalls
    extra: dict[str, Any]
    """What the layers above keep with it (the tree, token estimates)."""


def restore(path: str, fd: int, st: os.stat_result) -> Kept | None:
    """The kept index of the session file ``path`` (open as ``fd``, stat ``st``) if every check holds (see
    the module); the caller then reads what was appended after ``Kept.end``. None otherwise."""
    if not enabled():
        return None
    saved = _read(path)
    if saved is None or saved.path != os.path.realpath(path):
        return None
    if saved.version != CURRENT_VERSION or not saved.mark.appended_only(fd, st):
        return None
    if os.pread(fd, len(saved.header_line), 0) != saved.header_line:
        return None
    n = saved.count
    offsets, lengths, lines = (_ints(b, n) for b in (saved.offsets, saved.lengths, saved.lines))
    id_index = _ints(saved.id_index, len(saved.ids))
    if offsets is None or lengths is None or lines is None or id_index is None or len(saved.checked) > n:
        return None
    if any(not 0 <= i < n for i, _ in saved.heads) or any(not 0 <= i < n for i, _ in saved.bodies):
        return None
    calls = _ints(saved.calls, len(saved.calls) // 8)
    if (
        calls is None
        or len(saved.call_flags) > n
        or len(calls) % FIELDS
        or any(not 0 <= i < n for i in calls[0::FIELDS])
    ):
        return None
    return Kept(
        header=saved.header,
        version=saved.version,
        end=saved.mark.end,
        next_line=saved.next_line,
        count=n,
        offsets=offsets,
        lengths=lengths,
        lines=lines,
        index=dict(zip(saved.ids, id_index, strict=True)),
        heads=saved.heads,
        bodies=dict(saved.bodies),
        checked=bytearray(saved.checked),
        pin_entries=[i for i in saved.pin_entries if 0 <= i < n],
        diagnostics=[Diagnostic(*d) for d in saved.diagnostics],
        noted_calls=NotedCalls(saved.call_flags, calls),
        extra=saved.extra,
    )


def save(path: str, kept: Kept, identity: tuple[int, int], mark: FileMark | None) -> bool:
    """Keep ``kept``, the index of the session file ``path`` as read from the file ``identity`` (device,
    inode) and marked ``mark`` when it was read; False if it cannot be written, or if the file changed since."""
    if not enabled() or kept.version != CURRENT_VERSION:
        return False
    target = cache_path(path, create=True)
    if target is None:
        return False
    fd = -1
    try:
        fd = open_session_fd(path)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != identity or st.st_size < kept.end:
            return False  # changed since it was read: the next open reads it again anyway
        header_line = os.pread(fd, MAX_HEADER_LINE, 0).split(b"\n", 1)[0] + b"\n"
        # The reader's own mark was taken when it read: one taken now could vouch for bytes
        # rewritten since (and never read).
        if mark is None or mark.end != kept.end or not mark.appended_only(fd, st):
            return False
    except OSError:
        return False
    finally:
        if fd >= 0:
            os.close(fd)
    saved = Saved(
        format=FORMAT,
        path=os.path.realpath(path),
        mark=mark,
        next_line=kept.next_line,
        header_line=header_line,
        header=kept.header,
        version=kept.version,
        count=kept.count,
        ids=list(kept.index),
        id_index=memoryview(array("q", kept.index.values())).cast("B"),
        offsets=memoryview(kept.offsets).cast("B"),
        lengths=memoryview(kept.lengths).cast("B"),
        lines=memoryview(kept.lines).cast("B"),
        heads=kept.heads,
        bodies=sorted(kept.bodies.items()),
        checked=memoryview(bytes(kept.checked[: kept.count])),
        pin_entries=list(kept.pin_entries),
        diagnostics=[(d.path, d.line, d.message, d.severity, d.entryId, d.kind) for d in kept.diagnostics],
        call_flags=memoryview(bytes(kept.noted_calls.flags[: kept.count])),
        calls=memoryview(kept.noted_calls.calls).cast("B"),
        extra=kept.extra,
    )
    return write_kept(target, _encoder.encode(saved), MAGIC)


def forget(path: str) -> None:
    """Remove the cached index of ``path`` (if any)."""
    cached = cache_path(path)
    if cached is not None:
        forget_kept(cached)
