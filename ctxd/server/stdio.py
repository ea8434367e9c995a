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
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

if TYPE_CHECKING:  # pygls loads in a worker thread while the first frames are read
    from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)
CONTENT_LENGTH = re.compile(rb"^content-length:\s*(\d{1,12})\s*$", re.IGNORECASE)
MAX_HEADER = 1 << 16
MAX_BODY = 1 << 31
"""A larger Content-Length is taken for a broken header (2 GiB: no real message comes close)."""
SERVER_NOT_INITIALIZED = -32002


class _Writer(Protocol):
    def write(self, data: bytes) -> Any: ...


class _FileWriter:
    """Frames to a binary file (stdout), flushed at once."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out

    def write(self, data: bytes) -> None:
        self._out.write(data)
        self._out.flush()

    def close(self) -> None:
        self._out.close()


class _SkipResponse:
    """Forwards frames, except pygls' own answer to the ``initialize`` ctxd already answered."""

    def __init__(self, inner: _FileWriter, msg_id: Any) -> None:
        self._inner = inner
        self._id: Any = msg_id
        self._pending = True

    def write(self, data: bytes) -> None:
        if self._pending:
            body = data[data.find(b"\r\n\r\n") + 4 :]
            try:
                message = json.loads(body)
            except ValueError:
                message = None
            if isinstance(message, dict) and message.get("id") == self._id and "method" not in message:
                self._pending = False
                return
        self._inner.write(data)

    def close(self) -> None:
        self._inner.close()


def _error(writer: _Writer, code: int, message: str, msg_id: Any = None) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}).encode()
    writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


Ready = Callable[[dict[str, Any]], Awaitable["LanguageServer"]]


class _Frames:
    """LSP frames from a stream, recovering from broken headers.

    A header without a valid ``Content-Length`` loses its frame: the client gets a -32700 error
    (id null), the reason is logged, and the body, whose length is unknown, is skipped up to the
    next ``Content-Length`` header (on the wire it follows the body directly)."""

    def __init__(self, reader: asyncio.StreamReader, writer: _Writer) -> None:
        self.reader = reader
        self.writer = writer
        self._pending: bytes | None = None
        """A header line found while skipping a lost body."""
        self._restart = False
        """A frame was lost while its headers were read: the line returned starts the next one."""

    async def _line(self) -> bytes | None:
        if self._pending is not None:
            line, self._pending = self._pending, None
            return line
        while True:
            try:
                return await self.reader.readuntil(b"\n")
            except asyncio.IncompleteReadError:
                return None  # end of input
            except asyncio.LimitOverrunError as exc:
                # A header line too long to be one: report it, drop it up to its end.
                self._lose(f"a header line longer than {MAX_HEADER} bytes")
                await self.reader.readexactly(exc.consumed)
                self._restart = True
                return await self._skip()

    def _lose(self, reason: str) -> None:
        log.warning("lost a frame: %s; skipping to the next Content-Length header", reason)
        _error(self.writer, -32700, f"lost a frame: {reason}; skipped to the next Content-Length header")

    async def _skip(self) -> bytes | None:
        """Discard input up to the next ``Content-Length`` header; return that header line."""
        tail = b""
        while True:
            try:
                line = await self.reader.readuntil(b"\n")
            except asyncio.IncompleteReadError:
                return None
            except asyncio.LimitOverrunError as exc:
                # A long body without newlines: look at it in pieces (keeping a tail, in case the
                # header straddles two), and drop what holds no header.
                chunk = tail + await self.reader.readexactly(exc.consumed)
                at = _header_at(chunk)
                if at >= 0:
                    try:
                        return chunk[at:] + await self.reader.readuntil(b"\n")
                    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                        return None
                tail = chunk[-32:]
                continue
            line = tail + line
            tail = b""
            at = _header_at(line)
            if at >= 0:
                return line[at:]

    async def next_body(self) -> bytes | None:
        """The next frame's body, or None at the end of input."""
        while True:
            length: int | None = None
            problem: str | None = None
            headers = 0
            while True:  # headers, up to the blank line
                line = await self._line()
                if line is None:
                    return None
                if self._restart:  # what was read of this frame's headers belongs to a lost one
                    self._restart = False
                    length, problem, headers = None, None, 0
                stripped = line.strip()
                if not stripped:
                    if headers:
                        break
                    continue  # stray blank line between frames
                headers += 1
                if stripped[:15].lower() == b"content-length:":
                    match = CONTENT_LENGTH.match(stripped)
                    if match and int(match.group(1)) <= MAX_BODY:
                        length = int(match.group(1))
                    else:
                        value = stripped[15:].strip()[:40].decode("ascii", "replace")
                        problem = f"invalid Content-Length {value!r}"
            if length is None or problem is not None:
                self._lose(problem or "a header without Content-Length")
                self._pending = await self._skip()
                if self._pending is None:
                    return None
                continue
            try:
                return await self.reader.readexactly(length)
            except asyncio.IncompleteReadError:
                return None


