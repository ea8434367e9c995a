"""The history index: every session file under the roots, searchable with SQLite FTS5.

Incremental by file identity (:class:`ctxd.store.private.FileMark`): an unchanged file costs its
stat; a pi file that was only appended to costs its new lines; a transcript that was only appended to
is mapped again but only its entries from the last indexed one on are written (the last one may have
grown: Claude Code spreads one response over several lines); a truncated, replaced or rewritten file
is indexed again from scratch; a file that is gone leaves the index. Each file is written in one
transaction, so a search sees a file's old rows or its new ones, never half.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any, TypeVar

import attrs

from ctxd.errors import HistoryUnavailableError, SessionError
from ctxd.formats.codec import decode_any
from ctxd.formats.transcripts import detect, map_transcript
from ctxd.history.db import connect, default_path, guarded
from ctxd.history.extract import Item, item_of
from ctxd.history.opencode import KIND as OPENCODE
from ctxd.history.opencode import index_database
from ctxd.history.query import fts_match
from ctxd.history.rows import delete_rows, forget, insert_items
from ctxd.store.files import complete_chunks, open_regular, read_bounded
from ctxd.store.listing import iter_session_stats
from ctxd.store.private import FileMark

log = logging.getLogger(__name__)
T = TypeVar("T")

CHUNK = 8 << 20
"""Bytes of a pi file read at a time."""
MAX_TRANSCRIPT = 512 << 20
"""The largest transcript indexed (it is mapped whole, as ctxd reads it)."""


@attrs.frozen
class Hit:
    """One ranked search result."""

    path: str
    session: str
    agent: str
    archived: bool
    entryId: str
    line: int
    role: str
    snippet: str
    timestamp: str
    toolName: str
    score: float


@attrs.define
class Pass:
    """What one indexing pass did."""

    files: int = 0
    indexed: int = 0
    """Files (re)read."""
    entries: int = 0
    """Entries written."""
    removed: int = 0
    skipped: list[str] = attrs.field(factory=list)
    """Files that could not be read (vanished, not regular, busy database)."""

    def add(self, other: Pass) -> Pass:
        """This pass with ``other``'s work added (files, then opencode's database sessions)."""
        return Pass(
            self.files + other.files,
            self.indexed + other.indexed,
            self.entries + other.entries,
            self.removed + other.removed,
            self.skipped + other.skipped,
        )


@attrs.frozen
class _Known:
    kind: str
    session: str
    cwd: str
    mark: FileMark
    lines: int
    last_line: int


class HistoryIndex:
    """The index in one database file (default: the user's data folder)."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path or default_path()
        self._conn: sqlite3.Connection | None = None

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = connect(self.path)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        self._conn, result = guarded(self.path, self._db(), work)
        return result

    # --- indexing ---------------------------------------------------------------------------------

    def update(
        self, roots: Iterable[str], archive_roots: Iterable[str] = (), *, stop: Callable[[], bool] | None = None
    ) -> Pass:
        """Bring the index up to date with every session file under ``roots`` and ``archive_roots``."""
        done = Pass()
        archives = [os.path.realpath(r) for r in archive_roots]
        walked = list(dict.fromkeys([*(os.path.realpath(r) for r in roots), *archives]))
        seen: set[str] = set()
        for root in walked:
            for path, st in iter_session_stats(root):
                if stop is not None and stop():
                    return done
                path = os.path.realpath(path)
                if path not in seen:
                    seen.add(path)
                    self._one(done, path, st, archives)
        done.removed = self._run(lambda c: _forget_missing(c, walked, seen))
        return done

    def update_files(self, paths: Iterable[str], roots: Iterable[str], archive_roots: Iterable[str] = ()) -> Pass:
        """Index these files (those under ``roots`` or ``archive_roots``), or forget them if they are gone."""
        done = Pass()
        archives = [os.path.realpath(r) for r in archive_roots]
        walked = [*(os.path.realpath(r) for r in roots), *archives]
        for path in paths:
            path = os.path.realpath(path)
            if not any(path.startswith(r + os.sep) for r in walked):
                continue
            try:
                st = os.stat(path)
            except FileNotFoundError:
                done.removed += self._run(partial(forget, paths=[path]))
                continue
            except OSError as exc:
                done.skipped.append(f"{path}: {exc}")
                continue
            self._one(done, path, st, archives)
        return done

    def update_databases(self, databases: Iterable[str], *, stop: Callable[[], bool] | None = None) -> Pass:
        """Bring the index up to date with every session in these opencode databases (read-only; a database
        whose state token did not change is not opened)."""
        done = Pass()
        for db in dict.fromkeys(os.path.realpath(d) for d in databases):
            try:
                found = self._run(partial(index_database, db=db, stop=stop))
            except (SessionError, sqlite3.OperationalError) as exc:
                done.skipped.append(f"{db}: {exc}")
                continue
            done.files += found.sessions
            done.indexed += found.indexed
            done.entries += found.entries
            done.removed += found.removed
        return done

    def _one(self, done: Pass, path: str, st: os.stat_result, archives: list[str]) -> None:
        done.files += 1
        archived = any(path.startswith(a + os.sep) for a in archives)
        try:
            written = self._run(partial(_index_file, path=path, st=st, archived=archived))
        except (OSError, SessionError, sqlite3.OperationalError) as exc:
            done.skipped.append(f"{path}: {exc}")
            return
        if written is not None:
            done.indexed += 1
            done.entries += written

    # --- searching --------------------------------------------------------------------------------

    def search(self, query: str, *, session: str | None = None, limit: int = 20) -> list[Hit]:
        """Hits for ``query`` (an FTS5 query; anything that is not valid FTS5 is searched as plain words),
        best first; ``session``: only that session (an id or a file path)."""
        try:
            match = self._run(lambda c: fts_match(c, query))  # see ctxd.history.query
            if match is None:
                return []
            return self._run(lambda c: _search(c, match, session, limit))
        except sqlite3.OperationalError as exc:  # the query is never the cause (see fts_match): busy, or I/O
            raise HistoryUnavailableError(f"cannot search the history index now: {exc}", path=self.path) from None


# --- one file ---------------------------------------------------------------------------------------


def _known(conn: sqlite3.Connection, path: str) -> _Known | None:
    row = conn.execute(
        "SELECT kind, session, cwd, dev, ino, size, mtime_ns, end, tail, ctime_ns, lines, last_line FROM files"
        " WHERE path = ?",
        (path,),
    ).fetchone()
    if row is None:
        return None
    kind, session, cwd, dev, ino, size, mtime_ns, end, tail, ctime_ns, lines, last_line = row
    mark = FileMark(dev, ino, size, mtime_ns, end, bytes(tail), ctime_ns)
    return _Known(kind, session, cwd, mark, lines, last_line)


def _index_file(conn: sqlite3.Connection, path: str, st: os.stat_result, archived: bool) -> int | None:
    """Index one file if it changed; the number of entries written, or None if it had not changed."""
    known = _known(conn, path)
    if known is not None and known.mark.unchanged(st):
        return None
    fd = open_regular(path)
    try:
        st = os.fstat(fd)
        appended = known is not None and known.mark.appended_only(fd, st)
        conn.execute("BEGIN IMMEDIATE")
        try:
            if _known(conn, path) != known:  # another process indexed it meanwhile: its rows stand
                conn.execute("ROLLBACK")
                return 0
            written = _write_file(conn, fd, st, path, known if appended else None, archived)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return written
    finally:
        os.close(fd)


def _write_file(
    conn: sqlite3.Connection, fd: int, st: os.stat_result, path: str, known: _Known | None, archived: bool
) -> int:
    """Write the rows of a file (``known``: what was indexed of it before, when it only grew since)."""
    if known is None:
        delete_rows(conn, path, 0)
        head = read_bounded(fd, 1 << 20)
        kind = detect(head) or "unknown"
    else:
        kind = known.kind
    if kind == "pi":
        items, session, cwd, end, lines = _read_pi(fd, known)
        last_line = items[-1][0] if items else (known.last_line if known else 0)
    elif kind in ("claude", "codex", "opencode") and st.st_size <= MAX_TRANSCRIPT:  # opencode: ctxd's archive
        from_line = known.last_line if known is not None else 0
        if from_line:
            delete_rows(conn, path, from_line)
        items, session, cwd, end, lines = _read_transcript(fd, path, from_line)
        last_line = items[-1][0] if items else from_line
    else:  # not a session ctxd can read: remembered (so it is not read again until it changes), not indexed
        items, session, cwd, end, lines, last_line = [], "", "", 0, 0, 0
    insert_items(conn, path, items)
    mark = FileMark.take(fd, st, end) or FileMark.of_stat(st)
    conn.execute(
        "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            path,
            kind,
            session or (known.session if known else ""),
            os.path.normpath(cwd) if cwd else (known.cwd if known else ""),
            int(archived),
            mark.dev,
            mark.ino,
            mark.size,
            mark.mtime_ns,
            mark.end,
            mark.tail,
            mark.ctime_ns,
            lines,
            last_line,
        ),
    )
    return len(items)


