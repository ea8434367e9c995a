"""Codex rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``) as pi v3 entries.

Every line is ``{timestamp, type, payload}``. The result is a linear tree: each entry's parent is the entry
before it. What maps to what:

=====================================================  ===========================================================
Codex line                                             pi entry
=====================================================  ===========================================================
``session_meta``                                       the header (id, cwd, timestamp, cliVersion, provider, ...)
                                                       AND a ``custom`` entry ``codex.session_meta`` (it holds
                                                       the base instructions, worth showing)
``response_item`` ``message`` role user                ``message`` (user), text / image blocks; text Codex
                                                       injected (``# AGENTS.md instructions``, ``<environment_
                                                       context>``, ``<user_instructions>``, policies) gets
                                                       ``ctxdInjected`` = the kind (see ctxd.formats.injected)
``response_item`` ``message`` role developer/system    ``message`` with role ``system`` (pi 1.5.2), text blocks,
                                                       ``codexRole`` = the original role
``response_item`` ``message`` role assistant,          merged into ONE ``message`` (assistant) per model
``reasoning``, ``function_call``,                      response: text, thinking (summary text; the whole item
``custom_tool_call``, ``local_shell_call``, other      as ``thinkingSignature``, as pi's openai-responses
``*_call`` items with a ``call_id``                    provider stores it), toolCall
``function_call_output``, ``custom_tool_call_output``,  ``message`` (toolResult), ``toolName`` from the call with
other ``*_call_output`` items                          the same ``call_id``
``event_msg`` ``token_count`` with ``info``            ``usage`` entry (kind ``codex.token_count``); its
                                                       ``last_token_usage`` also becomes the usage of the latest
                                                       assistant message if that has none yet
``compacted``                                          ``compaction``
anything else (``turn_context``, other ``event_msg``,  ``custom`` ``codex.<type>[.<payload type>]`` with ``data`` =
``web_search_call``, ``ghost_snapshot``, ...)          the line
=====================================================  ===========================================================

Decisions where the format is ambiguous:

- Ids are derived from line numbers (``line_id``: 8 hex digits, like pi's), so they are stable as the file grows.
- Assistant merging: reasoning, assistant text and calls open or extend one assistant message. It is closed by
  a tool output, a user/developer/system message, a ``compacted`` line, or a ``token_count`` carrying usage
  (Codex writes one after every model response). Other lines in between (``agent_message`` events, turn
  context, web searches) do not close it; they become custom entries chained after it, so the tool results that
  follow have the assistant as their nearest message ancestor. Older rollouts without token counts merge all
  assistant pieces between two tool outputs / user messages.
- ``stopReason`` is toolUse when the message holds a toolCall, else stop (rollouts record no stop reason).
- Usage follows pi's openai-responses provider: input = input_tokens - cached_input_tokens (OpenAI counts cached
  tokens inside input_tokens), cacheRead = cached_input_tokens, output = output_tokens, cacheWrite = 0,
  totalTokens = total_tokens. An assistant message Codex reported no usage for carries no ``usage`` (a zero usage
  would read as an empty context). The usage entry keeps the cumulative ``total_token_usage`` as ``totalUsage``.
  A count never reaches back across a ``compacted`` line (after one it measures the new, smaller context).
- Event messages (user_message, agent_message, agent_reasoning, exec_command_end, task_started, ...) mostly
  duplicate response items; they are kept as custom entries (never messages), so nothing is dropped and the
  command metadata (exit codes, durations) stays visible.
- Arguments that are not a JSON object (custom tools such as apply_patch send raw text) become
  ``{"input": <raw>}``; ``local_shell_call`` uses its ``action`` object.
- Compaction: ``summary`` = ``payload.message``, or when that is empty a rendering of the replacement history's
  messages (``role: text`` paragraphs). ``tokensBefore`` = ``total_tokens`` of the latest ``last_token_usage``.
  ``firstKeptEntryId`` is the compaction's own id: Codex's replacement history stands in for everything before
  it, so the context reads summary, then the entries after the compaction (see the Claude adapter for why the
  own id rather than a later entry). ``details`` = ``{source: "codex", replacementHistory: <item count>}``.
- Rollouts from before the ``{timestamp, type, payload}`` envelope (a first line ``{id, timestamp,
  instructions}``, then bare response items and ``{record_type: "state"}`` lines) are read too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ctxd.formats.injected import mark_injected
from ctxd.formats.transcripts._base import (
    EPOCH_ISO,
    IdAllocator,
    Transcript,
    as_dict,
    as_int,
    as_str,
    data_url_image,
    finish_entries,
    iso_ms,
    line_id,
    opaque_block,
    parse_json_object,
    run_mapper,
    to_json_text,
)

TOP_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
TEXT_BLOCKS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})
_UUID_TAIL = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$", re.I)


def map_codex(data: bytes, path: str = "") -> Transcript:
    """Map a Codex rollout (the whole file's bytes) onto pi v3 entries; never raises."""
    return run_mapper(_CodexMapper(path if isinstance(path, str) else ""), data)


def codex_usage(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    inp = as_int(value.get("input_tokens"))
    cached = as_int(value.get("cached_input_tokens"))
    out = as_int(value.get("output_tokens"))
    total = as_int(value.get("total_tokens")) or inp + out
    return {"input": max(0, inp - cached), "output": out, "cacheRead": cached, "cacheWrite": 0, "totalTokens": total}


def _block(block: Any) -> dict[str, Any]:
    if isinstance(block, str):
        return {"type": "text", "text": block}
    if not isinstance(block, dict):
        return opaque_block("block", block)
    kind = block.get("type")
    if kind in TEXT_BLOCKS and isinstance(block.get("text"), str):
        return {"type": "text", "text": block["text"]}
    if kind == "refusal" and isinstance(block.get("refusal"), str):
        return {"type": "text", "text": block["refusal"]}
    if kind == "input_image":
        url = block.get("image_url")
        if isinstance(url, str):
            return data_url_image(url) or {"type": "text", "text": f"[image: {url}]"}
    return opaque_block(kind if isinstance(kind, str) and kind else "block", block)


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [_block(b) for b in content]
    return []


def _texts(items: Any) -> list[str]:
    if not isinstance(items, list):
        return []
    return [b["text"] for b in items if isinstance(b, dict) and isinstance(b.get("text"), str)]


def _render_history(items: Any) -> str:
    """A plain rendering of a replacement history: one ``role: text`` paragraph per message."""
    if not isinstance(items, list):
        return ""
    parts: list[str] = []
    for item in items:
        item = as_dict(item)
        kind = item.get("type")
        if kind == "message":
            text = "\n".join(_texts(item.get("content")))
            if text:
                parts.append(f"{as_str(item.get('role')) or 'unknown'}: {text}")
        elif kind in ("compaction", "compaction_summary"):
            parts.append(f"[{kind}: encrypted]")
    return "\n\n".join(parts)


def _arguments(payload: dict[str, Any]) -> dict[str, Any]:
    for key in ("arguments", "input", "action"):
        if key not in payload:
            continue
        value = payload[key]
        if isinstance(value, dict):
            return value
        if isinstance(value, str):
            parsed = parse_json_object(value) if key == "arguments" else None
            return parsed if parsed is not None else {"input": value}
        if value is not None:
            return {"input": value}
    return {}


def _output(value: Any) -> tuple[list[dict[str, Any]], bool]:
    """Tool output content blocks and whether it reports an error."""
    if isinstance(value, dict):
        blocks = _blocks(value.get("content"))
        if not blocks and "content" not in value:
            blocks = [{"type": "text", "text": to_json_text(value)}]
        return blocks, value.get("success") is False
    if value is None:
        return [], False
    return _blocks(value) if isinstance(value, str | list) else [{"type": "text", "text": to_json_text(value)}], False


class _CodexMapper:
    def __init__(self, path: str) -> None:
        self.path = path
        self.entries: list[dict[str, Any]] = []
        self.lines: list[int] = []
        self.diagnostics: list[tuple[int, str]] = []
        self.ids = IdAllocator()
        self.prev: str | None = None
        self.open: dict[str, Any] | None = None
        """The assistant message still taking pieces of the current model response."""
        self.last_assistant: dict[str, Any] | None = None
        self.calls: dict[str, str] = {}
        self.last_context: int | None = None
        self.model: str | None = None
        self.provider: str | None = None
        self.header: dict[str, Any] = {}
        self.first_ts: str | None = None
        self.last_ts: str | None = None

    def line(self, number: int, obj: dict[str, Any]) -> None:
        ts = as_str(obj.get("timestamp"))
        if ts:
            self.first_ts = self.first_ts or ts
            self.last_ts = ts
        stamp = ts or self.last_ts
        kind = as_str(obj.get("type")) or ""
        payload: Any = obj.get("payload")
        if "payload" not in obj:  # the layout before the {timestamp, type, payload} envelope
            if kind and kind not in TOP_TYPES:
                kind, payload = "response_item", obj
            elif not kind and "record_type" in obj:
                kind = "state"
            elif not kind and "id" in obj and "id" not in self.header:
                kind, payload = "session_meta", obj
        body = as_dict(payload)
        ptype = as_str(body.get("type")) or ""
        source_kind = f"{kind}.{ptype}" if ptype and kind in ("response_item", "event_msg") else kind

        if kind == "session_meta":
            self._meta(body)
            self._custom(number, obj, stamp, source_kind)
        elif kind == "turn_context":
            model = as_str(body.get("model"))
            if model:
                self.model = model
                self.header.setdefault("model", model)
            self._custom(number, obj, stamp, source_kind)
        elif kind == "response_item":
            self._item(number, obj, body, ptype, stamp, source_kind)
        elif kind == "event_msg" and ptype == "token_count" and isinstance(body.get("info"), dict):
            self._token_count(number, obj, body["info"], stamp, source_kind)
        elif kind == "compacted":
            self._compacted(number, body, stamp)
        else:
            self._custom(number, obj, stamp, source_kind)

    def _meta(self, body: dict[str, Any]) -> None:
        if "id" in self.header:
            return
        self.header["id"] = as_str(body.get("id")) or ""
        for src, dst in (
            ("timestamp", "timestamp"),
            ("cwd", "cwd"),
            ("cli_version", "cliVersion"),
            ("model_provider", "provider"),
            ("model", "model"),
            ("originator", "originator"),
            ("source", "source"),
        ):
            value = body.get(src)
            if isinstance(value, str) and value:
                self.header[dst] = value
        branch = as_dict(body.get("git")).get("branch")
        if isinstance(branch, str) and branch:
            self.header["gitBranch"] = branch
        self.provider = as_str(body.get("model_provider")) or self.provider
        self.model = as_str(body.get("model")) or self.model

    def _add(
        self, kind: str, fields: dict[str, Any], number: int, stamp: str | None, source_kind: str
    ) -> dict[str, Any]:
        eid = self.ids.take(line_id(number))
        entry: dict[str, Any] = {"type": kind, "id": eid, "parentId": self.prev, "timestamp": stamp}
        entry.update(fields)
        entry["ctxdSource"] = {"lines": [number], "kind": source_kind}
        self.entries.append(entry)
        self.lines.append(number)
        self.prev = eid
        return entry

    def _custom(self, number: int, obj: dict[str, Any], stamp: str | None, source_kind: str) -> None:
        fields = {"customType": f"codex.{source_kind or 'unknown'}", "data": obj}
        self._add("custom", fields, number, stamp, source_kind or "unknown")

    def _message(self, number: int, message: dict[str, Any], stamp: str | None, source_kind: str) -> dict[str, Any]:
        self.open = None
        return self._add("message", {"message": message}, number, stamp, source_kind)

    def _assistant(self, number: int, blocks: list[dict[str, Any]], stamp: str | None, source_kind: str) -> None:
        entry = self.open
        if entry is None:
            message = {
                "role": "assistant",
                "content": blocks,
                "api": "openai-responses",
                "provider": self.provider or "openai",
                "model": self.model or "",
                "stopReason": "stop",
                "timestamp": iso_ms(stamp),
            }
            entry = self._add("message", {"message": message}, number, stamp, source_kind)
            self.open = self.last_assistant = entry
        else:
            entry["message"]["content"].extend(blocks)
            entry["ctxdSource"]["lines"].append(number)
        message = entry["message"]
        message["stopReason"] = "toolUse" if any(b["type"] == "toolCall" for b in message["content"]) else "stop"

    def _item(
        self, number: int, obj: dict[str, Any], body: dict[str, Any], ptype: str, stamp: str | None, source_kind: str
    ) -> None:
        ms = iso_ms(stamp)
        call_id = as_str(body.get("call_id"))
        if ptype == "message":
            role = body.get("role")
            blocks = _blocks(body.get("content"))
            if role == "assistant":
                self._assistant(number, blocks, stamp, source_kind)
            elif role == "user":
                message = {"role": "user", "content": blocks, "timestamp": ms}
                mark_injected(message)
                self._message(number, message, stamp, source_kind)
            elif role in ("developer", "system"):
                message = {"role": "system", "content": blocks, "timestamp": ms, "codexRole": role}
                self._message(number, message, stamp, source_kind)
            else:
                self._custom(number, obj, stamp, source_kind)
        elif ptype == "reasoning":
            texts = _texts(body.get("summary")) or _texts(body.get("content"))
            thinking = {"type": "thinking", "thinking": "\n\n".join(texts), "thinkingSignature": to_json_text(body)}
            self._assistant(number, [thinking], stamp, source_kind)
        elif ptype.endswith("_call") and call_id:
            call_name = as_str(body.get("name")) or ptype[: -len("_call")]
            self.calls.setdefault(call_id, call_name)
            call = {"type": "toolCall", "id": call_id, "name": call_name, "arguments": _arguments(body)}
            self._assistant(number, [call], stamp, source_kind)
        elif ptype.endswith("_output") and call_id:
            name = self.calls.get(call_id)
            if name is None:
                self.diagnostics.append((number, f"tool output for unknown call_id {call_id!r}"))
            content, is_error = _output(body.get("output"))
            message = {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": name or "",
                "content": content,
                "isError": is_error,
                "timestamp": ms,
            }
            self._message(number, message, stamp, source_kind)
        else:
            self._custom(number, obj, stamp, source_kind)

    def _token_count(
        self, number: int, obj: dict[str, Any], info: dict[str, Any], stamp: str | None, source_kind: str
    ) -> None:
        usage = codex_usage(info.get("last_token_usage"))
        if usage is None:
            self._custom(number, obj, stamp, source_kind)
            return
        self.last_context = usage["totalTokens"]
        if self.last_assistant is not None and "usage" not in self.last_assistant["message"]:
            self.last_assistant["message"]["usage"] = dict(usage)
        self.open = None
        fields: dict[str, Any] = {
            "kind": "codex.token_count",
            "provider": self.provider or "openai",
            "model": self.model or "",
            "usage": usage,
            "note": "Codex token_count: last request (cumulative usage in totalUsage)",
        }
        total = codex_usage(info.get("total_token_usage"))
        if total is not None:
            fields["totalUsage"] = total
        window = info.get("model_context_window")
        if isinstance(window, int) and not isinstance(window, bool):
            fields["modelContextWindow"] = window
        self._add("usage", fields, number, stamp, source_kind)

    def _compacted(self, number: int, body: dict[str, Any], stamp: str | None) -> None:
        self.open = None
        self.last_assistant = None  # counts after a compaction measure the new context, not older messages
        history = body.get("replacement_history")
        message = as_str(body.get("message")) or ""
        summary = message if message.strip() else _render_history(history)
        eid = self.ids.take(line_id(number))
        entry: dict[str, Any] = {
            "type": "compaction",
            "id": eid,
            "parentId": self.prev,
            "timestamp": stamp,
            "summary": summary,
            "firstKeptEntryId": eid,
            "tokensBefore": self.last_context or 0,
            "details": {"source": "codex", "replacementHistory": len(history) if isinstance(history, list) else 0},
            "ctxdSource": {"lines": [number], "kind": "compacted"},
        }
        self.entries.append(entry)
        self.lines.append(number)
        self.prev = eid

    def result(self) -> Transcript:
        header: dict[str, Any] = {
            "type": "session",
            "version": 3,
            "id": self.header.get("id") or self._id_from_path(),
            "timestamp": self.header.get("timestamp") or self.first_ts or EPOCH_ISO,
            "cwd": self.header.get("cwd", ""),
            "agent": "codex",
        }
        for key, value in self.header.items():
            header.setdefault(key, value)
        finish_entries(self.entries, self.lines, self.diagnostics, self.first_ts)
        return Transcript("codex", header, self.entries, self.lines, self.diagnostics, self.prev)

    def _id_from_path(self) -> str:
        if not self.path:
            return ""
        stem = Path(self.path).stem
        match = _UUID_TAIL.search(stem)
        return match.group(1) if match else stem
