"""Reading entries' bodies: on demand, checked once, repaired and reported when damaged.

:class:`BodyReader` is the part of :class:`ctxd.store.reader.SessionReader` that decodes the body of an
indexed entry from its line. A line is decoded with care (:func:`ctxd.store.scan.decode_bounded`: pruned
when nested too deep, invalid UTF-8 replaced, each repair reported once) until it was read once and
needed nothing, or was validated whole when it was indexed (the native scanner: ``ctxd.store.native``);
it is then noted clean and decoded plainly. A line noted clean that no longer decodes (changed on disk
unnoticed) is read with care again. A repaired body is served from memory from then on.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

from ctxd.formats.codec import CURRENT_VERSION, decode_any, dumps_line
from ctxd.formats.migrate import migrate_body
from ctxd.store.files import open_session_fd
from ctxd.store.heads import Heads
from ctxd.store.scan import Diagnostic, decode_bounded, note_kind

__all__ = ["BodyReader"]


class BodyReader:
    """Bodies of the entries a reader indexed (mixed into :class:`ctxd.store.reader.SessionReader`,
    which owns the fields below)."""

    path: str
    version: int
    heads: Heads
    offsets: array[int]
    lengths: array[int]
    lines: array[int]
    diagnostics: list[Diagnostic]
    _bodies: dict[int, dict[str, Any]]
    _checked: bytearray

    def entry(self, i: int) -> dict[str, Any]:
        """The decoded body of entry ``i`` (a fresh dict each call), migrated to v3."""
        body = self._bodies.get(i)
        if body is not None:
            return _copy(body)
        fd = open_session_fd(self.path)
        try:
            data = os.pread(fd, self.lengths[i], self.offsets[i])
        finally:
            os.close(fd)
        return self._decode_body(i, data)

    def entries(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """Bodies of several entries with one open file (in the order given)."""
        out: list[dict[str, Any]] = []
        fd = open_session_fd(self.path)
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

    def body_checked(self, i: int) -> bool:
        """Whether entry ``i``'s line was read once and is served as it is (no problem to report)."""
        checked = self._checked
        return i < len(checked) and checked[i] == 1 and i not in self._bodies

    def clean_flags(self) -> bytearray:
        """Per entry, 1 when its line was read once and is served as it is (entries past its end: not
        read yet); see :meth:`body_checked` (which also excludes the entries served from memory)."""
        return self._checked

    def recovered(self, i: int) -> bool:
        """Whether entry ``i``'s body is served from memory (a line recovered or repaired when read)."""
        return i in self._bodies

    def note_clean_all(self, indices: Iterable[int]) -> None:
        """The lines of entries ``indices`` were read and need nothing (what :meth:`entry` notes
        after a full read)."""
        checked = self._checked
        if len(checked) < len(self.heads):
            checked.extend(bytes(len(self.heads) - len(checked)))
        for i in indices:
            checked[i] = 1

    def _decode_body(self, i: int, data: bytes) -> dict[str, Any]:
        """Entry ``i``'s body from its line ``data`` (see the module's docstring)."""
        checked = self._checked
        if i < len(checked) and checked[i]:
            try:
                body = decode_any(data)  # read before (or validated when indexed): servable as it is
            except (ValueError, RecursionError):  # changed on disk since, unnoticed: read it with care
                checked[i] = 0
                return self._decode_body(i, data)
        else:
            try:
                body, note = decode_bounded(data)
            except ValueError as exc:  # changed on disk under us: never crash on it
                body, note = {"type": self.heads[i].type, "id": self.heads[i].id}, f"unreadable now: {exc}"
            if note is not None:
                self._report(i, note)
                if isinstance(body, dict):
                    self._bodies[i] = body  # served from here from now on
                    body = _copy(body)
            else:
                if i >= len(checked):
                    checked.extend(bytes(len(self.heads) - len(checked)))
                checked[i] = 1
        if not isinstance(body, dict):  # cannot happen for an indexed line, but never crash on it
            return {"type": self.heads[i].type}
        if self.version < CURRENT_VERSION:
            return migrate_body(self.version, body, self.heads[i])
        return body

    def _report(self, i: int, note: str) -> None:
        """A problem found while reading entry ``i``'s body, reported once."""
        line = self.lines[i]
        if not any(d.line == line and d.message == note for d in self.diagnostics):
            kind = note_kind(note) if not note.startswith("unreadable") else "unreadable"
            self.diagnostics.append(Diagnostic(self.path, line, note, "warning", self.heads[i].id, kind))


def _copy(body: dict[str, Any]) -> dict[str, Any]:
    return decode_any(dumps_line(body))  # type: ignore[no-any-return]
