"""opencode sessions (rows of its SQLite database, ``~/.local/share/opencode/opencode.db``) as pi v3 entries.

opencode 1.18 keeps a session as one ``session`` row, its ``message`` rows (``data``: JSON with ``role``,
``time``, ``tokens``, ``finish``, ``summary`` ...) and each message's ``part`` rows (``data``: JSON with a
``type``). This module maps rows already read (see :mod:`ctxd.store.opencode`, which reads the database
read-only); it never touches the database. The result is a linear tree in message order (``time_created``,
then id). What maps to what:

===============================================  ================================================================
opencode                                         pi entry
===============================================  ================================================================
``session`` row                                  the header (id, cwd = ``directory``, timestamp, ``title``,
                                                 ``opencodeVersion``, ``opencodeParent`` = ``parent_id``)
user message: ``text`` / ``file`` parts          ``message`` (user); synthetic text (opencode's own, e.g. "Continue
                                                 if you have next steps") marks the message ``opencodeSynthetic``
                                                 and ``ctxdInjected`` = ``opencode.synthetic`` (see
                                                 :mod:`ctxd.formats.injected`: never the user's words)
user message with a ``compaction`` part          ``custom`` ``opencode.compaction-request`` (``auto``, ``overflow``)
assistant message with ``summary: true``         ``compaction``: ``summary`` = its text parts
assistant message: ``text``, ``reasoning``,      ``message`` (assistant): text, thinking, toolCall blocks; one per
``tool`` parts                                   model step (a ``step-start`` after a tool part opens a new one)
``tool`` part, status completed / error          ``message`` (toolResult) after its step's assistant message
other parts (``patch``, ``snapshot``, ``agent``,  ``custom`` ``opencode.<type>`` with ``data`` = the part
``subtask``, ``retry``, ...)
===============================================  ================================================================

Decisions:

- Ids are opencode's own (the message id for a message, the part id for a tool result or a custom entry), so
  they are stable as the session grows. A second step of one assistant message gets ``<message id>~<n>``.
- "Lines" (diagnostics, ``ctxdSource.lines``) are 1-based positions of the message in the session's order.
- Usage: from the step's ``step-finish`` part's ``tokens`` when there is one, else the message's ``tokens``:
  input, output, cacheRead = ``cache.read``, cacheWrite = ``cache.write``, totalTokens = ``total`` (or the sum);
  an all-zero count (a message still streaming) gives no usage.
- ``stopReason``: ``finish`` tool-calls -> toolUse, length -> length, an ``error`` on the message -> error (with
  ``errorMessage``), else stop (toolUse when the step holds a tool call).
- A tool part still pending or running shows its call and no result yet (the live session fills it in).
- Compaction: opencode's next request holds "What did we do so far?", the summary, then the messages after it,
  so ``firstKeptEntryId`` is the compaction's own id (nothing before it is kept verbatim). ``tokensBefore`` =
  the total tokens of the last assistant step before it. ``details`` = ``{source: "opencode", auto, overflow}``.
- A session's ``revert`` (undo) is not applied: every stored message is shown.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import attrs

from ctxd.formats.transcripts._base import (
    EPOCH_ISO,
    IdAllocator,
    Transcript,
    add_entry,
    as_dict,
    as_int,
    as_str,
    data_url_image,
    finish_entries,
    opaque_block,
    parse_json_object,
)

STOP_REASONS = {"tool-calls": "toolUse", "length": "length", "stop": "stop", "error": "error"}
QUIET_PARTS = frozenset({"step-start", "step-finish"})


@attrs.frozen
class OpencodeRows:
    """One opencode session as read from its database (JSON ``data`` columns still as text)."""

    session: dict[str, Any]
    """The ``session`` row by column name."""
    messages: list[tuple[str, int, str]]
    """``(id, time_created, data)`` in session order."""
    parts: list[tuple[str, str, str]]
    """``(message_id, id, data)`` in message then part order."""


def ms_iso(value: Any) -> str | None:
    """An ISO-8601 UTC timestamp (milliseconds) for milliseconds since the epoch, or None."""
    ms = as_int(value)
    if ms <= 0:
        return None
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    except (OverflowError, ValueError, OSError):
        return None


def opencode_usage(tokens: Any) -> dict[str, Any] | None:
    t = as_dict(tokens)
    cache = as_dict(t.get("cache"))
    inp, out = as_int(t.get("input")), as_int(t.get("output"))
    read, write = as_int(cache.get("read")), as_int(cache.get("write"))
    total = as_int(t.get("total")) or inp + out + read + write
    if not total:
        return None
    return {"input": inp, "output": out, "cacheRead": read, "cacheWrite": write, "totalTokens": total}


def map_opencode(rows: OpencodeRows, path: str = "") -> Transcript:
    """Map one session's rows onto pi v3 entries; never raises (what fails is reported in diagnostics)."""
    mapper = _Mapper(path)
    parts: dict[str, list[tuple[str, dict[str, Any] | None]]] = {}
    for message_id, part_id, data in rows.parts:
        parts.setdefault(message_id, []).append((part_id, parse_json_object(data)))
    for number, (message_id, created, data) in enumerate(rows.messages, 1):
        message = parse_json_object(data)
        if message is None:
            mapper.diagnostics.append((number, f"message {message_id}: data is not a JSON object"))
            continue
        try:
            mapper.message(number, message_id, created, message, parts.get(message_id, []))
        except Exception as exc:  # a shape nobody foresaw: report it, serve the rest
            mapper.diagnostics.append((number, f"message {message_id}: could not map: {exc!r}"))
    return mapper.result(rows.session)


