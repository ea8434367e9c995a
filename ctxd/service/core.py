"""The service's shared parts, which every job (:mod:`ctxd.service.sessions`, ``context``, ``compacting``,
``history``, ``agents``) is given: the configuration, the registry of open sessions and their locks, background
tasks, notifications, and the numbers every job reports (context usage, compaction decisions).

What the core needs of a job is passed in by :class:`ctxd.service.service.Service` when it composes them
(:attr:`Core.freshen`, :attr:`Core.kept_open`, :attr:`Core.changed`); the core never reaches into a job."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ctxd.compaction.overflow import decide
from ctxd.compaction.settings import CompactionSettings
from ctxd.context.answers import Size
from ctxd.errors import SessionNotFoundError
from ctxd.malloc import release_freed
from ctxd.redact import redact_json
from ctxd.service import protocol as p
from ctxd.service.config import Config
from ctxd.service.keeping import TRIM_EVERY, idle, over_budget, sweep_interval, weigh
from ctxd.service.registry import OpenSession, Registry
from ctxd.tree.session import Session

if TYPE_CHECKING:  # the compaction engine loads on first use: it is not needed to start serving
    from ctxd.compaction.cut.plan import CompactionPlan
    from ctxd.compaction.engine import HookDecision

    SessionHook = Callable[[str, str, CompactionPlan], Awaitable[HookDecision | None]]
    """The client's compact/willRun hook: (session path, trigger, plan) -> its decision."""

log = logging.getLogger(__name__)
T = TypeVar("T")
Notify = Callable[[str, Any], None]
AutoCompact = Callable[[OpenSession, Any], None]
"""Starts (or schedules) a compaction when a decision says one is due (``Compaction.maybe_auto``)."""


async def _fresh(opened: OpenSession) -> None:
    return None


