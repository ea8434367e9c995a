"""The pygls server: lifecycle, notifications, progress and the client hook.

Every method is served from the one table, :data:`ctxd.service.methods.METHODS`: structure the params (a dict)
into their attrs class, call the job's handler, return its JSON.  All registration happens in
:func:`create_server`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
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
from ctxd.service.methods import METHODS, Method, Request
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


Progress = Callable[[str, float | None], None]


def _register(server: CtxdServer, method: Method) -> None:
    """Serve one method of the table: structure its params, call its job's handler (with work-done progress under
    the client's ``workDoneToken`` for a long-running one, none for a dry run), answer its JSON."""
    name = method.name

    @server.feature(name)
    async def handler(ls: CtxdServer, params: Any) -> Any:
        try:
            typed: Any = p.structure_params(params, method.params)
        except Exception as exc:
            raise to_jsonrpc(exc) from exc
        token = typed.workDoneToken if method.progress is not None and not getattr(typed, "dryRun", False) else None
        progress: Progress | None = None
        if token is not None:
            ls.work_done_progress.begin(token, lsp.WorkDoneProgressBegin(title=method.progress or name, percentage=0))

            def progress(stage: str, fraction: float | None) -> None:
                pct = None if fraction is None else int(fraction * 100)
                ls.work_done_progress.report(token, lsp.WorkDoneProgressReport(message=stage, percentage=pct))

        try:
            given = frozenset(params) if isinstance(params, dict) else frozenset()
            result = await method.handler(ls.service, typed, Request(given, progress))
            return redact_json(result) if method.own_text or method.progress is not None else result
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
    for method in METHODS:  # the one table (ctxd.service.methods)
        _register(server, method)

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
                ls.service.history.history_touch(path)  # the history index follows every session file
                await ls.service.live.file_changed(path, kind)

            await ls.service.live.opencode_baseline()
            ls.watcher = Watcher(
                ls.config.all_roots,
                changed,
                step_ms=ls.config.watch_step_ms,
                on_live=ls.service.live.catch_up,  # a listing answered before the watch began (ctxd.server.early)
                files=ls.config.opencode_databases,
            )
            ls.service.run_task(ls.watcher.run(), "watcher")
            ls.service.history.history_watched = True
        ls.service.start()  # index in the background from the start, and publish to the team database if any

    @server.feature(lsp.SHUTDOWN)
    async def shutdown(ls: CtxdServer, params: Any) -> None:
        ls.shutdown_requested = True
        if ls.watcher is not None:
            ls.watcher.stop()
        await ls.service.close()

    return server
