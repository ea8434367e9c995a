"""``context/composition`` and ``context/compositionChanged``: what fills a session's context and
how it grew (``ctxd.context.composition``), sent again whenever the session changes once a client
has asked for it.

A client that asks for a session's composition at its leaf follows it: after each change of that
session (an append, another process's write, a compaction, a leaf move) the daemon computes it again
from the kept context and sends it whole, with the ``top`` the client last asked for. Changes that
arrive while one is being computed are folded into one more computation, never queued.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ctxd.context.composition import composition
from ctxd.errors import CtxdError, SessionNotFoundError
from ctxd.service import protocol as p
from ctxd.service.base import ServiceBase
from ctxd.service.registry import OpenSession

log = logging.getLogger(__name__)
MAX_FOLLOWED = 64
"""Compositions followed at once (a client follows the one it shows; the oldest follow is let go)."""


class Composing(ServiceBase):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._followed: dict[str, int] = {}
        """Session paths whose composition a client follows -> the ``top`` it last asked for."""
        self._pending: set[str] = set()
        """Followed sessions whose composition is about to be computed again."""

    def _composition(self, opened: OpenSession, leaf_id: str | None, top: int) -> dict[str, Any]:
        s = opened.session
        settings = self.config.compaction
        window = self.window()
        found = composition(
            s, leaf_id, window=window, threshold=settings.threshold(window), reserve=settings.reserve_tokens, top=top
        )
        return {"session": s.path, **found.to_json()}

    async def context_composition(self, params: p.ContextCompositionParams) -> dict[str, Any]:
        opened = await self._open(params.session)
        if params.leafId is None:
            path = opened.session.path
            self._followed.pop(path, None)
            self._followed[path] = params.top
            if len(self._followed) > MAX_FOLLOWED:  # the one followed longest ago is let go
                del self._followed[next(iter(self._followed))]
        return await self._with(params.session, lambda o: self._composition(o, params.leafId, params.top))

    def _kept_open(self, path: str) -> bool:
        return path in self._followed

    def _session_changed(self, path: str) -> None:
        if path not in self._followed or path in self._pending:
            return  # not followed, or a computation is pending that will see this change too
        self._pending.add(path)
        self.run_task(self._send_composition(path), f"composition {path}")

    async def _send_composition(self, path: str) -> None:
        try:
            await asyncio.sleep(0)  # let the change's other notifications leave first
            self._pending.discard(path)
            if path not in self._followed:
                return
            top = self._followed[path]
            # Closed meanwhile (past the budget): opened again, as a request would (ctxd.service.keeping).
            result = await self._with(path, lambda o: self._composition(o, None, top))
        except SessionNotFoundError:
            self._followed.pop(path, None)  # deleted: nothing left to follow
            return
        except CtxdError as exc:
            log.warning("cannot compute the composition of %s: %s", path, exc.message)
            return
        self._emit(p.COMPOSITION_CHANGED, result)
