"""The tail rule: a final line without its newline may belong to a live writer.

pi appends to its session file without any lock: one ``write()`` per line on an ``O_APPEND``
descriptor (Node's ``appendFileSync``).  Linux places each such write at the end of the file
whole: ``O_APPEND`` writes to a regular file never interleave at the byte level with other
``O_APPEND`` writes.  But a concurrent reader can see a large write half copied (the file grows
page by page while the writer is still in ``write()``), a writer can be killed mid-line, and a
writer that issues several ``write()`` calls for one line (some libraries do, and so does ctxd's
``fsync`` mode between lines) can have other writes land between its pieces.  So when ctxd finds
bytes after the last newline it cannot tell a line still being written from one whose writer died.

The rule, applied by every ctxd writer under its exclusive lock before it writes:

1. Readers never consume a final line without its newline; it is neither served nor reported.
2. While the file ends in a partial line, ctxd does not write: it polls (0.5 ms, growing to
   20 ms) and reads each line once a newline completes it, for as long as the tail keeps changing
   (a line that keeps growing for :data:`MAX_WAIT`, 30 s, without ending fails the append: nothing
   is written).
3. A tail that stays byte-for-byte unchanged for the grace period (:data:`TAIL_GRACE`, 1.5 s by
   default) was left by a writer that stopped.  ctxd then sets it aside *append-only*: it writes one
   newline after it, so the bytes stay where their writer put them and the line becomes complete —
   served if it is a whole JSON object (a writer died between its object and its newline),
   otherwise reported as a malformed line with its file and line number, with a copy recorded in
   ``<file>.torn`` (mode 0600).  Nothing another process wrote is ever moved, truncated or
   overwritten.
4. ctxd's own batch is one ``write()`` (a multi-line batch included), issued only when the file
   ends at the line boundary just checked.  Afterwards ctxd checks where the batch landed: if a
   writer that writes one line in several pieces started its line between that check and the write
   (a window of microseconds that no unlocked protocol can close), the batch was glued onto the
   piece.  ctxd reports it, waits for that writer's line to complete, appends the writer's line
   again whole (its pieces joined, byte for byte) and its own entries that the glued line hid (same
   ids), so that every entry is still present exactly once; the glued pieces stay behind as
   reported malformed lines.  A glued write hides only its first line, so a heal glued again in
   its turn is healed the same way (up to eight times in a row).

A writer stalled for longer than the grace period and then resuming finds its line already
terminated: its remaining bytes form a malformed line of their own.  A grace period much longer
than any live writer's pause between two pieces of a line (pi has none) keeps that from happening.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from typing import Any, Protocol

from ctxd.errors import SessionError
from ctxd.formats.codec import decode_any
from ctxd.store.files import PRIVATE_MODE, open_session_fd, write_all
from ctxd.store.private import FileMark
from ctxd.store.scan import Diagnostic


class Indexed(Protocol):
    """The file a tail belongs to, as its reader read it (:class:`ctxd.store.session_file.SessionFile`)."""

    path: str
    identity: tuple[int, int]
    end: int
    """Bytes indexed: the tail starts here."""
    next_line: int
    diagnostics: list[Diagnostic]
    mark: FileMark | None
    """The file's stat when it was last read (None: read it again on the next refresh)."""

    def refresh(self) -> Any: ...


log = logging.getLogger(__name__)


def _grace_from_env() -> float:
    try:
        ms = float(os.environ.get("CTXD_TAIL_GRACE_MS", "1500"))
    except ValueError:
        ms = 1500.0
    return ms / 1000 if ms >= 0 else 1.5


TAIL_GRACE = _grace_from_env()
"""Seconds a partial final line must stay unchanged before ctxd takes it for torn (1.5 s, or
``CTXD_TAIL_GRACE_MS`` from the environment; :class:`SessionFile` takes its own)."""

MAX_WAIT = 30.0
"""The longest an append waits for a final line that keeps growing without ever ending: then it
fails (nothing written) rather than write after a partial line."""

POLL_FIRST = 0.0005
POLL_MAX = 0.02
SIDECAR_CAP = 64 << 20
"""At most this much of a torn tail is copied to the sidecar (the bytes stay in the file anyway)."""
FINGERPRINT = 4096
"""The tail's last bytes compared between polls (with its size) to see that it is unchanged."""


class Replaced(Exception):
    """The file was replaced (renamed over, migrated) while waiting: the caller must reopen it."""


def _fingerprint(rfd: int, start: int, size: int) -> bytes:
    """Size and digest of the tail ``[start, size)`` (its last few KB)."""
    import hashlib  # here: reading a session never needs it

    first = max(start, size - FINGERPRINT)
    digest = hashlib.blake2b(os.pread(rfd, size - first, first), digest_size=16).digest()
    return size.to_bytes(8, "little") + digest


