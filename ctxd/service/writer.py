"""Each open session's append writer: a queue written in order by one task (group commit), under
one rule — an append is either answered with its result or not written.

* An append waits in the queue until the writer claims it, in the worker thread, just before
  writing it.  A cancel (``$/cancelRequest``) that comes first takes it out of the queue: it is
  never written, and the request fails with -32800.  A cancel that comes later changes nothing:
  the request is answered with the append's result.
* The writer waits for another process's write lock *before* it takes the session's own lock, so
  reads of the session (``context/build``, ``session/tree``, ...) go on meanwhile and serve the
  state last read; the wait is bounded by ``appendLockTimeout`` (-31010 naming the holder), and
  shutdown ends it at once.
* The writer never dies whatever its callers do: every answer is guarded (a caller may be gone),
  and a failure fails only the appends it concerns; the writer logs it and carries on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Any

import attrs

from ctxd.context.live import size_of
from ctxd.errors import CtxdError, SessionError
from ctxd.service import protocol as p
from ctxd.service.core import AutoCompact, Core
from ctxd.service.keeping import weigh
from ctxd.service.registry import OpenSession
from ctxd.store.session_file import LEAF, Durability

log = logging.getLogger(__name__)

QUEUED, WRITING, WITHDRAWN = "queued", "writing", "withdrawn"


@attrs.define(eq=False)
class Append:
    """One ``session/append`` (or an append a method makes) waiting for the writer."""

    entries: list[dict[str, Any]]
    parent: str | None
    use_leaf: bool
    mode: str | None
    future: asyncio.Future[dict[str, Any]]
    fields: list[tuple[str, str]] | None = None
    state: str = QUEUED
    _guard: threading.Lock = attrs.field(factory=threading.Lock)

    def claim(self) -> bool:
        """In the worker thread, just before writing: True when it is to be written (from then on a
        cancel is answered with its result)."""
        with self._guard:
            if self.state != QUEUED:
                return False
            self.state = WRITING
            return True

    def withdraw(self) -> bool:
        """Take it out before it is written: True when it never will be."""
        with self._guard:
            if self.state == QUEUED:
                self.state = WITHDRAWN
            return self.state == WITHDRAWN

    def answer(self, result: dict[str, Any]) -> None:
        if not self.future.done():  # its caller may have gone (cancelled before the write)
            self.future.set_result(result)

    def fail(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc if isinstance(exc, Exception) else CtxdError(str(exc) or repr(exc)))


class Appends:
    """The appends of every open session (each :class:`OpenSession` holds its queue and writer task)."""

    def __init__(self, core: Core, auto_compact: AutoCompact) -> None:
        self.core = core
        self.auto_compact = auto_compact

    async def append(
        self,
        opened: OpenSession,
        entries: list[dict[str, Any]],
        parent: str | None,
        *,
        use_leaf: bool,
        mode: str | None = None,
        fields: list[tuple[str, str]] | None = None,
    ) -> dict[str, Any]:
        """Queue an append and wait for its result; concurrent appends to one session are written
        together, in order, by one worker-thread hop, each still acknowledged only once written."""
        item = Append(entries, parent, use_leaf, mode, asyncio.get_running_loop().create_future(), fields)
        opened.queue.append(item)
        if opened.writer is None or opened.writer.done():
            opened.writer = self.core.run_task(self._drain(opened), f"writer {opened.session.path}")
        while True:
            try:
                return await asyncio.shield(item.future)
            except asyncio.CancelledError:
                if item.withdraw():
                    with contextlib.suppress(ValueError):
                        opened.queue.remove(item)
                    item.future.cancel()
                    raise
                # Being written (or written): the answer is its result, whoever cancelled.
                log.info("a cancel came while an append to %s was written: answered", opened.session.path)
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()

    async def _drain(self, opened: OpenSession) -> None:
        while opened.queue:
            batch, opened.queue = opened.queue, []
            writing = asyncio.ensure_future(self._write_batch(opened, batch))
            try:
                await asyncio.shield(writing)
            except asyncio.CancelledError:
                # The daemon is closing: what is still queued is not written; what is being written
                # is finished and answered (lock waits end at once: see Core.close).
                stopped = SessionError("the daemon is shutting down: not appended", path=opened.session.path)
                for item in [*batch, *opened.queue]:
                    if item.withdraw():
                        item.fail(stopped)
                opened.queue = []
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await writing
                raise
            except Exception as exc:  # a bug: it fails this batch's unanswered appends, never the writer
                log.exception("the writer of %s failed", opened.session.path)
                for item in batch:
                    if item.withdraw():
                        item.fail(exc)
                    elif not item.future.done():
                        item.fail(CtxdError(f"internal error after writing: {exc}", session=opened.session.path))

    async def _write_batch(self, opened: OpenSession, batch: list[Append]) -> None:
        s = opened.session
        try:
            # Another process's lock first, outside the session's lock: reads are not held up by it.
            # Mostly it is free: taken at once on the loop, the thread hop only when it must wait.
            if not s.file.take_lock(wait=False):
                await asyncio.to_thread(s.file.take_lock)
        except CtxdError as exc:
            for item in batch:
                if item.withdraw():
                    item.fail(exc)  # nothing written
            return
        if opened.lock.locked():
            # Busy in this process (a compaction writing, a branch summary): other processes need
            # not wait for that; the append takes the lock again (timed) once it may write.
            await asyncio.to_thread(s.file.release_lock)

        def work() -> tuple[list[list[str] | BaseException | None], Any, Any]:
            results: list[list[str] | BaseException | None] = []
            try:
                for item in batch:
                    if not item.claim():
                        results.append(None)  # withdrawn: cancelled, or the daemon is closing
                        continue
                    try:
                        results.append(
                            s.append(
                                item.entries,
                                parent_id=LEAF if item.use_leaf else item.parent,
                                durability=Durability(item.mode) if item.mode else None,
                                fields=item.fields,
                            )
                        )
                    except Exception as exc:  # one bad append fails alone
                        results.append(exc)
            finally:
                s.file.release_lock()
            try:
                size = size_of(s)
                weigh(opened)
                return results, size, self.core.decision(s, size)
            except Exception:  # the appends are written: they are answered whatever happens here
                log.exception("cannot size %s after an append", s.path)
                return results, None, None

        async with opened.lock:
            results, size, decision = await asyncio.to_thread(work)
        self.core.registry.touch(s.path)
        usage = self.core.usage(s, size.tokens) if size is not None else None
        leaf = s.leaf_id()
        for item, result in zip(batch, results, strict=True):
            if result is None:
                continue
            if isinstance(result, BaseException):
                item.fail(result)
                continue
            self.core.emit(p.DID_CHANGE, p.DidChange(s.path, s.file.session_id, result, leaf, "ctxd"))
            item.answer(
                {
                    "ids": result,
                    "leafId": leaf,
                    "usage": p.to_json(usage) if usage is not None else None,
                    "compactionDue": decision is not None and decision.trigger is not None,
                    "reason": decision.reason if decision is not None else "the context size could not be computed",
                }
            )
        if usage is not None:
            self.core.emit(p.CONTEXT_USAGE, usage)
            self.auto_compact(opened, decision)