def _complete_lines(fd: int, start: int) -> Iterator[tuple[bytes, int]]:
    """Each complete line from ``start`` on, with the offset after it, read in bounded chunks."""
    for lines, end in complete_chunks(fd, start, CHUNK):
        offset = end - len(lines)
        for raw in lines.split(b"\n")[:-1]:
            offset += len(raw) + 1
            yield raw, offset


def _read_pi(fd: int, known: _Known | None) -> tuple[list[tuple[int, Item]], str, str, int, int]:
    """(line, item) of a pi file's entries from where ``known`` stopped, its id and cwd, the offset
    after its last complete line and its number of complete lines."""
    start, line = (known.mark.end, known.lines) if known is not None else (0, 0)
    session = cwd = ""
    end = start
    items: list[tuple[int, Item]] = []
    for raw, after in _complete_lines(fd, start):
        line += 1
        end = after
        try:
            obj = decode_any(raw)
        except Exception:
            continue  # a malformed line: ctxd's readers report it; the index has nothing to take from it
        if line == 1 and isinstance(obj, dict) and obj.get("type") == "session":
            session, cwd = str(obj.get("id") or ""), str(obj.get("cwd") or "")
            continue
        item = item_of(obj)
        if item is not None:
            items.append((line, item))
    return items, session, cwd, end, line


