"""Indexing off the request path: one worker thread that brings the index up to date when asked.

:meth:`Indexer.kick` never waits: it marks the index stale and starts the worker if it is not
running; the worker runs passes until nothing asked for another. A search answers at once from what
is indexed and says whether a pass is still running (:attr:`Indexer.busy`); :meth:`Indexer.wait`
lets a caller that can afford it (``ctxd search``, a model's tool call) wait a bounded time.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from ctxd.history.index import HistoryIndex, Pass

log = logging.getLogger(__name__)


class Indexer:
    def __init__(
        self,
        index: HistoryIndex,
        sources: Callable[[], tuple[list[str], list[str]]],
        databases: Callable[[], list[str]] = list,
    ) -> None:
        """``sources``: the (roots, archive roots) to index, asked at each pass; ``databases``: the opencode
        databases to index (a :meth:`touch` naming one, or its ``-wal``, looks at that database)."""
        self.index = index
        self.sources = sources
        self.databases = databases
        self.last: Pass | None = None
        """What the last finished pass did."""
        self.error: str | None = None
        """Why the last pass failed, if it did."""
        self.after_pass: Callable[[], None] | None = None
        """Called (in the worker) after each pass that wrote entries: team history publishes them."""
        self._lock = threading.Lock()
        self._stale = False
        self._touched: set[str] = set()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._idle = threading.Event()
        self._idle.set()

    @property
    def busy(self) -> bool:
        """A pass is running or asked for."""
        return not self._idle.is_set()

    def kick(self) -> None:
        """Ask for a pass over every file (the index may be stale); returns at once."""
        with self._lock:
            self._stale = True
            self._start()

    def touch(self, path: str) -> None:
        """Ask for one file to be indexed (the watcher saw it change); returns at once."""
        with self._lock:
            self._touched.add(path)
            self._start()

    def _start(self) -> None:
        if self._stopping:
            return
        self._idle.clear()
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._work, name="ctxd-history", daemon=True)
            self._thread.start()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the passes asked for so far; whether they finished."""
        return self._idle.wait(timeout)

    def stop(self) -> None:
        """Stop after the file being indexed (each file is its own transaction: nothing is half written).
        Returns at once: a shutdown never waits for indexing (the worker closes its database itself)."""
        with self._lock:
            self._stopping = True
            running = self._thread is not None and self._thread.is_alive()
        if not running:
            self.index.close()

    def _work(self) -> None:
        while True:
            with self._lock:
                if not (self._stale or self._touched) or self._stopping:
                    self._idle.set()
                    self._thread = None
                    if self._stopping:
                        self.index.close()
                    return
                full, self._stale = self._stale, False
                touched, self._touched = self._touched, set()
            try:
                roots, archives = self.sources()
                databases = self.databases()
                if full:
                    done = self.index.update(roots, archives, stop=lambda: self._stopping)
                    done = self.last = done.add(self.index.update_databases(databases, stop=lambda: self._stopping))
                else:
                    named = _databases_named(touched, databases)
                    done = self.index.update_files(sorted(touched - named), roots, archives)
                    done = done.add(self.index.update_databases(sorted(named), stop=lambda: self._stopping))
                self.error = None
                if done.entries and self.after_pass is not None:
                    self.after_pass()
            except Exception as exc:  # the index is a cache: a failed pass is logged, searches go on
                self.error = str(exc)
                log.warning("history: indexing failed: %s", exc)


def _databases_named(paths: set[str], databases: list[str]) -> set[str]:
    """Those of ``paths`` that name one of ``databases`` (or its write-ahead log)."""
    reals = {os.path.realpath(db) for db in databases}
    return {p for p in paths if os.path.realpath(p.removesuffix("-wal")) in reals}
