"""A scriptable fake of the OpenAI chat-completions API, served over real HTTP on 127.0.0.1.

Tests point litellm at it with ``model="openai/<anything>"`` and ``api_base=server.url`` (and pi at it through
``models.json``). Every request is recorded (``server.requests``: method, path, headers, body), and each chat
request consumes the next scripted action (``server.script(...)``);
when the script is empty the server answers with ``server.default_text``. A ``responder`` callable can decide
the action from the request body instead.

Actions: :func:`reply`, :func:`tool_call`, :func:`overflow`, :func:`rate_limited`, :func:`server_error`,
:func:`slow`, :func:`empty`, or any :class:`Action`.  A request with ``"stream": true`` (as pi's
openai-completions provider sends) is answered with server-sent events: the text (or tool calls) in
chunks, the finish reason, the usage, then ``data: [DONE]``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import attrs
import pytest

from ._local import LocalServer

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")


@attrs.frozen
class Action:
    """What the server does with one request: wait ``delay`` seconds, then send ``status`` and ``body``."""

    status: int = 200
    text: str | None = "ok"
    usage: dict[str, int] | None = None
    error: dict[str, Any] | None = None
    delay: float = 0.0
    headers: dict[str, str] = attrs.field(factory=dict)
    tool_calls: list[dict[str, Any]] | None = None
    """``[{"id", "name", "arguments"}]``: the assistant calls these tools (finish reason ``tool_calls``)."""


def reply(text: str, *, usage: dict[str, int] | None = None, delay: float = 0.0) -> Action:
    """A normal completion whose assistant content is ``text``."""
    return Action(text=text, usage=usage, delay=delay)


def tool_call(name: str, arguments: dict[str, Any], *, text: str = "", call_id: str | None = None) -> Action:
    """An assistant message calling one tool (pi runs it and sends the result in the next request)."""
    call = {"id": call_id or f"call_{name}_{abs(hash(json.dumps(arguments, sort_keys=True))) % 10**8}"}
    call.update(name=name, arguments=arguments)
    return Action(text=text, tool_calls=[call])


def empty(delay: float = 0.0) -> Action:
    """A completion whose assistant content is the empty string."""
    return Action(text="", delay=delay)


def slow(seconds: float, text: str = "late answer") -> Action:
    """A normal completion sent only after ``seconds``."""
    return Action(text=text, delay=seconds)


def error(status: int, message: str, *, kind: str = "server_error", code: str | None = None) -> Action:
    return Action(status=status, text=None, error={"message": message, "type": kind, "param": None, "code": code})


def overflow() -> Action:
    """HTTP 400 with the body OpenAI sends when the prompt exceeds the model's window."""
    return error(
        400,
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9001 tokens. "
        "Please reduce the length of the messages.",
        kind="invalid_request_error",
        code="context_length_exceeded",
    )


def rate_limited() -> Action:
    return error(429, "Rate limit reached for requests", kind="requests", code="rate_limit_exceeded")


def server_error() -> Action:
    return error(500, "The server had an error while processing your request.")


@attrs.define
class RecordedRequest:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    started: float
    finished: float | None = None
    status: int | None = None
    method: str = "POST"

    @property
    def prompt(self) -> str:
        """All message contents of the request joined, for substring assertions."""
        parts: list[str] = []
        for message in self.body.get("messages", []):
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(str(b.get("text", "")) for b in content if isinstance(b, dict))
        return "\n".join(parts)

    @property
    def streamed(self) -> bool:
        return bool(self.body.get("stream"))


Responder = Callable[[dict[str, Any], int], Action | None]


