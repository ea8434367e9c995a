"""The service layer: every daemon method as one async function over the layers below.

Requests on one session are serialised by its lock and run off the event loop (disk I/O happens
in worker threads); different sessions proceed concurrently.  A compaction holds the lock only to
plan and to write, so ``context/build`` during a compaction answers from the state before it.
Notifications leave through ``notify(method, payload)``: the server sends them, tests record them.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from ctxd.compaction.overflow import decide
from ctxd.compaction.settings import CompactionSettings
from ctxd.context.build import Size, build_context, context_size
from ctxd.context.openai import to_openai
from ctxd.context.truncate import is_oversized, limit_chars, truncate_tool_result
from ctxd.context.view import project, run_rows
from ctxd.errors import CancelledError, CompactionError, CtxdError, InvalidEntryError
from ctxd.service import protocol as p
from ctxd.service.config import Config
from ctxd.service.registry import OpenSession, Registry, inside
from ctxd.store.create import create_session
from ctxd.store.listing import list_sessions
from ctxd.store.session_file import LEAF, Durability
from ctxd.tree.session import Session

if TYPE_CHECKING:  # the compaction engine loads on first use: it is not needed to start serving
    from ctxd.compaction.engine import HookDecision
    from ctxd.compaction.plan import CompactionPlan
    from ctxd.compaction.summarizers import Progress

    SessionHook = Callable[[str, str, CompactionPlan], Awaitable[HookDecision | None]]
    """The client's compact/willRun hook: (session path, trigger, plan) -> its decision."""

log = logging.getLogger(__name__)
T = TypeVar("T")
Notify = Callable[[str, Any], None]