def _read_transcript(fd: int, path: str, from_line: int) -> tuple[list[tuple[int, Item]], str, str, int, int]:
    data = read_bounded(fd, MAX_TRANSCRIPT)
    end = data.rfind(b"\n") + 1
    transcript = map_transcript(data[:end], path)
    if transcript is None:
        return [], "", "", end, data.count(b"\n", 0, end)
    items: list[tuple[int, Item]] = []
    for entry, line in zip(transcript.entries, transcript.lines, strict=True):
        if line < from_line:
            continue
        item = item_of(entry)
        if item is not None:
            items.append((line, item))
    header = transcript.header
    return items, str(header.get("id") or ""), str(header.get("cwd") or ""), end, data.count(b"\n", 0, end)


def _forget_missing(conn: sqlite3.Connection, roots: list[str], seen: set[str]) -> int:
    gone = [
        path
        for (path,) in conn.execute("SELECT path FROM files WHERE kind != ?", (OPENCODE,)).fetchall()
        if path not in seen and any(path.startswith(r + os.sep) for r in roots)
    ]  # an opencode database's sessions come and go with the database (ctxd.history.opencode), not with files
    return forget(conn, gone)


# --- one query --------------------------------------------------------------------------------------


def _search(conn: sqlite3.Connection, match: str, session: str | None, limit: int) -> list[Hit]:
    sql = (
        "SELECT r.path, f.session, f.kind, f.archived, r.entry_id, r.line, r.role, "
        "snippet(entries, 0, '«', '»', '…', 24), r.ts, r.tool, bm25(entries) AS score "
        "FROM entries JOIN rows r ON r.id = entries.rowid JOIN files f ON f.path = r.path "
        "WHERE entries MATCH ?"
    )
    args: list[Any] = [match]
    if session:
        sql += " AND (f.session = ? OR f.path = ?)"
        args += [session, os.path.abspath(session)]
    sql += " ORDER BY score LIMIT ?"
    args.append(max(1, limit))
    return [
        Hit(path, sid, kind, bool(archived), eid, line, role, snippet, ts, tool, float(score))
        for path, sid, kind, archived, eid, line, role, snippet, ts, tool, score in conn.execute(sql, args)
    ]
