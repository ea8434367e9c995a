"""Watching session roots with watchfiles (inotify), so files written by agents show up at once.

Roots that do not exist yet are picked up when they appear; a root that vanishes is survived.
Only ``*.jsonl`` files are reported, and the ``files`` named (opencode's databases: a change to one or to its
``-wal`` is reported as a modification of the database).  Every change is handed to ``on_change(path, kind)`` with
kind "added", "modified" or "deleted"; the receiver re-reads from its saved offset, so coalesced
or missed events lose nothing.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Iterable

log = logging.getLogger(__name__)

OnChange = Callable[[str, str], Awaitable[None]]
RESCAN_SECONDS = 1.0


class Watcher:
    def __init__(
        self,
        roots: list[str],
        on_change: OnChange,
        *,
        step_ms: int = 10,
        on_live: Callable[[], Awaitable[None]] | None = None,
        files: Iterable[str] = (),
    ) -> None:
        """``on_live``: called once the watch is live (what changed before it began is not an event)."""
        files = list(files)
        self.files = {os.path.realpath(f): f for f in files}
        for real, given in list(self.files.items()):
            self.files[real + "-wal"] = given
            self.files[given + "-wal"] = given
            self.files.setdefault(given, given)
        self.roots = roots
        self.folders = list(dict.fromkeys(os.path.dirname(f) for f in files))
        """The databases' folders, watched without their subfolders (opencode keeps git snapshots there)."""
        self.on_change = on_change
        self.step_ms = step_ms
        self.on_live = on_live
        self._stop = asyncio.Event()

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        loops = [self._watch(self.roots, recursive=True)]
        if self.folders:
            loops.append(self._watch(self.folders, recursive=False))
        await asyncio.gather(*loops)

    async def _watch(self, roots: list[str], *, recursive: bool) -> None:
        """Watch ``roots`` (with their subfolders: session roots; without: the databases' folders)."""
        from watchfiles import Change, awatch

        kinds = {Change.added: "added", Change.modified: "modified", Change.deleted: "deleted"}
        previous: set[str] | None = None
        while not self._stop.is_set():
            existing = [r for r in roots if os.path.isdir(r)]
            # Roots that appeared since the last watch may already hold files (made with the root).
            appeared = [] if previous is None else [r for r in existing if r not in previous]
            previous = set(existing)
            if not existing:
                await self._sleep(RESCAN_SECONDS)
                continue
            try:
                async for changes in awatch(
                    *existing,
                    stop_event=self._stop,
                    step=self.step_ms,
                    debounce=400,
                    rust_timeout=int(RESCAN_SECONDS * 1000),
                    yield_on_timeout=True,
                    recursive=recursive,
                    ignore_permission_denied=True,
                ):
                    if self.on_live is not None:
                        live, self.on_live = self.on_live, None
                        try:
                            await live()
                        except Exception:
                            log.exception("catching up once the watch was live failed")
                    if appeared and not recursive:
                        # A database's folder appeared: the database may have been written before the watch.
                        for path in sorted({f for f in self.files.values() if os.path.dirname(f) in appeared}):
                            if os.path.exists(path):
                                await self._deliver(path, "modified")
                        appeared = []
                    if appeared and recursive:
                        # The watch is live now: report what the new roots held before it began
                        # (a file also reported by an event is harmless: the receiver re-reads).
                        for path in await asyncio.to_thread(_sessions_under, appeared):
                            await self._deliver(path, "added")
                        appeared = []
                    # Deletions first, then additions, then modifications, in path order.
                    order = {"deleted": 0, "added": 1, "modified": 2}
                    events = sorted(
                        {
                            (path, kinds[c])
                            for c, path in changes
                            if recursive and path.endswith(".jsonl") and c in kinds
                        }
                        | {(self.files[path], "modified") for c, path in changes if path in self.files},
                        key=lambda e: (order[e[1]], e[0]),
                    )
                    for path, kind in events:
                        await self._deliver(path, kind)
                    if [r for r in roots if os.path.isdir(r)] != existing:
                        break  # a root appeared or vanished: watch the new set
            except (FileNotFoundError, RuntimeError, OSError) as exc:
                log.warning("watching %s stopped (%s); restarting", existing, exc)
                await self._sleep(0.2)

    async def _deliver(self, path: str, kind: str) -> None:
        try:
            await self.on_change(path, kind)
        except Exception:
            log.exception("handling %s of %s failed", kind, path)

    async def _sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except TimeoutError:
            pass


def _sessions_under(roots: list[str]) -> list[str]:
    found: list[str] = []
    for root in roots:
        for directory, _, files in os.walk(root):
            found.extend(os.path.join(directory, name) for name in sorted(files) if name.endswith(".jsonl"))
    return found