class Service:
    def __init__(self, config: Config, notify: Notify | None = None) -> None:
        self.config = config
        self.notify: Notify = notify or (lambda method, payload: None)
        self.registry = Registry(config.all_roots)
        self.hook: SessionHook | None = None
        """The client's compact/willRun hook, called with the session's path, the trigger and the plan."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._announced: set[str] = set()
        """Session files announced with session/didCreate (by a method or by the watcher)."""

    # --- plumbing -----------------------------------------------------------------------------

    def _emit(self, method: str, payload: Any) -> None:
        try:
            self.notify(method, p.to_json(payload))
        except Exception:  # a broken client connection must not break the operation
            log.exception("could not send %s", method)

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
            if opened.scheduled is not None:
                opened.scheduled.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for opened in self.registry.open.values():
            opened.session.file.close()

    async def _open(self, ref: str) -> OpenSession:
        # Resolving an id may read every session header under the roots: not on the event loop.
        path = await asyncio.to_thread(self.registry.resolve, ref)
        opened = self.registry.get(path)
        if opened is not None:
            return opened
        session = await asyncio.to_thread(Session.open, path, durability=self.config.durability_mode)
        return self.registry.add(path, session)

    async def _with(self, ref: str, fn: Callable[[OpenSession], T]) -> T:
        opened = await self._open(ref)
        async with opened.lock:
            return await asyncio.to_thread(fn, opened)

    async def _locked_call(self, opened: OpenSession, fn: Callable[[], T]) -> T:
        async with opened.lock:
            return await asyncio.to_thread(fn)

    def window(self, settings: CompactionSettings | None = None) -> int:
        return (settings or self.config.compaction).resolved_window()

    # --- sessions -----------------------------------------------------------------------------

    async def session_list(self, params: p.SessionListParams) -> dict[str, Any]:
        roots = self.config.all_roots
        if params.roots:
            outside = [r for r in params.roots if not inside(r, self.config.all_roots)]
            if outside:
                raise CtxdError(f"roots outside the configured roots: {outside}", roots=outside)
            roots = params.roots
        found = await asyncio.to_thread(list_sessions, roots, params.cwd)
        for s in found:
            # Real paths, as every other method and notification names sessions (symlinked roots).
            s.path = os.path.realpath(s.path)
            if s.parentSession:
                s.parentSession = os.path.realpath(s.parentSession)
            self.registry.remember(s.id, s.path)
        return {"roots": roots, "sessions": [s.to_json() for s in found]}

    async def session_open(self, params: p.SessionParams) -> dict[str, Any]:
        return await self._with(params.session, self._info)

    def _info(self, opened: OpenSession) -> dict[str, Any]:
        s = opened.session
        size = context_size(s.file, s.tree, estimates=s.estimates)
        return {
            "path": s.path,
            "sessionId": s.file.session_id,
            "cwd": s.file.cwd,
            "name": s.tree.name,
            "version": s.file.version,
            "entries": len(s.file),
            "leafId": s.leaf_id(),
            "usage": p.to_json(self._usage(s, size.tokens)),
            "diagnostics": [d.to_json() for d in s.file.diagnostics],
            "readOnly": s.file.read_only,
            "agent": s.file.header.get("agent", "pi"),
        }

    async def session_create(self, params: p.SessionCreateParams) -> dict[str, Any]:
        root = params.root or self.config.roots[0]
        if not inside(root, self.config.roots) and root not in self.config.roots:
            raise CtxdError(f"root {root!r} is not a configured session root", root=root)
        path = await asyncio.to_thread(create_session, root, params.cwd)
        opened = await self._open(path)
        self._did_create(opened.session.path, opened.session.file.session_id)
        if params.name:
            await self._append(opened, [{"type": "session_info", "name": params.name}], None, use_leaf=True)
        return await self._with(path, self._info)

    async def session_append(self, params: p.SessionAppendParams, *, explicit_parent: bool) -> dict[str, Any]:
        entries = list(params.entries)
        for i, m in enumerate(params.messages):
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                raise InvalidEntryError(f"messages[{i}] must be an object with a string 'role'", index=i)
            entries.append({"type": "message", "message": m})
        if not entries:
            raise InvalidEntryError("nothing to append: give entries or messages")
        opened = await self._open(params.session)
        return await self._append(
            opened, entries, params.parentId, use_leaf=not explicit_parent, mode=params.durability
        )

    async def _append(
        self,
        opened: OpenSession,
        entries: list[dict[str, Any]],
        parent: str | None,
        *,
        use_leaf: bool,
        mode: str | None = None,
    ) -> dict[str, Any]:
        """Queue an append; concurrent appends to one session are written together, in order, by
        one worker-thread hop (group commit), each still acknowledged only once written."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        opened.queue.append(_Append(entries, parent, use_leaf, mode, future))
        if opened.writer is None or opened.writer.done():
            opened.writer = self.run_task(self._drain(opened), f"writer {opened.session.path}")
        return await future

    async def _drain(self, opened: OpenSession) -> None:
        s = opened.session
        while opened.queue:
            batch, opened.queue = opened.queue, []

            def work(batch: list[_Append] = batch) -> tuple[list[list[str] | BaseException], Size, Any]:
                results: list[list[str] | BaseException] = []
                for item in batch:
                    try:
                        results.append(
                            s.append(
                                item.entries,
                                parent_id=LEAF if item.use_leaf else item.parent,
                                durability=Durability(item.mode) if item.mode else None,
                            )
                        )
                    except Exception as exc:  # one bad append fails alone
                        results.append(exc)
                size = context_size(s.file, s.tree, estimates=s.estimates)
                return results, size, self._decision(s, size)

            try:
                async with opened.lock:
                    results, size, decision = await asyncio.to_thread(work)
            except BaseException as exc:
                for item in batch:
                    if not item.future.done():
                        item.future.set_exception(exc if isinstance(exc, Exception) else CtxdError(str(exc)))
                if not isinstance(exc, Exception):
                    raise
                continue
            opened.last_activity = time.monotonic()
            usage = self._usage(s, size.tokens)
            leaf = s.leaf_id()
            for item, result in zip(batch, results, strict=True):
                if isinstance(result, BaseException):
                    item.future.set_exception(result)
                    continue
                self._emit(p.DID_CHANGE, p.DidChange(s.path, s.file.session_id, result, leaf, "ctxd"))
                item.future.set_result(
                    {
                        "ids": result,
                        "leafId": leaf,
                        "usage": p.to_json(usage),
                        "compactionDue": decision.trigger is not None,
                        "reason": decision.reason,
                    }
                )
            self._emit(p.CONTEXT_USAGE, usage)
            self._maybe_auto_compact(opened, decision)

    def _decision(self, s: Session, size: Size) -> Any:
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

    def _usage(self, s: Session, tokens: int) -> p.ContextUsage:
        window = self.window()
        threshold = self.config.compaction.threshold(window)
        return p.ContextUsage(s.path, tokens, window, round(100.0 * tokens / window, 1), threshold, s.leaf_id())

    async def session_tree(self, params: p.SessionTreeParams) -> dict[str, Any]:
        def work(opened: OpenSession) -> dict[str, Any]:
            s = opened.session
            if params.fromId is not None:
                rows = run_rows(s, params.fromId, params.limit)
                total = len(rows)
            else:
                rows, total = project(s, collapse=params.collapse, offset=params.offset, limit=params.limit)
            size = context_size(s.file, s.tree, estimates=s.estimates)
            return {
                "session": s.path,
                "sessionId": s.file.session_id,
                "name": s.tree.name,
                "leafId": s.leaf_id(),
                "entries": len(s.file),
                "total": total,
                "offset": params.offset,
                "rows": [r.to_json() for r in rows],
                "usage": p.to_json(self._usage(s, size.tokens)),
                "readOnly": s.file.read_only,
            }

        return await self._with(params.session, work)

    async def session_entry(self, params: p.SessionEntryParams) -> dict[str, Any]:
        def work(opened: OpenSession) -> dict[str, Any]:
            s = opened.session
            i = s.file.require(params.entryId)
            from ctxd.context.view import node

            leaf = s.leaf()
            active = set(s.tree.path_to_root(leaf)) if leaf is not None else set()
            info = node(s, i, 0, active, leaf).to_json()
            info["entry"] = s.file.entry(i)
            info["children"] = [s.tree.id_of(c) for c in s.tree.child_ids(i)]
            return info

        return await self._with(params.session, work)

    async def session_label(self, params: p.SessionLabelParams) -> dict[str, Any]:
        opened = await self._open(params.session)
        await self._with(params.session, lambda o: o.session.file.require(params.entryId))
        entry: dict[str, Any] = {"type": "label", "targetId": params.entryId}
        if params.label:
            entry["label"] = params.label
        result = await self._append(opened, [entry], None, use_leaf=True)
        return {"labelEntryId": result["ids"][0], "entryId": params.entryId, "label": params.label}

    async def session_fork(self, params: p.SessionEntryParams) -> dict[str, Any]:
        path = await self._with(params.session, lambda o: o.session.fork(params.entryId))
        forked = await self._open(path)
        self._did_create(path, forked.session.file.session_id)
        return {
            "path": path,
            "sessionId": forked.session.file.session_id,
            "parentSession": self.registry.resolve(params.session),
        }

    async def session_stats(self, params: p.SessionParams) -> dict[str, Any]:
        def work(opened: OpenSession) -> dict[str, Any]:
            s = opened.session
            roles: dict[str, int] = {}
            types: dict[str, int] = {}
            for h in s.file.heads:
                types[h.type] = types.get(h.type, 0) + 1
                if h.message is not None:
                    roles[h.message.role] = roles.get(h.message.role, 0) + 1
            leaves = sum(1 for i in range(len(s.file)) if not s.tree.child_ids(i))
            ctx = build_context(s.file, s.tree, estimates=s.estimates)
            return {
                "session": s.path,
                "entries": len(s.file),
                "bytes": os.path.getsize(s.path),
                "types": types,
                "roles": roles,
                "leaves": leaves,
                "labels": len(s.tree.labels),
                "orphans": len(s.tree.orphans),
                "diagnostics": [d.to_json() for d in s.file.diagnostics],
                "contextMessages": len(ctx.messages),
                "usage": p.to_json(self._usage(s, ctx.contextTokens)),
            }

        return await self._with(params.session, work)

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
                        "instructions": ledger.get("instructions"),
                        "messagesSummarized": ledger.get("messagesSummarized"),
                        "summaryPreview": " ".join(summary.split())[:200],
                    }
                )
            rows.reverse()
            return {"session": s.path, "compactions": rows}

        return await self._with(params.session, work)

    # --- context ------------------------------------------------------------------------------

    async def context_build(self, params: p.ContextBuildParams) -> dict[str, Any]:
        def work(opened: OpenSession) -> dict[str, Any]:
            s = opened.session
            ctx = build_context(s.file, s.tree, params.leafId, estimates=s.estimates)
            out = ctx.to_json(with_messages=params.includeMessages and params.format == "pi")
            messages = ctx.agent_messages()
            if params.truncateToolResults:
                limit = limit_chars(params.contextWindow or self.window())
                truncated = [i for i, m in enumerate(messages) if is_oversized(m, limit)]
                for i in truncated:
                    messages[i] = truncate_tool_result(messages[i], limit)
                    if params.format == "pi" and params.includeMessages:
                        out["messages"][i]["message"] = messages[i]
                out["truncated"] = [ctx.messages[i].entryId for i in truncated]
            if params.format == "openai":
                problems: list[str] = []
                out["openai"] = to_openai(messages, problems)
                out["diagnostics"] = out["diagnostics"] + [{"line": None, "message": m} for m in problems]
            out["usage"] = p.to_json(self._usage(s, ctx.contextTokens))
            if params.countModel:
                from ctxd.context.exact import exact_tokens

                total, each = exact_tokens(messages, params.countModel)
                out["exactTokens"] = {"model": params.countModel, "tokens": total, "perMessage": each}
            return out

        return await self._with(params.session, work)

    # --- compaction and branching -------------------------------------------------------------

    def _settings(self, keep_recent: int | None) -> CompactionSettings:
        settings = attrs.evolve(self.config.compaction)
        if keep_recent is not None:
            settings.keepRecentTokens = keep_recent
        return settings

    async def compact(self, params: p.CompactParams, progress: Progress | None = None) -> dict[str, Any]:
        from ctxd.compaction.engine import dry_run
        from ctxd.compaction.plan import NothingToCompact

        settings = self._settings(params.keepRecentTokens)
        if params.dryRun:

            def plan(o: OpenSession) -> dict[str, Any]:
                try:
                    return dry_run(o.session, settings, leaf_id=params.leafId).to_json()
                except NothingToCompact as exc:  # as a real compaction reports it, not as a bug
                    raise CompactionError(f"nothing to compact: {exc}", path=o.session.path) from exc

            return await self._with(params.session, plan)
        opened = await self._open(params.session)
        if opened.session.file.read_only:
            # Another agent's transcript is never written: compact a pi fork of it instead.
            source = opened.session.path
            leaf = params.leafId or opened.session.leaf_id()
            if leaf is None:
                raise CompactionError("the transcript is empty: nothing to compact", path=source)
            fork = await self._with(params.session, lambda o: o.session.fork(leaf, root=self.config.roots[0]))
            forked = await self._open(fork)
            self._emit(p.DID_CREATE, p.DidCreate(fork, forked.session.file.session_id))
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
            before = await asyncio.to_thread(lambda: context_size(s.file, s.tree, leaf, estimates=s.estimates))
        self._emit(p.COMPACTION_STATUS, p.CompactionStatus(s.path, "running", trigger, before.tokens))
        try:
            outcome = await compact(
                s,
                settings,
                trigger=trigger,
                leaf_id=leaf,
                instructions=instructions,
                progress=progress,
                hook=None if self.hook is None else functools.partial(self.hook, s.path, trigger),
                guard=lambda fn: self._locked_call(opened, fn),
            )
        except (asyncio.CancelledError, CancelledError):
            self._emit(p.COMPACTION_STATUS, p.CompactionStatus(s.path, "cancelled", trigger, before.tokens))
            raise
        except CtxdError as exc:
            self._emit(
                p.COMPACTION_STATUS,
                p.CompactionStatus(s.path, "failed", trigger, before.tokens, error=exc.message),
            )
            raise
        except Exception as exc:
            self._emit(
                p.COMPACTION_STATUS, p.CompactionStatus(s.path, "failed", trigger, before.tokens, error=str(exc))
            )
            raise CompactionError(f"compaction failed: {exc}", session=s.path) from exc
        self._emit(
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
        self._emit(p.DID_CHANGE, p.DidChange(s.path, s.file.session_id, [outcome.entryId], s.leaf_id(), "ctxd"))
        async with opened.lock:
            size = await asyncio.to_thread(lambda: context_size(s.file, s.tree, estimates=s.estimates))
        self._emit(p.CONTEXT_USAGE, self._usage(s, size.tokens))
        out = outcome.to_json()
        out["retry"] = retry
        return out

    async def branch(self, params: p.BranchParams) -> dict[str, Any]:
        from ctxd.compaction.branching import branch as run_branch

        opened = await self._open(params.session)
        s = opened.session
        async with opened.lock:
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
        self._emit(p.DID_CHANGE, p.DidChange(s.path, s.file.session_id, new, s.leaf_id(), "ctxd"))
        async with opened.lock:
            size = await asyncio.to_thread(lambda: context_size(s.file, s.tree, estimates=s.estimates))
        self._emit(p.CONTEXT_USAGE, self._usage(s, size.tokens))
        return outcome.to_json()

    # --- auto-compaction ----------------------------------------------------------------------

    def _maybe_auto_compact(self, opened: OpenSession, decision: Any) -> None:
        if not self.config.autoCompact or not self.config.compaction.enabled or decision.trigger is None:
            if opened.scheduled is not None:
                opened.scheduled.cancel()  # no longer due (compacted elsewhere, or disabled)
                opened.scheduled = None
            return
        if opened.compaction is not None and not opened.compaction.done():
            return
        if opened.scheduled is not None:
            opened.scheduled.cancel()
            opened.scheduled = None
        ttl = self.config.promptCacheTtlSeconds
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
        opened.compaction = self.run_task(
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
        window = self.window()
        outcome = await self._locked_call(opened, lambda: truncate_by_replay(s, window, leaf_id=leaf))
        if not outcome.truncated:
            self._emit(
                p.COMPACTION_STATUS,
                p.CompactionStatus(s.path, "failed", "overflow", error="nothing to compact and nothing to truncate"),
            )
            return
        self._emit(
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
        self._emit(p.DID_CHANGE, p.DidChange(s.path, s.file.session_id, [], s.leaf_id(), "ctxd"))

    # --- live changes (from the watcher) ------------------------------------------------------

    def _did_create(self, path: str, session_id: str | None) -> None:
        # Our own new files reach the watcher too, often before the method that wrote them is done:
        # announce each file once, whoever sees it first.
        if path not in self._announced:
            self._announced.add(path)
            self._emit(p.DID_CREATE, p.DidCreate(path, session_id))

    async def file_changed(self, path: str, kind: str) -> None:
        """A session file under a root was added, modified or deleted by someone (maybe us)."""
        real = os.path.realpath(path) if kind != "deleted" else os.path.abspath(path)
        opened = self.registry.get(real)
        if kind == "deleted":
            if opened is not None or not os.path.exists(path):
                self.registry.drop(real)
                self._announced.discard(real)
                self._emit(p.DID_DELETE, p.DidDelete(real))
            return
        if kind == "added" and opened is None:
            self._did_create(real, await asyncio.to_thread(_header_id, real))
            return
        if opened is None:
            session_id = await asyncio.to_thread(_header_id, real)
            self._emit(p.DID_CHANGE, p.DidChange(real, session_id, [], None, "external"))
            return
        s = opened.session

        def work() -> tuple[Any, range, Size, Any]:
            result, new = s.refresh()
            size = context_size(s.file, s.tree, estimates=s.estimates)
            return result, new, size, self._decision(s, size)

        try:
            async with opened.lock:
                result, new, size, decision = await asyncio.to_thread(work)
        except CtxdError as exc:
            log.warning("cannot refresh %s: %s", real, exc.message)
            return
        if not result.added and not result.reloaded:
            return  # our own append, already announced; or nothing complete yet
        ids = [] if result.reloaded else [s.tree.id_of(i) for i in result.added]
        opened.last_activity = time.monotonic()
        self._emit(p.DID_CHANGE, p.DidChange(real, s.file.session_id, ids, s.leaf_id(), "external", result.reloaded))
        self._emit(p.CONTEXT_USAGE, self._usage(s, size.tokens))
        if any(_role(s, i) == "assistant" for i in new):
            self._maybe_auto_compact(opened, decision)


def _header_id(path: str) -> str | None:
    """The session id in a file's header line, if it can be read yet."""
    try:
        with open(path, "rb") as f:
            header = json.loads(f.readline(1 << 20))
    except (OSError, ValueError):
        return None
    session_id = header.get("id") if isinstance(header, dict) else None
    return session_id if isinstance(session_id, str) else None


def _role(s: Session, i: int) -> str | None:
    message = s.file.heads[i].message
    return message.role if message is not None else None


@attrs.define
class _Append:
    entries: list[dict[str, Any]]
    parent: str | None
    use_leaf: bool
    mode: str | None
    future: asyncio.Future[dict[str, Any]]
