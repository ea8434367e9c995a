"""One session file: :class:`SessionReader` plus safe appends.

Writing happens only under an exclusive advisory lock, after catching up with whatever other
processes appended, and never after a final line that lacks its newline: such a line may belong to
a writer that takes no lock (pi), so ctxd waits for it to complete, and only a tail that stays
unchanged for a grace period is terminated in place (never moved or truncated).  The whole rule is
in :mod:`ctxd.store.tail`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import msgspec

from ctxd.errors import InvalidEntryError, SessionError, UnsupportedVersionError
from ctxd.formats.codec import CURRENT_VERSION, decode_head, dumps_line, head_from_dict
from ctxd.store import locks, tail
from ctxd.store.files import (
    Clock,
    atomic_write,
    iso_timestamp,
    locked,
    new_entry_id,
    open_regular,
    open_session_fd,
    write_all,
)
from ctxd.store.reader import LEAF_MARKER, PIN_MARKER, Durability, RefreshResult, SessionReader
from ctxd.store.scan import Diagnostic
from ctxd.store.validate import check_depth, validate_entries

log = logging.getLogger(__name__)

HEAL_ATTEMPTS = 8
"""How many times in a row a heal (rule 4 of :mod:`ctxd.store.tail`) is retried when it is glued
onto another writer's piece again; each retry is a new race of a few microseconds."""

__all__ = ["LEAF", "LEAF_MARKER", "PIN_MARKER", "Durability", "RefreshResult", "SessionFile"]

T = TypeVar("T")


class _Leaf:
    def __repr__(self) -> str:
        return "LEAF"


LEAF: Any = _Leaf()
"""Default parent for appends: the session's current leaf, read under the lock."""


