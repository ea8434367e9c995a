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
``compacted``                                          ``compaction``; in 0.169 (``retained_context`` present) also
                                                       one ``message`` per item of ``replacement_history`` besides
                                                       the summary (what the compaction kept; ``codexRetained``)
``token_usage_record`` (0.169)                         ``usage`` entry (kind ``codex.token_usage_record``, or
                                                       ``codex.compaction_usage`` for the summary request); also
                                                       the usage of the assistant message it closes
``response_item`` assistant ``message`` with           ``custom`` ``codex.response_item.compaction_output`` (the
``metadata.compaction_output`` (0.169)                 summary request's answer, never a conversation message)
``event_msg`` ``item_completed`` (0.169)               ``custom`` ``codex.event_msg.item_completed.<item type>``
                                                       (UserMessage, AgentMessage, ContextCompaction, ...)
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
- Codex 0.169 writes each response's usage as a ``token_usage_record`` before the ``token_count`` event; once a
  file has such records, ``token_count`` events are kept as custom entries (they repeat the record, and the one
  after a compaction carries an estimate with zero input). The summary request's usage (between the compaction's
  answer and the ``compacted`` line) never becomes an assistant's usage nor the compaction's ``tokensBefore``.
- User messages whose 0.169 metadata gives every part a provenance other than the user (``harness``,
  ``skills``, ...) get ``ctxdInjected`` = ``codex.<content item kind>`` when the text alone did not tell.
- Compaction in 0.169: Codex's next request is its base instructions, then the replacement history (the kept
  developer and user messages, then the summary as a user message), then what follows. ctxd's context is the
  summary (the compaction entry), then the kept messages (entries of the ``compacted`` line, kind
  ``compacted.replacement_history``), then what follows: the same items, the summary first.
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

from ctxd.formats.lazy_re import lazy_compile
from ctxd.formats.transcripts._base import (
    EPOCH_ISO,
    IdAllocator,
    Transcript,
    add_entry,
    as_dict,
    as_str,
    finish_entries,
    iso_ms,
    line_id,
    run_mapper,
    to_json_text,
)
from ctxd.formats.transcripts.codex_items import (
    block_texts,
    codex_usage,
    content_blocks,
    conversation_message,
    render_history,
    retained_items,
    tool_arguments,
    tool_output,
)

TOP_TYPES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted", "world_state", "token_usage_record"}
)
_UUID_TAIL = lazy_compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$", re.I)


