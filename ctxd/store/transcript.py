"""Other agents' transcripts (Claude Code, Codex) as read-only session files.

The adapters in :mod:`ctxd.formats.transcripts` map a whole file onto pi v3 entries; this class
serves the mapped entries through :class:`SessionFile`'s interface, so the tree, context building,
dry-run compaction and the editors work on them unchanged.  Nothing is ever written to these files.

A refresh re-maps the file: appended lines usually only add entries (reported as such), but a
line can also grow an earlier entry (one API response spread over several lines) or be inserted
mid-file (Claude subagent files between two snapshots); those are reported as a reload.
"""

from __future__ import annotations

import os
from typing import Any

from ctxd.errors import BadHeaderError, ReadOnlySessionError, SessionError
from ctxd.formats.codec import head_from_dict
from ctxd.formats.transcripts import Transcript, detect, map_transcript
from ctxd.store.files import open_regular, open_session_fd, read_bounded
from ctxd.store.reader import DECODED
from ctxd.store.scan import Diagnostic
from ctxd.store.session_file import RefreshResult, SessionFile

MAX_TRANSCRIPT = 512 << 20
"""The largest transcript mapped (it is read whole)."""
FINGERPRINT = 4096
"""Bytes before the consumed end compared on refresh, to notice a rewrite or a mid-file insertion."""


class TranscriptFile(SessionFile):
    read_only = True

    def __init__(self, path: str, **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        self.kind = ""
        self._leaf: str | None = None
        self._fingerprint = b""
        self._stamp: tuple[int, int, int] = (-1, -1, -1)
        """Size, mtime and ctime when last read: a write that keeps the size (an edit in place) is seen."""
        self._bodies_list: list[dict[str, Any]] = []

    def load(self) -> None:
        data, identity, stamp = self._read()
        transcript = map_transcript(data, self.path)
        if transcript is None:
            raise BadHeaderError("not a pi, Claude Code or Codex session file; refusing it", path=self.path, line=1)
        self._reset()  # only now: a file that fails to map leaves the last good state
        self.identity = identity
        self._install(transcript, data)
        self._stamp = stamp
        self.generation += 1

    def release_heads(self) -> None:
        """Nothing to let go: a transcript's entries exist only as mapped (they have no lines of their own)."""

    def held_bytes(self) -> int:
        """The index, and every entry's body as mapped (about twice the file's bytes)."""
        return super().held_bytes() + DECODED * self.end

    def _unchanged(self, st: os.stat_result) -> bool:
        stamp = (st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        return (st.st_dev, st.st_ino) == self.identity and st.st_size == self.end and stamp == self._stamp

    def changed_since_read(self) -> bool:
        try:
            return not self._unchanged(os.stat(self.path))
        except OSError:
            return True

    def refresh(self) -> RefreshResult:
        try:
            st = os.stat(self.path)
        except FileNotFoundError as exc:
            raise SessionError("session file disappeared", path=self.path) from exc
        if self._unchanged(st):
            return RefreshResult(range(len(self.heads), len(self.heads)))
        data, identity, stamp = self._read()
        start = max(0, self.end - FINGERPRINT)
        same_prefix = identity == self.identity and data[start : self.end] == self._fingerprint
        transcript = map_transcript(data, self.path)
        if transcript is None:
            raise BadHeaderError("the file is no longer a session transcript", path=self.path, line=1)
        old = self._bodies_list
        new = transcript.entries
        if same_prefix and len(new) >= len(old) and new[: len(old)] == old:
            first = len(self.heads)
            self._extend(transcript, first)
            self._leaf = transcript.leaf_id
            self.end = data.rfind(b"\n") + 1
            self._fingerprint = data[max(0, self.end - FINGERPRINT) : self.end]
            self._diagnose(transcript)
            self._stamp = stamp
            return RefreshResult(range(first, len(self.heads)))
        self._reset()
        self.identity = identity
        self._install(transcript, data)
        self._stamp = stamp
        self.generation += 1
        return RefreshResult(range(len(self.heads)), reloaded=True)

    def leaf_index(self) -> int | None:
        if self._leaf is not None and self._leaf in self.index:
            return self.index[self._leaf]
        return super().leaf_index()

    def append(self, entries: Any, **kwargs: Any) -> list[str]:
        raise ReadOnlySessionError(
            f"{self.kind or 'this'} transcript is read-only: fork it to a pi session to write", path=self.path
        )

    def move_leaf(self, entry_id: str | None) -> str:
        self.append([])
        raise AssertionError("unreachable")  # pragma: no cover

    # --- internals ----------------------------------------------------------------------------

    def _read(self) -> tuple[bytes, tuple[int, int], tuple[int, int, int]]:
        fd = open_session_fd(self.path)
        try:
            st = os.fstat(fd)
            data = read_bounded(fd, MAX_TRANSCRIPT + 1)
        finally:
            os.close(fd)
        if len(data) > MAX_TRANSCRIPT:
            message = f"larger than {MAX_TRANSCRIPT >> 20} MB: too large to map as a transcript"
            raise SessionError(message, path=self.path)
        return data, (st.st_dev, st.st_ino), (st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def _install(self, transcript: Transcript, data: bytes) -> None:
        self.kind = transcript.kind
        self.header = dict(transcript.header)
        self.version = 3
        self._bodies_list = []
        self._extend(transcript, 0)
        self._leaf = transcript.leaf_id
        self.end = data.rfind(b"\n") + 1
        self._fingerprint = data[max(0, self.end - FINGERPRINT) : self.end]
        self.next_line = data.count(b"\n", 0, self.end) + 1
        self._diagnose(transcript)

    def _extend(self, transcript: Transcript, first: int) -> None:
        for entry, line in zip(transcript.entries[first:], transcript.lines[first:], strict=True):
            i = len(self.heads)
            self.heads.append(head_from_dict(entry))
            self.offsets.append(-1)
            self.lengths.append(0)
            self.lines.append(line)
            self._bodies[i] = entry
            self._bodies_list.append(entry)
            if isinstance(entry.get("id"), str):
                self.index[entry["id"]] = i

    def _diagnose(self, transcript: Transcript) -> None:
        known = {(d.line, d.message) for d in self.diagnostics}
        for line, reason in transcript.diagnostics:
            if (line, reason) not in known:
                self.diagnostics.append(Diagnostic(self.path, line, reason))


def sniff(path: str) -> str | None:
    """The format of a session file from its first line: "pi", "claude", "codex" or None (also for
    anything that is not a regular file: opening it is then refused with a clear error)."""
    try:
        fd = open_regular(path)
    except (OSError, SessionError):
        return None
    try:
        head = os.pread(fd, 1 << 16, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    first = head.split(b"\n", 1)[0]
    return detect(first) if first.strip() else None
