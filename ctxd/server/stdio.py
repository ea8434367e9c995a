"""The transports: LSP framing read natively by asyncio (no thread hop per message), over stdio
or, for debugging, one TCP connection on loopback.

pygls' own transport (``pygls.io_.run_async``) does not serve: it reads stdin through a thread pool,
three hops per message, and drops malformed frames silently. On a pipe, an asyncio stream reads frames
on the loop itself (:class:`ctxd.jsonrpc.FrameReader`, the client's framing too), which is what lets
one connection carry thousands of requests a second, and each message is handed to pygls through its
public protocol methods. Malformed frames get a JSON-RPC error instead of silence: a body that is not
JSON is answered with -32700 (parse error), a body that is not a request object with -32600.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from ctxd.jsonrpc import MAX_HEADER, FrameReader, encode_frame, error_message, invalid, parse_body

if TYPE_CHECKING:  # pygls loads in a worker thread while the first frames are read
    from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)
SERVER_NOT_INITIALIZED = -32002
EXIT_WAIT = 5.0
"""How long ``exit`` waits for the answer to a ``shutdown`` still being handled (seconds)."""


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


class _Outgoing:
    """The frames the server writes, watched for two answers: pygls' own answer to an ``initialize``
    ctxd already answered (dropped), and the answer to ``shutdown`` (``exit`` waits for it). Only while
    one of them is awaited is a frame's body read (a few frames around start and stop)."""

    def __init__(self, inner: _Writer) -> None:
        self._inner = inner
        self._drop: Any = None
        self._dropping = False
        self._awaited: Any = None
        self._answered = asyncio.Event()
        self._answered.set()

    def drop_answer(self, msg_id: Any) -> None:
        """Drop the (next) answer to the request ``msg_id``."""
        self._drop, self._dropping = msg_id, True

    def await_answer(self, msg_id: Any) -> None:
        """Note that the request ``msg_id`` is to be answered (see :meth:`answered`)."""
        self._awaited = msg_id
        self._answered.clear()

    async def answered(self, timeout: float) -> None:
        """Return once the awaited answer was written, or after ``timeout`` seconds."""
        try:
            await asyncio.wait_for(self._answered.wait(), timeout)
        except TimeoutError:
            log.warning("exit: the answer to shutdown did not come within %.0f s", timeout)

    def write(self, data: bytes) -> Any:
        if self._dropping or not self._answered.is_set():
            msg_id = _answer_id(data)
            if msg_id is not _NOT_AN_ANSWER:
                if self._dropping and msg_id == self._drop:
                    self._dropping = False
                    return None
                if not self._answered.is_set() and msg_id == self._awaited:
                    self._answered.set()
        return self._inner.write(data)

    def close(self) -> Any:
        return self._inner.close()  # type: ignore[attr-defined]


_NOT_AN_ANSWER = object()


def _answer_id(frame: bytes) -> Any:
    """The id of the response a frame holds, or ``_NOT_AN_ANSWER``."""
    body = frame[frame.find(b"\r\n\r\n") + 4 :]
    try:
        message = json.loads(body)
    except ValueError:
        return _NOT_AN_ANSWER
    if isinstance(message, dict) and "id" in message and "method" not in message:
        return message["id"]
    return _NOT_AN_ANSWER


def _error(writer: _Writer, code: int, message: str, msg_id: Any = None) -> None:
    writer.write(encode_frame(error_message(code, message, msg_id)))


Ready = Callable[[dict[str, Any]], Awaitable["LanguageServer"]]


def _reading(reader: asyncio.StreamReader, writer: _Writer) -> FrameReader:
    """Frames from ``reader``; a lost frame is logged and answered with -32700 (id null)."""

    def lost(reason: str) -> None:
        log.warning("lost a frame: %s; skipping to the next Content-Length header", reason)
        _error(writer, -32700, f"lost a frame: {reason}; skipped to the next Content-Length header")

    return FrameReader(reader, lost)


class Early(Protocol):
    """Requests answered while the server still loads (see :mod:`ctxd.server.early`)."""

    def configure(self, initialize: dict[str, Any]) -> None: ...

    async def answer(self, request: dict[str, Any]) -> tuple[bool, Any]: ...


async def _pump(
    ready: Ready, reader: asyncio.StreamReader, writer: _Outgoing, stop: threading.Event, early: Early | None = None
) -> None:
    """Read frames and hand them to the server, which ``ready`` gives on the first valid message.

    While ``ready`` runs (pygls loading), messages wait in order for the server, except the
    requests ``early`` answers itself (the first ``session/list`` need not wait for pygls)."""
    server: LanguageServer | None = None
    getting: asyncio.Future[LanguageServer] | None = None
    backlog: list[dict[str, Any]] = []
    frames = _reading(reader, writer)
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
                        if await _handle(server, queued, writer):
                            return
                    backlog.clear()
                    continue
            body = await reading
            reading = None
            if body is None:
                return  # end of input
            data, problem = parse_body(body)
            if problem:
                _error(writer, -32700, f"parse error: {problem}")
                continue
            problem = invalid(data)
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
                        writer.write(encode_frame({"jsonrpc": "2.0", "id": data["id"], "result": result}))
                        continue
                backlog.append(data)
                continue
            if await _handle(server, data, writer):
                return
    finally:
        if reading is not None:
            reading.cancel()


async def _handle(server: LanguageServer, data: dict[str, Any], writer: _Outgoing) -> bool:
    """Give one message to the server; True when it was ``exit`` (stop reading)."""
    method = data.get("method")
    protocol = server.protocol
    if method == "shutdown":
        server.shutdown_requested = True  # type: ignore[attr-defined]
        if "id" in data:
            writer.await_answer(data["id"])
    if method == "exit" and "id" not in data:
        # The LSP exit notification: let the shutdown in flight (pygls cancels every other request) finish.
        await writer.answered(EXIT_WAIT)
        return True
    try:
        protocol.handle_message(protocol.structure_message(data))
    except Exception as exc:
        log.exception("could not handle a message")
        msg_id = data.get("id")
        if msg_id is not None and "method" in data:
            from ctxd.server.errors import to_jsonrpc

            err = to_jsonrpc(exc)
            writer.write(encode_frame(error_message(err.code, err.message, msg_id, err.data)))
    return False


def _valid_cancel(params: Any) -> bool:
    return isinstance(params, dict) and isinstance(params.get("id"), str | int) and not isinstance(params["id"], bool)


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
    file = _FileWriter(stdout)
    writer = _Outgoing(file)
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
            server.protocol.set_writer(file)
            await run_async(stop, StdinAsyncReader(stdin, server.thread_pool), server.protocol, log)
            return

        async def ready(first: dict[str, Any]) -> LanguageServer:
            if first.get("method") == "initialize" and "id" in first:
                writer.write(encode_frame({"jsonrpc": "2.0", "id": first["id"], "result": initialize_result(first)}))
                writer.drop_answer(first["id"])  # pygls answers it too
            server = await loading
            holder.append(server)
            server.protocol.set_writer(writer)
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

    async def main() -> None:
        done = asyncio.Event()

        async def connection(reader: asyncio.StreamReader, stream: asyncio.StreamWriter) -> None:
            writer = _Outgoing(stream)
            server.protocol.set_writer(writer)

            async def ready(first: dict[str, Any]) -> LanguageServer:
                return server

            try:
                await _pump(ready, reader, writer, stop)
            finally:
                stream.close()
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