class Core:
    def __init__(self, config: Config, notify: Notify | None = None) -> None:
        self.config = config
        self.notify: Notify = notify or (lambda method, payload: None)
        self.registry = Registry(config.all_roots, config.opencode_databases)
        self.hook: SessionHook | None = None
        """The client's compact/willRun hook, called with the session's path, the trigger and the plan."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._trimmed = 0.0
        """When freed memory was last given back to the system (see :mod:`ctxd.malloc`)."""
        self._sweeper: asyncio.Task[None] | None = None
        """Closes idle sessions (see :mod:`ctxd.service.keeping`), from the first session opened on."""
        self.freshen: Callable[[OpenSession], Awaitable[None]] = _fresh
        """Catches a session up with its file before a request is served, when it changed since it was read
        (:meth:`ctxd.service.live.Live.freshen`: what it finds is announced as the watcher would)."""
        self.kept_open: Callable[[str], bool] = lambda path: False
        """Whether a client follows the session at ``path``: then it is not closed for idleness
        (:meth:`ctxd.service.context.Context.follows`)."""
        self.changed: Callable[[str], None] = lambda path: None
        """Called after each ``session/didChange``: views that follow the session update
        (:meth:`ctxd.service.context.Context.session_changed`)."""

    # --- plumbing -----------------------------------------------------------------------------

    def emit(self, method: str, payload: Any) -> None:
        try:
            self.notify(method, redact_json(p.to_json(payload)))
        except Exception:  # a broken client connection must not break the operation
            log.exception("could not send %s", method)
        if method == p.DID_CHANGE:
            self.changed(payload.session)

    def run_task(self, coro: Awaitable[Any], name: str) -> asyncio.Task[Any]:
        """Run a background task, keep a reference, log its failure."""
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("background task %s failed", name, exc_info=t.exception())

        task.add_done_callback(done)
        return task

    async def close(self) -> None:
        for opened in self.registry.open.values():
            opened.session.file.stop_waiting()  # an append waiting for another process's lock gives up
        for opened in self.registry.open.values():
            if opened.scheduled is not None:
                opened.scheduled.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for opened in self.registry.open.values():
            opened.session.close()

    async def open(self, ref: str) -> OpenSession:
        # Resolved on the loop, so that requests keep their order (appends are written in the
        # order they arrived); only an unknown id, which may read every session header under the
        # roots, is looked for in a worker thread.
        path = self.registry.resolve_quickly(ref)
        if path is None:
            path = await asyncio.to_thread(self.registry.resolve, ref)
        opened = self.registry.get(path)
        if opened is None:
            opened = OpenSession(await asyncio.to_thread(Session.open, path, durability=self.config.durability_mode))
            opened.session.file.lock_timeout = self.config.append_lock_timeout
            await asyncio.to_thread(weigh, opened)
            if self.registry.get(path) is None:
                self.registry.add(path, opened)
                opened.used_by_current_task()
                self.keep_bounded()
            else:  # opened meanwhile by another request: that one is kept
                await asyncio.to_thread(opened.session.close)
                opened = self.registry.open[path]
        self.registry.touch(path)
        opened.used_by_current_task()
        return opened

    # --- keeping sessions open within bounds (ctxd.service.keeping) -----------------------------

    def keep_bounded(self) -> None:
        """Close the least recently used sessions past the count and byte budgets, and make sure idle
        ones are looked for."""
        for path in over_budget(self.registry.open, self.config.open_sessions):
            self.forget(path)
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = self.run_task(self._sweep(), "closing idle sessions")

    async def _sweep(self) -> None:
        while self.registry.open:
            await asyncio.sleep(sweep_interval(self.config.open_sessions))
            for path in idle(list(self.registry.open.items()), self.config.open_sessions, self.kept_open):
                self.forget(path)

    def forget(self, path: str) -> None:
        """Close ``path``'s session (if open) and let it go; it opens again on its next request."""
        opened = self.registry.drop(path)
        if opened is not None:
            log.debug("closing %s", path)
            self.run_task(self._close(opened), f"close {path}")

    async def _close(self, opened: OpenSession) -> None:
        await asyncio.to_thread(opened.session.close)
        del opened  # let it go before giving freed memory back
        now = time.monotonic()
        if now - self._trimmed >= TRIM_EVERY:  # what the closed sessions held goes back to the system
            self._trimmed = now
            await asyncio.to_thread(release_freed)

    def created_inside(self, registry: Registry, path: str) -> None:
        """After creating ``path``: if a folder was swapped for a link meanwhile and the file landed
        outside the roots, take it back and refuse (the check before creating is the rule; this
        closes the race)."""
        try:
            registry.check(path)
        except SessionNotFoundError:
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise

    async def with_session(self, ref: str, fn: Callable[[OpenSession], T]) -> T:
        """``fn`` on the open session ``ref`` (caught up with its file first), in a worker thread under its lock."""
        opened = await self.open(ref)
        if opened.session.file.changed_since_read():  # one stat: every answer is the file as it is now
            await self.freshen(opened)

        def work(o: OpenSession) -> T:
            try:
                return fn(o)
            finally:
                weigh(o)

        async with opened.lock:
            out = await asyncio.to_thread(work, opened)
        self.keep_bounded()
        return out

    async def locked_call(self, opened: OpenSession, fn: Callable[[], T]) -> T:
        """``fn`` in a worker thread under the session's lock: a compaction's steps, which read, then
        write (see :meth:`writing`)."""
        async with self.writing(opened):
            return await asyncio.to_thread(fn)

    @contextlib.asynccontextmanager
    async def writing(self, opened: OpenSession) -> AsyncIterator[None]:
        """The session's lock for work that reads, then writes.  Another process's write lock is
        waited for first, outside the session's lock (reads are answered meanwhile; past
        ``appendLockTimeout`` it fails, before any model call), and kept until the work is done."""
        file = opened.session.file
        if not file.take_lock(wait=False):
            await asyncio.to_thread(file.take_lock)
        try:
            async with opened.lock:
                yield
        finally:
            await asyncio.to_thread(file.release_lock)

    def window(self, settings: CompactionSettings | None = None) -> int:
        return (settings or self.config.compaction).resolved_window()

    def decision(self, s: Session, size: Size) -> Any:
        last = size.last
        leaf = s.leaf()
        last_id = s.leaf_id()
        last_parent = None
        if leaf is not None and s.tree.parent[leaf] >= 0:
            last_parent = s.tree.id_of(s.tree.parent[leaf])
        return decide(
            last,
            last_id=last_id,
            last_parent=last_parent,
            context_tokens=size.tokens,
            window=self.window(),
            settings=self.config.compaction,
        )

    def usage(self, s: Session, tokens: int) -> p.ContextUsage:
        window = self.window()
        threshold = self.config.compaction.threshold(window)
        return p.ContextUsage(s.path, tokens, window, round(100.0 * tokens / window, 1), threshold, s.leaf_id())
