"""One session file: its index, incremental refresh, on-demand bodies, and safe appends.

Reading never modifies the file.  Writing happens only under an exclusive advisory lock, after
catching up with whatever other processes appended, and never after a final line that lacks its
newline: such a line is completed (if it is a whole JSON object) or moved to a sidecar file.
"""

from __future__ import annotations

import enum
import gc
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import attrs

from ctxd.errors import (
    BadHeaderError,
    EntryNotFoundError,
    InvalidEntryError,
    SessionError,
    UnsupportedVersionError,
)
from ctxd.formats.codec import CURRENT_VERSION, LineHead, decode_any, decode_head, dumps_line, head_from_dict
from ctxd.formats.migrate import migrate_body, migrate_head_roles, migrate_heads
from ctxd.store.files import Clock, atomic_write, iso_timestamp, locked, new_entry_id, write_all
from ctxd.store.scan import Diagnostic, ScannedLine, scan

LEAF_MARKER = "ctxd.leaf"
"""customType of the ``custom`` entry ctxd writes to move the leaf: pi skips it in context."""


class Durability(enum.Enum):
    FLUSH = "flush"
    """Each append reaches the OS before it is acknowledged (survives a crash of ctxd)."""
    FSYNC = "fsync"
    """Each entry is fsynced (survives a power loss)."""
    FSYNC_BATCH = "fsync-batch"
    """Each append call (a batch) is fsynced once."""


class _Leaf:
    def __repr__(self) -> str:
        return "LEAF"


LEAF: Any = _Leaf()
"""Default parent for appends: the session's current leaf, read under the lock."""


@attrs.frozen
class RefreshResult:
    added: range
    """Indices of entries read by this refresh."""
    reloaded: bool = False
    """The file was truncated or replaced, so everything was read again."""


