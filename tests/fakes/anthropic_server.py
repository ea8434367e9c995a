"""A scriptable fake of the Anthropic Messages API (streaming SSE), served over real HTTP on 127.0.0.1.

Claude Code talks to it when ``ANTHROPIC_BASE_URL`` is ``server.url``. Every request is recorded
(``server.requests``, each classified as ``"main"``, ``"summary"`` or ``"other"``), and each *main* request
(the agent's own turn) consumes the next scripted :class:`Turn` (``server.script(...)``): a text answer, or
tool calls (Bash, Edit, Write, Read, ...) that Claude Code then runs and answers with ``tool_result`` blocks.
The compaction request (Claude's "create a detailed summary" prompt) is answered with ``server.summary_text``;
side requests (titles, topic checks) get a short text. When the script is empty the answer is
``server.default_text``.

Responses stream as Claude Code asks (``message_start``, ``content_block_start``/``_delta``/``_stop``,
``message_delta``, ``message_stop``); non-streaming requests get one JSON message. ``count_tokens`` answers
with a rough count; any other path (Claude Code's ``HEAD /api/hello``) gets an empty 200.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import attrs

from ._local import LocalServer

SUMMARY_MARKERS = (
    "Your task is to create a detailed summary of the conversation so far",
    "Your task is to create a detailed summary of this conversation",
)
"""Claude Code's compaction prompt (2.1.330) starts with one of these."""


@attrs.frozen
class ToolUse:
    name: str
    input: dict[str, Any]
    id: str = ""


@attrs.frozen
class Turn:
    """One assistant response: optional text, then tool calls (stop_reason ``tool_use`` when there are any)."""

    text: str = ""
    tools: tuple[ToolUse, ...] = ()
    input_tokens: int = 0
    """Reported ``usage.input_tokens`` (0: a rough count of the request)."""


Reply = Callable[[dict[str, Any]], Turn]
"""A scripted turn computed from the request's body when it arrives (as a model reads what it was sent)."""


def say(text: str) -> Turn:
    return Turn(text=text)


def call(name: str, text: str = "", **tool_input: Any) -> Turn:
    """A response calling one tool: ``call("Bash", command="ls")``."""
    return Turn(text=text, tools=(ToolUse(name, tool_input),))


