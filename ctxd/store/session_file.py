"""One session file: :class:`SessionReader` plus safe appends.

Writing happens only under an exclusive advisory lock, after catching up with whatever other
processes appended, and never after a final line that lacks its newline: such a line is completed
(if it is a whole JSON object) or moved to a sidecar file.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from ctxd.errors import InvalidEntryError, SessionError, UnsupportedVersionError
from ctxd.formats.codec import CURRENT_VERSION, decode_any, decode_head, dumps_line, head_from_dict
from ctxd.store.files import Clock, atomic_write, iso_timestamp, locked, new_entry_id, write_all
from ctxd.store.reader import LEAF_MARKER, Durability, RefreshResult, SessionReader
from ctxd.store.scan import Diagnostic

__all__ = ["LEAF", "LEAF_MARKER", "Durability", "RefreshResult", "SessionFile"]


class _Leaf:
    def __repr__(self) -> str:
        return "LEAF"


LEAF: Any = _Leaf()
"""Default parent for appends: the session's current leaf, read under the lock."""


class SessionFile(SessionReader):
    """A pi session file that can be appended to. Not safe for concurrent use without the
    caller's own locking, except :meth:`append`, which serialises itself (across threads and
    processes)."""

    def __init__(self, path: str, *, durability: Durability = Durability.FLUSH, clock: Clock = time.time):
        super().__init__(path, durability=durability, clock=clock)
        self._write_lock = threading.Lock()
        self._append_fd: int | None = None

    def append(
        self,
        entries: Sequence[dict[str, Any]],
        *,
        parent_id: str | None = LEAF,
        durability: Durability | None = None,
        chain: bool = True,
    ) -> list[str]:
        """Append entries as one batch and return their ids once they are durable as configured.

        Missing ``id``, ``parentId`` and ``timestamp`` are filled in: the first entry's parent is
        ``parent_id`` (default: the leaf, read under the lock) and, with ``chain``, each further
        entry's parent is the previous one.  Entries are validated before anything is written.
        """
        if not entries:
            return []
        for e in entries:
            if not isinstance(e, dict) or not isinstance(e.get("type"), str) or e.get("type") == "session":
                raise InvalidEntryError("each entry must be an object with a string 'type' (not 'session')")
        mode = durability or self.durability
        with self._write_lock:
            for _ in range(8):
                fd = self._lock_fd()
                try:
                    with locked(fd):
                        if self._catch_up_locked(fd):
                            return self._write_locked(fd, entries, parent_id, chain, mode)
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
    ) -> list[str]:
        prepared, lines = self._prepare(entries, parent_id, chain)
        data = b"".join(lines)
        before = self._end  # caught up under the lock: the file ends here
        if mode is Durability.FSYNC and len(lines) > 1:
            for one in lines:
                write_all(fd, one)
                os.fsync(fd)
        else:
            write_all(fd, data)
            if mode is not Durability.FLUSH:
                os.fsync(fd)
        after = os.fstat(fd).st_size
        if after == before + len(data):
            self._index_own(prepared, lines, before)
        else:
            self.refresh()  # someone without the lock (pi) wrote meanwhile
        return [e["id"] for e in prepared]

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

    def _lock_fd(self) -> int:
        if self._append_fd is None:
            try:
                self._append_fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
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
        """Under the lock: read what others appended, repair a torn tail, and migrate an old file
        to v3. False if the file was replaced and the caller must reopen it."""
        st = os.fstat(fd)
        try:
            current = os.stat(self.path)
        except FileNotFoundError as exc:
            raise SessionError("session file disappeared", path=self.path) from exc
        identity = (st.st_dev, st.st_ino)
        if (current.st_dev, current.st_ino) != identity or identity != self._identity:
            return False
        if self.version > CURRENT_VERSION:
            raise UnsupportedVersionError(
                f"version {self.version} is newer than ctxd supports; not writing", path=self.path
            )
        size = st.st_size
        if size != self._end:
            self.refresh()
            size = os.fstat(fd).st_size
        if size > self._end:
            self._repair_tail(fd, size)
        if self.version < CURRENT_VERSION:
            self._migrate_on_disk()
            return False
        return True

    def _repair_tail(self, fd: int, size: int) -> None:
        rfd = self._open_read()
        try:
            tail = os.pread(rfd, size - self._end, self._end)
        finally:
            os.close(rfd)
        line = self._next_line
        try:
            obj = decode_any(tail)
        except Exception:
            obj = None
        if isinstance(obj, dict):
            write_all(fd, b"\n")
            os.fsync(fd)
            self.diagnostics.append(
                Diagnostic(self.path, line, "final line lacked its newline; completed it", severity="info")
            )
            self.refresh()
            return
        sidecar = self.path + ".torn"
        sfd = os.open(sidecar, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            write_all(sfd, tail + b"\n")
            os.fsync(sfd)
        finally:
            os.close(sfd)
        os.ftruncate(fd, self._end)
        os.fsync(fd)
        self.diagnostics.append(
            Diagnostic(
                self.path,
                line,
                f"torn final line ({len(tail)} bytes, not JSON) moved to {sidecar}",
                severity="warning",
            )
        )

    def _migrate_on_disk(self) -> None:
        """Rewrite a v1/v2 file as v3, atomically, keeping every line (even malformed ones) in place."""
        rfd = self._open_read()
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
            Diagnostic(self.path, 1, f"migrated from version {self.version} to {CURRENT_VERSION}", severity="info")
        )

    def _prepare(
        self, entries: Sequence[dict[str, Any]], parent_id: str | None, chain: bool
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
        for e in entries:
            entry = {"type": e["type"]}
            entry.update(e)
            eid = entry.get("id")
            if not isinstance(eid, str) or not eid:
                eid = new_entry_id(taken)
            elif taken(eid):
                raise InvalidEntryError(f"entry id {eid!r} already exists", entryId=eid)
            fresh.add(eid)
            entry["id"] = eid
            if "parentId" not in e:
                entry["parentId"] = parent
            elif entry["parentId"] is not None and not taken(entry["parentId"]):
                raise InvalidEntryError(f"parentId {entry['parentId']!r} does not exist", entryId=eid)
            entry.setdefault("timestamp", now)
            prepared.append(entry)
            if chain:
                parent = eid
        return prepared, [dumps_line(e) for e in prepared]

    def _index_own(self, prepared: list[dict[str, Any]], lines: list[bytes], start: int) -> None:
        offset = start
        for entry, line_bytes in zip(prepared, lines, strict=True):
            length = len(line_bytes) - 1
            try:
                head = decode_head(line_bytes[:-1])
            except Exception:
                head = head_from_dict(entry)
            i = len(self.heads)
            self.heads.append(head)
            self.offsets.append(offset)
            self.lengths.append(length)
            self.lines.append(self._next_line)
            self.index[entry["id"]] = i
            self._next_line += 1
            offset += length + 1
        self._end = offset
