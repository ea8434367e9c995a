"""A small asyncio client for the ctxd daemon, for tools that spawn it.

It speaks JSON-RPC 2.0 with LSP framing over the daemon's stdin/stdout and depends on nothing but
the standard library (no pygls)::

    async with CtxdClient(initialization_options={"roots": [root]}) as client:
        created = await client.request("session/create", {"cwd": "/proj"})
        await client.request("session/append", {"session": created["path"], "messages": [...]})
        status = await client.wait_for("compaction/status", lambda p: p["state"] == "succeeded")

Errors answered by the daemon raise :class:`ClientError` with its ``code``, ``message`` and
``data``; a daemon that went away raises :class:`ServerExitedError`.  Cancelling the task that
awaits :meth:`CtxdClient.request` sends ``$/cancelRequest`` for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import json
import os
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import IO, Any

from ctxd.jsonrpc import FrameReader, decode_frames, encode_frame

__all__ = [
    "ClientError",
    "CtxdClient",
    "Notification",
    "ServerExitedError",
    "decode_frames",
    "encode_frame",
]

NotificationCallback = Callable[[Any], Awaitable[None] | None]
"""Called with a notification's params; may be a coroutine function."""
RequestHandler = Callable[[Any], Awaitable[Any] | Any]
"""Answers a request the daemon sends to the client (e.g. ``compact/willRun``) with its result."""
Predicate = Callable[[Any], bool]
Trace = Callable[[str, dict[str, Any]], None]
"""Called with ("send" or "recv", message) for every JSON-RPC message on the wire."""

SERVER_EXITED = -32099
READ_LIMIT = 1 << 20
"""The daemon's output is read in pieces of up to this many bytes (and no header line is longer)."""
HISTORY = 10_000


