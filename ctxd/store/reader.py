"""Reading one session file: its index, incremental refresh and on-demand bodies.

Reading never modifies the file, and never consumes a final line that lacks its newline (it may
still be being written).  A refresh reads on from where the last read stopped only when the file's
mark (:class:`ctxd.store.private.FileMark`: its stat and sampled bytes before that point) says the
file was only appended to; a file rewritten in place, grown or not, is read again whole.  Writing
is :class:`ctxd.store.session_file.SessionFile`'s.
"""

from __future__ import annotations

import bisect
import enum
import gc
import os
import time
from array import array
from collections.abc import Callable, KeysView
from typing import Any, Self

import attrs
import msgspec

from ctxd.errors import EntryNotFoundError, SessionError
from ctxd.formats.codec import CURRENT_VERSION
from ctxd.formats.migrate import migrate_head_roles, migrate_heads
from ctxd.store import index_cache
from ctxd.store.bodies import BodyView
from ctxd.store.calls import NotedCalls
from ctxd.store.files import Clock, open_session_fd
from ctxd.store.header import read_header
from ctxd.store.heads import Heads, HeadSink, read_heads
from ctxd.store.private import FileMark, grown_stat
from ctxd.store.reader_bodies import BodyReader
from ctxd.store.scan import Diagnostic, Lines, ScannedLine, scan

LEAF_MARKER = "ctxd.leaf"
"""customType of the ``custom`` entry ctxd writes to move the leaf: pi skips it in context."""
PIN_MARKER = "ctxd.pin"
"""customType of the ``custom`` entry ctxd writes to pin or unpin a message (see ctxd.context.pins)."""
BOOKKEEPING = frozenset({LEAF_MARKER, PIN_MARKER})
"""ctxd's own custom entries: written at the leaf, they stand for their parent as the leaf."""


class Durability(enum.Enum):
    FLUSH = "flush"
    """Each append reaches the OS before it is acknowledged (survives a crash of ctxd)."""
    FSYNC = "fsync"
    """Each entry is fsynced (survives a power loss)."""
    FSYNC_BATCH = "fsync-batch"
    """Each append call (a batch) is fsynced once."""


@attrs.frozen
class RefreshResult:
    added: range
    """Indices of entries read by this refresh."""
    reloaded: bool = False
    """The file was truncated or replaced, so everything was read again."""


PER_ENTRY = 150
"""Bytes an indexed entry holds beside its head: its offset, length, line, id and tree links."""
PER_HEAD = 720
"""Bytes a decoded head holds."""
DECODED = 2
"""A decoded body holds about this many times its line's bytes."""

SCAN_ESTIMATES_BYTES = 256 << 20
"""A read of more than this many bytes (a big file's first read) keeps none of the estimates the native
scanner makes: a million entries would hold 120 MB of them, and a context needs those of its path only
(estimated when it is built). Appended lines always keep theirs."""


