"""``ctxd mcp``: the Model Context Protocol over stdio, a second front door beside :mod:`ctxd.server`.

The only package that imports the MCP SDK (``mcp`` on PyPI). Its tools are thin: each calls the same
service function a JSON-RPC handler calls (``history/search``, ``history/expand``) or the one
function that gives a session's must-keep facts (:func:`ctxd.service.facts.session_facts`), and
renders the answer as text for the model. stdout carries the protocol alone; logs go to stderr.
"""

from __future__ import annotations

import logging
import os
import sys


def serve() -> int:
    level = logging.getLevelName(os.environ.get("CTXD_LOG_LEVEL", "WARNING").upper())
    logging.basicConfig(
        stream=sys.stderr,
        level=level if isinstance(level, int) else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from ctxd.redact import redact_logs

    redact_logs()
    from ctxd.mcp.tools import run

    return run()


__all__ = ["serve"]
