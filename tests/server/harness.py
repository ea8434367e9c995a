"""Shared pieces of the end-to-end daemon tests.

* the command and environment that start ``ctxd serve`` as a subprocess;
* a pytest-lsp client that keeps ctxd's payloads as plain dicts, records every notification in
  ``client.notes`` and answers ``compact/willRun`` with ``client.will_run``;
* :class:`RawDaemon`, a daemon spoken to byte by byte with a strict LSP frame reader;
* builders for pi messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from ctxd.server.app import converter_factory
from ctxd.service import protocol as p

REPO = Path(__file__).resolve().parents[2]
SERVER_COMMAND = [sys.executable, "-P", "-m", "ctxd", "serve"]  # -P: the working directory never shadows ctxd
TIMEOUT = 30.0
"""The one generous bound every wait for a notification uses: a bound on a hang, not a speed checked (a daemon
still loading pygls on 2 cores shared with other tests missed 5 s)."""


def server_env(**extra: str) -> dict[str, str]:
    """The daemon's environment: ours without CTXD_* settings, ctxd importable, no config file, no
    default roots from this machine, litellm's bundled model map (no network)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXD_")}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH", "")) if x)
    env["CTXD_CONFIG"] = str(REPO / "tests" / "server" / "no-such-config.json")
    # No default roots from this machine: pi's, Claude Code's and Codex's folders point nowhere.
    nowhere = REPO / "tests" / "server" / "no-such-dir"
    env["PI_CODING_AGENT_DIR"] = str(nowhere / "pi")
    env["CLAUDE_CONFIG_DIR"] = str(nowhere / "claude")
    env["CODEX_HOME"] = str(nowhere / "codex")
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env.update(extra)
    return env


# --- notifications --------------------------------------------------------------------------------


