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

from ctxd.context.view import cap
from ctxd.errors import CtxdError
from ctxd.redact import redact, redact_json
from ctxd.service.protocol import NAME_LIMIT, InvalidParams, error_text


class CtxdJsonRpcError(JsonRpcException):
    CODE = -31000


def to_jsonrpc(exc: BaseException) -> JsonRpcException:
    if isinstance(exc, JsonRpcException):
        return exc
    if isinstance(exc, InvalidParams):
        data: dict[str, Any] = {"field": exc.field} if exc.field else {}
        return JsonRpcInvalidParams(message=_text(str(exc)), data=data)
    if isinstance(exc, CtxdError):
        return CtxdJsonRpcError(message=_text(exc.message), code=exc.code, data=_redacted(exc.data))
    return CtxdJsonRpcError(message=_text(f"internal error: {type(exc).__name__}: {exc}"), code=-32603)


def _text(message: str) -> str:
    # Never a secret, never megabytes (a 10 MB session "name" echoed back).
    return error_text(redact(message)) or ""


def _redacted(data: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in data.items():
        v = redact_json(v)
        out[k] = "***" if "key" in k.lower() else (cap(v, NAME_LIMIT) if isinstance(v, str) else v)
    return out