class SessionFile(SessionReader):
    """A pi session file that can be appended to. Not safe for concurrent use without the
    caller's own locking, except :meth:`append`, which serialises itself (across threads and
    processes)."""

    def __init__(
        self,
        path: str,
        *,
        durability: Durability = Durability.FLUSH,
        clock: Clock = time.time,
        tail_grace: float | None = None,
        on_chunk: Callable[[SessionReader], None] | None = None,
    ):
        super().__init__(path, durability=durability, clock=clock, on_chunk=on_chunk)
        self.tail_grace = tail.TAIL_GRACE if tail_grace is None else tail_grace
        """Seconds a partial final line must stay unchanged before it is taken for torn."""
        self._write_lock = threading.Lock()
        self._append_fd: int | None = None
        self.lock_timeout: float | None = None
        """Seconds an append waits for another process's write lock (None: as long as it takes, in a
        blocking ``flock``); with a timeout, :meth:`stop_waiting` ends the wait too."""
        self._stop_waiting = threading.Event()

    def append(
        self,
        entries: Sequence[dict[str, Any]],
        *,
        parent_id: str | None = LEAF,
        durability: Durability | None = None,
        chain: bool = True,
        fields: Sequence[tuple[str, str]] | None = None,
    ) -> list[str]:
        """Append entries as one batch and return their ids once they are durable as configured.

        Missing ``id``, ``parentId`` and ``timestamp`` are filled in: the first entry's parent is
        ``parent_id`` (default: the leaf, read under the lock) and, with ``chain``, each further
        entry's parent is the previous one.  Entries are validated (:mod:`ctxd.store.validate`;
        ``fields`` names them in errors) before anything is written: one bad entry, nothing written.
        """
        if not entries:
            return []
        validate_entries(entries, fields)
        mode = durability or self.durability
        return self._under_lock(lambda fd: self._write_locked(fd, entries, parent_id, chain, mode, fields))

    def settle(self) -> None:
        """Under the lock, read everything appended and wait out (or, after the grace period, set
        aside) a partial final line: what an append does before it writes, writing nothing else."""
        self._under_lock(lambda fd: None)

    def _under_lock(self, then: Callable[[int], T]) -> T:
        """Take the lock, catch up (following a replaced or migrated file), then ``then(fd)``."""
        with self._write_lock:
            for _ in range(8):
                fd = self._lock_fd()
                try:
                    with locked(fd, timeout=self.lock_timeout, stop=self._stop_waiting, path=self.path):
                        if self._catch_up_locked(fd):
                            return then(fd)
                except OSError as exc:
                    self._close_append_fd()
                    raise SessionError(f"append failed: {exc.strerror or exc}", path=self.path) from exc
                # The file was replaced (migrated, or rewritten by someone): follow it.
                self._close_append_fd()
                self.load()
            raise SessionError("the file keeps being replaced; gave up appending", path=self.path)

    def _write_locked(
        self,
        fd: int,
        entries: Sequence[dict[str, Any]],
        parent_id: str | None,
        chain: bool,
        mode: Durability,
        fields: Sequence[tuple[str, str]] | None = None,
    ) -> list[str]:
        prepared, lines = self._prepare(entries, parent_id, chain, fields)
        # One write() for the batch (rule 4 of ctxd.store.tail); fsync mode writes (and syncs) line by line.
        chunks = lines if mode is Durability.FSYNC and len(lines) > 1 else [b"".join(lines)]
        glued: list[tuple[int, int]] = []
        before = (self.end, len(self.heads))
        try:
            self._write_chunks_locked(fd, prepared, lines, chunks, mode, glued)
        except tail.Replaced as exc:
            raise SessionError("the file was replaced while appending", path=self.path) from exc
        except OSError:
            self._take_back_locked(fd, before, b"".join(lines))
            raise
        return [e["id"] for e in prepared]

    def _take_back_locked(self, fd: int, before: tuple[int, int], data: bytes) -> None:
        """A batch failed part way (a full disk): cut the file back to its length ``before[0]``
        before the batch, and forget what was indexed of it, so that the batch is all or nothing.

        Only bytes that are exactly a beginning of the batch's own ``data`` are cut; if anything
        else lies after ``before[0]`` (another writer's), nothing is cut, and it is reported."""
        end, count = before
        try:
            size = os.fstat(fd).st_size
            if size > end:
                rfd = open_session_fd(self.path)
                try:
                    landed = os.pread(rfd, size - end, end)
                finally:
                    os.close(rfd)
                if not data.startswith(landed):
                    log.warning("%s: a failed append could not be taken back: another writer wrote after it", self.path)
                    self.refresh()
                    return
                os.ftruncate(fd, end)
        except OSError as exc:
            log.warning("%s: a failed append could not be taken back: %s", self.path, exc.strerror or exc)
            return
        if len(self.heads) != count or self.end != end:
            self.load()  # some of the batch was read back (fsync mode writes line by line)
        else:
            self._remark()

    def _write_chunks_locked(
        self,
        fd: int,
        prepared: list[dict[str, Any]],
        lines: list[bytes],
        chunks: list[bytes],
        mode: Durability,
        glued: list[tuple[int, int]],
    ) -> None:
        for chunk in chunks:
            before = self.end
            start, landed_after_partial = self._write_raw_locked(fd, chunk, sync=mode is not Durability.FLUSH)
            if landed_after_partial:
                glued.append((start, start + len(chunk)))
            if len(chunks) == 1 and start == before and os.fstat(fd).st_size == start + len(chunk):
                self._index_own(prepared, lines, before)  # nobody else wrote: no need to read it back
            else:
                self.refresh()  # someone without the lock (pi) wrote meanwhile
        if glued:
            self._heal_locked(fd, prepared, lines, glued, mode)

    def _write_raw_locked(self, fd: int, data: bytes, *, sync: bool) -> tuple[int, bool]:
        """Write ``data`` (whole lines) at the end, only when the file ends in a newline; return
        where it landed and whether it landed after a partial line after all (rule 4)."""
        while os.fstat(fd).st_size != self.end:  # the last check before writing: keep it tight
            tail.settle(self, fd, self.tail_grace)
        before = self.end
        write_all(fd, data)
        if sync:
            os.fsync(fd)
        start = os.lseek(fd, 0, os.SEEK_CUR) - len(data)
        if start == before:
            return start, False
        rfd = open_session_fd(self.path)
        try:
            previous = os.pread(rfd, 1, start - 1)
        finally:
            os.close(rfd)
        return start, previous != b"\n"

    def _heal_locked(
        self,
        fd: int,
        prepared: list[dict[str, Any]],
        lines: list[bytes],
        glued: list[tuple[int, int]],
        mode: Durability,
    ) -> None:
        """Our data landed after another writer's partial line (rule 4): append that writer's line
        again whole, and our entries the glued line hid.

        A glued write hides only its first line (the rest of one ``write()`` lands whole after it),
        so a heal that is glued again in its turn is healed the same way: that first line and the
        line it split are written again, a bounded number of times."""
        sync = mode is not Durability.FLUSH
        rejoined = [line for start, end in glued if (line := self._rejoin_locked(fd, start, end))]
        pending = [line for entry, line in zip(prepared, lines, strict=True) if entry["id"] not in self.index]
        pending += rejoined
        for _ in range(HEAL_ATTEMPTS):
            if not pending:
                return
            data = b"".join(pending)
            start, again = self._write_raw_locked(fd, data, sync=sync)
            self.refresh()
            if not again:
                return
            found = self._rejoin_locked(fd, start, start + len(data))
            pending = [pending[0], *([found] if found else [])]

    def _rejoin_locked(self, fd: int, start: int, end: int) -> bytes:
        """The other writer's line that our write ``[start, end)`` split, whole (b"" when nothing
        was lost or it cannot be found); each case reported."""
        found = tail.await_rejoin(self, fd, start, end, self.tail_grace)  # the other writer finishes
        if found is None:
            message = "an append landed inside another writer's line; that line could not be rejoined"
        elif not found:
            message = "an append landed after another writer's object before its newline; both are served"
        else:
            message = "an append landed inside another writer's line; appended that line again, whole"
        self.diagnostics.append(Diagnostic(self.path, self.line_at(start), message, severity="warning", kind="glued"))
        return found or b""

    def move_leaf(self, entry_id: str | None) -> str:
        """Persist a leaf move: a ``custom`` entry pi ignores in context, parented at the target.

        pi takes the last line as its leaf, so pi reopening the file lands on ``entry_id`` too.
        """
        if entry_id is not None:
            self.require(entry_id)
        return self.append(
            [{"type": "custom", "customType": LEAF_MARKER, "data": {"leafId": entry_id}}],
            parent_id=entry_id,
        )[0]

    def close(self) -> None:
        self._close_append_fd()
        super().close()

    def take_lock(self, *, wait: bool = True) -> bool:
        """Take the write lock ahead of an append, waiting as :meth:`append` would, and keep it: the
        next :meth:`append` (or :meth:`settle`) in this process finds it taken and releases it when
        done; :meth:`release_lock` releases it if none comes.  Nothing in memory changes, so readers
        of this object need not wait for it.  With ``wait`` false it only tries, without blocking
        (fit for an event loop): True when the lock is now held (or nothing is ever written here)."""
        if self.read_only:
            return True  # another agent's transcript: never opened for writing, never locked
        if not self._write_lock.acquire(blocking=wait):
            return False
        try:
            fd = self._lock_fd()
            if not wait:
                return locks.try_acquire(fd)
            locks.acquire(fd, timeout=self.lock_timeout, stop=self._stop_waiting, path=self.path)
            return True
        except OSError as exc:
            raise SessionError(f"cannot lock for appending: {exc.strerror or exc}", path=self.path) from exc
        finally:
            self._write_lock.release()

    def release_lock(self) -> None:
        """Release the write lock if :meth:`take_lock` kept it (nothing happens otherwise)."""
        with self._write_lock:
            if self._append_fd is not None:
                locks.release(self._append_fd)

    def stop_waiting(self) -> None:
        """Give up every wait for the write lock, now and later (the daemon is shutting down)."""
        self._stop_waiting.set()

    def _lock_fd(self) -> int:
        if self._append_fd is None:
            try:
                self._append_fd = open_regular(self.path, os.O_WRONLY | os.O_APPEND)
            except OSError as exc:
                raise SessionError(f"cannot open for appending: {exc.strerror}", path=self.path) from exc
        return self._append_fd

    def _close_append_fd(self) -> None:
        if self._append_fd is not None:
            try:
                os.close(self._append_fd)
            finally:
                self._append_fd = None

    def _catch_up_locked(self, fd: int) -> bool:
        """Under the lock: read what others appended, wait out (or set aside) a partial tail (see
        :mod:`ctxd.store.tail`), and migrate an old file to v3. False if the file was replaced and
        the caller must reopen it."""
        st = os.fstat(fd)
        try:
            current = os.stat(self.path)
        except FileNotFoundError as exc:
            raise SessionError("session file disappeared", path=self.path) from exc
        identity = (st.st_dev, st.st_ino)
        if (current.st_dev, current.st_ino) != identity or identity != self.identity:
            return False
        self.refresh()  # a file rewritten in place is read again before anything is written after it
        if self.version > CURRENT_VERSION:
            raise UnsupportedVersionError(
                f"version {self.version} is newer than ctxd supports; not writing", path=self.path
            )
        try:
            tail.settle(self, fd, self.tail_grace)
        except tail.Replaced:
            return False
        if self.version < CURRENT_VERSION:
            self._migrate_on_disk()
            return False
        return True

    def _migrate_on_disk(self) -> None:
        """Rewrite a v1/v2 file as v3, atomically, keeping every line (even malformed ones) in place."""
        rfd = open_session_fd(self.path)
        try:
            size = os.fstat(rfd).st_size
            raw = os.pread(rfd, size, 0)
        finally:
            os.close(rfd)
        bodies = self.entries(range(len(self.heads)))
        by_line: dict[int, list[bytes]] = {}
        for line, body in zip(self.lines, bodies, strict=True):
            by_line.setdefault(line, []).append(dumps_line(body))
        header = dict(self.header)
        header["version"] = CURRENT_VERSION
        out: list[bytes] = [dumps_line(header)]
        for number, text in enumerate(raw.split(b"\n")[1:-1], start=2):
            # Recovered lines (two objects run together) become one line each; malformed or
            # blank lines are kept byte for byte.
            out.extend(by_line.get(number, [text + b"\n"]))
        stat = os.stat(self.path)
        atomic_write(self.path, b"".join(out), mode=stat.st_mode & 0o777)
        self.diagnostics.append(
            Diagnostic(
                self.path, 1, f"migrated from version {self.version} to {CURRENT_VERSION}", "info", kind="migrated"
            )
        )

    def _prepare(
        self,
        entries: Sequence[dict[str, Any]],
        parent_id: str | None,
        chain: bool,
        fields: Sequence[tuple[str, str]] | None = None,
    ) -> tuple[list[dict[str, Any]], list[bytes]]:
        if parent_id is LEAF:
            parent_id = self.leaf_id()
        elif parent_id is not None:
            self.require(parent_id)
        now = iso_timestamp(self.clock())
        fresh: set[str] = set()

        def taken(candidate: str) -> bool:
            return candidate in self.index or candidate in fresh

        prepared: list[dict[str, Any]] = []
        parent = parent_id
        for i, e in enumerate(entries):
            at = fields[i][0] if fields is not None else f"entries[{i}]"
            entry = {"type": e["type"]}
            entry.update(e)
            eid = entry.get("id")
            if eid is None:
                eid = new_entry_id(taken)
            elif taken(eid):
                raise InvalidEntryError(f"entry id {eid!r} already exists", entryId=eid, field=f"{at}.id")
            entry["id"] = eid
            if "parentId" not in e:
                entry["parentId"] = parent
            elif entry["parentId"] is not None and not taken(entry["parentId"]):
                # Only entries already in the file or earlier in the batch: no self-parent, no cycle.
                missing = entry["parentId"]
                raise InvalidEntryError(f"parentId {missing!r} does not exist", entryId=eid, field=f"{at}.parentId")
            fresh.add(eid)
            entry.setdefault("timestamp", now)
            prepared.append(entry)
            if chain:
                parent = eid
        lines: list[bytes] = []
        for i, e in enumerate(prepared):
            at = fields[i][0] if fields is not None else f"entries[{i}]"
            try:
                lines.append(dumps_line(e))
            except RecursionError as exc:
                raise InvalidEntryError(f"{at}: nests too deeply", field=at, index=i) from exc
            except (msgspec.EncodeError, TypeError, ValueError, OverflowError) as exc:  # from Python callers only
                raise InvalidEntryError(f"{at}: cannot be written as JSON: {exc}", field=at, index=i) from exc
            check_depth(lines[-1], at, i)
        return prepared, lines

    def _index_own(self, prepared: list[dict[str, Any]], lines: list[bytes], start: int) -> None:
        offset = start
        for entry, line_bytes in zip(prepared, lines, strict=True):
            length = len(line_bytes) - 1
            try:
                head = decode_head(line_bytes[:-1])
            except Exception:
                head = head_from_dict(entry)
            i = len(self.heads)
            if head.type == "custom" and head.customType == PIN_MARKER:
                self.pin_entries.append(i)
            self.heads.append(head)
            self.offsets.append(offset)
            self.lengths.append(length)
            self.lines.append(self.next_line)
            self.index[entry["id"]] = i
            self.next_line += 1
            offset += length + 1
        self.end = offset
        self._remark()
