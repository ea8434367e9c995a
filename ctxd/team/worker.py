"""The background publisher: one thread that runs publishing passes when asked, never on a request's path.

:meth:`TeamWorker.kick` returns at once (the history indexer kicks after each pass, so new entries go out as they
are indexed). A pass that fails is retried with a growing delay (2 s doubling to 5 minutes) while entries wait in
the spool; the failure is logged once (the same kind of failure again is not logged again; the recovery is), and local
search is not touched. Another process publishing at the time (``ctxd team sync``, another ``ctxd mcp``) holds
the machine's publishing lock: this worker then tries again a little later.
"""

from __future__ import annotations

import logging
import threading
import time

from ctxd.errors import TeamError
from ctxd.team.publish import Publisher, PublishPass, pass_lock

log = logging.getLogger(__name__)
RETRY_FIRST = 2.0
RETRY_LAST = 300.0
BUSY_RETRY = 2.0
"""Seconds before trying again when another process holds the publishing lock."""


class TeamWorker:
    def __init__(self, publisher: Publisher) -> None:
        self.publisher = publisher
        self.last: PublishPass | None = None
        """What the last finished pass did."""
        self.last_at: float | None = None
        """When it finished (time.time())."""
        self.error: TeamError | None = None
        """Why the last pass failed (None once one succeeds)."""
        self._lock = threading.Lock()
        self._wanted = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None
        self._delay = RETRY_FIRST
        self._idle = threading.Event()
        self._idle.set()

    @property
    def busy(self) -> bool:
        return not self._idle.is_set()

    def kick(self) -> None:
        """Ask for a pass (entries may be waiting); returns at once."""
        with self._lock:
            if self._stopping:
                return
            self._wanted = True
            self._idle.clear()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name="ctxd-team", daemon=True)
                self._thread.start()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the passes asked for so far; whether they finished."""
        return self._idle.wait(timeout)

    def stop(self) -> None:
        """Stop after the batch in flight (a batch is one server transaction); returns at once."""
        with self._lock:
            self._stopping = True
            if self._timer is not None:
                self._timer.cancel()
            running = self._thread is not None and self._thread.is_alive()
        if not running:
            self.publisher.close()

    def _later(self, seconds: float) -> None:
        with self._lock:
            if self._stopping:
                return
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(seconds, self.kick)
            self._timer.daemon = True
            self._timer.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._wanted or self._stopping:
                    self._idle.set()
                    self._thread = None
                    if self._stopping:
                        self.publisher.close()
                    return
                self._wanted = False
            self._one()

    def _one(self) -> None:
        try:
            with pass_lock(self.publisher.history_path, wait=0) as taken:
                if not taken:
                    self._later(BUSY_RETRY)
                    return
                done = self.publisher.run(stop=lambda: self._stopping)
        except TeamError as exc:
            self._failed(exc)
            return
        except Exception as exc:  # the local index failed (busy, damaged): the spool is intact; try again later
            self._failed(TeamError("local", f"reading the local history index failed: {exc}"))
            return
        if self.error is not None:
            log.warning("team: publishing to the team database again (%d entries sent)", done.sent)
        self.error = None
        self.last, self.last_at = done, time.time()
        self._delay = RETRY_FIRST
        if done.sent:
            log.info("team: published %d entries in %.2f s", done.sent, done.seconds)

    def _failed(self, exc: TeamError) -> None:
        if self.error is None or self.error.kind != exc.kind:
            log.warning("team: %s (local search goes on; entries wait in the spool)", exc.message)
        self.error = exc
        if exc.kind not in ("driver", "config", "schemaNewer"):  # those wait for a person, not for time
            self._later(self._delay)
            self._delay = min(self._delay * 2, RETRY_LAST)