def _header_at(data: bytes) -> int:
    return data.lower().find(b"content-length:")


def _parse(body: bytes) -> tuple[Any, str | None]:
    """The JSON in ``body``, or why it is not JSON."""
    try:
        return json.loads(body), None
    except RecursionError:
        return None, "nested too deeply"
    except ValueError as exc:
        return None, str(exc)


class Early(Protocol):
    """Requests answered while the server still loads (see :mod:`ctxd.server.early`)."""

    def configure(self, initialize: dict[str, Any]) -> None: ...

    async def answer(self, request: dict[str, Any]) -> tuple[bool, Any]: ...


async def _pump(
    ready: Ready, reader: asyncio.StreamReader, writer: _Writer, stop: threading.Event, early: Early | None = None
) -> None:
    """Read frames and hand them to the server, which ``ready`` gives on the first valid message.

    While ``ready`` runs (pygls loading), messages wait in order for the server, except the
    requests ``early`` answers itself (the first ``session/list`` need not wait for pygls)."""
    server: LanguageServer | None = None
    getting: asyncio.Future[LanguageServer] | None = None
    backlog: list[dict[str, Any]] = []
    frames = _Frames(reader, writer)
    initialized = False
    reading: asyncio.Future[bytes | None] | None = None
    try:
        while not stop.is_set():
            if reading is None:
                reading = asyncio.ensure_future(frames.next_body())
            if server is None and getting is not None:
                if not getting.done():
                    waiting: set[asyncio.Future[Any]] = {reading, getting}
                    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if getting.done():
                    server = getting.result()
                    for queued in backlog:
                        if await _handle(server, queued):
                            return
                    backlog.clear()
                    continue
            body = await reading
            reading = None
            if body is None:
                return  # end of input
            data, problem = _parse(body)
            if problem:
                _error(writer, -32700, f"parse error: {problem}")
                continue
            problem = _invalid(data)
            if problem:
                _error(writer, -32600, f"invalid request: {problem}")
                continue
            method = data.get("method")
            if not initialized and method not in ("initialize", "exit"):
                # The LSP: before initialize, requests get ServerNotInitialized, notifications are dropped.
                if "id" in data and method is not None:
                    _error(
                        writer,
                        SERVER_NOT_INITIALIZED,
                        "the server is not initialized: send initialize first",
                        data["id"],
                    )
                continue
            if method == "$/cancelRequest" and not _valid_cancel(data.get("params")):
                continue  # nothing to cancel: ignored quietly
            if getting is None:
                if method == "exit":
                    return
                getting = asyncio.ensure_future(ready(data))
                if early is not None and method == "initialize":
                    early.configure(data)
            initialized = initialized or method == "initialize"
            if server is None:
                # Early, only while nothing waiting could change what it reads (a create, an append).
                quiet = all(m.get("method") in ("initialize", "initialized") for m in backlog)
                if early is not None and backlog and quiet and "id" in data and method is not None:
                    answered, result = await early.answer(data)
                    if answered:
                        writer.write(_frame({"jsonrpc": "2.0", "id": data["id"], "result": result}))
                        continue
                backlog.append(data)
                continue
            if await _handle(server, data):
                return
    finally:
        if reading is not None:
            reading.cancel()


async def _handle(server: LanguageServer, data: dict[str, Any]) -> bool:
    """Give one message to the server; True when it was ``exit`` (stop reading)."""
    method = data.get("method")
    protocol = server.protocol
    if method == "shutdown":
        server.shutdown_requested = True  # type: ignore[attr-defined]
    if method == "exit" and "id" not in data:
        # The LSP exit notification: let requests in flight (the shutdown) finish, then stop.
        pending = [f for f in protocol._request_futures.values() if isinstance(f, asyncio.Future)]
        if pending:
            await asyncio.wait(pending, timeout=5)  # type: ignore[type-var]
        return True
    try:
        protocol.handle_message(protocol.structure_message(data))
    except Exception as exc:
        log.exception("could not handle a message")
        msg_id = data.get("id")
        if msg_id is not None and "method" in data:
            from ctxd.server.errors import to_jsonrpc

            err = to_jsonrpc(exc)
            protocol._send_response(msg_id, error=err.to_response_error())
    return False


