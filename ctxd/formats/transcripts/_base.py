"""Shared pieces of the transcript adapters: the result type, line splitting, decoding, small coercions.

Everything here is pure and never raises on malformed input: callers get ``None``/defaults instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import attrs
import msgspec

from ctxd.formats import depth

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
EPOCH_ISO = "1970-01-01T00:00:00.000Z"
_MS = timedelta(milliseconds=1)
_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode

MAX_INLINE_JSON = 4000
"""Blocks the adapters cannot map are rendered as text holding their JSON, up to this many characters."""


@attrs.define
class Transcript:
    """Another agent's transcript mapped onto pi v3 entries (read-only)."""

    kind: str
    """``"claude"`` or ``"codex"``."""
    header: dict[str, Any]
    """A pi-style header: ``{"type": "session", "version": 3, "id", "timestamp", "cwd", "agent", ...extras}``."""
    entries: list[dict[str, Any]]
    """pi v3 entries in file order; each carries ``ctxdSource: {"lines": [...], "kind": ...}``."""
    lines: list[int]
    """1-based source line of each entry (the first line of merged ones)."""
    diagnostics: list[tuple[int, str]]
    """``(line, reason)`` for lines that failed to map (or mapped with a repair); everything else is served."""
    leaf_id: str | None
    """The entry the agent's conversation is at (the last main-chain entry)."""


def as_bytes(data: Any) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    if isinstance(data, str):
        return data.encode("utf-8", "surrogatepass")
    return b""


def complete_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """``(line number, raw line)`` for every complete (newline-terminated) line; a final partial line is skipped."""
    end = data.rfind(b"\n")
    if end < 0:
        return
    yield from enumerate(data[:end].split(b"\n"), 1)


def decode_line(number: int, raw: bytes) -> tuple[Any, str | None]:
    """The decoded JSON object of one line, or ``(None, reason)``; ``(None, None)`` for a blank line.

    A line nested deeper than :data:`ctxd.formats.depth.MAX_DEPTH` is pruned to it (see that
    module) and comes with a note: ``(obj, note)``."""
    if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    if not raw.strip():
        return None, None
    note = None
    if depth.too_deep(raw):
        raw = depth.prune(raw)
        note = f"nested deeper than {depth.MAX_DEPTH} levels: the deeper values are replaced by a placeholder"
    try:
        obj = _decode(raw)
    except Exception as exc:  # msgspec.DecodeError, invalid UTF-8, nesting limits ...
        return None, f"invalid JSON: {exc}"
    if not isinstance(obj, dict):
        return None, f"not a JSON object ({type(obj).__name__})"
    return obj, note


def first_json_line(first_line: bytes) -> Any:
    """The decoded first non-empty line of ``first_line`` (which may hold more lines), or None."""
    data = as_bytes(first_line)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        raw = data[start:end]
        if raw.strip():
            try:
                return _decode(raw)
            except Exception:
                return None
        start = end + 1
    return None


def iso_ms(value: Any) -> int | None:
    """Milliseconds since the epoch for an ISO-8601 timestamp (naive means UTC), or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    try:
        return (dt - EPOCH) // _MS
    except (OverflowError, ValueError):
        return None


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def as_int(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value == value and abs(value) < 1e18:
        return int(value)
    return 0


def to_json_text(value: Any) -> str:
    try:
        return _encode(value).decode("utf-8", "replace")
    except Exception:
        return repr(value)


def opaque_block(kind: str, block: Any) -> dict[str, Any]:
    """A text block standing for a block the adapters cannot map (its JSON, when short enough)."""
    text = to_json_text(block)
    if len(text) > MAX_INLINE_JSON:
        return {"type": "text", "text": f"[{kind}: {len(text)} characters, see the source line]"}
    return {"type": "text", "text": f"[{kind}] {text}"}


def parse_json_object(text: str) -> dict[str, Any] | None:
    try:
        value = _decode(text)
    except Exception:
        return None
    return value if isinstance(value, dict) else None


def data_url_image(url: str) -> dict[str, Any] | None:
    """A pi image block for a ``data:<mime>;base64,<data>`` URL, or None."""
    if not url.startswith("data:"):
        return None
    head, sep, payload = url.partition(",")
    if not sep or not head.endswith(";base64"):
        return None
    mime = head[5:-7] or "image/png"
    return {"type": "image", "data": payload, "mimeType": mime}


class IdAllocator:
    """Unique entry ids: the preferred one when free, else a deterministic variant of it."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def take(self, preferred: str) -> str:
        candidate = preferred
        n = 1
        while candidate in self.used or not candidate:
            candidate = f"{preferred}~{n}"
            n += 1
        self.used.add(candidate)
        return candidate


def line_id(number: int) -> str:
    """A stable derived id for a source line (8 hex digits, like pi's ids)."""
    return f"{number:08x}"


def finish_entries(
    entries: list[dict[str, Any]], lines: list[int], diagnostics: list[tuple[int, str]], first_ts: str | None
) -> None:
    """Fill timestamps lacking before the first dated line, and guarantee a valid tree (parents earlier, ids unique).

    The mappers build a valid tree by construction; this is the safety net behind the "never raises, always a
    valid tree" contract.
    """
    fallback = first_ts or EPOCH_ISO
    seen: set[str] = set()
    for entry, line in zip(entries, lines, strict=False):
        if not isinstance(entry.get("timestamp"), str):
            entry["timestamp"] = fallback
        message = entry.get("message")
        if isinstance(message, dict) and message.get("timestamp") is None:
            message["timestamp"] = iso_ms(entry["timestamp"]) or 0
        parent = entry.get("parentId")
        if parent is not None and parent not in seen:
            diagnostics.append((line, f"parent {parent!r} is not an earlier entry; made a root"))
            entry["parentId"] = None
        seen.add(entry["id"])


def add_entry(
    entries: list[dict[str, Any]],
    lines: list[int],
    kind: str,
    eid: str,
    parent: str | None,
    stamp: str | None,
    number: int,
    source_kind: str,
    fields: dict[str, Any],
) -> dict[str, Any]:
    """Append one mapped entry (pi's fields, then ``fields``, then ``ctxdSource``: the line it came from and
    what kind of line that was) and its source line; returns the entry."""
    entry: dict[str, Any] = {"type": kind, "id": eid, "parentId": parent, "timestamp": stamp}
    entry.update(fields)
    entry["ctxdSource"] = {"lines": [number], "kind": source_kind}
    entries.append(entry)
    lines.append(number)
    return entry


class Mapper(Protocol):
    """One format's line-by-line mapping state (see :func:`run_mapper`)."""

    diagnostics: list[tuple[int, str]]

    def line(self, number: int, obj: dict[str, Any]) -> None: ...

    def result(self) -> Transcript: ...


def run_mapper(mapper: Mapper, data: Any) -> Transcript:
    """Feed every complete line of ``data`` to ``mapper``; a line that fails is reported, never raised."""
    try:
        for number, raw in complete_lines(as_bytes(data)):
            obj, reason = decode_line(number, raw)
            if reason:
                mapper.diagnostics.append((number, reason))
            if obj is None:
                continue
            try:
                mapper.line(number, obj)
            except Exception as exc:  # a shape nobody foresaw: report it, serve the rest
                mapper.diagnostics.append((number, f"could not map: {exc!r}"))
    except Exception as exc:
        mapper.diagnostics.append((0, f"mapping stopped: {exc!r}"))
    return mapper.result()
