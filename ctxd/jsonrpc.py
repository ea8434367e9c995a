"""JSON-RPC 2.0 with LSP framing: the one reader and writer of frames, for the daemon's transport
(:mod:`ctxd.server.stdio`) and its client (:mod:`ctxd.client`). Standard library only.

A frame is a ``Content-Length`` header (in bytes), a blank line and a UTF-8 JSON body. :class:`FrameReader`
reads frames from an asyncio stream and recovers from broken headers: a header without a valid
``Content-Length`` loses its frame (``on_lost`` is told why) and the input is skipped up to the next
``Content-Length`` header (on the wire it follows the lost body directly).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "CONTENT_LENGTH",
    "MAX_BODY",
    "MAX_HEADER",
    "FrameReader",
    "decode_frames",
    "encode_frame",
    "error_message",
    "invalid",
    "parse_body",
]

CONTENT_LENGTH = re.compile(rb"^content-length:\s*(\d{1,12})\s*$", re.IGNORECASE)
MAX_HEADER = 1 << 16
"""The longest header line read (a longer one is taken for a broken header; give streams this limit)."""
MAX_BODY = 1 << 31
"""A larger Content-Length is taken for a broken header (2 GiB: no real message comes close)."""


def encode_frame(message: Mapping[str, Any] | Any) -> bytes:
    """One LSP frame: a ``Content-Length`` header (in bytes) and the UTF-8 JSON body."""
    body = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def decode_frames(data: bytes) -> tuple[list[Any], bytes]:
    """Split ``data`` into complete frames' JSON bodies and the incomplete rest.

    Raises ValueError on anything that is not LSP framing (for checking a raw stream)."""
    messages: list[Any] = []
    while data:
        end = data.find(b"\r\n\r\n")
        if end < 0:
            break
        length: int | None = None
        for line in data[:end].split(b"\r\n"):
            name, sep, value = line.partition(b":")
            if not sep:
                raise ValueError(f"not an LSP header line: {line!r}")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        if length is None:
            raise ValueError(f"a frame without Content-Length: {data[:end]!r}")
        start = end + 4
        if len(data) < start + length:
            break
        messages.append(json.loads(data[start : start + length].decode("utf-8")))
        data = data[start + length :]
    return messages, data


def error_message(code: int, message: str, msg_id: Any = None, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error response (``data`` left out when None)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": msg_id, "error": error}


def parse_body(body: bytes) -> tuple[Any, str | None]:
    """The JSON in a frame's ``body``, or why it is not JSON."""
    try:
        return json.loads(body), None
    except RecursionError:
        return None, "nested too deeply"
    except ValueError as exc:
        return None, str(exc)


def invalid(data: object) -> str | None:
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


class FrameReader:
    """LSP frames' bodies from a stream, recovering from broken headers (see the module): ``on_lost`` is
    called with the reason for each frame lost. ``limit``: the stream's (its longest header line)."""

    def __init__(self, reader: asyncio.StreamReader, on_lost: Callable[[str], None], limit: int = MAX_HEADER) -> None:
        self.reader = reader
        self.on_lost = on_lost
        self.limit = limit
        self._pending: bytes | None = None
        """A header line found while skipping a lost body."""
        self._restart = False
        """A frame was lost while its headers were read: the line returned starts the next one."""

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
                self.on_lost(problem or "a header without Content-Length")
                self._pending = await self._skip()
                if self._pending is None:
                    return None
                continue
            try:
                return await self.reader.readexactly(length)
            except asyncio.IncompleteReadError:
                return None

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
                self.on_lost(f"a header line longer than {self.limit} bytes")
                await self.reader.readexactly(exc.consumed)
                self._restart = True
                return await self._skip()

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


def _header_at(data: bytes) -> int:
    return data.lower().find(b"content-length:")