def _valid_cancel(params: Any) -> bool:
    return isinstance(params, dict) and isinstance(params.get("id"), str | int) and not isinstance(params["id"], bool)


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


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def serve_stdio(
    load: Callable[[], LanguageServer],
    stdin: BinaryIO,
    stdout: BinaryIO,
    initialize_result: Callable[[dict[str, Any]], dict[str, Any]],
    early: Callable[[], Any] | None = None,
) -> LanguageServer | None:
    """Serve over stdin/stdout until ``exit`` (or end of input); returns the server (None if the
    input ended before it was needed).

    The server (pygls, and everything ctxd serves with) loads in a worker thread while the first
    frame is read, and ``initialize`` is answered from ``initialize_result`` as soon as it arrives:
    the client learns the capabilities at once, and its next requests are served when loading is
    done.  pygls still sees the ``initialize`` (for its own state and ctxd's configuration); its
    duplicate answer is dropped. ``early`` loads first, in the same worker thread: what it returns
    (:class:`ctxd.server.early.EarlyAnswers`) answers some requests until the server is loaded.
    """
    writer = _FileWriter(stdout)
    stop = threading.Event()
    holder: list[LanguageServer] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        first = loop.run_in_executor(None, early) if early is not None else None

        async def load_after_early() -> LanguageServer:
            if first is not None:
                await asyncio.wait({first})  # its failure only means no early answers
            return await loop.run_in_executor(None, load)

        loading = asyncio.ensure_future(load_after_early())
        reader = asyncio.StreamReader(limit=MAX_HEADER, loop=loop)
        try:
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), stdin)
        except (ValueError, OSError):
            # Not a pipe (a regular file, say): fall back to pygls' threaded reader.
            from pygls.io_ import StdinAsyncReader, run_async

            server = await loading
            holder.append(server)
            server._stop_event = stop  # pygls' shutdown() sets it
            server.protocol.set_writer(writer)
            await run_async(stop, StdinAsyncReader(stdin, server.thread_pool), server.protocol, log)
            return

        async def ready(first: dict[str, Any]) -> LanguageServer:
            answered = None
            if first.get("method") == "initialize" and "id" in first:
                writer.write(_frame({"jsonrpc": "2.0", "id": first["id"], "result": initialize_result(first)}))
                answered = first["id"]
            server = await loading
            holder.append(server)
            server._stop_event = stop  # pygls' shutdown() sets it
            server.protocol.set_writer(_SkipResponse(writer, answered) if answered is not None else writer)
            return server

        await _pump(ready, reader, writer, stop, _EarlyLater(first) if first is not None else None)

    try:
        asyncio.run(main())
    except BrokenPipeError:
        log.error("the client went away")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        for server in holder:
            server.shutdown()  # type: ignore[no-untyped-call]
    return holder[0] if holder else None


class _EarlyLater:
    """:class:`Early` over answers that are still loading (a future): none until they are loaded."""

    def __init__(self, loading: asyncio.Future[Any]) -> None:
        self._loading = loading
        self._initialize: dict[str, Any] | None = None
        self._configured: Any = None

    def configure(self, initialize: dict[str, Any]) -> None:
        self._initialize = initialize

    async def answer(self, request: dict[str, Any]) -> tuple[bool, Any]:
        if self._configured is None:
            await asyncio.wait({self._loading})
            if self._loading.cancelled() or self._loading.exception() is not None or self._initialize is None:
                return False, None
            self._configured = self._loading.result().configure(self._initialize)
            if self._configured is None:
                return False, None
        answered: tuple[bool, Any] = await self._configured.answer(request)
        return answered


def serve_tcp(server: LanguageServer, host: str, port: int) -> None:
    """Serve one client connection on ``host:port`` until ``exit`` (or the client hangs up)."""
    stop = threading.Event()
    server._stop_event = stop  # pygls' shutdown() sets it

    async def main() -> None:
        done = asyncio.Event()

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            server.protocol.set_writer(writer)  # type: ignore[arg-type]

            async def ready(first: dict[str, Any]) -> LanguageServer:
                return server

            try:
                await _pump(ready, reader, writer, stop)
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
