"""Claude Code transcripts (``~/.claude/projects/<munged cwd>/<session>.jsonl``) as pi v3 entries.

What maps to what:

==============================================  ==================================================================
Claude line                                     pi entry
==============================================  ==================================================================
``assistant`` lines sharing ``message.id``      ONE ``message`` (assistant): id = the first line's uuid, blocks in
                                                order (text, thinking, redacted_thinking -> thinking with
                                                ``redacted``, tool_use -> toolCall), usage/model of the last line,
                                                ``stopReason`` from ``stop_reason``
``user`` with ``tool_result`` blocks            one ``message`` (toolResult) per block, chained; other blocks of the
                                                line follow as a user message
``user`` (text / images)                        ``message`` (user); string content kept as a string
``user`` with ``isMeta``                        ``custom`` ``claude.user.meta``
``user`` whose text Claude Code injected         ``message`` (user) with ``ctxdInjected`` = the kind (slash-command
(command records, local command output,         records ``claude.command``, ``claude.command-output``,
system reminders, caveats, interruptions)       ``claude.system-reminder``, ``claude.caveat``, ``interruption``,
                                                ``hook``; see :mod:`ctxd.formats.injected`)
``system`` ``compact_boundary`` + the next      ONE ``compaction`` (id = the boundary's uuid, parent = the entry of
``user`` with ``isCompactSummary``              ``logicalParentUuid``, summary = the summary line's text)
``summary`` (session titles)                    ``session_info`` ``{name}``
anything else (system, progress, attachment,    ``custom`` ``claude.<type>[.<subtype>]`` with ``data`` = the line
file-history-snapshot, queue-operation, ...)
==============================================  ==================================================================

Decisions where the format is ambiguous:

- Ids: Claude's ``uuid`` is kept; lines without one get ``line_id(n)`` (8 hex digits of the line number); the
  second and later entries made from one line get ``<uuid>.<k>``. A line's uuid then stands for the LAST entry
  made from it, so its children chain after all of them. A repeated uuid is reported and the line skipped.
- Lines without a uuid (file-history-snapshot, queue-operation, summary) are *spliced* into the main chain: each
  is parented to the current main-chain tail, and a later line whose parent is that tail is parented to the
  spliced entry instead. The chain stays linear, with no one-entry side branches; the same holds for lines
  before the first message (the first ``parentUuid: null`` line chains after them, so the file is one tree).
- Tool results: a result parented (by ``parentUuid``) to a merged assistant entry chains after the results
  already hanging there, so when Claude interleaves ``tool_use`` lines of one response with their results, the
  results still form one chain under the assistant (not siblings). When ``parentUuid`` is missing or unknown the
  result goes under the entry holding its ``tool_use``. The nearest message ancestor of every toolResult is
  the assistant holding its toolCall (custom entries such as snapshots or progress may sit in between; they do
  not enter the context).
- ``stopReason``: end_turn -> stop, tool_use -> toolUse, max_tokens / model_context_window_exceeded -> length,
  other values -> stop; with no ``stop_reason`` on any line (Claude logs ``null`` while streaming) it is toolUse
  when the message holds a toolCall, else stop. ``isApiErrorMessage`` lines -> ``error`` with ``errorMessage``.
- Usage: input_tokens -> input, output_tokens -> output, cache_read_input_tokens -> cacheRead,
  cache_creation_input_tokens -> cacheWrite, totalTokens = their sum. Messages of the ``<synthetic>`` model
  (interruptions, API errors) carry no usage: they were never an API response, and a zero usage would read as an
  empty context.
- Compaction: ``firstKeptEntryId`` is the compaction's OWN id when Claude keeps nothing verbatim across the
  boundary, so the context at any leaf after it is the summary followed by the entries after the compaction.
  pi's builder reads an id not before the compaction as "nothing kept"; ctxd's builder treats the compaction
  itself as the first kept entry (inclusive ancestor) and emits the same messages without a diagnostic (a
  later entry, such as the compaction's first child, would not be an ancestor and would be reported). The id
  is also stable while the file grows. Claude Code 2.1.330 keeps the newest messages verbatim and names them in
  ``compactMetadata.preservedSegment`` (``headUuid`` .. ``tailUuid``, the tail being ``logicalParentUuid``):
  then ``firstKeptEntryId`` is the head's entry, as in pi (summary, the kept messages, then what follows), when
  it is an ancestor of the boundary. ``tokensBefore`` = ``compactMetadata.preTokens``; ``details`` =
  ``{trigger, preTokens, source: "claude"}``. An ``isCompactSummary`` line with no boundary before it becomes a
  compaction of its own (tokensBefore 0).
- Sidechains (``isSidechain``, older layout): placed as ``parentUuid`` says; a sidechain root (no parent) goes
  under the assistant entry whose Task/Agent toolCall has the same prompt, else it is a root. They never move
  the main-chain leaf. In a subagent file (``agent-*.jsonl``, or no path and the first line is a sidechain line
  with an ``agentId``) every line is main-chain.
- Leaf: the last main-chain entry in file order. Spliced lines are on the main chain, so it may be a title or a
  snapshot written after the last message; its path is the conversation, and those entries add nothing to the
  context.
- ``isMeta`` user lines are custom entries, as specified; note that Claude Code does send some of them (command
  caveats, skill bodies) to the model, so ctxd's context for a Claude session can be slightly smaller than
  Claude's.
- Header: ``id`` = ``sessionId`` (a subagent file: its file stem, with ``sessionId``, ``agentId`` and
  ``parentSession`` as extras), ``cwd``, ``timestamp`` of the first dated line, ``cliVersion`` (Claude's
  ``version``; pi's ``version`` is the format's), ``gitBranch``, ``model`` (the first real model).
- ``toolUseResult`` (Claude's structured copy of a tool's output) is not copied into the entry: it duplicates
  the result text and can be large; the source line (``ctxdSource.lines``) still has it.
- Blocks that fit no pi block (server tool use, web search results, documents, ...) become text blocks holding
  ``[<type>] <json>`` (a short marker when the JSON exceeds 4000 characters).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ctxd.formats.injected import mark_injected
from ctxd.formats.transcripts._base import (
    EPOCH_ISO,
    IdAllocator,
    Transcript,
    add_entry,
    as_dict,
    as_int,
    as_str,
    finish_entries,
    iso_ms,
    line_id,
    run_mapper,
)
from ctxd.formats.transcripts.claude_content import (
    STOP_REASONS,
    assistant_blocks,
    claude_usage,
    content_block,
    text_of,
)
from ctxd.formats.transcripts.claude_files import parent_session

ROOT = ""
"""Key of the virtual root in the splice map (never an entry id)."""

TASK_TOOLS = frozenset({"Task", "Agent"})


QUEUED = "claude.queued"
"""``ctxdSource.kind`` of a user message derived from a queue operation (see ``_ClaudeMapper._queue``)."""


def map_claude(data: bytes, path: str = "") -> Transcript:
    """Map a Claude Code transcript (the whole file's bytes) onto pi v3 entries; never raises."""
    return run_mapper(_ClaudeMapper(path if isinstance(path, str) else ""), data)


class _ClaudeMapper:
    def __init__(self, path: str) -> None:
        self.path = path
        # A subagent file is known by its name; without a path, by its first line (see ``line``).
        self.subagent: bool | None = os.path.basename(path).startswith("agent-") if path else None
        self.entries: list[dict[str, Any]] = []
        self.lines: list[int] = []
        self.diagnostics: list[tuple[int, str]] = []
        self.ids = IdAllocator()
        self.by_id: dict[str, dict[str, Any]] = {}
        self.alias: dict[str, str] = {}
        """Source uuid -> the entry standing for that line (merged lines -> the merged entry)."""
        self.after: dict[str, str] = {}
        """Splice map: entry id (or ROOT) -> the entry chained after it that later children hang from."""
        self.responses: dict[str, dict[str, Any]] = {}
        """``message.id`` -> its merged assistant entry."""
        self.raw_stop: dict[str, str] = {}
        self.api_errors: set[str] = set()
        self.tool_owner: dict[str, tuple[str, str]] = {}
        """tool_use id -> (entry id, tool name)."""
        self.task_prompts: dict[str, str] = {}
        self.filled: set[str] = set()
        self.main_leaf: str | None = None
        self.last_entry: str | None = None
        self.first_ts: str | None = None
        self.last_ts: str | None = None
        self.meta: dict[str, str] = {}
        self.queued: list[tuple[int, str, str | None]] = []
        """What the user typed while the agent worked (``queue-operation`` enqueue): ``(line, text, stamp)``."""
        self.delivered: list[tuple[int, str, str | None]] = []
        """Queued messages Claude Code took in (a ``remove`` after the enqueue), not yet placed."""

    # --- per line --------------------------------------------------------------------------------

    def line(self, number: int, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        kind = kind if isinstance(kind, str) else ""
        ts = as_str(obj.get("timestamp"))
        if ts:
            self.first_ts = self.first_ts or ts
            self.last_ts = ts
        self._note_meta(obj)
        if self.subagent is None and "isSidechain" in obj:
            self.subagent = obj.get("isSidechain") is True and isinstance(obj.get("agentId"), str)
        uuid = as_str(obj.get("uuid")) or None
        if uuid is not None and uuid in self.alias:
            self.diagnostics.append((number, f"duplicate uuid {uuid}; line skipped"))
            return
        main = bool(self.subagent) or obj.get("isSidechain") is not True
        stamp = ts or self.last_ts
        message = obj.get("message")
        if kind == "queue-operation":
            self._queue(number, obj, stamp)
        elif self.delivered and kind == "assistant" and main:
            self._place_queued(number)
        if kind == "assistant" and isinstance(message, dict):
            self._assistant(number, obj, uuid, main, stamp, message)
        elif kind == "user" and isinstance(message, dict):
            if obj.get("isCompactSummary") is True:
                self._compact_summary(number, obj, uuid, main, stamp, message)
            elif obj.get("isMeta") is True:
                self._custom(number, obj, uuid, main, stamp, "claude.user.meta")
            else:
                self._user(number, obj, uuid, main, stamp, message)
        elif kind == "system" and obj.get("subtype") == "compact_boundary":
            self._boundary(number, obj, uuid, main, stamp)
        elif kind == "summary" and isinstance(obj.get("summary"), str):
            self._title(number, obj, uuid, main, stamp)
        else:
            if kind in ("user", "assistant"):
                self.diagnostics.append((number, f"{kind} line without a message object; kept as a custom entry"))
            subtype = obj.get("subtype")
            custom_type = f"claude.{kind or 'unknown'}"
            if isinstance(subtype, str) and subtype:
                custom_type += f".{subtype}"
            self._custom(number, obj, uuid, main, stamp, custom_type)

    def _queue(self, number: int, obj: dict[str, Any], stamp: str | None) -> None:
        """Claude Code's queue of what the user typed while the agent worked: an ``enqueue`` of the user's own text,
        then a ``remove`` when Claude Code takes it in. The transcript has no other record of those words; they are
        placed as a user message before the agent's next response (after the results it was waiting for).
        Injected text queued the same way (task notifications) is recorded as its own user line and left out."""
        operation = obj.get("operation")
        content = obj.get("content")
        if operation == "enqueue" and isinstance(content, str) and content.strip():
            if not content.lstrip().startswith("<"):
                self.queued.append((number, content, stamp))
        elif operation in ("remove", "dequeue") and self.queued:
            self.delivered.append(self.queued.pop(0))

    def _place_queued(self, number: int) -> None:
        """The delivered queued messages, placed before the response on line ``number``. Each is derived from
        its ``enqueue`` line (which keeps its own custom entry): ``ctxdSource`` says so, with no line of its own."""
        for line, text, stamp in self.delivered:
            before = len(self.entries)
            self._user(number, {"type": "user"}, None, True, stamp, {"role": "user", "content": text})
            for entry in self.entries[before:]:
                entry["ctxdSource"] = {"lines": [], "kind": QUEUED, "from": [line]}
        self.delivered = []

    def _note_meta(self, obj: dict[str, Any]) -> None:
        for src, dst in (
            ("sessionId", "sessionId"),
            ("cwd", "cwd"),
            ("version", "cliVersion"),
            ("gitBranch", "gitBranch"),
            ("agentId", "agentId"),
        ):
            value = obj.get(src)
            if dst not in self.meta and isinstance(value, str) and value:
                self.meta[dst] = value

    # --- placement -------------------------------------------------------------------------------

    def _tail(self, eid: str | None) -> str | None:
        """The entry new children of ``eid`` hang from: ``eid`` itself or the last entry spliced after it."""
        start = ROOT if eid is None else eid
        key = start
        while key in self.after:
            key = self.after[key]
        if key != start and self.after.get(start) != key:
            self.after[start] = key  # path compression: same answer, no repeated walks
        return None if key == ROOT else key

    def _parent(
        self, number: int, obj: dict[str, Any], uuid: str | None, main: bool, prompt: str | None = None
    ) -> str | None:
        parent = obj.get("parentUuid")
        if isinstance(parent, str) and parent:
            target = self.alias.get(parent)
            if target is not None:
                return self._tail(target)
            self.diagnostics.append((number, f"parentUuid {parent} is not in the file; attached to the previous entry"))
            if main:
                return self._tail(self.main_leaf)
        if uuid is None or main:
            # A uuid-less line splices after the main-chain tail; a main-chain root chains after the lines
            # spliced before the first message (if any), so the file stays one tree.
            return self._tail(self.main_leaf if uuid is None else None)
        # A sidechain root: under the entry whose Task call launched it, when that is identifiable.
        return self.task_prompts.get(prompt) if prompt else None

    def _add(
        self,
        eid: str,
        kind: str,
        parent: str | None,
        stamp: str | None,
        number: int,
        source_kind: str,
        fields: dict[str, Any],
        main: bool,
        *,
        splice: bool = False,
    ) -> dict[str, Any]:
        entry = add_entry(self.entries, self.lines, kind, eid, parent, stamp, number, source_kind, fields)
        self.by_id[eid] = entry
        if splice:
            self.after[ROOT if parent is None else parent] = eid
        if main:
            self.main_leaf = eid
        self.last_entry = eid
        return entry

    # --- line kinds ------------------------------------------------------------------------------

    def _assistant(
        self, number: int, obj: dict[str, Any], uuid: str | None, main: bool, stamp: str | None, message: dict[str, Any]
    ) -> None:
        response_id = as_str(message.get("id")) or None
        blocks = assistant_blocks(message.get("content"))
        entry = self.responses.get(response_id) if response_id else None
        if entry is not None:
            content = entry["message"]["content"]
            for block in blocks:
                if block not in content:
                    content.append(block)
            entry["ctxdSource"]["lines"].append(number)
        else:
            parent = self._parent(number, obj, uuid, main)
            eid = self.ids.take(uuid or line_id(number))
            msg: dict[str, Any] = {
                "role": "assistant",
                "content": blocks,
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": "",
                "stopReason": "stop",
                "timestamp": iso_ms(stamp),
            }
            if response_id:
                msg["responseId"] = response_id
            entry = self._add(eid, "message", parent, stamp, number, "assistant", {"message": msg}, main)
            if response_id:
                self.responses[response_id] = entry
        eid = entry["id"]
        if uuid:
            self.alias[uuid] = eid
        self._update_response(entry, message, obj)
        for block in blocks:
            if block["type"] != "toolCall":
                continue
            self.tool_owner.setdefault(block["id"], (eid, block["name"]))
            prompt = block["arguments"].get("prompt")
            if block["name"] in TASK_TOOLS and isinstance(prompt, str):
                self.task_prompts.setdefault(prompt, eid)

    def _update_response(self, entry: dict[str, Any], message: dict[str, Any], obj: dict[str, Any]) -> None:
        msg = entry["message"]
        eid = entry["id"]
        model = as_str(message.get("model"))
        if model:
            msg["model"] = model
            if model != "<synthetic>":
                self.meta.setdefault("model", model)
        usage = claude_usage(message.get("usage"))
        if usage is not None and msg["model"] != "<synthetic>":
            msg["usage"] = usage
        raw = message.get("stop_reason")
        if isinstance(raw, str) and raw:
            self.raw_stop[eid] = raw
        if obj.get("isApiErrorMessage") is True:
            self.api_errors.add(eid)
        if eid in self.api_errors:
            msg["stopReason"] = "error"
            msg["errorMessage"] = text_of(msg["content"]) or "API error"
            msg.pop("usage", None)
        elif eid in self.raw_stop:
            msg["stopReason"] = STOP_REASONS.get(self.raw_stop[eid], "stop")
        else:
            has_call = any(b.get("type") == "toolCall" for b in msg["content"])
            msg["stopReason"] = "toolUse" if has_call else "stop"

    def _user(
        self, number: int, obj: dict[str, Any], uuid: str | None, main: bool, stamp: str | None, message: dict[str, Any]
    ) -> None:
        content = message.get("content")
        ms = iso_ms(stamp)
        results: list[dict[str, Any]] = []
        rest: Any = content
        if isinstance(content, list):
            results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
            if results:
                rest = [b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_result")]
        bodies: list[dict[str, Any]] = [self._tool_result(number, block, ms) for block in results]
        if not results or rest:
            if isinstance(rest, str):
                user_content: Any = rest
            else:
                user_content = [content_block(b) for b in rest] if isinstance(rest, list) else []
            body: dict[str, Any] = {"role": "user", "content": user_content, "timestamp": ms}
            mark_injected(body)
            bodies.append(body)

        # The first entry's parent.
        target: str | None = None
        parent_uuid = as_str(obj.get("parentUuid"))
        if results:
            target = self.alias.get(parent_uuid) if parent_uuid else None
            if target is None:
                owner = self.tool_owner.get(bodies[0]["toolCallId"])
                target = owner[0] if owner else None
        if target is not None:
            parent = self._tail(target)
        else:
            parent = self._parent(number, obj, uuid, main, prompt=text_of(content) or None)

        base = uuid or line_id(number)
        previous: str | None = None
        for k, body in enumerate(bodies):
            eid = self.ids.take(base if k == 0 else f"{base}.{k}")
            where = parent if previous is None else previous
            self._add(eid, "message", where, stamp, number, "user", {"message": body}, main)
            if previous is not None:
                self.after[previous] = eid
            elif uuid is None:
                self.after[ROOT if where is None else where] = eid
            elif results and target is not None and where is not None and self._is_assistant(target):
                # Later results of the same response chain after this one rather than becoming siblings.
                self.after[where] = eid
            previous = eid
        if uuid and previous is not None:
            self.alias[uuid] = previous

    def _is_assistant(self, eid: str) -> bool:
        entry = self.by_id.get(eid)
        return entry is not None and entry.get("type") == "message" and entry["message"].get("role") == "assistant"

    def _tool_result(self, number: int, block: dict[str, Any], ms: int | None) -> dict[str, Any]:
        call_id = as_str(block.get("tool_use_id")) or ""
        owner = self.tool_owner.get(call_id)
        if owner is None:
            self.diagnostics.append((number, f"tool_result for unknown tool_use_id {call_id!r}"))
        content = block.get("content")
        if isinstance(content, str):
            blocks = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            blocks = [content_block(b) for b in content]
        else:
            blocks = []
        return {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": owner[1] if owner else "",
            "content": blocks,
            "isError": block.get("is_error") is True,
            "timestamp": ms,
        }

    def _boundary(self, number: int, obj: dict[str, Any], uuid: str | None, main: bool, stamp: str | None) -> None:
        meta = as_dict(obj.get("compactMetadata"))
        pre = as_int(meta.get("preTokens"))
        logical = as_str(obj.get("logicalParentUuid"))
        target = self.alias.get(logical) if logical else None
        if target is None:
            # 2.1.330 may name a message it never wrote; the preserved segment's tail is the last one it did.
            tail = as_str(as_dict(meta.get("preservedSegment")).get("tailUuid"))
            target = self.alias.get(tail) if tail else None
        if target is not None:
            parent = self._tail(target)
        else:
            if logical:
                self.diagnostics.append((number, f"logicalParentUuid {logical} is not in the file"))
            parent = self._tail(self.main_leaf) if main else None
        eid = self.ids.take(uuid or line_id(number))
        fields = {
            "summary": "",
            "firstKeptEntryId": self._preserved_head(meta, parent) or eid,
            "tokensBefore": pre,
            "details": {"trigger": meta.get("trigger"), "preTokens": pre, "source": "claude"},
        }
        self._add(eid, "compaction", parent, stamp, number, "system", fields, main)
        if uuid:
            self.alias[uuid] = eid

    def _preserved_head(self, meta: dict[str, Any], parent: str | None) -> str | None:
        """The entry of ``preservedSegment.headUuid`` when it is ``parent`` or one of its ancestors."""
        head = as_str(as_dict(meta.get("preservedSegment")).get("headUuid"))
        if not head:
            uuids = as_dict(meta.get("preservedMessages")).get("uuids")
            head = as_str(uuids[0]) if isinstance(uuids, list) and uuids else None
        target = self.alias.get(head) if head else None
        if target is None or parent is None:
            return None
        # Claude's alias may point at a merged entry that begins earlier; walk up from the boundary's parent.
        node: str | None = parent
        for _ in range(100_000):
            if node is None:
                return None
            if node == target:
                return target
            entry = self.by_id.get(node)
            node = entry.get("parentId") if entry is not None else None
        return None

    def _compact_summary(
        self, number: int, obj: dict[str, Any], uuid: str | None, main: bool, stamp: str | None, message: dict[str, Any]
    ) -> None:
        text = text_of(message.get("content"))
        parent_uuid = as_str(obj.get("parentUuid"))
        target = self.alias.get(parent_uuid) if parent_uuid else None
        boundary = self.by_id.get(target) if target else None
        if boundary is not None and boundary["type"] == "compaction" and boundary["id"] not in self.filled:
            boundary["summary"] = text
            boundary["ctxdSource"]["lines"].append(number)
            self.filled.add(boundary["id"])
            if uuid:
                self.alias[uuid] = boundary["id"]
            return
        parent = self._parent(number, obj, uuid, main)
        eid = self.ids.take(uuid or line_id(number))
        fields = {"summary": text, "firstKeptEntryId": eid, "tokensBefore": 0, "details": {"source": "claude"}}
        self._add(eid, "compaction", parent, stamp, number, "user", fields, main, splice=uuid is None)
        self.filled.add(eid)
        if uuid:
            self.alias[uuid] = eid

    def _title(self, number: int, obj: dict[str, Any], uuid: str | None, main: bool, stamp: str | None) -> None:
        parent = self._parent(number, obj, uuid, main)
        eid = self.ids.take(uuid or line_id(number))
        self._add(
            eid, "session_info", parent, stamp, number, "summary", {"name": obj["summary"]}, main, splice=uuid is None
        )
        if uuid:
            self.alias[uuid] = eid

    def _custom(
        self, number: int, obj: dict[str, Any], uuid: str | None, main: bool, stamp: str | None, custom_type: str
    ) -> None:
        parent = self._parent(number, obj, uuid, main)
        eid = self.ids.take(uuid or line_id(number))
        kind = obj.get("type")
        fields = {"customType": custom_type, "data": obj}
        self._add(
            eid,
            "custom",
            parent,
            stamp,
            number,
            kind if isinstance(kind, str) else "",
            fields,
            main,
            splice=uuid is None,
        )
        if uuid:
            self.alias[uuid] = eid

    # --- result ----------------------------------------------------------------------------------

    def result(self) -> Transcript:
        meta = self.meta
        header: dict[str, Any] = {
            "type": "session",
            "version": 3,
            "id": meta.get("sessionId") or (Path(self.path).stem if self.path else ""),
            "timestamp": self.first_ts or EPOCH_ISO,
            "cwd": meta.get("cwd", ""),
            "agent": "claude",
        }
        for key in ("model", "gitBranch", "cliVersion"):
            if key in meta:
                header[key] = meta[key]
        leaf = self.main_leaf
        if self.subagent:
            leaf = self.last_entry
            if "sessionId" in meta:
                header["sessionId"] = meta["sessionId"]
            if "agentId" in meta:
                header["agentId"] = meta["agentId"]
            if self.path:
                header["id"] = Path(self.path).stem
                parent = parent_session(self.path, meta.get("sessionId"))
                if parent:
                    header["parentSession"] = parent
            elif "agentId" in meta:
                header["id"] = f"agent-{meta['agentId']}"
        finish_entries(self.entries, self.lines, self.diagnostics, self.first_ts)
        return Transcript("claude", header, self.entries, self.lines, self.diagnostics, leaf)
