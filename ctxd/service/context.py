"""The context job: ``context/build`` (the next request's context, from the kept context of
:mod:`ctxd.context.live`), and ``context/composition`` with ``context/compositionChanged``: what fills a
session's context and how it grew (``ctxd.context.composition``), sent again whenever the session changes
once a client has asked for it.

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
from ctxd.context.live import live_context
from ctxd.context.openai import to_openai
from ctxd.context.truncate import is_oversized, limit_chars, truncate_tool_result
from ctxd.errors import CtxdError, SessionNotFoundError
from ctxd.service import protocol as p
from ctxd.service.core import Core
from ctxd.service.registry import OpenSession

log = logging.getLogger(__name__)
MAX_FOLLOWED = 64
"""Compositions followed at once (a client follows the one it shows; the oldest follow is let go)."""


class Context:
    def __init__(self, core: Core) -> None:
        self.core = core
        self.config = core.config
        self._followed: dict[str, int] = {}
        """Session paths whose composition a client follows -> the ``top`` it last asked for."""
        self._pending: set[str] = set()
        """Followed sessions whose composition is about to be computed again."""

    async def context_build(self, params: p.ContextBuildParams) -> dict[str, Any]:
        def work(opened: OpenSession) -> dict[str, Any]:
            s = opened.session
            live = live_context(s)  # kept between requests: an append costs what it adds
            ctx = live.context(params.leafId)
            revision = live.revision()
            base = 0
            if params.sinceLeafId and params.sinceRevision == revision and params.format == "pi":
                base = live.unchanged_prefix(params.sinceLeafId, params.leafId)
            with_messages = params.includeMessages and params.format == "pi"
            out = ctx.to_json(with_messages=with_messages, start=base)
            out["base"] = base
            out["revision"] = revision
            messages = ctx.agent_messages() if params.format == "openai" or params.countModel else None
            if params.truncateToolResults:
                limit = limit_chars(params.contextWindow or self.core.window())
                truncated = [i for i in range(base, len(ctx.messages)) if is_oversized(ctx.messages[i].message, limit)]
                if messages is None:
                    messages = ctx.agent_messages()
                for i in truncated:
                    messages[i] = truncate_tool_result(messages[i], limit)
                    if with_messages:
                        out["messages"][i - base]["message"] = messages[i]
                out["truncated"] = [ctx.messages[i].entryId for i in truncated]
            if params.format == "openai":
                assert messages is not None
                problems: list[str] = []
                out["openai"] = to_openai(messages, problems)
                out["diagnostics"] = out["diagnostics"] + [{"line": None, "message": m} for m in problems]
            out["usage"] = p.to_json(self.core.usage(s, ctx.contextTokens))
            if params.countModel:
                from ctxd.context.exact import exact_tokens

                assert messages is not None
                total, each = exact_tokens(messages, params.countModel)
                out["exactTokens"] = {"model": params.countModel, "tokens": total, "perMessage": each}
            return out

        return await self.core.with_session(params.session, work)

    def _composition(self, opened: OpenSession, leaf_id: str | None, top: int) -> dict[str, Any]:
        s = opened.session
        settings = self.config.compaction
        window = self.core.window()
        found = composition(
            s, leaf_id, window=window, threshold=settings.threshold(window), reserve=settings.reserve_tokens, top=top
        )
        return {"session": s.path, **found.to_json()}

    async def context_composition(self, params: p.ContextCompositionParams) -> dict[str, Any]:
        opened = await self.core.open(params.session)
        if params.leafId is None:
            path = opened.session.path
            self._followed.pop(path, None)
            self._followed[path] = params.top
            if len(self._followed) > MAX_FOLLOWED:  # the one followed longest ago is let go
                del self._followed[next(iter(self._followed))]
        return await self.core.with_session(params.session, lambda o: self._composition(o, params.leafId, params.top))

    def follows(self, path: str) -> bool:
        """Whether a client follows the composition of the session at ``path`` (it is then kept open)."""
        return path in self._followed

    def session_changed(self, path: str) -> None:
        """After a ``session/didChange``: a followed composition is computed again and sent."""
        if path not in self._followed or path in self._pending:
            return  # not followed, or a computation is pending that will see this change too
        self._pending.add(path)
        self.core.run_task(self._send_composition(path), f"composition {path}")

    async def _send_composition(self, path: str) -> None:
        try:
            await asyncio.sleep(0)  # let the change's other notifications leave first
            self._pending.discard(path)
            if path not in self._followed:
                return
            top = self._followed[path]
            # Closed meanwhile (past the budget): opened again, as a request would (ctxd.service.keeping).
            result = await self.core.with_session(path, lambda o: self._composition(o, None, top))
        except SessionNotFoundError:
            self._followed.pop(path, None)  # deleted: nothing left to follow
            return
        except CtxdError as exc:
            log.warning("cannot compute the composition of %s: %s", path, exc.message)
            return
        self.core.emit(p.COMPOSITION_CHANGED, result)
