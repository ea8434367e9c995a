"""The pygls server: lifecycle, the method table, notifications, progress and the client hook.

Handlers are thin: structure the params (a dict) into their attrs class, call the service, return
its JSON.  All registration happens in :func:`create_server`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidRequest
from pygls.lsp.server import LanguageServer
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage, default_converter
from pygls.protocol.language_server import LanguageServerProtocol, lsp_method

from ctxd import __version__
from ctxd.errors import CtxdError
from ctxd.redact import redact, redact_json
from ctxd.server.errors import to_jsonrpc
from ctxd.service import protocol as p
from ctxd.service.config import Config, config_from_json, show
from ctxd.service.service import Service
from ctxd.service.watch import Watcher

if TYPE_CHECKING:
    from ctxd.compaction.cut.plan import CompactionPlan
    from ctxd.compaction.engine import HookDecision

log = logging.getLogger(__name__)


def _keep_dict(obj: dict[str, Any], cls: type) -> Any:
    # pygls turns unknown methods' params into namedtuples (renaming keys); keep plain dicts.
    # JSON-RPC lets a request omit "params" (and a message may carry extra members): without
    # defaults, cls(**obj) would fail and the request would never be answered.
    names = [f.name for f in attrs.fields(cls)]
    return cls(**{name: obj.get(name) for name in names})


def converter_factory() -> Any:
    converter = default_converter()  # type: ignore[no-untyped-call]
    for cls in (JsonRPCRequestMessage, JsonRPCNotification, JsonRPCResponseMessage):
        converter.register_structure_hook(cls, _keep_dict)
    return converter


class CtxdProtocol(LanguageServerProtocol):
    initialize_seen = False

    @lsp_method(lsp.INITIALIZE)
    def lsp_initialize(self, params: lsp.InitializeParams) -> Any:
        # A second initialize would replace the configuration (roots included) and the service
        # under a watcher still bound to the old one: the LSP allows it once.
        if self.initialize_seen:
            raise JsonRpcInvalidRequest("initialize may be sent only once")
        self.initialize_seen = True
        result = yield from super().lsp_initialize(params)
        from ctxd.server.capabilities import capabilities

        result.capabilities.experimental = {"ctxd": capabilities()}
        return result


class CtxdServer(LanguageServer):
    def __init__(self, config: Config | None = None) -> None:
        super().__init__("ctxd", __version__, protocol_cls=CtxdProtocol, converter_factory=converter_factory)
        self.config = config or Config()
        self.service = Service(self.config, self._notify)
        self.watcher: Watcher | None = None
        self.hook_supported = False
        self.shutdown_requested = False

    def _notify(self, method: str, payload: Any) -> None:
        self.protocol.notify(method, payload)

    def log_to_client(self, level: lsp.MessageType, message: str) -> None:
        self.protocol.notify(lsp.WINDOW_LOG_MESSAGE, lsp.LogMessageParams(type=level, message=redact(message)))

    async def will_run_hook(self, session: str, trigger: str, plan: CompactionPlan) -> HookDecision | None:
        payload = {"session": session, "trigger": trigger, "plan": plan.to_json()}
        try:
            reply = await asyncio.wait_for(self.protocol.send_request_async(p.COMPACT_WILL_RUN, payload), 30)
        except Exception as exc:  # the hook is advisory: a failing client does not stop compaction
            log.warning("compact/willRun failed: %s", exc)
            return None
        if not isinstance(reply, dict):
            return None
        from ctxd.compaction.engine import HookDecision  # loaded lazily, with the engine

        summary = reply.get("summary")
        return HookDecision(cancel=bool(reply.get("cancel")), summary=summary if isinstance(summary, str) else None)


Handler = Callable[[CtxdServer, Any], Awaitable[Any]]


def _method(
    server: CtxdServer, name: str, cls: type, call: Callable[[Service, Any], Awaitable[Any]], *, own_text: bool = False
) -> None:
    """Register a method; ``own_text``: its result carries ctxd's own text (failures a provider
    answered with, ...), which is scrubbed of secrets (a session's content is the agent's data)."""

    @server.feature(name)
    async def handler(ls: CtxdServer, params: Any) -> Any:
        try:
            typed: Any = p.structure_params(params, cls)
            result = await call(ls.service, typed)
            return redact_json(result) if own_text else result
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not isinstance(exc, p.InvalidParams | CtxdError):
                log.exception("%s failed", name)  # a bug: report it, keep serving
            raise to_jsonrpc(exc) from exc

    handler.__name__ = f"handle_{name.replace('/', '_')}"


Progress = Callable[[str, float | None], None]


def _progress_method(
    server: CtxdServer,
    name: str,
    cls: type,
    title: str,
    call: Callable[[Service, Any, Progress | None], Awaitable[Any]],
) -> None:
    """Register a long-running method: work-done progress under the client's ``workDoneToken`` (none
    for a dry run), its result scrubbed of secrets like ``_method``'s ``own_text``."""

    @server.feature(name)
    async def handler(ls: CtxdServer, params: Any) -> Any:
        try:
            typed: Any = p.structure_params(params, cls)
        except Exception as exc:
            raise to_jsonrpc(exc) from exc
        token = typed.workDoneToken
        if getattr(typed, "dryRun", False):
            token = None
        progress: Progress | None = None
        if token is not None:
            ls.work_done_progress.begin(token, lsp.WorkDoneProgressBegin(title=title, percentage=0))

            def progress(stage: str, fraction: float | None) -> None:
                pct = None if fraction is None else int(fraction * 100)
                ls.work_done_progress.report(token, lsp.WorkDoneProgressReport(message=stage, percentage=pct))

        try:
            return redact_json(await call(ls.service, typed, progress))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not isinstance(exc, p.InvalidParams | CtxdError):
                log.exception("%s failed", name)  # a bug: report it, keep serving
            raise to_jsonrpc(exc) from exc
        finally:
            if token is not None:
                ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message="done"))

    handler.__name__ = f"handle_{name.replace('/', '_')}"