def map_codex(data: bytes, path: str = "") -> Transcript:
    """Map a Codex rollout (the whole file's bytes) onto pi v3 entries; never raises."""
    return run_mapper(_CodexMapper(path if isinstance(path, str) else ""), data)


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
        self.usage_records = False
        """Whether a ``token_usage_record`` line was seen (0.169): then ``token_count`` events only repeat it."""
        self.compacting = False
        """Between a compaction's model answer and its ``compacted`` line: that usage is the summary request's."""
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
            if self.usage_records:  # 0.169 writes each response's usage as a token_usage_record first
                self.open = None
                self._custom(number, obj, stamp, source_kind)
            else:
                self._token_count(number, obj, body["info"], stamp, source_kind)
        elif kind == "token_usage_record":
            self._usage_record(number, obj, body, stamp)
        elif kind == "event_msg" and ptype == "item_completed":
            item_type = as_str(as_dict(body.get("item")).get("type")) or "unknown"
            self._custom(number, obj, stamp, f"event_msg.item_completed.{item_type}")
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
        entry = add_entry(self.entries, self.lines, kind, eid, self.prev, stamp, number, source_kind, fields)
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
            blocks = content_blocks(body.get("content"))
            if role == "assistant" and as_dict(obj.get("metadata")).get("compaction_output") is True:
                # The compaction request's answer (0.169): the summary, which the compacted line carries; never a
                # message of the conversation.
                self.open = None
                self.compacting = True
                self._custom(number, obj, stamp, "response_item.compaction_output")
            elif role == "assistant":
                self._assistant(number, blocks, stamp, source_kind)
            elif role in ("user", "developer", "system"):
                self._message(number, conversation_message(body, blocks, ms), stamp, source_kind)
            else:
                self._custom(number, obj, stamp, source_kind)
        elif ptype == "reasoning":
            texts = block_texts(body.get("summary")) or block_texts(body.get("content"))
            thinking = {"type": "thinking", "thinking": "\n\n".join(texts), "thinkingSignature": to_json_text(body)}
            self._assistant(number, [thinking], stamp, source_kind)
        elif ptype.endswith("_call") and call_id:
            call_name = as_str(body.get("name")) or ptype[: -len("_call")]
            self.calls.setdefault(call_id, call_name)
            call = {"type": "toolCall", "id": call_id, "name": call_name, "arguments": tool_arguments(body)}
            self._assistant(number, [call], stamp, source_kind)
        elif ptype.endswith("_output") and call_id:
            name = self.calls.get(call_id)
            if name is None:
                self.diagnostics.append((number, f"tool output for unknown call_id {call_id!r}"))
            content, is_error = tool_output(body.get("output"))
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
        self.open = None
        self._give_usage(usage)
        fields = self._usage_fields("codex.token_count", usage, codex_usage(info.get("total_token_usage")))
        fields["note"] = "Codex token_count: last request (cumulative usage in totalUsage)"
        window = info.get("model_context_window")
        if isinstance(window, int) and not isinstance(window, bool):
            fields["modelContextWindow"] = window
        self._add("usage", fields, number, stamp, source_kind)

    def _give_usage(self, usage: dict[str, Any]) -> None:
        """A conversation request's usage: the context size so far, and the latest assistant's usage if unset."""
        self.last_context = usage["totalTokens"]
        if self.last_assistant is not None and "usage" not in self.last_assistant["message"]:
            self.last_assistant["message"]["usage"] = dict(usage)

    def _usage_fields(self, kind: str, usage: dict[str, Any], total: dict[str, Any] | None) -> dict[str, Any]:
        fields: dict[str, Any] = {"kind": kind, "provider": self.provider or "openai", "model": self.model or ""}
        fields["usage"] = usage
        if total is not None:
            fields["totalUsage"] = total
        return fields

    def _usage_record(self, number: int, obj: dict[str, Any], body: dict[str, Any], stamp: str | None) -> None:
        """A 0.169 ``token_usage_record``: the usage of one model response (``response_id``)."""
        usage = codex_usage(body.get("usage"))
        self.usage_records = True
        self.open = None
        if usage is None:
            self._custom(number, obj, stamp, "token_usage_record")
            return
        if self.compacting:  # the summary request's usage: it measures the old context plus the prompt
            kind = "codex.compaction_usage"
        else:
            kind = "codex.token_usage_record"
            self._give_usage(usage)
        fields = self._usage_fields(kind, usage, codex_usage(body.get("thread_token_usage")))
        fields["note"] = "Codex token_usage_record: one model response (thread total in totalUsage)"
        response_id = as_str(body.get("response_id"))
        if response_id:
            fields["responseId"] = response_id
        self._add("usage", fields, number, stamp, "token_usage_record")

    def _compacted(self, number: int, body: dict[str, Any], stamp: str | None) -> None:
        self.open = None
        self.last_assistant = None  # counts after a compaction measure the new context, not older messages
        self.compacting = False
        history = body.get("replacement_history")
        message = as_str(body.get("message")) or ""
        retained = retained_items(history, message) if "retained_context" in body else []
        rest = [i for i in history if all(i is not r for r in retained)] if isinstance(history, list) else history
        summary = message if message.strip() else render_history(rest)  # kept messages follow as entries
        eid = self.ids.take(line_id(number))
        details: dict[str, Any] = {
            "source": "codex",
            "replacementHistory": len(history) if isinstance(history, list) else 0,
        }
        if retained:
            details["retained"] = len(retained)
        window = body.get("window_number")
        if isinstance(window, int) and not isinstance(window, bool):
            details["window"] = window
        entry: dict[str, Any] = {
            "type": "compaction",
            "id": eid,
            "parentId": self.prev,
            "timestamp": stamp,
            "summary": summary,
            "firstKeptEntryId": eid,
            "tokensBefore": self.last_context or 0,
            "details": details,
            "ctxdSource": {"lines": [number], "kind": "compacted"},
        }
        self.entries.append(entry)
        self.lines.append(number)
        self.prev = eid
        # What the compaction kept (0.169): the replacement history's messages besides the summary, which Codex
        # sends again after it; they follow the compaction as messages of the same line.
        ms = iso_ms(stamp)
        for item in retained:
            kept = conversation_message(item, content_blocks(item.get("content")), ms)
            kept["codexRetained"] = True
            self._add("message", {"message": kept}, number, stamp, "compacted.replacement_history")

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
