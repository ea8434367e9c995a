"""What the daemon says it can do: ctxd's capabilities and the ``initialize`` result, known before pygls
or anything heavy has loaded (see :mod:`ctxd.server`)."""

from __future__ import annotations

from typing import Any

from ctxd import __version__
from ctxd.service.names import COMPACT_WILL_RUN, METHODS, NOTIFICATIONS

__all__ = ["capabilities", "initialize_result"]


def capabilities() -> dict[str, Any]:
    """ctxd's entry in ``capabilities.experimental``."""
    return {
        "version": __version__,
        "methods": list(METHODS),
        "notifications": list(NOTIFICATIONS),
        "clientRequests": [COMPACT_WILL_RUN],
    }


def initialize_result(request: dict[str, Any]) -> dict[str, Any]:
    """The ``initialize`` result: what pygls reports for ctxd's server, without waiting for it."""
    return {
        "capabilities": {
            "positionEncoding": "utf-16",
            "textDocumentSync": {"openClose": True, "change": 2, "save": False},
            "executeCommandProvider": {"commands": []},
            "experimental": {"ctxd": capabilities()},
        },
        "serverInfo": {"name": "ctxd", "version": __version__},
    }
