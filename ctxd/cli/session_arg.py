"""The session file named on the command line."""

from __future__ import annotations

import os
import stat

from ctxd.errors import SessionError
from ctxd.tree.session import Session

__all__ = ["open_session"]


def open_session(path: str) -> Session:
    """The session file named on the command line: a regular file, or a one-line error (a FIFO
    would block the read, a device never end it, a directory is not a session), or an opencode session
    named ``<database>#<session id>`` as the daemon and ``ctxd search`` name it."""
    if "#" in path and not os.path.lexists(path):  # only then is the opencode reader (sqlite3) imported
        from ctxd.store.opencode import split_ref

        if split_ref(path) is not None:
            return Session.open(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise SessionError("no such session file", path=os.path.abspath(path)) from None
    if stat.S_ISDIR(st.st_mode):
        raise SessionError("is a directory, not a session file", path=os.path.abspath(path))
    if not stat.S_ISREG(st.st_mode):
        raise SessionError("not a regular file (a FIFO, a device, a socket?)", path=os.path.abspath(path))
    return Session.open(path)
