"""The daemon: JSON-RPC 2.0 with LSP framing over stdio (or TCP on loopback), via pygls.

Only this package imports pygls and lsprotocol.  Start-up is arranged so the client hears back
quickly: pygls and the rest of ctxd load in a worker thread while the first frame is read, and
``initialize`` is answered from :func:`initialize_result` (the same capabilities the pygls server
reports) as soon as it arrives.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from ctxd.server.capabilities import capabilities, initialize_result

if TYPE_CHECKING:
    from ctxd.server.app import CtxdServer


def _protect_stdout() -> Any:
    """Give the protocol its own copy of fd 1 and point fd 1 (and sys.stdout) at stderr, so that
    nothing else — a stray print, a library's chatter — can corrupt the JSON-RPC stream."""
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(proto_fd, "wb", buffering=0)


def _load(config_path: str | None) -> CtxdServer:
    # pygls logs every error response with a traceback; ctxd logs real bugs itself.
    logging.getLogger("pygls").setLevel(logging.CRITICAL)
    from ctxd.server.app import create_server
    from ctxd.service.config import load_cli_config

    config, problems = load_cli_config(config_path)
    for problem in problems:
        logging.getLogger("ctxd").warning("configuration: %s", problem)
    return create_server(config)


def _early(config_path: str | None) -> Any:
    """What answers ``session/list`` while pygls loads (ctxd.server.early): loaded first."""
    from ctxd.server.early import EarlyAnswers

    return EarlyAnswers(config_path)


def serve(tcp: str | None = None, config_path: str | None = None) -> int:
    level = logging.getLevelName(os.environ.get("CTXD_LOG_LEVEL", "WARNING").upper())
    logging.basicConfig(
        stream=sys.stderr,
        level=level if isinstance(level, int) else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from ctxd.redact import redact_logs

    redact_logs()  # no log line shows a secret, whatever a provider or a library says
    from ctxd.malloc import limit_arenas

    limit_arenas()  # before any thread: a daemon runs for weeks (see ctxd.malloc)
    if tcp:
        host, _, port = tcp.rpartition(":")
        host = host or "127.0.0.1"
        if host not in ("127.0.0.1", "localhost", "::1"):
            sys.stderr.write(f"ctxd: --tcp must listen on loopback, not {host}\n")
            return 2
        from ctxd.server.stdio import serve_tcp

        server = _load(config_path)
        serve_tcp(server, host, int(port))
        return 0 if server.shutdown_requested else 1
    from ctxd.server.stdio import serve_stdio

    out = _protect_stdout()
    served = serve_stdio(
        lambda: _load(config_path), sys.stdin.buffer, out, initialize_result, lambda: _early(config_path)
    )
    # pygls exits 0 on `exit` even without `shutdown`; the LSP says 1.
    _exit_now(0 if served is not None and getattr(served, "shutdown_requested", False) else 1)


def _exit_now(code: int) -> NoReturn:
    """Leave at once: everything is written (the protocol's frames are flushed one by one, appends
    are system calls), and tearing down the interpreter's objects would add half a second, under
    load more, to the client's wait for the exit."""
    logging.shutdown()
    sys.stderr.flush()
    os._exit(code)


__all__ = ["capabilities", "initialize_result", "serve"]