def settle(sf: Indexed, fd: int, grace: float) -> None:
    """Under the lock: return once everything in the file has been read and it ends in a newline.

    Complete lines are read as they arrive; a partial tail is waited for, and set aside (rule 3)
    only after it stayed unchanged for ``grace`` seconds.  Raises :class:`Replaced` when the file
    was replaced meanwhile.
    """
    seen = b""
    since = started = time.monotonic()
    delay = POLL_FIRST
    identity = sf.identity
    while True:
        size = os.fstat(fd).st_size
        if size != sf.end:
            sf.refresh()
            if sf.identity != identity:
                raise Replaced
            size = os.fstat(fd).st_size
        if size <= sf.end:
            if size < sf.end:  # truncated by someone: read it again from the start
                sf.refresh()
                if sf.identity != identity:
                    raise Replaced
                continue
            return
        # The tail stood still at least from the end of the read that first saw it (``since``) to
        # the start of the read that sees it again (``looked``): a pause of this thread after a read
        # (a loaded machine) is never taken for the tail standing still.
        looked = time.monotonic()
        rfd = open_session_fd(sf.path)
        try:
            now_seen = _fingerprint(rfd, sf.end, size)
        finally:
            os.close(rfd)
        if now_seen != seen:
            now = time.monotonic()
            if now - started > max(MAX_WAIT, 2 * grace):
                raise SessionError(
                    f"the last line has kept growing for {now - started:.0f} s without ending; not appending "
                    "after a line another writer is still writing",
                    path=sf.path,
                    line=sf.next_line,
                )
            seen, since, delay = now_seen, now, POLL_FIRST
        elif looked - since >= grace:
            set_aside(sf, fd, size)
            seen = b""
            continue
        time.sleep(delay)
        delay = min(delay * 2, POLL_MAX)


def _record(sidecar: str, data: bytes) -> None:
    """Append ``data`` to the sidecar (created 0600; never through a symlink, never a non-file)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    sfd = os.open(sidecar, flags, PRIVATE_MODE)
    try:
        if stat.S_ISREG(os.fstat(sfd).st_mode):
            write_all(sfd, data)
            os.fsync(sfd)
    finally:
        os.close(sfd)


def set_aside(sf: Indexed, fd: int, size: int) -> None:
    """Terminate the unchanged partial tail ``[sf.end, size)`` with a newline (rule 3)."""
    rfd = open_session_fd(sf.path)
    try:
        length = size - sf.end
        tail = os.pread(rfd, min(length, SIDECAR_CAP), sf.end)
    finally:
        os.close(rfd)
    if b"\n" in tail:
        # Complete lines the reader did not read (its note of the file was wrong): ending the first of
        # them again would write a blank line. Read the file again instead, and look at its tail anew.
        log.warning("%s: complete lines after the last one read; reading the file again", sf.path)
        sf.mark = None
        return
    line = sf.next_line
    whole = False
    if length <= SIDECAR_CAP:
        try:
            whole = isinstance(decode_any(tail), dict)
        except Exception:  # not JSON (msgspec errors, or too deep to decode)
            whole = False
    sidecar = sf.path + ".torn"
    if not whole:
        _record(sidecar, tail + b"\n")
    if os.fstat(fd).st_size != size:
        return  # its writer woke up after all: wait for it again
    write_all(fd, b"\n")
    os.fsync(fd)
    landed = os.lseek(fd, 0, os.SEEK_CUR) - 1
    if landed != size:
        # The writer finished its line in the microseconds between the check and our newline.
        sf.diagnostics.append(
            Diagnostic(
                sf.path, line, "a stalled writer resumed while its line was being terminated", "warning", kind="resumed"
            )
        )
    if whole:
        message = f"final line lacked its newline for {length} bytes and stayed unchanged; completed it"
        sf.diagnostics.append(Diagnostic(sf.path, line, message, severity="info", kind="completed"))
    else:
        cut = "" if length <= SIDECAR_CAP else f" (its first {SIDECAR_CAP} bytes)"
        sf.diagnostics.append(
            Diagnostic(
                sf.path,
                line,
                f"torn final line ({length} bytes, not a JSON object) left by a writer that stopped: "
                f"terminated in place; a copy{cut} is in {sidecar}",
                severity="warning",
                kind="torn",
            )
        )


REJOIN_CAP = 64 << 20
"""How far around a glued write ctxd looks for the two pieces of the other writer's line."""


def _is_object(data: bytes) -> bool:
    try:
        return isinstance(decode_any(data), dict)
    except Exception:  # not JSON, or too deep to decode
        return False


def rejoin(sf: Indexed, start: int, end: int) -> bytes | None:
    """The other writer's line that our write ``[start, end)`` split (rule 4), whole and with its
    newline; ``b""`` when nothing was lost (its piece was a whole object missing only its newline,
    served from the glued line); None when its second piece cannot be found."""
    rfd = open_session_fd(sf.path)
    try:
        lo = max(0, start - REJOIN_CAP)
        before = os.pread(rfd, start - lo, lo)
        piece = before[before.rfind(b"\n") + 1 :]
        if _is_object(piece):
            return b""
        after = os.pread(rfd, min(sf.end - end, REJOIN_CAP), end)
    finally:
        os.close(rfd)
    for rest in after.split(b"\n")[:-1]:
        if rest and not _is_object(rest) and _is_object(piece + rest):
            return piece + rest + b"\n"
    return None


def await_rejoin(sf: Indexed, fd: int, start: int, end: int, grace: float) -> bytes | None:
    """:func:`rejoin`, waiting for the other writer's second piece while the file keeps changing
    (and at most ``grace`` seconds after it stopped)."""
    seen = -1
    since = time.monotonic()
    delay = POLL_FIRST
    while True:
        settle(sf, fd, grace)
        found = rejoin(sf, start, end)
        if found is not None:
            return found
        size = os.fstat(fd).st_size
        now = time.monotonic()
        if size != seen:
            seen, since = size, now
        elif now - since >= grace:
            return None
        time.sleep(delay)
        delay = min(delay * 2, POLL_MAX)
