"""Requests the daemon answers while pygls still loads.

pygls and lsprotocol take a few hundred milliseconds to import, ctxd's service layer a third of
that. So the service loads first, in the same worker thread (:func:`ctxd.server.stdio.serve_stdio`),
and once ``initialize`` has arrived, ``session/list`` (a read that needs no open session and sends no
notification) is answered by a service made from the same configuration; every other message waits,
in order, for the server. A request it cannot answer (bad params, an error) waits too: the server
answers it as it would have.
"""

from __future__ import annotations

import logging
from typing import Any

from ctxd.options import prepare
from ctxd.service import protocol as p
from ctxd.service.config import Config, config_from_json, load_cli_config
from ctxd.service.service import Service

EARLY = frozenset({p.SESSION_LIST})
log = logging.getLogger(__name__)


class EarlyAnswers:
    """Loaded in the worker thread before pygls (importing this module is most of the cost)."""

    def __init__(self, config_path: str | None) -> None:
        self.base, _ = load_cli_config(config_path)
        prepare(Config)  # initialize's options are read with it

    def configure(self, initialize: dict[str, Any]) -> _Answering | None:
        params = initialize.get("params")
        options = params.get("initializationOptions") if isinstance(params, dict) else None
        if options is not None and not isinstance(options, dict):
            return None  # the server reports it; nothing is answered early
        problems: list[str] = []
        config: Config = config_from_json(options, problems, base=self.base)
        hooks = (options or {}).get("hooks")
        if problems or (hooks is not None and not _valid_hooks(hooks)):
            return None  # the server reports them first (window/logMessage), then answers
        return _Answering(Service(config))


def _valid_hooks(hooks: Any) -> bool:
    return isinstance(hooks, dict) and isinstance(hooks.get("compactWillRun", False), bool)


class _Answering:
    def __init__(self, service: Service) -> None:
        self.service = service

    async def answer(self, request: dict[str, Any]) -> tuple[bool, Any]:
        """(True, result) for a request answered here, else (False, None)."""
        if request.get("method") not in EARLY:
            return False, None
        try:
            params = p.structure_params(request.get("params"), p.SessionListParams)
            result = await self.service.sessions.session_list(params)
        except Exception:  # the server answers it, with the error it gives
            return False, None
        log.debug("%s answered while the server loads", request.get("method"))
        return True, result
