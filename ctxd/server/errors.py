"""The one place where ctxd's errors become JSON-RPC errors.

Codes (documented in docs/protocol.md):
    -32602  invalid params (``data.field`` names the field)
    -31001  unknown session          -31002  unknown entry       -31003  invalid entry
    -31010  unusable session file    -31011  bad header          -31012  unsupported version
    -31013  read-only session        -31020  compaction failed   -32800  cancelled
    -32603  internal error (a bug; the daemon keeps running)
"""

from __future__ import annotations

from typing import Any

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from ctxd.errors import CtxdError
from ctxd.redact import redact, redact_json
from ctxd.service.protocol import InvalidParams


class CtxdJsonRpcError(JsonRpcException):
    CODE = -31000


def to_jsonrpc(exc: BaseException) -> JsonRpcException:
    if isinstance(exc, JsonRpcException):
        return exc
    if isinstance(exc, InvalidParams):
        data: dict[str, Any] = {"field": exc.field} if exc.field else {}
        return JsonRpcInvalidParams(message=redact(str(exc)), data=data)
    if isinstance(exc, CtxdError):
        return CtxdJsonRpcError(message=redact(exc.message), code=exc.code, data=_redacted(exc.data))
    return CtxdJsonRpcError(message=redact(f"internal error: {type(exc).__name__}: {exc}"), code=-32603)


def _redacted(data: dict[str, Any]) -> dict[str, Any]:
    return {k: ("***" if "key" in k.lower() else redact_json(v)) for k, v in data.items()}
