"""Listings that read what changed: each session file's row, kept by the file's identity.

A row is made once by reading the file (:func:`ctxd.store.listing.summarize_file`). Then, by the
file's device, inode, size and mtime: an unchanged file costs its stat; a pi session that grew
(same inode, its last bytes before the old end unchanged) costs the lines appended since, read in
bounded chunks: their count, a later ``session_info`` name, the first user message if there was
none yet; anything else (replaced, truncated, rewritten, a transcript that changed) is read again.
So a 200 MB session in a root costs nothing after the first listing, and a little after each turn.
The rows live as long as the process (the daemon), at most :data:`MAX_FILES` of them; ``ctxd
sessions`` keeps them between runs in the user's cache (``$XDG_CACHE_HOME/ctxd/listing``, 0600).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import attrs
import msgspec

from ctxd.store.files import complete_chunks, open_regular
from ctxd.store.listing import SessionSummary, first_title, last_name, read_for_listing, summarize_bytes
from ctxd.store.private import FileMark, cache_dir, read_kept, write_kept

MAX_FILES = 100_000
CHUNK = 1 << 23
MAGIC = b"ctxd-listing\x00"


@attrs.define
class _Known:
    mark: FileMark
    """The file as summarised: its end is the offset after the last newline read, or -1 when the
    row cannot follow the file's growth (it is read again)."""
    summary: SessionSummary
    newlines: int
    titled: bool


class ListingCache:
    def __init__(self) -> None:
        self._known: dict[str, _Known] = {}
        self._lock = threading.Lock()
        self._changed = False

    # --- kept between processes (``ctxd sessions``): one file in the user's cache ----------------

    def load(self) -> None:
        """Add the rows a previous process kept (``$XDG_CACHE_HOME/ctxd/listing``); a damaged file is ignored."""
        path = _store_path(create=False)
        payload = None if path is None else read_kept(path, MAGIC)
        if payload is None:
            return
        try:
            rows = _decoder.decode(payload)
        except (msgspec.DecodeError, ValueError, TypeError):
            return
        with self._lock:
            for row in rows:
                self._known.setdefault(row.path, _from_stored(row))

    def save(self) -> None:
        """Keep the rows for the next process, if any changed (0600, written whole and renamed)."""
        if not self._changed:
            return
        path = _store_path(create=True)
        if path is None:
            return
        with self._lock:
            rows = [_to_stored(p, k) for p, k in self._known.items()]
            self._changed = False
        write_kept(path, _encoder.encode(rows), MAGIC)

    def summarize(self, path: str, root: str, st: os.stat_result) -> SessionSummary:
        """``path``'s row (a fresh copy: callers may change it), reading only what changed since
        the last time (``st``: the file's stat, as the listing walk found it)."""
        with self._lock:
            known = self._known.get(path)
        if known is not None:
            if known.mark.unchanged(st):
                return _copy(known.summary, root)
            grown = self._grown(path, known)
            if grown is not None:
                return _copy(grown.summary, root)
        return _copy(self._full(path, root).summary, root)

    def changed_since_listed(self) -> list[tuple[str, str]]:
        """``(path, "modified" or "deleted")`` of the files whose stat differs from when they were listed."""
        with self._lock:
            known = list(self._known.items())
        out: list[tuple[str, str]] = []
        for path, k in known:
            try:
                st = os.stat(path)
            except OSError:
                out.append((path, "deleted"))
                continue
            if not k.mark.unchanged(st):
                out.append((path, "modified"))
        return out

    def forget(self) -> None:
        with self._lock:
            self._known.clear()

    def _remember(self, path: str, known: _Known) -> None:
        with self._lock:
            if len(self._known) >= MAX_FILES and path not in self._known:
                self._known.clear()
            self._known[path] = known
            self._changed = True

    def _full(self, path: str, root: str) -> _Known:
        st, data, newlines, end = read_for_listing(path)
        summary = summarize_bytes(path, root, st, data, newlines)
        pi = summary.agent == "pi" and summary.error is None
        # A pi session read to its last newline can follow its growth; a transcript is read again.
        mark = None
        if pi:
            fd = open_regular(path)
            try:
                mark = FileMark.take(fd, st, end)
            finally:
                os.close(fd)
        titled = pi and first_title(data) is not None
        known = _Known(mark or FileMark.of_stat(st), summary, newlines, titled)
        self._remember(path, known)
        return known

    def _grown(self, path: str, known: _Known) -> _Known | None:
        """``known`` with the lines appended since folded in, or None if the file changed otherwise."""
        if known.mark.end < 0:
            return None
        fd = open_regular(path)
        try:
            st = os.fstat(fd)
            if not known.mark.appended_only(fd, st):
                return None  # replaced, truncated or rewritten: read it again
            summary = attrs.evolve(known.summary, modified=st.st_mtime, size=st.st_size)
            newlines, titled, end = known.newlines, known.titled, known.mark.end
            for lines, after in complete_chunks(fd, known.mark.end, CHUNK):
                end = after
                newlines += lines.count(b"\n")
                name = last_name(lines)
                if name is not None:
                    summary.name = name[0]
                if not titled:
                    title = first_title(lines)
                    if title is not None:
                        summary.title, titled = title, True
            summary.entries = newlines - 1
            mark = FileMark.take(fd, st, end)
        finally:
            os.close(fd)
        if mark is None:
            return None
        grown = _Known(mark, summary, newlines, titled)
        self._remember(path, grown)
        return grown


def _copy(summary: SessionSummary, root: str) -> SessionSummary:
    """A row the caller may change (a listing pairs archives by changing rows): lists copied too."""
    return attrs.evolve(summary, root=root, archives=list(summary.archives))


class _Stored(msgspec.Struct, array_like=True):
    path: str
    mark: FileMark
    newlines: int
    titled: bool
    summary: dict[str, Any]


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(list[_Stored])


def _to_stored(path: str, k: _Known) -> _Stored:
    return _Stored(path, k.mark, k.newlines, k.titled, k.summary.to_json())


def _from_stored(row: _Stored) -> _Known:
    summary = SessionSummary(**row.summary)
    return _Known(row.mark, summary, row.newlines, row.titled)


def _store_path(create: bool) -> str | None:
    folder = cache_dir(create=create)
    return None if folder is None else os.path.join(folder, "listing")


LISTINGS = ListingCache()
"""The process's listing cache (the daemon's, for every ``session/list``)."""
