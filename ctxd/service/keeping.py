"""Which sessions the daemon keeps open: bounded by time, count and bytes, never one in use.

A session a request names stays open afterwards: its index, tree and kept context make the next
request cheap. A daemon that runs for weeks would otherwise end up holding every session it ever
touched (a few MB each), so:

- a session that no request, append or other process's write touched for ``openSessions.idleSeconds``
  is closed (looked for every few seconds), unless a client follows its composition;
- past ``openSessions.maxCount`` open sessions, or ``openSessions.maxBytes`` bytes held by them (as
  each weighs itself: :meth:`ctxd.tree.session.Session.weight`, measured against tracemalloc), the
  least recently used are closed first, followed or not;
- a session in use is never closed (:meth:`OpenSession.busy`): while a request that opened it runs,
  while the watcher reads what another process wrote, while an append is queued or being written,
  while a compaction runs or is scheduled.

Everything an open session holds is derived from its file, so a closed session opens again on its
next request and answers the same (``context/build``'s ``revision`` excepted: a new kept context has a
new one, as after a restart, and a client holding the old one gets the whole context once). A
followed composition whose session was closed is computed again from the reopened session when the
session changes: the client following it sees no difference. History search reads the sessions of its
hits that are not open without keeping them open (:mod:`ctxd.service.history`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from ctxd.service.config import OpenSessions
from ctxd.service.registry import OpenSession

log = logging.getLogger(__name__)

WEIGH_EVERY = 1.0
"""Seconds between two weighings of a session in use (weighing a million entries costs ~15 ms)."""
SWEEP_MAX = 15.0
"""The longest pause between two looks for idle sessions."""


TRIM_EVERY = 5.0
"""Seconds between two returns of freed memory to the system (after sessions close: ctxd.malloc)."""


def weigh(opened: OpenSession, *, force: bool = False) -> None:
    """Note about how many bytes ``opened`` holds (under its lock: its state is consistent there), at
    most every :data:`WEIGH_EVERY` seconds; a failure to weigh never fails the work it follows."""
    now = time.monotonic()
    if not force and opened.weight and now - opened.weighed < WEIGH_EVERY:
        return
    try:
        opened.weight = opened.session.weight()
    except Exception:  # a view caught mid-change by a reader elsewhere: weighed next time
        log.debug("cannot weigh %s now", opened.session.path, exc_info=True)
        return
    opened.weighed = now


def sweep_interval(limits: OpenSessions) -> float:
    """How often to look for idle sessions: a quarter of the idle time, between 50 ms and 15 s."""
    return max(0.05, min(limits.idle_seconds / 4, SWEEP_MAX))


def idle(
    sessions: Iterable[tuple[str, OpenSession]], limits: OpenSessions, followed: Callable[[str], bool]
) -> list[str]:
    """The sessions to close for idleness: untouched for ``idleSeconds``, not followed, not in use."""
    now = time.monotonic()
    return [
        path
        for path, opened in sessions
        if now - opened.last_activity >= limits.idle_seconds and not followed(path) and not opened.busy()
    ]


def over_budget(sessions: dict[str, OpenSession], limits: OpenSessions) -> list[str]:
    """The sessions to close, least recently used first, until the rest fit ``maxCount`` and
    ``maxBytes``; sessions in use stay (then the rest may not fit until they are done)."""
    extra = len(sessions) - limits.max_count
    held = sum(opened.weight for opened in sessions.values())
    chosen: list[str] = []
    for path, opened in sessions.items():  # least recently used first (see Registry.touch)
        if extra <= 0 and held <= limits.max_bytes:
            break
        if opened.busy():
            continue
        chosen.append(path)
        extra -= 1
        held -= opened.weight
    return chosen
