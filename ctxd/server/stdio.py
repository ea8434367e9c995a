"""The transports: LSP framing read natively by asyncio (no thread hop per message), over stdio
or, for debugging, one TCP connection on loopback.

pygls reads stdin through a thread pool, three hops per message; on a pipe, an asyncio stream
reads frames on the loop itself, which is what lets one connection carry thousands of requests a
second.  Malformed frames get a JSON-RPC error instead of silence: a body that is not JSON is
answered with -32700 (parse error), a body that is not a request object with -32600.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from typing import Any, BinaryIO, Protocol

from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)
CONTENT_LENGTH = re.compile(rb"^content-length:\s*(\d+)\s*$", re.IGNORECASE)
MAX_HEADER = 1 << 16


class _Writer(Protocol):
    def write(self, data: bytes) -> Any: ...


def _error(writer: _Writer, code: int, message: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}).encode()
    writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


async def _pump(server: LanguageServer, reader: asyncio.StreamReader, writer: _Writer, stop: threading.Event) -> None:
    protocol = server.protocol
    while not stop.is_set():
        length: int | None = None
        while True:  # headers, up to the blank line
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError:
                return  # end of input
            except asyncio.LimitOverrunError:
                _error(writer, -32700, "header line too long")
                await reader.read(MAX_HEADER)
                continue
            stripped = line.strip()
            if not stripped:
                if length is not None:
                    break
                continue  # stray blank line between frames
            match = CONTENT_LENGTH.match(stripped)
            if match:
                length = int(match.group(1))
        try:
            body = await reader.readexactly(length)
        except asyncio.IncompleteReadError:
            return
        try:
            data = json.loads(body)
        except ValueError as exc:
            _error(writer, -32700, f"parse error: {exc}")
            continue
        problem = _invalid(data)
        if problem:
            _error(writer, -32600, f"invalid request: {problem}")
            continue
        method = data.get("method")
        if method == "shutdown":
            server.shutdown_requested = True  # type: ignore[attr-defined]
        if method == "exit" and "id" not in data:
            # The LSP exit notification: let requests in flight (the shutdown) finish, then stop.
            pending = [f for f in protocol._request_futures.values() if isinstance(f, asyncio.Future)]
            if pending:
                await asyncio.wait(pending, timeout=5)  # type: ignore[type-var]
            return
        try:
            protocol.handle_message(protocol.structure_message(data))
        except Exception as exc:
            log.exception("could not handle a message")
            msg_id = data.get("id")
            if msg_id is not None and "method" in data:
                from ctxd.server.errors import to_jsonrpc

                err = to_jsonrpc(exc)
                protocol._send_response(msg_id, error=err.to_response_error())


def _invalid(data: object) -> str | None:
    """Why ``data`` is not a JSON-RPC 2.0 message, or None."""
    if not isinstance(data, dict):
        return "expected a JSON-RPC 2.0 object"
    if data.get("jsonrpc") != "2.0":
        return 'expected "jsonrpc": "2.0"'
    if "id" in data and (isinstance(data["id"], bool) or not isinstance(data["id"], str | int | None)):
        return "the id must be a string, a number or null"
    if "method" in data:
        return None if isinstance(data["method"], str) else "the method must be a string"
    if "result" in data or "error" in data:
        return None
    return "expected a method (a request or notification) or a result (a response)"


def serve_stdio(server: LanguageServer, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Serve ``server`` over stdin/stdout until ``exit`` (or end of input)."""
    stop = threading.Event()
    server._stop_event = stop  # pygls' shutdown() sets it
    writer = StdoutWriter(stdout)
    server.protocol.set_writer(writer)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_HEADER, loop=loop)
        try:
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), stdin)
        except (ValueError, OSError):
            # Not a pipe (a regular file, say): fall back to pygls' threaded reader.
            from pygls.io_ import StdinAsyncReader, run_async

            await run_async(stop, StdinAsyncReader(stdin, server.thread_pool), server.protocol, log)
            return
        await _pump(server, reader, writer, stop)

    try:
        asyncio.run(main())
    except BrokenPipeError:
        log.error("the client went away")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()  # type: ignore[no-untyped-call]


def serve_tcp(server: LanguageServer, host: str, port: int) -> None:
    """Serve one client connection on ``host:port`` until ``exit`` (or the client hangs up)."""
    stop = threading.Event()
    server._stop_event = stop  # pygls' shutdown() sets it

    async def main() -> None:
        done = asyncio.Event()

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            server.protocol.set_writer(writer)  # type: ignore[arg-type]
            try:
                await _pump(server, reader, writer, stop)
            finally:
                writer.close()
                done.set()

        tcp = await asyncio.start_server(connection, host, port, limit=MAX_HEADER)
        log.warning("ctxd listening on %s:%s", host, port)
        async with tcp:
            await done.wait()

    try:
        asyncio.run(main())
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()  # type: ignore[no-untyped-call]


__all__ = ["serve_stdio", "serve_tcp"]