class _Mapper:
    def __init__(self, path: str) -> None:
        self.path = path
        self.entries: list[dict[str, Any]] = []
        self.lines: list[int] = []
        self.diagnostics: list[tuple[int, str]] = []
        self.ids = IdAllocator()
        self.prev: str | None = None
        self.first_ts: str | None = None
        self.last_tokens = 0
        self.pending_request: dict[str, Any] | None = None

    def _add(self, kind: str, eid: str, fields: dict[str, Any], number: int, stamp: str | None, source: str) -> None:
        entry = add_entry(self.entries, self.lines, kind, self.ids.take(eid), self.prev, stamp, number, source, fields)
        self.prev = entry["id"]

    def message(
        self,
        number: int,
        message_id: str,
        created: int,
        message: dict[str, Any],
        parts: list[tuple[str, dict[str, Any] | None]],
    ) -> None:
        stamp = ms_iso(as_dict(message.get("time")).get("created")) or ms_iso(created)
        self.first_ts = self.first_ts or stamp
        good: list[tuple[str, dict[str, Any]]] = []
        for part_id, part in parts:
            if part is None:
                self.diagnostics.append((number, f"part {part_id}: data is not a JSON object"))
            else:
                good.append((part_id, part))
        role = message.get("role")
        if role == "user":
            self._user(number, message_id, stamp, good)
        elif role == "assistant" and message.get("summary") is True:
            self._summary(number, message_id, stamp, message, good)
        elif role == "assistant":
            self._assistant(number, message_id, stamp, message, good)
        else:
            self.diagnostics.append((number, f"message {message_id}: unknown role {role!r}"))
            self._add("custom", message_id, {"customType": "opencode.message", "data": message}, number, stamp, "?")

    def _user(self, number: int, message_id: str, stamp: str | None, parts: list[tuple[str, dict[str, Any]]]) -> None:
        blocks: list[dict[str, Any]] = []
        synthetic = True
        others: list[tuple[str, dict[str, Any]]] = []
        for part_id, part in parts:
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str):
                if not part.get("ignored"):
                    blocks.append({"type": "text", "text": part["text"]})
                    synthetic = synthetic and part.get("synthetic") is True
            elif kind == "file":
                blocks.append(_file_block(part))
                synthetic = False
            elif kind == "compaction":
                fields = {"auto": part.get("auto") is True, "overflow": part.get("overflow") is True}
                self.pending_request = fields
                data = {"customType": "opencode.compaction-request", "data": fields}
                self._add("custom", message_id, data, number, stamp, "compaction")
                return
            else:
                others.append((part_id, part))
        if blocks:
            msg: dict[str, Any] = {"role": "user", "content": blocks, "timestamp": None}
            if synthetic:  # opencode's own words ("Continue if you have next steps ..."), never a request
                msg["opencodeSynthetic"] = True
                msg["ctxdInjected"] = "opencode.synthetic"
            self._add("message", message_id, {"message": msg}, number, stamp, "user")
        self._customs(number, stamp, others)

    def _summary(
        self,
        number: int,
        message_id: str,
        stamp: str | None,
        message: dict[str, Any],
        parts: list[tuple[str, dict[str, Any]]],
    ) -> None:
        text = "\n\n".join(p["text"] for _, p in parts if p.get("type") == "text" and isinstance(p.get("text"), str))
        details: dict[str, Any] = {"source": "opencode", **(self.pending_request or {})}
        self.pending_request = None
        fields = {"summary": text, "firstKeptEntryId": "", "tokensBefore": self.last_tokens, "details": details}
        self._add("compaction", message_id, fields, number, stamp, "summary")
        self.entries[-1]["firstKeptEntryId"] = self.entries[-1]["id"]
        usage = opencode_usage(message.get("tokens"))
        if usage is not None:
            self.entries[-1]["summaryUsage"] = usage

    def _assistant(
        self,
        number: int,
        message_id: str,
        stamp: str | None,
        message: dict[str, Any],
        parts: list[tuple[str, dict[str, Any]]],
    ) -> None:
        steps: list[list[tuple[str, dict[str, Any]]]] = [[]]
        for part_id, part in parts:
            if part.get("type") == "step-start" and any(p.get("type") == "tool" for _, p in steps[-1]):
                steps.append([])
            steps[-1].append((part_id, part))
        for n, step in enumerate(steps):
            last = n == len(steps) - 1
            self._step(number, message_id if n == 0 else f"{message_id}~{n}", stamp, message, step, last)

    def _step(
        self,
        number: int,
        eid: str,
        stamp: str | None,
        message: dict[str, Any],
        parts: list[tuple[str, dict[str, Any]]],
        last: bool,
    ) -> None:
        blocks: list[dict[str, Any]] = []
        results: list[tuple[str, dict[str, Any]]] = []
        others: list[tuple[str, dict[str, Any]]] = []
        tokens: Any = None
        for part_id, part in parts:
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str):
                blocks.append({"type": "text", "text": part["text"]})
            elif kind == "reasoning" and isinstance(part.get("text"), str):
                blocks.append({"type": "thinking", "thinking": part["text"]})
            elif kind == "tool":
                state = as_dict(part.get("state"))
                call_id = as_str(part.get("callID")) or part_id
                arguments = state.get("input") if isinstance(state.get("input"), dict) else {}
                blocks.append(
                    {"type": "toolCall", "id": call_id, "name": as_str(part.get("tool")) or "", "arguments": arguments}
                )
                if state.get("status") in ("completed", "error"):
                    results.append((part_id, part))
            elif kind == "step-finish":
                tokens = part.get("tokens")
            elif kind not in QUIET_PARTS:
                others.append((part_id, part))
        has_call = any(b["type"] == "toolCall" for b in blocks)
        msg: dict[str, Any] = {
            "role": "assistant",
            "content": blocks,
            "api": "opencode",
            "provider": as_str(message.get("providerID")) or "",
            "model": as_str(message.get("modelID")) or "",
            "stopReason": "toolUse" if has_call else "stop",
            "timestamp": None,
        }
        usage = opencode_usage(tokens if tokens is not None else (message.get("tokens") if last else None))
        if usage is not None:
            msg["usage"] = usage
            self.last_tokens = usage["totalTokens"]
        if last:
            finish = as_str(message.get("finish"))
            if finish in STOP_REASONS and not (finish == "stop" and has_call):
                msg["stopReason"] = STOP_REASONS[finish]
            error = message.get("error")
            if error is not None:
                msg["stopReason"] = "error"
                err = as_dict(error)
                msg["errorMessage"] = (
                    as_str(as_dict(err.get("data")).get("message")) or as_str(err.get("name")) or "error"
                )
        self._add("message", eid, {"message": msg}, number, stamp, "assistant")
        for part_id, part in results:
            self._result(number, part_id, part, stamp)
        self._customs(number, stamp, others)

    def _result(self, number: int, part_id: str, part: dict[str, Any], stamp: str | None) -> None:
        state = as_dict(part.get("state"))
        failed = state.get("status") == "error"
        output = state.get("error") if failed else state.get("output")
        text = output if isinstance(output, str) else ""
        end = ms_iso(as_dict(state.get("time")).get("end"))
        msg = {
            "role": "toolResult",
            "toolCallId": as_str(part.get("callID")) or part_id,
            "toolName": as_str(part.get("tool")) or "",
            "content": [{"type": "text", "text": text}],
            "isError": failed,
            "timestamp": None,
        }
        self._add("message", part_id, {"message": msg}, number, end or stamp, "tool")

    def _customs(self, number: int, stamp: str | None, parts: list[tuple[str, dict[str, Any]]]) -> None:
        for part_id, part in parts:
            kind = as_str(part.get("type")) or "part"
            self._add("custom", part_id, {"customType": f"opencode.{kind}", "data": part}, number, stamp, kind)

    def result(self, session: dict[str, Any]) -> Transcript:
        header: dict[str, Any] = {
            "type": "session",
            "version": 3,
            "id": as_str(session.get("id")) or "",
            "timestamp": ms_iso(session.get("time_created")) or self.first_ts or EPOCH_ISO,
            "cwd": as_str(session.get("directory")) or "",
            "agent": "opencode",
        }
        for src, dst in (("title", "title"), ("version", "opencodeVersion"), ("parent_id", "opencodeParent")):
            value = session.get(src)
            if isinstance(value, str) and value:
                header[dst] = value
        finish_entries(self.entries, self.lines, self.diagnostics, self.first_ts)
        return Transcript("opencode", header, self.entries, self.lines, self.diagnostics, self.prev)


def _file_block(part: dict[str, Any]) -> dict[str, Any]:
    url = as_str(part.get("url")) or ""
    mime = as_str(part.get("mime")) or ""
    if mime.startswith("image/"):
        image = data_url_image(url)
        if image is not None:
            return image
    name = as_str(part.get("filename")) or url
    if name:
        return {"type": "text", "text": f"[file: {name}]"}
    return opaque_block("file", part)