class SessionFile:
    """An indexed pi session file. Not safe for concurrent use without the caller's own locking
    except :meth:`append`, which serialises itself (across threads and processes)."""

    read_only = False
    """True for other agents' transcripts (see :mod:`ctxd.store.transcript`)."""

    def __init__(self, path: str, *, durability: Durability = Durability.FLUSH, clock: Clock = time.time):
        self.path = os.path.abspath(path)
        self.durability = durability
        self.clock = clock
        self._write_lock = threading.Lock()
        self._append_fd: int | None = None
        self.generation = 0
        """Bumped on every full reload: cached views of this file must be rebuilt."""
        self._reset()

    def _reset(self) -> None:
        self.header: dict[str, Any] = {}
        self.version = CURRENT_VERSION
        self.heads: list[LineHead] = []
        self.offsets: list[int] = []
        self.lengths: list[int] = []
        self.lines: list[int] = []
        self.index: dict[str, int] = {}
        self.diagnostics: list[Diagnostic] = []
        self._bodies: dict[int, dict[str, Any]] = {}
        self._end = 0
        self._next_line = 2
        self._identity: tuple[int, int] = (0, 0)
        self._header_bytes = b""

    # --- reading ------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str, **kwargs: Any) -> SessionFile:
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

    def load(self) -> None:
        """Read and index the whole file (raises BadHeaderError if line 1 is not a session header)."""
        fd = self._open_read()
        saved = dict(self.__dict__)
        try:
            self._reset()
            st = os.fstat(fd)
            self._identity = (st.st_dev, st.st_ino)
            self._read_header(fd)
            gc_was_enabled = gc.isenabled()
            gc.disable()  # a hundred thousand small objects: the collector would dominate
            try:
                self._scan_from(fd, self._end)
            finally:
                if gc_was_enabled:
                    gc.enable()
            self._finish_migration(0)
            self.generation += 1
        except BaseException:
            # A reload that fails (a file caught half-rewritten) leaves the last good state.
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise
        finally:
            os.close(fd)

    def refresh(self) -> RefreshResult:
        """Read only what was appended since the last read; reload fully if the file was truncated
        or replaced."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError as exc:
            raise SessionError("session file disappeared", path=self.path) from exc
        if st.st_size == self._end and (st.st_dev, st.st_ino) == self._identity:
            return RefreshResult(range(len(self.heads), len(self.heads)))
        if (st.st_dev, st.st_ino) != self._identity or st.st_size < self._end or self._header_changed():
            self.load()
            return RefreshResult(range(len(self.heads)), reloaded=True)
        fd = self._open_read()
        try:
            start = len(self.heads)
            self._scan_from(fd, self._end)
            self._finish_migration(start)
            return RefreshResult(range(start, len(self.heads)))
        finally:
            os.close(fd)

    def pending_bytes(self) -> int:
        """Bytes after the last complete line (a line still being written, or torn)."""
        try:
            return max(0, os.stat(self.path).st_size - self._end)
        except FileNotFoundError:
            return 0

    def entry(self, i: int) -> dict[str, Any]:
        """The decoded body of entry ``i`` (a fresh dict each call), migrated to v3."""
        body = self._bodies.get(i)
        if body is not None:
            return _copy(body)
        fd = self._open_read()
        try:
            data = os.pread(fd, self.lengths[i], self.offsets[i])
        finally:
            os.close(fd)
        return self._decode_body(i, data)

    def entries(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """Bodies of several entries with one open file (in the order given)."""
        out: list[dict[str, Any]] = []
        fd = self._open_read()
        try:
            for i in indices:
                body = self._bodies.get(i)
                if body is not None:
                    out.append(_copy(body))
                else:
                    out.append(self._decode_body(i, os.pread(fd, self.lengths[i], self.offsets[i])))
        finally:
            os.close(fd)
        return out

    def entry_by_id(self, entry_id: str) -> dict[str, Any]:
        return self.entry(self.require(entry_id))

    def require(self, entry_id: str) -> int:
        i = self.index.get(entry_id)
        if i is None:
            raise EntryNotFoundError(entry_id, path=self.path)
        return i

    def line_of(self, entry_id: str) -> int:
        return self.lines[self.require(entry_id)]

    def leaf_index(self) -> int | None:
        """pi's leaf: the last entry in file order; a ctxd leaf marker stands for its parent."""
        if not self.heads:
            return None
        last = len(self.heads) - 1
        head = self.heads[last]
        if head.type == "custom" and head.customType == LEAF_MARKER and head.parentId is not None:
            return self.index.get(head.parentId, last)
        return last

    def leaf_id(self) -> str | None:
        i = self.leaf_index()
        return None if i is None else self.heads[i].id

    # --- writing ------------------------------------------------------------------------------

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

    # --- internals ----------------------------------------------------------------------------

    def _open_read(self) -> int:
        try:
            return os.open(self.path, os.O_RDONLY)
        except FileNotFoundError as exc:
            raise SessionError("no such session file", path=self.path) from exc
        except OSError as exc:
            raise SessionError(f"cannot read: {exc.strerror}", path=self.path) from exc

    def _read_header(self, fd: int) -> None:
        first = b""
        pos = 0
        while b"\n" not in first:
            chunk = os.pread(fd, 65536, pos)
            if not chunk:
                break
            first += chunk
            pos += len(chunk)
        nl = first.find(b"\n")
        if not first.strip():
            raise BadHeaderError("the file is empty: no session header", path=self.path, line=1)
        if nl < 0:
            raise BadHeaderError("the header line is incomplete (no newline yet)", path=self.path, line=1)
        raw = first[:nl]
        try:
            header = decode_any(raw)
        except Exception as exc:
            raise BadHeaderError(f"line 1 is not JSON ({exc}); refusing the file", path=self.path, line=1) from exc
        if not isinstance(header, dict) or header.get("type") != "session":
            raise BadHeaderError(
                "line 1 is not a session header (type 'session'); refusing the file", path=self.path, line=1
            )
        if not isinstance(header.get("id"), str) or not header["id"]:
            raise BadHeaderError("the session header has no id; refusing the file", path=self.path, line=1)
        version = header.get("version", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise BadHeaderError(f"the header's version {version!r} is not a positive integer", path=self.path, line=1)
        if version > CURRENT_VERSION:
            self.diagnostics.append(
                Diagnostic(self.path, 1, f"version {version} is newer than ctxd knows ({CURRENT_VERSION}); read-only")
            )
        self.header = header
        self.version = version
        self._header_bytes = bytes(raw[:256])
        self._end = nl + 1
        self._next_line = 2

    def _header_changed(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return True
        try:
            return os.pread(fd, len(self._header_bytes), 0) != self._header_bytes
        finally:
            os.close(fd)

    def _scan_from(self, fd: int, start: int) -> None:
        heads = self.heads
        index = self.index

        def bulk(new: list[LineHead], offsets: list[int], lengths: list[int], line: int) -> bool:
            ids = [h.id for h in new]
            if None in ids or "session" in [h.type for h in new]:
                return False
            first = len(heads)
            expected = len(index) + len(ids)
            index.update(zip(ids, range(first, first + len(ids)), strict=True))  # type: ignore[arg-type]
            if len(index) != expected:
                # A duplicate id: undo, and let the line-by-line path report it.
                index.clear()
                index.update((h.id, i) for i, h in enumerate(heads) if h.id is not None)
                return False
            heads.extend(new)
            self.offsets.extend(offsets)
            self.lengths.extend(lengths)
            self.lines.extend(range(line, line + len(new)))
            return True

        self._end, self._next_line = scan(fd, start, self._next_line, self.path, self._add, self.diagnostics, bulk)

    def _add(self, scanned: ScannedLine) -> None:
        head = scanned.head
        if self.version >= 2 and not head.id:
            self.diagnostics.append(
                Diagnostic(self.path, scanned.line, f"entry of type {head.type or '?'!r} has no id; skipped")
            )
            return
        if head.type == "session":
            self.diagnostics.append(Diagnostic(self.path, scanned.line, "a second session header; skipped"))
            return
        i = len(self.heads)
        if head.id:
            if head.id in self.index:
                self.diagnostics.append(
                    Diagnostic(self.path, scanned.line, f"duplicate id {head.id!r}; the later entry wins")
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

    def _decode_body(self, i: int, data: bytes) -> dict[str, Any]:
        body = decode_any(data)
        if not isinstance(body, dict):  # cannot happen for an indexed line, but never crash on it
            return {"type": self.heads[i].type}
        if self.version < CURRENT_VERSION:
            return migrate_body(self.version, body, self.heads[i])
        return body

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


def _copy(body: dict[str, Any]) -> dict[str, Any]:
    return decode_any(dumps_line(body))  # type: ignore[no-any-return]
