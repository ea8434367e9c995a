"""ctxd's archive of opencode sessions: a session's database rows exported to a JSON-lines file.

opencode deletes a session's rows when the user deletes the session. On the plugin's request (``session/archive``)
ctxd reads the session read-only (:func:`ctxd.store.opencode.read_session`) and keeps its rows in
``<data>/archive/opencode/<project>/<session id>.jsonl`` (format: :mod:`ctxd.formats.transcripts.opencode_archive`;
``<project>`` is opencode's project id, or the session's UTC start date when that id cannot name a folder).
Folders are 0700, files 0600, as for the other archives (:mod:`ctxd.store.archive`).

- Unchanged rows give the same bytes, and the copy is left alone (no write at all).
- Grown or updated rows replace the copy whole and atomically (a reader sees the old or the new file).
- When rows the copy holds are gone from the database (opencode's revert), the copy first moves to
  ``<session id>/earlier/<UTC>.jsonl``, so the archive never loses a row it once held.
"""

from __future__ import annotations

import os
import time

from ctxd.formats.transcripts.opencode import OpencodeRows
from ctxd.formats.transcripts.opencode_archive import decode_archive, encode_archive
from ctxd.store.archive import ArchiveResult, is_safe_name, rotate_copy
from ctxd.store.dirs import archive_root, makedirs_private
from ctxd.store.files import PRIVATE_MODE, atomic_write, locked
from ctxd.store.opencode import read_session


def opencode_archive_path(rows: OpencodeRows, root: str) -> str | None:
    """Where the archive keeps this session, or None when its id cannot name a file."""
    session_id = str(rows.session.get("id") or "")
    if not is_safe_name(session_id):
        return None
    project = str(rows.session.get("project_id") or "")
    if not is_safe_name(project):
        created = rows.session.get("time_created")
        seconds = created / 1000 if isinstance(created, int) and created > 0 else time.time()
        project = time.strftime("%Y-%m-%d", time.gmtime(seconds))
    return os.path.join(root, "opencode", project, f"{session_id}.jsonl")


def archive_opencode_session(db: str, session_id: str, root: str | None = None) -> ArchiveResult:
    """Bring the archived copy of one opencode session up to the database's rows.

    Raises SessionError (no such session, unreadable database), ValueError (an id that cannot name a file) or
    OSError (the archive cannot be written)."""
    rows = read_session(db, session_id)
    dst = opencode_archive_path(rows, root or archive_root())
    if dst is None:
        raise ValueError(f"an opencode session id that cannot name a file: {session_id!r}")
    data = encode_archive(rows)
    folder = os.path.dirname(dst)
    makedirs_private(folder)
    lock = os.open(os.path.join(folder, ".lock"), os.O_RDWR | os.O_CREAT, PRIVATE_MODE)
    try:
        with locked(lock):
            return _write_locked(dst, rows, data)
    finally:
        os.close(lock)


def _write_locked(dst: str, rows: OpencodeRows, data: bytes) -> ArchiveResult:
    try:
        with open(dst, "rb") as f:
            old = f.read()
    except FileNotFoundError:
        old = None
    if old == data:
        return ArchiveResult(dst, 0, None)
    rotated = rotate_copy(dst) if old is not None and _loses_rows(old, rows) else None
    atomic_write(dst, data)
    return ArchiveResult(dst, len(data), rotated)


def _loses_rows(old: bytes, rows: OpencodeRows) -> bool:
    """Does the copy hold a message or part the database no longer has?"""
    kept, _ = decode_archive(old)
    if kept is None:
        return True  # not an archive of ours: keep it aside rather than overwrite it
    now = {m[0] for m in rows.messages} | {p[1] for p in rows.parts}
    return any(m[0] not in now for m in kept.messages) or any(p[1] not in now for p in kept.parts)
