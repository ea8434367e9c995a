"""Creating and forking session files (private to the user, written whole or not at all)."""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Sequence
from typing import Any

from ctxd.errors import SessionError
from ctxd.formats.codec import CURRENT_VERSION, dumps_line
from ctxd.store.dirs import makedirs_private
from ctxd.store.files import Clock, atomic_write, create_private, iso_timestamp, uuid7


def new_header(
    cwd: str, *, session_id: str | None = None, parent_session: str | None = None, now: float
) -> dict[str, Any]:
    header: dict[str, Any] = {
        "type": "session",
        "version": CURRENT_VERSION,
        "id": session_id or uuid7(now),
        "timestamp": iso_timestamp(now),
        "cwd": cwd,
    }
    if parent_session:
        header["parentSession"] = parent_session
    return header


def create_session(
    root: str,
    cwd: str,
    *,
    session_id: str | None = None,
    path: str | None = None,
    directory: str | None = None,
    parent_session: str | None = None,
    entries: Sequence[dict[str, Any]] = (),
    clock: Clock = time.time,
) -> str:
    """Create a new session file under ``root`` in pi's layout (or in ``directory``, or at ``path``);
    return its path.

    The file holds the header and ``entries`` (complete entries with ids), and is mode 0600; the
    directories created for it are 0700.  SessionError (-31010 on the wire, as a failed append)
    when it cannot be created: a full disk, a read-only file system, no permission, a name too
    long or with a NUL in it, a file where a folder should be.
    """
    now = clock()
    header = new_header(cwd, session_id=session_id, parent_session=parent_session, now=now)
    if path is None:
        from ctxd.store.listing import cwd_dirname, session_filename  # here: opening a session never needs it

        directory = directory or os.path.join(root, cwd_dirname(cwd))
        path = os.path.join(directory, session_filename(header["timestamp"], header["id"]))
    data = dumps_line(header) + b"".join(dumps_line(e) for e in entries)
    try:
        if entries:
            makedirs_private(os.path.dirname(os.path.abspath(path)))
            if os.path.exists(path):
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)
            atomic_write(path, data)
        else:
            create_private(path, data)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename and exc.filename != path else ""
        reason = f"cannot create the session file: {exc.strerror or exc}{where}"
        raise SessionError(reason, path=path) from exc
    except ValueError as exc:  # a NUL in the path (from the cwd)
        raise SessionError(f"cannot create the session file: {exc}", path=path) from exc
    return os.path.abspath(path)