class Notes:
    """Every notification a client received, in order, with waiting by method and predicate."""

    def __init__(self) -> None:
        self.items: list[tuple[str, Any]] = []
        self._waiters: list[asyncio.Future[None]] = []

    def record(self, method: str, params: Any) -> None:
        self.items.append((method, params))
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    def mark(self) -> int:
        return len(self.items)

    def of(self, method: str, session: str | None = None, since: int = 0) -> list[Any]:
        return [
            params
            for m, params in self.items[since:]
            if m == method and (session is None or (isinstance(params, dict) and params.get("session") == session))
        ]

    async def wait(
        self,
        method: str,
        predicate: Callable[[Any], bool] | None = None,
        *,
        session: str | None = None,
        since: int = 0,
        timeout: float = TIMEOUT,
    ) -> Any:
        """The first ``method`` notification from position ``since`` on that matches."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            for params in self.of(method, session, since):
                if predicate is None or predicate(params):
                    return params
            remaining = deadline - loop.time()
            if remaining <= 0:
                seen = [(m, x) for m, x in self.items[since:] if m == method]
                raise AssertionError(f"no matching {method} within {timeout}s; saw {seen}")
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter, remaining)

    async def quiet(self, method: str, *, session: str | None = None, since: int = 0, seconds: float = 1.0) -> None:
        """Assert that no ``method`` notification arrives for ``seconds``."""
        await asyncio.sleep(seconds)
        assert not self.of(method, session, since), self.of(method, session, since)


def make_client() -> LanguageClient:
    """A pytest-lsp client for ctxd: dict payloads, recorded notifications, the willRun hook."""
    client = LanguageClient(converter_factory=converter_factory)
    notes = Notes()
    client.notes = notes  # type: ignore[attr-defined]
    client.will_run = None  # type: ignore[attr-defined]
    client.will_run_calls = []  # type: ignore[attr-defined]

    def progress(ls: LanguageClient, params: lsp.ProgressParams) -> None:
        notes.record(lsp.PROGRESS, {"token": params.token, "value": params.value})

    features = dict(DEFAULT_CLIENT_FEATURES)
    features[lsp.PROGRESS] = progress
    register_lsp_features(client, features)

    for method in p.NOTIFICATIONS:

        def recorder(ls: LanguageClient, params: Any, method: str = method) -> None:
            notes.record(method, params)

        client.feature(method)(recorder)

    @client.feature(p.COMPACT_WILL_RUN)
    async def will_run(ls: LanguageClient, params: Any) -> Any:
        ls.will_run_calls.append(params)  # type: ignore[attr-defined]
        answer = ls.will_run  # type: ignore[attr-defined]
        if answer is None:
            return None
        result = answer(params)
        if asyncio.iscoroutine(result):
            result = await result
        return result

    return client


CONFIG = ClientServerConfig(server_command=SERVER_COMMAND, client_factory=make_client, server_env=server_env())


async def initialize(client: LanguageClient, options: dict[str, Any]) -> lsp.InitializeResult:
    return await client.initialize_session(
        lsp.InitializeParams(capabilities=lsp.ClientCapabilities(), initialization_options=options)
    )


async def shutdown(client: LanguageClient) -> None:
    """``shutdown`` + ``exit``, bounded so that a dead daemon cannot hang the teardown."""
    try:
        await asyncio.wait_for(client.shutdown_session(), 20)
    except (TimeoutError, RuntimeError, JsonRpcException):
        if client._server is not None and client._server.returncode is None:
            client._server.kill()


@contextlib.asynccontextmanager
async def start_ctxd(
    options: dict[str, Any], *, command: list[str] | None = None, **env: str
) -> AsyncIterator[LanguageClient]:
    """A daemon of its own for one test, with these initializationOptions (and extra env; and
    another ``command`` that runs ``SERVER_COMMAND``, e.g. as another user)."""
    same = not env and command is None
    config = CONFIG if same else ClientServerConfig(command or SERVER_COMMAND, make_client, server_env(**env))
    client = await config.start()
    try:
        await initialize(client, options)
        yield client
    finally:
        await shutdown(client)
        await client.stop()


# --- requests -------------------------------------------------------------------------------------


async def call(client: LanguageClient, method: str, params: Any = None, timeout: float = 30) -> Any:
    return await asyncio.wait_for(client.protocol.send_request_async(method, params), timeout)


async def call_error(client: LanguageClient, method: str, params: Any = None) -> JsonRpcException:
    with pytest.raises(JsonRpcException) as info:
        await call(client, method, params)
    return info.value


async def new_session(client: LanguageClient, cwd: str = "/proj", **kw: Any) -> str:
    created = await call(client, p.SESSION_CREATE, {"cwd": cwd, **kw})
    return str(created["path"])


async def append(client: LanguageClient, session: str, *messages: dict[str, Any], **kw: Any) -> dict[str, Any]:
    result: dict[str, Any] = await call(
        client, p.SESSION_APPEND, {"session": session, "messages": list(messages), **kw}
    )
    return result


def read_entries(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# --- pi messages ----------------------------------------------------------------------------------


def user(text: str = "hello") -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 1_700_000_000_000}


def usage(total: int) -> dict[str, Any]:
    return {
        "input": total,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": total,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }


def assistant(
    text: str = "ok",
    *,
    total: int | None = None,
    stop: str = "stop",
    error: str | None = None,
    calls: list[tuple[str, str, dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for call_id, name, args in calls or []:
        content.append({"type": "toolCall", "id": call_id, "name": name, "arguments": args})
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "api": "openai-completions",
        "provider": "test",
        "model": "test-model",
        "stopReason": stop,
        "timestamp": 1_700_000_000_000,
    }
    if total is not None:
        message["usage"] = usage(total)
    if error is not None:
        message["errorMessage"] = error
    return message


def tool_result(call_id: str, text: str, name: str = "read") -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "timestamp": 1_700_000_000_000,
    }


def conversation(turns: int, words: int = 150) -> list[dict[str, Any]]:
    """``turns`` user/assistant pairs of about ``words`` words each (enough to compact)."""
    out: list[dict[str, Any]] = []
    for i in range(turns):
        out.append(user(f"question {i}: " + "please look at this " * (words // 4)))
        out.append(assistant(f"answer {i}: " + "here is what I found " * (words // 5)))
    return out


# --- raw LSP framing ------------------------------------------------------------------------------


class FrameError(AssertionError):
    """The daemon wrote something that is not a well-formed LSP frame."""


def parse_frames(data: bytes) -> tuple[list[dict[str, Any]], bytes]:
    """Strictly split ``data`` into JSON-RPC messages and the incomplete rest.

    Each frame must be ``Content-Length: N`` (plus an optional ``Content-Type``) header lines
    ending in CRLF, an empty line, and exactly N bytes of a JSON-RPC 2.0 object."""
    out: list[dict[str, Any]] = []
    while data:
        end = data.find(b"\r\n\r\n")
        if end < 0:
            if not b"Content-Length: ".startswith(data[:16]) and not data.startswith(b"Content-"):
                raise FrameError(f"stray bytes where a frame should start: {data[:200]!r}")
            break
        length = None
        for line in data[:end].split(b"\r\n"):
            if line.startswith(b"Content-Length: ") and line[16:].isdigit():
                length = int(line[16:])
            elif not line.startswith(b"Content-Type: "):
                raise FrameError(f"bad header line {line!r} in {data[: end + 4]!r}")
        if length is None:
            raise FrameError(f"frame without Content-Length: {data[: end + 4]!r}")
        start = end + 4
        if len(data) < start + length:
            break
        try:
            message = json.loads(data[start : start + length].decode("utf-8"))
        except ValueError as exc:
            raise FrameError(f"body is not JSON: {data[start : start + length][:200]!r}") from exc
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            raise FrameError(f"not a JSON-RPC 2.0 message: {message!r}")
        out.append(message)
        data = data[start + length :]
    return out, data


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def encode(message: Any) -> bytes:
    return frame(json.dumps(message).encode("utf-8"))


class RawDaemon:
    """``ctxd serve`` spoken to by hand: every byte of its stdout is kept and parsed strictly."""

    def __init__(self, **env: str) -> None:
        self.env = server_env(**env)
        self.process: asyncio.subprocess.Process | None = None
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.messages: list[dict[str, Any]] = []
        self._rest = b""
        self._arrived = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._ids = 1000

    async def start(self) -> RawDaemon:
        self.process = await asyncio.create_subprocess_exec(
            *SERVER_COMMAND,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
        )
        self._tasks = [asyncio.create_task(self._pump_stdout()), asyncio.create_task(self._pump_stderr())]
        return self

    async def _pump_stdout(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        while chunk := await self.process.stdout.read(65536):
            self.stdout += chunk
            messages, self._rest = parse_frames(self._rest + chunk)
            self.messages += messages
            self._arrived.set()
        self._arrived.set()

    async def _pump_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        while chunk := await self.process.stderr.read(65536):
            self.stderr += chunk

    def send_bytes(self, data: bytes) -> None:
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(data)

    def send(self, message: Any) -> None:
        self.send_bytes(encode(message))

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def request(self, method: str, params: Any = None, *, msg_id: Any = None) -> Any:
        msg_id = self.next_id() if msg_id is None else msg_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return msg_id

    async def response(self, msg_id: Any, timeout: float = 30) -> dict[str, Any]:
        """The response to ``msg_id`` (a result or an error)."""

        def find() -> dict[str, Any] | None:
            for m in self.messages:
                if "method" not in m and m.get("id") == msg_id:
                    return m
            return None

        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (found := find()) is None:
            if self.process is not None and self.process.returncode is not None and self._tasks[0].done():
                raise AssertionError(f"the daemon exited ({self.process.returncode}) before answering {msg_id}")
            self._arrived.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"no response to {msg_id} within {timeout}s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), min(remaining, 0.5))
        return found

    async def notification(
        self, method: str, predicate: Callable[[Any], bool] | None = None, timeout: float = TIMEOUT
    ) -> Any:
        """The params of the first ``method`` notification so far (or to come) that matches."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            for m in self.messages:
                if m.get("method") == method and "id" not in m and (predicate is None or predicate(m.get("params"))):
                    return m.get("params")
            self._arrived.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"no matching {method} within {timeout}s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), min(remaining, 0.5))

    async def call(self, method: str, params: Any = None, timeout: float = 30) -> dict[str, Any]:
        return await self.response(self.request(method, params), timeout)

    async def initialize(self, options: dict[str, Any]) -> dict[str, Any]:
        answer = await self.call(
            "initialize", {"processId": os.getpid(), "capabilities": {}, "initializationOptions": options}
        )
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        return answer

    async def wait(self, timeout: float = 20) -> int:
        assert self.process is not None
        code = await asyncio.wait_for(self.process.wait(), timeout)
        await asyncio.wait_for(asyncio.gather(*self._tasks), timeout)
        return code

    async def close(self) -> None:
        """Kill the daemon if it is still running."""
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