class ClientError(Exception):
    """A JSON-RPC error answered by the daemon (or raised by this client)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data


class ServerExitedError(ClientError):
    """The daemon exited or closed its output before answering."""

    def __init__(self, message: str = "the ctxd daemon exited") -> None:
        super().__init__(SERVER_EXITED, message)


class Notification:
    """One notification received from the daemon: ``method`` and ``params``, with its position."""

    __slots__ = ("index", "method", "params")

    def __init__(self, index: int, method: str, params: Any) -> None:
        self.index = index
        self.method = method
        self.params = params

    def __repr__(self) -> str:
        return f"Notification({self.index}, {self.method!r}, {self.params!r})"


def default_command() -> list[str]:
    """``python -P -m ctxd serve`` with this interpreter.

    ``-P`` keeps the working directory off the daemon's ``sys.path``: a folder named ``ctxd``
    there (a clone of this repository, say) would otherwise be imported instead of the package."""
    return [sys.executable, "-P", "-m", "ctxd", "serve"]


def _package_home() -> str | None:
    """The folder this client's ``ctxd`` package was imported from, when only the working
    directory or the script's folder (which ``-P`` leaves out) put it on ``sys.path``; the daemon
    needs it on ``PYTHONPATH`` to run the same ctxd."""
    package = sys.modules.get(__name__.rpartition(".")[0])
    origin = getattr(package, "__file__", None)
    if not origin:
        return None
    home = os.path.dirname(os.path.dirname(os.path.abspath(origin)))
    implicit = {os.path.abspath(sys.path[0] or os.curdir) if sys.path else None, os.getcwd()}
    return home if home in implicit else None


class CtxdClient:
    """A ctxd daemon in a subprocess and a JSON-RPC connection to it.

    ``command`` defaults to ``[sys.executable, "-P", "-m", "ctxd", "serve"]`` (see
    :func:`default_command`).  ``initialization_options``
    is sent as ``initializationOptions`` (roots, watch, autoCompact, compaction, hooks, ...).
    ``stderr`` is where the daemon's log goes (default: this process's stderr).  ``trace`` sees
    every message sent and received (for logging or debugging).
    """

    def __init__(
        self,
        command: Sequence[str] | None = None,
        *,
        initialization_options: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stderr: int | IO[Any] | None = None,
        request_timeout: float | None = 120.0,
        trace: Trace | None = None,
    ) -> None:
        self._default = command is None
        self.command = list(command) if command is not None else default_command()
        self.initialization_options = dict(initialization_options or {})
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.stderr = stderr
        self.request_timeout = request_timeout
        self.trace = trace
        self.process: asyncio.subprocess.Process | None = None
        self.server_info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self.returncode: int | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int | str, asyncio.Future[Any]] = {}
        self._callbacks: dict[str, list[NotificationCallback]] = {}
        self._handlers: dict[str, RequestHandler] = {}
        self._history: deque[Notification] = deque(maxlen=HISTORY)
        self._count = 0
        self._arrived = asyncio.Condition()
        self._reader_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False
        self._eof = False

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> dict[str, Any]:
        """Spawn the daemon, send ``initialize`` and ``initialized``; returns the initialize result."""
        if self.process is not None:
            raise RuntimeError("the client is already started")
        env = None if self.env is None else {**os.environ, **self.env}
        home = _package_home() if self._default else None
        if home is not None:
            env = dict(os.environ if env is None else env)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (home, env.get("PYTHONPATH", "")) if p)
        self.process = await asyncio.create_subprocess_exec(
            *self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=self.stderr,
            env=env,
            cwd=self.cwd,
            limit=READ_LIMIT,
        )
        self._reader_task = asyncio.create_task(self._read_loop(), name="ctxd-client-reader")
        params: dict[str, Any] = {
            "processId": os.getpid(),
            "clientInfo": {"name": "ctxd.client"},
            "capabilities": {},
            "initializationOptions": self.initialization_options,
        }
        try:
            result = await self.request("initialize", params)
        except BaseException:
            await self._terminate()
            raise
        self.server_info = dict(result.get("serverInfo") or {})
        self.capabilities = dict(result.get("capabilities") or {})
        await self.notify("initialized", {})
        return dict(result)

    async def close(self, timeout: float = 10.0) -> int | None:
        """``shutdown`` then ``exit``; waits for the daemon and returns its exit code."""
        if self.process is None or self._closed:
            return self.returncode
        self._closed = True
        process = self.process
        if process.returncode is None:
            with contextlib.suppress(ClientError, TimeoutError, ConnectionError):
                await self.request("shutdown", None, timeout=timeout)
            with contextlib.suppress(ClientError, ConnectionError, RuntimeError):
                await self.notify("exit", None)
            try:
                await asyncio.wait_for(process.wait(), timeout)
            except TimeoutError:
                await self._terminate()
        await self._finish()
        self.returncode = process.returncode
        return self.returncode

    async def _terminate(self) -> None:
        process = self.process
        if process is not None and process.returncode is None:
            process.kill()
            await process.wait()
        await self._finish()

    async def _finish(self) -> None:
        if self.process is not None and self.process.stdin is not None:
            self.process.stdin.close()
        if self._reader_task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._reader_task, 5)
        for task in list(self._tasks):
            task.cancel()
        self._fail_pending()

    async def __aenter__(self) -> CtxdClient:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # --- sending --------------------------------------------------------------------------------

    async def _send(self, message: dict[str, Any]) -> None:
        process = self.process
        if process is None or process.stdin is None or process.stdin.is_closing() or self._eof:
            raise ServerExitedError("the ctxd daemon is not running")
        if self.trace is not None:
            self.trace("send", message)
        process.stdin.write(encode_frame(message))
        try:
            await process.stdin.drain()
        except (ConnectionError, BrokenPipeError) as exc:
            raise ServerExitedError(f"the ctxd daemon is gone: {exc}") from exc

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no answer)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._send(message)

    async def request(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """Send a request and return its result; raises :class:`ClientError` on an error answer.

        If the awaiting task is cancelled (or ``timeout`` passes), ``$/cancelRequest`` is sent."""
        msg_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = future
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self._send(message)
            limit = timeout if timeout is not None else self.request_timeout
            return await asyncio.wait_for(asyncio.shield(future), limit)  # shielded: still pending below
        except (asyncio.CancelledError, TimeoutError):
            if not future.done():
                with contextlib.suppress(ClientError, ConnectionError, RuntimeError):
                    await self.notify("$/cancelRequest", {"id": msg_id})
            raise
        finally:
            self._pending.pop(msg_id, None)
            if not future.done():
                future.cancel()

    # --- notifications and server requests --------------------------------------------------------

    def on_notification(self, method: str, callback: NotificationCallback) -> Callable[[], None]:
        """Call ``callback(params)`` for every ``method`` notification; returns an unsubscribe function.

        ``method="*"`` receives every notification as a :class:`Notification`."""
        self._callbacks.setdefault(method, []).append(callback)

        def remove() -> None:
            with contextlib.suppress(ValueError):
                self._callbacks.get(method, []).remove(callback)

        return remove

    def on_request(self, method: str, handler: RequestHandler) -> None:
        """Answer the daemon's ``method`` requests (e.g. ``compact/willRun``) with ``handler(params)``.

        A handler that raises ClientError answers with that error."""
        self._handlers[method] = handler

    def mark(self) -> int:
        """A position in the notification history, for :meth:`wait_for`'s ``since``."""
        return self._count

    @property
    def notifications(self) -> list[Notification]:
        """The notifications received so far (the most recent 10,000)."""
        return list(self._history)

    async def wait_for(
        self,
        method: str,
        predicate: Predicate | None = None,
        *,
        timeout: float | None = 10.0,
        since: int | None = None,
    ) -> Any:
        """The params of the next ``method`` notification matching ``predicate``.

        By default only notifications arriving after the call count; pass ``since=client.mark()``
        taken before a request to also match those that arrived while it ran.  Raises TimeoutError."""
        start = self._count if since is None else since

        def find() -> Notification | None:
            for note in self._history:
                if note.index >= start and note.method == method and (predicate is None or predicate(note.params)):
                    return note
            return None

        async def wait() -> Any:
            async with self._arrived:
                while True:
                    found = find()
                    if found is not None:
                        return found.params
                    if self._eof:
                        raise ServerExitedError(f"the ctxd daemon exited before {method} arrived")
                    await self._arrived.wait()

        return await asyncio.wait_for(wait(), timeout)

    # --- receiving ------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        frames = FrameReader(self.process.stdout, lambda reason: None, READ_LIMIT)  # lost: skipped to the next
        try:
            while True:
                body = await frames.next_body()
                if body is None:
                    return
                try:
                    message = json.loads(body.decode("utf-8"))
                except ValueError:
                    continue
                if isinstance(message, dict):
                    if self.trace is not None:
                        self.trace("recv", message)
                    await self._dispatch(message)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            return
        finally:
            self._eof = True
            self._fail_pending()
            async with self._arrived:
                self._arrived.notify_all()

    def _fail_pending(self) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ServerExitedError())
        self._pending.clear()

    async def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if isinstance(method, str):
            if "id" in message:
                self._spawn(self._answer(message["id"], method, message.get("params")))
            else:
                await self._notification(method, message.get("params"))
            return
        future = self._pending.get(message.get("id"))  # type: ignore[arg-type]
        if future is None or future.done():
            return
        error = message.get("error")
        if isinstance(error, dict):
            future.set_exception(
                ClientError(int(error.get("code", -32603)), str(error.get("message", "")), error.get("data"))
            )
        else:
            future.set_result(message.get("result"))

    async def _notification(self, method: str, params: Any) -> None:
        note = Notification(self._count, method, params)
        self._count += 1
        self._history.append(note)
        calls = [(cb, params) for cb in self._callbacks.get(method, ())]
        calls += [(cb, note) for cb in self._callbacks.get("*", ())]
        for callback, argument in calls:
            try:
                result = callback(argument)
                if inspect.isawaitable(result):
                    self._spawn(result)
            except Exception:  # a failing callback must not stop the connection
                continue
        async with self._arrived:
            self._arrived.notify_all()

    async def _answer(self, msg_id: Any, method: str, params: Any) -> None:
        handler = self._handlers.get(method)
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id}
        if handler is None:
            reply["error"] = {"code": -32601, "message": f"method not found: {method}"}
        else:
            try:
                result = handler(params)
                if inspect.isawaitable(result):
                    result = await result
                reply["result"] = result
            except ClientError as exc:
                reply["error"] = {"code": exc.code, "message": exc.message, "data": exc.data}
            except Exception as exc:
                reply["error"] = {"code": -32603, "message": f"{type(exc).__name__}: {exc}"}
        with contextlib.suppress(ClientError, ConnectionError):
            await self._send(reply)

    def _spawn(self, awaitable: Awaitable[Any]) -> None:
        async def run() -> None:
            with contextlib.suppress(Exception):
                await awaitable

        task = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
