"""The advisory write lock (``flock``) on a session file: taken with a bounded wait that can be
abandoned, and, when the wait runs out, who holds it.

Another process may keep the lock as long as it likes (a stuck writer, a debugger); a daemon must
not wait with it for ever, nor keep a shutdown waiting.  So the lock is tried without blocking
and the try repeated (1 ms, growing to 50 ms) until it is taken, the time is up
(:class:`~ctxd.errors.SessionLockedError`, naming the holder from ``/proc/locks`` where it can be
found), or the caller's ``stop`` event is set.  Nothing is written in either failure.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time

from ctxd.errors import SessionError, SessionLockedError

POLL_FIRST = 0.001
POLL_MAX = 0.05
CMDLINE_LIMIT = 300
"""A holder's command line is cut to this many characters in an error."""


def acquire(fd: int, *, timeout: float | None = None, stop: threading.Event | None = None, path: str = "") -> None:
    """Take the exclusive lock on ``fd``, waiting at most ``timeout`` seconds and giving up as soon
    as ``stop`` is set.  Without a timeout (the CLI) the wait is the kernel's own, blocking and fair,
    unless ``stop`` is already set; a bounded wait polls."""
    if timeout is None and (stop is None or not stop.is_set()):
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = POLL_FIRST
    while not try_acquire(fd):
        if stop is not None and stop.is_set():
            raise SessionError("the daemon is shutting down: not appending (nothing was written)", path=path)
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            pid, command = holder(fd)
            who = f"process {pid} ({command})" if pid is not None else "unknown"
            raise SessionLockedError(
                f"the session's write lock is held by another process: {who}; waited {timeout:g} s, "
                "nothing was written",
                path=path,
                lockHolderPid=pid,
                lockHolder=command,
                waitedSeconds=timeout,
            )
        pause = delay if remaining is None else min(delay, remaining)
        if stop is not None:
            stop.wait(pause)
        else:
            time.sleep(pause)
        delay = min(delay * 2, POLL_MAX)


def try_acquire(fd: int) -> bool:
    """Take the exclusive lock on ``fd`` if it is free, without waiting: True when taken."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def release(fd: int) -> None:
    """Release the lock on ``fd`` (a no-op when it is not held)."""
    fcntl.flock(fd, fcntl.LOCK_UN)


def holder(fd: int, locks: str = "/proc/locks") -> tuple[int | None, str]:
    """The pid and command line of a process holding a lock on ``fd``'s file (from ``/proc/locks``);
    ``(None, "unknown")`` when it cannot be told (no procfs, another pid namespace)."""
    try:
        st = os.fstat(fd)
        with open(locks, encoding="ascii", errors="replace") as f:
            table = f.read(1 << 20)
    except OSError:
        return None, "unknown"
    # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5654782 0 EOF"; a waiter's line has "->" after the number.
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in table.splitlines():
        fields = line.split()
        if len(fields) < 6 or fields[1] != "FLOCK" or fields[5] != device or not fields[4].isdigit():
            continue  # POSIX locks do not hold up flock; a waiter's line reads "1: -> FLOCK ..."
        pid = int(fields[4])
        return pid, _command(pid)
    return None, "unknown"


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(4096)
    except OSError:
        return "unknown"
    text = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
    if not text:
        return "unknown"
    return text if len(text) <= CMDLINE_LIMIT else text[: CMDLINE_LIMIT - 1] + "…"
