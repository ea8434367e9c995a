"""Which entries of a session that is not open are summarised away: what a search's hits need.

A hit says whether its entry is summarised away in its session's current context, read from the
session file itself. A session that is open answers from what it holds; any other is read here and
let go, so that a search never keeps its hits' sessions open (ctxd.service.keeping). Reading a
session costs its index and tree, so reads go one at a time (concurrent searches never read a dozen
sessions at once), and what was found is remembered per file state (device, inode, size, mtime,
ctime), for at most :data:`MAX_IDS` entry ids in all, the least recently used forgotten first: a
session whose file changed is read again.
"""

from __future__ import annotations

import asyncio
import os

from ctxd.history.ranges import summarized_ids
from ctxd.store.session_file import Durability
from ctxd.tree.session import Session

MAX_IDS = 20_000
"""Entry ids remembered in all (about 2 MB at most)."""

_Stamp = tuple[int, int, int, int, int]


def _read(path: str, durability: Durability) -> frozenset[str]:
    session = Session.open(path, durability=durability)
    try:
        return frozenset(summarized_ids(session))
    finally:
        session.close()


def _stamp(path: str) -> _Stamp | None:
    """The file's state, or None when it has none to go by (an opencode session in a database)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class Summarized:
    """The summarised-away entries of sessions that are not open (see the module)."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[_Stamp, frozenset[str]]] = {}
        self._held = 0
        self._reading = asyncio.Lock()

    async def ids(self, path: str, durability: Durability) -> frozenset[str]:
        stamp = _stamp(path)
        found = self._found(path, stamp)
        if found is not None:
            return found
        async with self._reading:
            found = self._found(path, stamp)  # read meanwhile by another search
            if found is not None:
                return found
            ids = await asyncio.to_thread(_read, path, durability)
        if stamp is not None:
            self._keep(path, stamp, ids)
        return ids

    def _found(self, path: str, stamp: _Stamp | None) -> frozenset[str] | None:
        kept = self._kept.get(path)
        if kept is None or stamp is None or kept[0] != stamp:
            return None
        self._kept[path] = self._kept.pop(path)  # the most recently used: forgotten last
        return kept[1]

    def _keep(self, path: str, stamp: _Stamp, ids: frozenset[str]) -> None:
        old = self._kept.pop(path, None)
        if old is not None:
            self._held -= len(old[1])
        self._kept[path] = (stamp, ids)
        self._held += len(ids)
        while self._held > MAX_IDS and self._kept:
            oldest = next(iter(self._kept))
            self._held -= len(self._kept.pop(oldest)[1])
