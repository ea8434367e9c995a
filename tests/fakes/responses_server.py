"""A scriptable fake of the OpenAI Responses API (``POST /v1/responses``, streamed), on 127.0.0.1.

Codex points at it through a custom model provider (``base_url = server.url``). Every request is recorded
(``server.requests``: path, headers, body), and each one is answered by ``server.responder(body, index)`` (or
:func:`reply` of ``server.default_text``). An answer is server-sent events as the Responses API streams them:
``response.created``, then per output item ``response.output_item.added`` / ``response.output_text.delta`` /
``response.output_item.done``, then ``response.completed`` carrying the usage (which a test may set large to make
Codex compact). A request that is not a Responses request gets 404 (and is recorded).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import attrs
import pytest

from ._local import LocalServer

RESPONSES_PATHS = ("/v1/responses", "/responses")
COMPACTION_MARK = "You are performing a CONTEXT CHECKPOINT COMPACTION"
"""How Codex's compaction prompt begins (the last user item of a compaction request, non-OpenAI providers)."""


@attrs.frozen
class Answer:
    """One streamed response: assistant ``text`` (may be empty), then ``calls``, reported with ``input_tokens``."""

    text: str = "ok"
    calls: list[dict[str, Any]] = attrs.field(factory=list)
    """``[{"call_id", "name", "arguments"}]``: function calls (``arguments`` a dict or a JSON string)."""
    input_tokens: int = 100
    output_tokens: int = 10


def reply(text: str, *, input_tokens: int = 100) -> Answer:
    return Answer(text=text, input_tokens=input_tokens)


def call(name: str, arguments: dict[str, Any], call_id: str, *, input_tokens: int = 100) -> Answer:
    return Answer(
        text="", calls=[{"call_id": call_id, "name": name, "arguments": arguments}], input_tokens=input_tokens
    )


@attrs.define
class RecordedRequest:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    method: str = "POST"

    @property
    def input(self) -> list[dict[str, Any]]:
        items = self.body.get("input")
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    def texts(self) -> list[str]:
        """The text of every message item of the input, in order."""
        out: list[str] = []
        for item in self.input:
            if item.get("type") == "message" and isinstance(item.get("content"), list):
                out.append("".join(str(b.get("text", "")) for b in item["content"] if isinstance(b, dict)))
        return out

    compaction_marks: tuple[str, ...] = (COMPACTION_MARK,)
    """How a compaction request's last user item may begin (set from the server's ``compaction_marks``)."""

    @property
    def is_compaction(self) -> bool:
        users = [i for i in self.input if i.get("type") == "message" and i.get("role") == "user"]
        if not users:
            return False
        last = users[-1].get("content")
        text = "".join(str(b.get("text", "")) for b in last if isinstance(b, dict)) if isinstance(last, list) else ""
        return text.lstrip().startswith(self.compaction_marks)


Responder = Callable[[RecordedRequest, int], Answer]


class FakeResponsesServer(LocalServer):
    """Threaded HTTP server; use as a context manager."""

    def __init__(self, default_text: str = "ok") -> None:
        self.default_text = default_text
        self.requests: list[RecordedRequest] = []
        self.responder: Responder | None = None
        self.compaction_marks: tuple[str, ...] = (COMPACTION_MARK,)
        """Beginnings of a compaction prompt (a test that sets its own ``compact_prompt`` adds its own)."""
        self._lock = threading.Lock()
        super().__init__()

    def start(self) -> FakeResponsesServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                server._handle(self, "POST")

            def do_GET(self) -> None:
                server._handle(self, "GET")

        return self._serve(Handler)

    @property
    def url(self) -> str:
        """The provider's ``base_url`` (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path in RESPONSES_PATHS and r.method == "POST"]

    def _handle(self, handler: Any, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        path = handler.path.split("?", 1)[0]
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        headers = dict(handler.headers.items())
        record = RecordedRequest(path, body if isinstance(body, dict) else {}, headers, method, self.compaction_marks)
        with self._lock:
            self.requests.append(record)
            index = len(self.model_requests) - 1
        if method != "POST" or path not in RESPONSES_PATHS:
            data = json.dumps({"error": {"message": f"unknown path {path}", "type": "invalid_request_error"}})
            handler.send_response(404)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data.encode())
            return
        answer = self.responder(record, index) if self.responder is not None else reply(self.default_text)
        self._stream(handler, answer, index)

    @staticmethod
    def _events(answer: Answer, index: int) -> list[dict[str, Any]]:
        rid = f"resp_fake{index}"
        events: list[dict[str, Any]] = [{"type": "response.created", "response": {"id": rid}}]
        items: list[dict[str, Any]] = []
        if answer.text:
            items.append(
                {
                    "type": "message",
                    "id": f"msg_fake{index}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": answer.text, "annotations": []}],
                }
            )
        for c in answer.calls:
            arguments = c["arguments"] if isinstance(c["arguments"], str) else json.dumps(c["arguments"])
            item = {"type": "function_call", "id": f"fc_{c['call_id']}", "status": "completed"}
            item.update(call_id=c["call_id"], name=c["name"], arguments=arguments)
            items.append(item)
        for n, item in enumerate(items):
            added = dict(item, content=[]) if item["type"] == "message" else item
            events.append({"type": "response.output_item.added", "output_index": n, "item": added})
            if item["type"] == "message":
                delta = {"type": "response.output_text.delta", "item_id": item["id"], "output_index": n}
                events.append(dict(delta, content_index=0, delta=answer.text))
            events.append({"type": "response.output_item.done", "output_index": n, "item": item})
        usage = {
            "input_tokens": answer.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": answer.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": answer.input_tokens + answer.output_tokens,
        }
        events.append({"type": "response.completed", "response": {"id": rid, "usage": usage, "output": items}})
        return events

    def _stream(self, handler: Any, answer: Answer, index: int) -> None:
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "text/event-stream")
            handler.send_header("Cache-Control", "no-cache")
            handler.send_header("Connection", "close")
            handler.end_headers()
            for event in self._events(answer, index):
                handler.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
                handler.wfile.flush()
            handler.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.fixture
def responses_server() -> Iterator[FakeResponsesServer]:
    """A started :class:`FakeResponsesServer`, stopped after the test."""
    with FakeResponsesServer() as server:
        yield server