class FakeOpenAIServer(LocalServer):
    """Threaded HTTP server; use as a context manager or call :meth:`start` / :meth:`stop`."""

    def __init__(self, default_text: str = "## Goal\nFake summary.") -> None:
        self.default_text = default_text
        self.requests: list[RecordedRequest] = []
        self.responder: Responder | None = None
        self._script: deque[Action] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        super().__init__()

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                server._handle(self)

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                headers = dict(self.headers.items())
                record = RecordedRequest(path, {}, headers, time.monotonic(), status=404, method="GET")
                with server._lock:
                    server.requests.append(record)
                self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return self._serve(Handler)

    def stop(self) -> None:
        self._stopping.set()
        super().stop()

    @property
    def url(self) -> str:
        """The ``api_base`` to hand to litellm (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting ---------------------------------------------------------------------------------------------

    def script(self, *actions: Action) -> None:
        """Queue actions; each request consumes one, in order."""
        with self._lock:
            self._script.extend(actions)

    @property
    def prompts(self) -> list[str]:
        return [r.prompt for r in self.requests]

    # -- request handling --------------------------------------------------------------------------------------

    def _next_action(self, body: dict[str, Any], index: int) -> Action:
        with self._lock:
            if self._script:
                return self._script.popleft()
        if self.responder is not None:
            action = self.responder(body, index)
            if action is not None:
                return action
        return reply(self.default_text)

    def _handle(self, handler: Any) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        path = handler.path.split("?", 1)[0]
        if path not in CHAT_PATHS:
            headers = dict(handler.headers.items())
            with self._lock:
                self.requests.append(RecordedRequest(path, {}, headers, time.monotonic(), status=404))
            handler._send(404, {"error": {"message": f"unknown path {path}", "type": "invalid_request_error"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            handler._send(400, {"error": {"message": "invalid JSON body", "type": "invalid_request_error"}})
            return
        record = RecordedRequest(path=path, body=body, headers=dict(handler.headers.items()), started=time.monotonic())
        with self._lock:
            self.requests.append(record)
            index = len(self.requests) - 1
        action = self._next_action(body, index)
        deadline = time.monotonic() + action.delay
        while not self._stopping.is_set() and time.monotonic() < deadline:
            time.sleep(min(0.02, max(0.0, deadline - time.monotonic())))
        if action.error is None and body.get("stream"):
            record.status = action.status
            self._stream(handler, body, action, index)
            record.finished = time.monotonic()
            return
        if action.error is not None:
            payload: dict[str, Any] = {"error": action.error}
        else:
            payload = self._completion(body, action, index)
        record.status = action.status
        record.finished = time.monotonic()
        try:
            data = json.dumps(payload).encode()
            handler.send_response(action.status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            for key, value in action.headers.items():
                handler.send_header(key, value)
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout)

    @staticmethod
    def _usage(action: Action, index: int) -> dict[str, int]:
        text = action.text or ""
        return action.usage or {
            "prompt_tokens": 100 + index,
            "completion_tokens": max(1, len(text) // 4),
            "total_tokens": 100 + index + max(1, len(text) // 4),
        }

    @staticmethod
    def _wire_calls(action: Action) -> list[dict[str, Any]]:
        out = []
        for i, call in enumerate(action.tool_calls or []):
            arguments = call.get("arguments", {})
            out.append(
                {
                    "index": i,
                    "id": call["id"],
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                    },
                }
            )
        return out

    def _stream(self, handler: Any, body: dict[str, Any], action: Action, index: int) -> None:
        """Server-sent events as OpenAI streams them: role, content pieces, tool calls, finish, usage."""
        base = {"id": f"chatcmpl-fake{index}", "object": "chat.completion.chunk", "created": 1_700_000_000}
        base["model"] = str(body.get("model", "fake-model"))

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
            payload = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
            return b"data: " + json.dumps(payload).encode() + b"\n\n"

        text = action.text or ""
        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": text[i : i + 40]}) for i in range(0, len(text), 40)]
        calls = self._wire_calls(action)
        events += [chunk({"tool_calls": [call]}) for call in calls]
        events.append(chunk({}, "tool_calls" if calls else "stop"))
        usage_chunk = {**base, "choices": [], "usage": self._usage(action, index)}
        events.append(b"data: " + json.dumps(usage_chunk).encode() + b"\n\n")
        events.append(b"data: [DONE]\n\n")
        try:
            handler.send_response(action.status)
            handler.send_header("Content-Type", "text/event-stream")
            handler.send_header("Cache-Control", "no-cache")
            handler.send_header("Connection", "close")
            handler.end_headers()
            for event in events:
                handler.wfile.write(event)
                handler.wfile.flush()
            handler.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            pass

    @classmethod
    def _completion(cls, body: dict[str, Any], action: Action, index: int) -> dict[str, Any]:
        text = action.text or ""
        usage = cls._usage(action, index)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if action.tool_calls:
            message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in cls._wire_calls(action)]
        return {
            "id": f"chatcmpl-fake{index}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": str(body.get("model", "fake-model")),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if action.tool_calls else "stop",
                }
            ],
            "usage": usage,
        }


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    """A started :class:`FakeOpenAIServer`, stopped after the test."""
    with FakeOpenAIServer() as server:
        yield server