def create_server(config: Config | None = None) -> CtxdServer:
    server = CtxdServer(config)
    s = p  # short alias for the table

    _method(server, s.SESSION_LIST, s.SessionListParams, lambda svc, a: svc.session_list(a))
    _method(server, s.SESSION_OPEN, s.SessionParams, lambda svc, a: svc.session_open(a))
    _method(server, s.SESSION_CREATE, s.SessionCreateParams, lambda svc, a: svc.session_create(a))
    _method(server, s.SESSION_TREE, s.SessionTreeParams, lambda svc, a: svc.session_tree(a))
    _method(server, s.SESSION_ENTRY, s.SessionEntryParams, lambda svc, a: svc.session_entry(a))
    _method(server, s.SESSION_LABEL, s.SessionLabelParams, lambda svc, a: svc.session_label(a))
    _method(server, s.SESSION_FORK, s.SessionEntryParams, lambda svc, a: svc.session_fork(a))
    _method(server, s.SESSION_STATS, s.SessionParams, lambda svc, a: svc.session_stats(a))
    _method(server, s.SESSION_LEDGER, s.SessionParams, lambda svc, a: svc.session_ledger(a), own_text=True)
    _method(server, s.SESSION_CHECK, s.SessionCheckParams, lambda svc, a: svc.session_check(a))
    _method(server, s.SESSION_PIN, s.SessionPinParams, lambda svc, a: svc.session_pin(a))
    _method(server, s.CONTEXT_BUILD, s.ContextBuildParams, lambda svc, a: svc.context_build(a))
    _method(server, s.BRANCH, s.BranchParams, lambda svc, a: svc.branch(a), own_text=True)
    _method(server, s.BRANCH_SUMMARIZE, s.BranchSummarizeParams, lambda svc, a: svc.branch_summarize(a), own_text=True)
    _method(server, s.CONTEXT_TRUNCATE, s.ContextTruncateParams, lambda svc, a: svc.context_truncate(a))
    _method(server, s.CONTEXT_COMPOSITION, s.ContextCompositionParams, lambda svc, a: svc.context_composition(a))
    _method(server, s.SESSION_FACTS, s.SessionParams, lambda svc, a: svc.session_facts(a), own_text=True)
    _method(server, s.HISTORY_SEARCH, s.HistorySearchParams, lambda svc, a: svc.history_search(a))
    _method(server, s.HISTORY_EXPAND, s.HistoryExpandParams, lambda svc, a: svc.history_expand(a))
    _method(server, s.SESSION_ARCHIVE, s.SessionParams, lambda svc, a: svc.session_archive(a))
    _method(server, s.COMPACT_PROMPT, s.CompactPromptParams, lambda svc, a: svc.compact_prompt(a))
    _method(server, s.COMPACT_FACTS, s.SessionParams, lambda svc, a: svc.compact_facts(a), own_text=True)

    @server.feature(s.SESSION_APPEND)
    async def append(ls: CtxdServer, params: Any) -> Any:
        try:
            typed = s.structure_params(params, s.SessionAppendParams)
            explicit = isinstance(params, dict) and "parentId" in params
            return await ls.service.session_append(typed, explicit_parent=explicit)
        except Exception as exc:
            raise to_jsonrpc(exc) from exc

    # Long-running methods report work-done progress when the client gives a token.
    _progress_method(server, s.COMPACT, s.CompactParams, "ctxd: compacting", lambda svc, a, pr: svc.compact(a, pr))
    # An agent's own compaction (pi's extension): summarised, never written; $/cancelRequest cancels it.
    _progress_method(
        server,
        s.COMPACT_SUMMARIZE,
        s.CompactSummarizeParams,
        "ctxd: summarising",
        lambda svc, a, pr: svc.compact_summarize(a, pr),
    )

    @server.feature(lsp.INITIALIZE)
    def initialize(ls: CtxdServer, params: lsp.InitializeParams) -> None:
        problems: list[str] = []
        options = params.initialization_options
        if options is not None and not isinstance(options, dict):
            if attrs.has(type(options)):
                options = attrs.asdict(options)
            else:
                kind = "an array" if isinstance(options, list | tuple) else type(options).__name__
                problems.append(f"initializationOptions must be an object, not {kind}; using the defaults")
                options = None
        ls.config = config_from_json(options, problems, base=ls.config)
        ls.service = Service(ls.config, ls._notify)
        hooks = (options or {}).get("hooks") if isinstance(options, dict) else None
        ls.hook_supported = isinstance(hooks, dict) and hooks.get("compactWillRun") is True
        if hooks is not None and (
            not isinstance(hooks, dict) or not isinstance(hooks.get("compactWillRun", False), bool)
        ):
            problems.append(
                f'initializationOptions: hooks: expected {{"compactWillRun": true or false}}, got {show(hooks)}'
            )
        if ls.hook_supported:
            ls.service.hook = ls.will_run_hook
        for problem in problems:
            log.warning("configuration: %s", problem)
            ls.log_to_client(lsp.MessageType.Warning, f"ctxd configuration: {problem}")

    @server.feature(lsp.INITIALIZED)
    async def initialized(ls: CtxdServer, params: lsp.InitializedParams) -> None:
        if ls.config.watch and ls.watcher is None:

            async def changed(path: str, kind: str) -> None:
                ls.service.history_touch(path)  # the history index follows every session file
                await ls.service.file_changed(path, kind)

            await ls.service.opencode_baseline()
            ls.watcher = Watcher(
                ls.config.all_roots,
                changed,
                step_ms=ls.config.watch_step_ms,
                on_live=ls.service.catch_up,  # a listing answered before the watch began (ctxd.server.early)
                files=ls.config.opencode_databases,
            )
            ls.service.run_task(ls.watcher.run(), "watcher")
            ls.service.history_watched = True
        ls.service.history_kick()  # index in the background from the start: searches answer at once
        ls.service.team_start()  # and publish to the team database, if one is configured

    @server.feature(lsp.SHUTDOWN)
    async def shutdown(ls: CtxdServer, params: Any) -> None:
        ls.shutdown_requested = True
        if ls.watcher is not None:
            ls.watcher.stop()
        await ls.service.close()

    return server
