"""Anchors: how a search hit, a summary or a model names an entry of a session for ``history/expand``.

An anchor is one of:

- an entry id, exactly;
- a unique prefix of an entry id, of at least :data:`MIN_PREFIX` characters (Claude Code's ids are 36-character
  uuids; the offline summary names entries by their first 8 characters). The entries ctxd makes from one
  Claude Code line (``<uuid>``, ``<uuid>.1``, ...) share a prefix: it names the first of them;
- ``L<line>``: the entry on that 1-based line of the session file (the header is line 1), for files whose
  entries have no ids (pi v1 sessions: the ids ctxd derives for them are not in the file).

:func:`anchor_of` is the anchor a search hit carries; :func:`resolve` finds the entry an anchor names.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from ctxd.errors import EntryNotFoundError
from ctxd.formats.lazy_re import lazy_compile

if TYPE_CHECKING:
    from ctxd.tree.session import Session

MIN_PREFIX = 8
"""The shortest prefix of an entry id that names it."""
MAX_CANDIDATES = 5
"""Entries an ambiguous prefix's error names (the count says how many more)."""
_LINE_RE = lazy_compile(r"^[Ll](\d{1,12})$")


class AnchorError(ValueError):
    """An anchor that names more than one entry (invalid params: the message names the candidates)."""

    def __init__(self, message: str, candidates: list[str]) -> None:
        super().__init__(message)
        self.candidates = candidates


def anchor_of(entry_id: str, line: int) -> str:
    """The anchor of an indexed entry: its id, or ``L<line>`` when the file gives it none."""
    return entry_id or f"L{line}"


def resolve(session: Session, anchor: str, *, name: str = "entryId") -> int:
    """The index of the entry ``anchor`` names (see the module doc). Raises EntryNotFoundError when it names
    none, :class:`AnchorError` when a prefix names several (``name``: the parameter, for the message)."""
    file = session.file
    found = file.index.get(anchor)
    if found is not None:
        return found
    line = _LINE_RE.match(anchor)
    if line is not None:
        return _at_line(session, int(line.group(1)), anchor)
    if len(anchor) < MIN_PREFIX:
        raise EntryNotFoundError(anchor, path=file.path)
    matches = [i for i, head in enumerate(file.heads) if head.id and head.id.startswith(anchor)]
    if len(matches) > 1:  # one Claude Code line's entries (<uuid>, <uuid>.1, ...): its first
        first = file.heads[matches[0]].id or ""
        if all((file.heads[i].id or "").startswith(f"{first}.") for i in matches[1:]):
            matches = matches[:1]
    if not matches:
        raise EntryNotFoundError(anchor, path=file.path)
    if len(matches) > 1:
        named = [f"{file.heads[i].id} (line {file.lines[i]})" for i in matches[:MAX_CANDIDATES]]
        more = f" and {len(matches) - MAX_CANDIDATES} more" if len(matches) > MAX_CANDIDATES else ""
        raise AnchorError(
            f"{name} {anchor!r} is the start of {len(matches)} entry ids: {', '.join(named)}{more}; "
            "give more of the id",
            [file.heads[i].id or "" for i in matches],
        )
    return matches[0]


def _at_line(session: Session, line: int, anchor: str) -> int:
    file = session.file
    lines = file.lines
    k = bisect.bisect_left(lines, line)
    if k < len(lines) and lines[k] == line:
        return k
    raise EntryNotFoundError(anchor, path=file.path)
