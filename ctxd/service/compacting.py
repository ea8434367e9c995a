"""The compaction job: manual compactions and dry runs, automatic ones (threshold, overflow, cache-aware
scheduling), tool-result truncation after an overflow, branches, and ``session/ledger`` (every compaction a
session holds)."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from typing import TYPE_CHECKING, Any

import attrs

from ctxd.compaction.settings import CompactionSettings
from ctxd.context.live import size_of
from ctxd.errors import CancelledError, CompactionError, CtxdError
from ctxd.service import protocol as p
from ctxd.service.core import Core
from ctxd.service.registry import OpenSession, Registry
from ctxd.store.listing import cwd_dirname

if TYPE_CHECKING:  # the compaction engine loads on first use: it is not needed to start serving
    from ctxd.compaction.summary import Progress


log = logging.getLogger(__name__)


class Compaction:
    def __init__(self, core: Core) -> None:
        self.core = core
        self.config = core.config
        self.registry = core.registry

    # --- compaction and branching -------------------------------------------------------------

    def _settings(self, keep_recent: int | None) -> CompactionSettings:
        settings = attrs.evolve(self.config.compaction)
        if keep_recent is not None:
            settings.keep_recent_tokens = keep_recent
        return settings

    async def compact(self, params: p.CompactParams, progress: Progress | None = None) -> dict[str, Any]:
        from ctxd.compaction.cut.plan import NothingToCompact
        from ctxd.compaction.engine import dry_run_json

        settings = self._settings(params.keepRecentTokens)
        if params.dryRun:

            def plan(o: OpenSession) -> dict[str, Any]:
                try:
                    return dry_run_json(o.session, settings, leaf_id=params.leafId)
                except NothingToCompact as exc:  # as a real compaction reports it, not as a bug
                    raise CompactionError(f"nothing to compact: {exc}", path=o.session.path) from exc

            return await self.core.with_session(params.session, plan)
        opened = await self.core.open(params.session)
        if opened.session.file.read_only:
            # Another agent's transcript is never written: compact a pi fork of it instead.
            source = opened.session.path
            leaf = params.leafId or opened.session.leaf_id()
            if leaf is None:
                raise CompactionError("the transcript is empty: nothing to compact", path=source)
            root = self.config.roots[0]
            pi = Registry(self.config.roots)
            pi.check_destination(os.path.join(root, cwd_dirname(opened.session.file.cwd)))
            fork = await self.core.with_session(params.session, lambda o: o.session.fork(leaf, root=root))
            self.core.created_inside(pi, fork)
            forked = await self.core.open(fork)
            self.core.emit(p.DID_CREATE, p.DidCreate(fork, forked.session.file.session_id))
            out = await self._compact(forked, settings, "manual", None, params.instructions, progress)
            return {**out, "session": fork, "forkedFrom": source}
        return await self._compact(opened, settings, "manual", params.leafId, params.instructions, progress)

    async def _compact(
        self,
        opened: OpenSession,
        settings: CompactionSettings,
        trigger: str,
        leaf_id: str | None,
        instructions: str | None,
        progress: Progress | None = None,
        retry: bool = False,
    ) -> dict[str, Any]:
        from ctxd.compaction.engine import compact

        s = opened.session
        async with opened.lock:
            leaf = leaf_id or s.leaf_id()
            before = await asyncio.to_thread(lambda: size_of(s, leaf))
        self.core.emit(p.COMPACTION_STATUS, p.CompactionStatus(s.path, "running", trigger, before.tokens))
        try:
            outcome = await compact(
                s,
                settings,
                trigger=trigger,
                leaf_id=leaf,
                instructions=instructions,
                progress=progress,
                hook=None if self.core.hook is None else functools.partial(self.core.hook, s.path, trigger),
                guard=lambda fn: self.core.locked_call(opened, fn),
            )
        except (asyncio.CancelledError, CancelledError):
            self.core.emit(p.COMPACTION_STATUS, p.CompactionStatus(s.path, "cancelled", trigger, before.tokens))
            raise
        except CtxdError as exc:
            self.core.emit(
                p.COMPACTION_STATUS,
                p.CompactionStatus(s.path, "failed", trigger, before.tokens, error=exc.message),
            )
            raise
        except Exception as exc:
            self.core.emit(
                p.COMPACTION_STATUS, p.CompactionStatus(s.path, "failed", trigger, before.tokens, error=str(exc))
            )
            raise CompactionError(f"compaction failed: {exc}", session=s.path) from exc
        self.core.emit(
            p.COMPACTION_STATUS,
            p.CompactionStatus(
                s.path,
                "succeeded",
                trigger,
                outcome.tokensBefore,
                outcome.tokensAfter,
                entryId=outcome.entryId,
                retry=retry,
                path=outcome.path,
            ),
        )
        self.core.emit(p.DID_CHANGE, p.DidChange(s.path, s.file.session_id, [outcome.entryId], s.leaf_id(), "ctxd"))
        async with opened.lock:
            size = await asyncio.to_thread(lambda: size_of(s))
        self.core.emit(p.CONTEXT_USAGE, self.core.usage(s, size.tokens))
        out = outcome.to_json()
        out["retry"] = retry
        return out

    async def branch(self, params: p.BranchParams) -> dict[str, Any]:
        from ctxd.compaction.branching import branch as run_branch

        opened = await self.core.open(params.session)
        s = opened.session
        async with self.core.writing(opened):
            # The branch summary's model call holds the lock: the leaf must not move meanwhile.
            outcome = await run_branch(
                s,
                params.entryId,
                summarize=params.summarize,
                settings=self.config.compaction,
                instructions=params.instructions,
                guard=asyncio.to_thread,
            )
        new = [i for i in (outcome.summaryEntryId, outcome.markerId) if i]
        self.core.emit(p.DID_CHANGE, p.DidChange(s.path, s.file.session_id, new, s.leaf_id(), "ctxd"))
        async with opened.lock:
            size = await asyncio.to_thread(lambda: size_of(s))
        self.core.emit(p.CONTEXT_USAGE, self.core.usage(s, size.tokens))
        return outcome.to_json()

    async def session_ledger(self, params: p.SessionParams) -> dict[str, Any]:
        """Every compaction in the session, newest first: when, why, tokens, model, cost, duration."""

        def work(opened: OpenSession) -> dict[str, Any]:
            s = opened.session
            heads = s.file.heads
            wanted = [i for i, h in enumerate(heads) if h.type == "compaction"]
            leaf = s.leaf()
            active = set(s.tree.path_to_root(leaf)) if leaf is not None else set()
            rows = []
            for i, body in zip(wanted, s.file.entries(wanted), strict=True):
                raw_details = body.get("details")
                details: dict[str, Any] = raw_details if isinstance(raw_details, dict) else {}
                raw_ledger = details.get("ctxd")
                ledger: dict[str, Any] = raw_ledger if isinstance(raw_ledger, dict) else {}
                summary = str(body.get("summary", ""))
                rows.append(
                    {
                        "entryId": body.get("id"),
                        "line": s.file.lines[i],
                        "timestamp": body.get("timestamp"),
                        "trigger": ledger.get("trigger"),
                        "tokensBefore": body.get("tokensBefore"),
                        "tokensAfter": ledger.get("tokensAfter"),
                        "summarizer": ledger.get("summarizer") or ("hook" if body.get("fromHook") else None),
                        "model": ledger.get("model"),
                        "path": ledger.get("path"),
                        "cost": ledger.get("cost"),
                        "durationMs": ledger.get("durationMs"),
                        "failures": ledger.get("failures", []),
                        "firstKeptEntryId": body.get("firstKeptEntryId"),
                        "onActivePath": i in active,
                        "madeBy": "ctxd" if ledger else "other",
                        "instructions": p.capped(ledger.get("instructions"), p.NAME_LIMIT),
                        "mustKeep": ledger.get("mustKeep"),
                        "messagesSummarized": ledger.get("messagesSummarized"),
                        "summaryPreview": " ".join(summary.split())[:200],
                    }
                )
            rows.reverse()
            return {"session": s.path, "compactions": rows}

        return await self.core.with_session(params.session, work)

    # --- auto-compaction ----------------------------------------------------------------------

    def maybe_auto(self, opened: OpenSession, decision: Any) -> None:
        """Start (or schedule) a background compaction when ``decision`` says one is due."""
        if not self.config.auto_compact or not self.config.compaction.enabled or decision.trigger is None:
            if opened.scheduled is not None:
                opened.scheduled.cancel()  # no longer due (compacted elsewhere, or disabled)
                opened.scheduled = None
            return
        if opened.compaction is not None and not opened.compaction.done():
            return
        if opened.scheduled is not None:
            opened.scheduled.cancel()
            opened.scheduled = None
        ttl = self.config.prompt_cache_ttl_seconds
        if decision.trigger == "threshold" and ttl:
            # Cache-aware: compacting rewrites the prompt prefix, so wait until just before the
            # provider's cache would expire anyway; new activity re-arms the timer.
            delay = max(0.0, ttl - min(5.0, ttl * 0.1))
            loop = asyncio.get_running_loop()
            opened.scheduled = loop.call_later(delay, self._start_auto, opened, decision)
            return
        self._start_auto(opened, decision)

    def _start_auto(self, opened: OpenSession, decision: Any) -> None:
        opened.scheduled = None
        retry = decision.trigger == "overflow"
        opened.compaction = self.core.run_task(
            self._auto(opened, decision.trigger, decision.leafId, retry), f"auto-compact {opened.session.path}"
        )

    async def _auto(self, opened: OpenSession, trigger: str, leaf: str | None, retry: bool) -> None:
        try:
            await self._compact(opened, self.config.compaction, trigger, leaf, None, retry=retry)
        except CtxdError as exc:
            log.warning("auto-compaction of %s failed: %s", opened.session.path, exc.message)
            if trigger == "overflow" and leaf is not None and leaf not in opened.truncation_attempted:
                # Nothing left to summarise: cut oversized tool results instead (once per overflow).
                opened.truncation_attempted.add(leaf)
                await self._truncate(opened, leaf)

    async def _truncate(self, opened: OpenSession, leaf: str) -> None:
        from ctxd.compaction.replay import truncate_by_replay

        s = opened.session
        window = self.core.window()
        outcome = await self.core.locked_call(opened, lambda: truncate_by_replay(s, window, leaf_id=leaf))
        if not outcome.truncated:
            self.core.emit(
                p.COMPACTION_STATUS,
                p.CompactionStatus(s.path, "failed", "overflow", error="nothing to compact and nothing to truncate"),
            )
            return
        self.core.emit(
            p.COMPACTION_STATUS,
            p.CompactionStatus(
                s.path,
                "succeeded",
                "overflow",
                outcome.tokensBefore,
                outcome.tokensAfter,
                entryId=outcome.leafId,
                retry=True,
                path="truncate-tool-results",
            ),
        )
        self.core.emit(p.DID_CHANGE, p.DidChange(s.path, s.file.session_id, [], s.leaf_id(), "ctxd"))