@attrs.define
class RecordedRequest:
    method: str
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    kind: str
    """``"main"`` (a scripted agent turn), ``"summary"`` (compaction), ``"other"`` (side requests, count_tokens)."""
    response: Turn | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        value = self.body.get("messages")
        return value if isinstance(value, list) else []

    @property
    def text(self) -> str:
        """Every text of the request's messages (text blocks and tool results) joined, for substring checks."""
        return "\n".join(_texts(self.messages))

    def tool_results(self) -> list[dict[str, Any]]:
        """The ``tool_result`` blocks of the request's last user message."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                content = message.get("content")
                return (
                    [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
                    if isinstance(content, list)
                    else []
                )
        return []


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)
    elif isinstance(value, dict):
        if isinstance(value.get("text"), str):
            yield value["text"]
        if "content" in value:
            yield from _texts(value["content"])


def classify(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "other"
    # Claude Code 2.1.330 may end a request with a "system" message of its own (MCP tools that became available,
    # the servers' instructions): the prompt is the last message that is not one of those.
    spoken = [m for m in messages if not (isinstance(m, dict) and m.get("role") == "system")]
    last = spoken[-1] if spoken else messages[-1]
    text = "\n".join(_texts(last.get("content"))) if isinstance(last, dict) else ""
    if any(marker in text for marker in SUMMARY_MARKERS):
        return "summary"
    # Claude Code's agent loop always sends its tools; side requests (titles, topic checks) send none.
    return "main" if body.get("tools") else "other"


class FakeAnthropicServer(LocalServer):
    """Threaded HTTP server; use as a context manager or call :meth:`start` / :meth:`stop`."""

    def __init__(self, default_text: str = "Done.", summary_text: str = "Summary: nothing to report.") -> None:
        self.default_text = default_text
        self.summary_text = summary_text
        self.requests: list[RecordedRequest] = []
        self._script: deque[Turn | Reply] = deque()
        self._lock = threading.Lock()
        self._ids = 0
        super().__init__()

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def start(self) -> FakeAnthropicServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                server._handle(self)

            def do_GET(self) -> None:
                server._empty(self)

            def do_HEAD(self) -> None:
                server._empty(self)

        return self._serve(Handler)

    @property
    def url(self) -> str:
        """The ``ANTHROPIC_BASE_URL`` to hand to Claude Code."""
        return f"http://127.0.0.1:{self.port}"

    # -- scripting ---------------------------------------------------------------------------------------------

    def script(self, *turns: Turn | Reply) -> None:
        """Queue responses; each main request consumes one, in order (a :data:`Reply` is called with the body)."""
        with self._lock:
            self._script.extend(turns)

    def of_kind(self, kind: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.kind == kind]

    # -- request handling --------------------------------------------------------------------------------------

    def _empty(self, handler: Any) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def _handle(self, handler: Any) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        path = handler.path.split("?", 1)[0]
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        headers = dict(handler.headers.items())
        if path.endswith("/count_tokens"):
            self._record(RecordedRequest("POST", path, body, headers, "other"))
            _send_json(handler, {"input_tokens": max(1, len(raw) // 4)})
            return
        if not path.endswith("/v1/messages"):
            self._record(RecordedRequest("POST", path, body, headers, "other"))
            self._empty(handler)
            return
        kind = classify(body)
        if kind == "main":
            with self._lock:
                scripted = self._script.popleft() if self._script else Turn(text=self.default_text)
            turn = scripted if isinstance(scripted, Turn) else scripted(body)
        elif kind == "summary":
            turn = Turn(text=self.summary_text)
        else:
            turn = Turn(text="Fake")
        with self._lock:
            self._ids += 1
            number = self._ids
        tools = tuple(t if t.id else attrs.evolve(t, id=f"toolu_fake{number:03d}{k}") for k, t in enumerate(turn.tools))
        turn = attrs.evolve(turn, tools=tools, input_tokens=turn.input_tokens or max(1, len(raw) // 4))
        self._record(RecordedRequest("POST", path, body, headers, kind, turn))
        message_id = f"msg_fake{number:04d}"
        model = str(body.get("model") or "claude-fake")
        try:
            if body.get("stream"):
                _send_stream(handler, message_id, model, turn)
            else:
                _send_json(handler, _message(message_id, model, turn))
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _record(self, record: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(record)


def _blocks(turn: Turn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if turn.text:
        blocks.append({"type": "text", "text": turn.text})
    for tool in turn.tools:
        blocks.append({"type": "tool_use", "id": tool.id, "name": tool.name, "input": tool.input})
    return blocks


def _usage(turn: Turn) -> dict[str, int]:
    return {
        "input_tokens": turn.input_tokens,
        "output_tokens": max(1, len(turn.text) // 4),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def _message(message_id: str, model: str, turn: Turn) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _blocks(turn),
        "stop_reason": "tool_use" if turn.tools else "end_turn",
        "stop_sequence": None,
        "usage": _usage(turn),
    }


def _send_json(handler: Any, payload: dict[str, Any]) -> None:
    data = json.dumps(payload).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def _send_stream(handler: Any, message_id: str, model: str, turn: Turn) -> None:
    start = _message(message_id, model, turn)
    start.update(content=[], stop_reason=None)
    start["usage"] = dict(start["usage"], output_tokens=1)
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(_blocks(turn)):
        if block["type"] == "text":
            empty: dict[str, Any] = {"type": "text", "text": ""}
            delta: dict[str, Any] = {"type": "text_delta", "text": block["text"]}
        else:
            empty = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": empty}))
        events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    stop = "tool_use" if turn.tools else "end_turn"
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": max(1, len(turn.text) // 4)},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    data = "".join(f"event: {name}\ndata: {json.dumps(payload)}\n\n" for name, payload in events).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