class SessionReader(BodyReader):
    """An indexed pi session file, read-only (see :class:`SessionFile` for appends)."""

    read_only = False
    """True for other agents' transcripts (see :mod:`ctxd.store.transcript`)."""

    def __init__(
        self,
        path: str,
        *,
        durability: Durability = Durability.FLUSH,
        clock: Clock = time.time,
        on_chunk: Callable[[SessionReader], None] | None = None,
    ):
        self.path = os.path.abspath(path)
        self.durability = durability
        self.clock = clock
        self.on_chunk = on_chunk
        """Called after each chunk of lines a full read indexes (``Session`` builds its tree as the
        file is read, so that a big file's heads can go chunk by chunk)."""
        self.generation = 0
        """Bumped on every full reload: cached views of this file must be rebuilt."""
        self._reset()

    def _reset(self) -> None:
        self.header: dict[str, Any] = {}
        self.version = CURRENT_VERSION
        self.heads: Heads = Heads(self)
        """Each entry's index head (see :mod:`ctxd.store.heads`: decoded from its line when needed)."""
        self.offsets: array[int] = array("q")
        self.lengths: array[int] = array("q")
        self.lines: array[int] = array("q")
        self.index: dict[str, int] = {}
        self.pin_entries: list[int] = []
        """Entries that pin or unpin a message, in file order (ctxd.context.pins reads them)."""
        self.diagnostics: list[Diagnostic] = []
        self._bodies: dict[int, dict[str, Any]] = {}
        self._checked = bytearray()
        """1 for entries whose body was read once and needed nothing (see decode_bounded)."""
        self.noted_calls = NotedCalls()
        """Where the tool calls of the entries the native scanner read lie in their lines (``ctxd.store.calls``)."""
        self.scan_estimates: dict[int, int] = {}
        """Token estimates of message entries made while their lines were indexed (the native
        scanner's: ``ctxd.store.native``), by entry index, for ``Session`` to take."""
        self.end = 0
        """Bytes indexed (up to the end of the last complete line read): a refresh reads on from here."""
        self.next_line = 2
        """The line number of the next line read."""
        self.identity: tuple[int, int] = (0, 0)
        """The file read: its device and inode."""
        self.mark: FileMark | None = None
        """The file as last read (stat taken before reading, sampled bytes up to ``end``)."""
        self.last_scan = (0, 0)
        """The bytes the last read indexed (start, end): a reopen from the cache reads only the new ones."""
        self.restored: tuple[int, dict[str, Any]] | None = None
        """(entries, what the layers above saved) when the index was read back from the cache."""
        self._view: BodyView | None = None
        """The bodies as of this read (see :mod:`ctxd.store.bodies`), made when first asked for."""

    @classmethod
    def open(cls, path: str, **kwargs: Any) -> Self:
        session = cls(path, **kwargs)
        session.load()
        return session

    def __len__(self) -> int:
        return len(self.heads)

    @property
    def session_id(self) -> str:
        return str(self.header.get("id", ""))

    @property
    def cwd(self) -> str:
        return str(self.header.get("cwd", ""))

    def body_view(self) -> BodyView:
        """The bodies as of this read (:mod:`ctxd.store.bodies`), shared by every answer made from it."""
        view = self._view
        if view is None or view.generation != self.generation or view.mark is not self.mark:
            view = self._view = BodyView(self)
        return view

    def load(self) -> None:
        """Read and index the whole file (raises BadHeaderError if line 1 is not a session header)."""
        fd = open_session_fd(self.path)
        saved = dict(self.__dict__)
        try:
            self._reset()
            st = os.fstat(fd)
            self.identity = (st.st_dev, st.st_ino)
            restored = self._restore(fd, st)
            if not restored:
                self._read_header(fd)
            gc_was_enabled = gc.isenabled()
            gc.disable()  # a hundred thousand small objects: the collector would dominate
            try:
                # With a restored index, only what was appended since.
                self._scan_from(fd, self.end, self.on_chunk if not restored else None)
            finally:
                if gc_was_enabled:
                    gc.enable()
            if not restored:
                self._finish_migration(0)
            self.mark = FileMark.take(fd, st, self.end)
            self.generation += 1
        except BaseException:
            # A reload that fails (a file caught half-rewritten) leaves the last good state.
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise
        finally:
            os.close(fd)

    def refresh(self) -> RefreshResult:
        """Read only what was appended since the last read; read the whole file again if it was
        truncated, replaced or rewritten in place (see :class:`ctxd.store.private.FileMark`)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError as exc:
            raise SessionError("session file disappeared", path=self.path) from exc
        mark = self.mark
        if mark is not None and mark.unchanged(st):
            return RefreshResult(range(len(self.heads), len(self.heads)))  # nothing written since
        if mark is not None and st.st_size == mark.size:
            st = grown_stat(self.path, st)
        if (st.st_dev, st.st_ino) != self.identity or st.st_size < self.end:
            return self._reload()
        fd = open_session_fd(self.path)
        try:
            if mark is None or not mark.appended_only(fd, st):
                changed = True  # rewritten in place (maybe grown too): read it all again
            else:
                changed = False
                start = len(self.heads)
                self._scan_from(fd, self.end)
                self._finish_migration(start)
                self.mark = FileMark.take(fd, st, self.end)
        finally:
            os.close(fd)
        if changed:
            return self._reload()
        return RefreshResult(range(start, len(self.heads)))

    def changed_since_read(self) -> bool:
        """Whether the file may have been written since it was last read (its stat is not the one its
        mark noted: one ``stat``). Every answer made from what was read checks this first, so that it
        is the file as it is now (an edit in place of the same length included), as an entry read
        from its line is."""
        mark = self.mark
        if mark is None:
            return True
        try:
            return not mark.unchanged(os.stat(self.path))
        except OSError:
            return True

    def _reload(self) -> RefreshResult:
        self.load()
        return RefreshResult(range(len(self.heads)), reloaded=True)

    def _remark(self) -> None:
        """Note the file as it is now, after a write of our own that was indexed as written.

        Another writer (one without the lock) may have added a line since our write was checked to be
        the last: a mark whose stat counts it would say "nothing written since" and that line would
        never be read (and, taken for a torn tail, be ended again: a blank line). So the mark keeps
        the stat only when the file ends where the index does; otherwise the next refresh reads on."""
        fd = open_session_fd(self.path)
        try:
            st = os.fstat(fd)
            mark = FileMark.take(fd, st, self.end)
            if mark is not None and st.st_size != self.end:
                mark = msgspec.structs.replace(mark, size=-1)  # never "unchanged": read on from _end
            self.mark = mark
        finally:
            os.close(fd)

    def _restore(self, fd: int, st: os.stat_result) -> bool:
        """The index as the cache kept it, when it still describes this file (see index_cache)."""
        try:
            kept = index_cache.restore(self.path, fd, st)
        except (OSError, ValueError, TypeError, KeyError, OverflowError):
            kept = None
        if kept is None:
            return False
        list.extend(self.heads, [None] * kept.count)
        for i, head in kept.heads:
            list.__setitem__(self.heads, i, head)
        self.offsets, self.lengths, self.lines = kept.offsets, kept.lengths, kept.lines
        self.index = kept.index
        self._bodies = kept.bodies
        self._checked = bytearray(kept.checked)
        self.pin_entries = kept.pin_entries
        self.diagnostics = kept.diagnostics
        self.header, self.version = kept.header, kept.version
        self.end, self.next_line = kept.end, kept.next_line
        self.noted_calls = kept.noted_calls
        self.restored = (kept.count, kept.extra)
        return True

    def save_index(self, extra: dict[str, Any] | None = None) -> bool:
        """Keep this index in the user's cache (see :mod:`ctxd.store.index_cache`)."""
        n = len(self.heads)
        kept = index_cache.Kept(
            header=self.header,
            version=self.version,
            end=self.end,
            next_line=self.next_line,
            count=n,
            offsets=self.offsets,
            lengths=self.lengths,
            lines=self.lines,
            index=self.index,
            heads=[(i, self.heads[i]) for i in sorted(self.keep_heads()) if i < n],
            bodies=self._bodies,
            checked=self._checked,
            pin_entries=self.pin_entries,
            diagnostics=self.diagnostics,
            noted_calls=self.noted_calls,
            extra=extra or {},
        )
        return index_cache.save(self.path, kept, self.identity, self.mark)

    def held_bytes(self) -> int:
        """About how much memory the index holds (measured with tracemalloc on generated sessions):
        each entry's offsets, lengths, line and id, each decoded head (a released one costs nothing),
        and the bodies kept in memory (lines recovered or repaired when read)."""
        n = len(self.heads)
        kept = sum(self.lengths[i] for i in self._bodies) if self._bodies else 0
        return PER_ENTRY * n + PER_HEAD * (n - self.heads.released()) + DECODED * kept

    def keep_heads(self) -> KeysView[int]:
        """Entries whose head cannot be decoded again from their line alone (see :class:`Heads`)."""
        return self._bodies.keys()

    def release_heads(self) -> None:
        """Let the heads of indexed entries go (they are decoded again from their lines when asked for)."""
        self.heads.release()

    def read_heads(self, missing: list[int], put: HeadSink) -> None:
        """Decode the heads of entries ``missing`` (ascending) from the file, as :class:`Heads` asks."""
        fd = open_session_fd(self.path)
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != self.identity:
                raise SessionError("the file was replaced on disk; it will be read again", path=self.path)
            read_heads(self, fd, missing, put)
        finally:
            os.close(fd)

    def pending_bytes(self) -> int:
        """Bytes after the last complete line (a line still being written, or torn)."""
        try:
            return max(0, os.stat(self.path).st_size - self.end)
        except FileNotFoundError:
            return 0

    def entry_by_id(self, entry_id: str) -> dict[str, Any]:
        return self.entry(self.require(entry_id))

    def require(self, entry_id: str) -> int:
        i = self.index.get(entry_id)
        if i is None:
            raise EntryNotFoundError(entry_id, path=self.path)
        return i

    def line_of(self, entry_id: str) -> int:
        return self.lines[self.require(entry_id)]

    def line_at(self, offset: int) -> int:
        """The line number of the byte at ``offset`` (counted from the nearest indexed line)."""
        k = bisect.bisect_right(self.offsets, offset) - 1
        base, line = (self.offsets[k], self.lines[k]) if k >= 0 and self.offsets[k] >= 0 else (0, 1)
        fd = open_session_fd(self.path)
        try:
            return line + os.pread(fd, max(0, offset - base), base).count(b"\n")
        finally:
            os.close(fd)

    def leaf_index(self) -> int | None:
        """pi's leaf: the last entry in file order; a ctxd leaf marker or pin entry stands for its parent."""
        if not self.heads:
            return None
        last = len(self.heads) - 1
        head = self.heads[last]
        if head.type == "custom" and head.customType in BOOKKEEPING and head.parentId is not None:
            return self.index.get(head.parentId, last)
        return last

    def leaf_id(self) -> str | None:
        i = self.leaf_index()
        return None if i is None else self.heads[i].id

    def _read_header(self, fd: int) -> None:
        found = read_header(fd, self.path)
        self.diagnostics.extend(found.diagnostics)
        self.header, self.version = found.fields, found.version
        self.end, self.next_line = found.end, 2

    def _scan_from(self, fd: int, start: int, on_chunk: Callable[[SessionReader], None] | None = None) -> None:
        heads = self.heads
        index = self.index
        try:
            keep_estimates = os.fstat(fd).st_size - start <= SCAN_ESTIMATES_BYTES
        except OSError:
            keep_estimates = False

        def bulk(chunk: Lines) -> bool:
            new = chunk.heads
            first = len(heads)
            chunk_ids = dict(zip([h.id for h in new], range(first, first + len(new)), strict=True))
            if len(chunk_ids) != len(new) or None in chunk_ids or not index.keys().isdisjoint(chunk_ids):
                return False  # no id, or a duplicate id: the line-by-line path reports it
            types = {h.type for h in new}
            if "session" in types:
                return False
            index.update(chunk_ids)  # type: ignore[arg-type]
            if "custom" in types:
                pins = [first + k for k, h in enumerate(new) if h.type == "custom" and h.customType == PIN_MARKER]
                self.pin_entries.extend(pins)
            heads.extend(new)
            self.offsets.extend(chunk.offsets)
            self.lengths.extend(chunk.lengths)
            if chunk.numbers is not None:
                self.lines.extend(chunk.numbers)
            else:
                self.lines.fromlist(list(range(chunk.line, chunk.line + len(new))))
            if chunk.estimates is not None:
                self._validated(first, len(new), chunk.estimates if keep_estimates else None)
            if chunk.calls is not None and self.version == CURRENT_VERSION:
                self.noted_calls.note(first, *chunk.calls)  # bodies served as written: the lines are theirs
            return True

        after = (lambda: on_chunk(self)) if on_chunk is not None else None
        self.end, self.next_line = scan(fd, start, self.next_line, self.path, self._add, self.diagnostics, bulk, after)
        self.last_scan = (start, self.end)

    def _validated(self, first: int, count: int, estimates: tuple[array[int], array[int]] | None) -> None:
        """Entries ``first`` .. ``first + count`` were validated whole by the native scanner: note
        them read clean, and keep the token estimates it made (``estimates``: the lines, 0-based, and
        their estimates; None: not kept), for a file in the current format, whose bodies are served as
        written."""
        checked = self._checked
        if len(checked) < first:
            checked.extend(bytes(first - len(checked)))
        checked[first : first + count] = b"\x01" * count
        if estimates is not None and estimates[0] and self.version == CURRENT_VERSION:
            lines, values = estimates
            self.scan_estimates.update(zip(map(first.__add__, lines), values, strict=True))

    def _add(self, scanned: ScannedLine) -> None:
        head = scanned.head
        if self.version >= 2 and not head.id:
            self.diagnostics.append(
                Diagnostic(
                    self.path, scanned.line, f"entry of type {head.type or '?'!r} has no id; skipped", kind="no-id"
                )
            )
            return
        if head.type == "session":
            message = "a second session header; skipped"
            self.diagnostics.append(Diagnostic(self.path, scanned.line, message, kind="second-header"))
            return
        i = len(self.heads)
        if head.type == "custom" and head.customType == PIN_MARKER:
            self.pin_entries.append(i)
        if head.id:
            if head.id in self.index:
                self.diagnostics.append(
                    Diagnostic(
                        self.path,
                        scanned.line,
                        f"duplicate id {head.id!r}; the later entry wins",
                        "error",
                        head.id,
                        "duplicate-id",
                    )
                )
            self.index[head.id] = i
        self.heads.append(head)
        self.offsets.append(scanned.offset)
        self.lengths.append(scanned.length)
        self.lines.append(scanned.line)
        if scanned.body is not None:
            self._bodies[i] = scanned.body

    def _finish_migration(self, start: int) -> None:
        if self.version >= CURRENT_VERSION:
            return
        if start == 0:
            migrate_heads(self.version, self.session_id, self.heads, self.lines)
        else:
            # Appended by an old writer after load: chain them on, as pi's migration would.
            new = self.heads[start:]
            migrate_heads(self.version, self.session_id, new, self.lines[start:])
            if self.version < 2 and new and start > 0:
                new[0].parentId = self.heads[start - 1].id
        migrate_head_roles(self.version, self.heads[start:])
        for i in range(start, len(self.heads)):
            head_id = self.heads[i].id
            if head_id:
                self.index[head_id] = i

    def close(self) -> None:
        """Release what the file holds open (for a reader, only its view of the bodies, which refers
        back to it: an answer made from it keeps its own)."""
        self._view = None
