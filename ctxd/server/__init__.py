"""The daemon: JSON-RPC 2.0 with LSP framing over stdio (or TCP on loopback), via pygls.

Only this package imports pygls and lsprotocol.
"""

from __future__ import annotations

import logging
import os
import sys

from ctxd.service.config import load_cli_config


def _protect_stdout() -> object:
    """Give the protocol its own copy of fd 1 and point fd 1 (and sys.stdout) at stderr, so that
    nothing else — a stray print, a library's chatter — can corrupt the JSON-RPC stream."""
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(proto_fd, "wb", buffering=0)


def serve(tcp: str | None = None, config_path: str | None = None) -> int:
    logging.basicConfig(
        stream=sys.stderr,
        level=os.environ.get("CTXD_LOG_LEVEL", "WARNING").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # pygls logs every error response with a traceback; ctxd logs real bugs itself.
    logging.getLogger("pygls").setLevel(logging.CRITICAL)
    from ctxd.server.app import create_server

    config, problems = load_cli_config(config_path)
    for problem in problems:
        logging.getLogger("ctxd").warning("configuration: %s", problem)
    server = create_server(config)
    if tcp:
        host, _, port = tcp.rpartition(":")
        host = host or "127.0.0.1"
        if host not in ("127.0.0.1", "localhost", "::1"):
            sys.stderr.write(f"ctxd: --tcp must listen on loopback, not {host}\n")
            return 2
        from ctxd.server.stdio import serve_tcp

        serve_tcp(server, host, int(port))
        return 0 if server.shutdown_requested else 1
    from ctxd.server.stdio import serve_stdio

    out = _protect_stdout()
    serve_stdio(server, sys.stdin.buffer, out)  # type: ignore[arg-type]
    # pygls exits 0 on `exit` even without `shutdown`; the LSP says 1.
    return 0 if server.shutdown_requested else 1


__all__ = ["serve"]
