"""What a conversation says, extracted without a model, for the offline summariser.

Owns one linear pass over pi AgentMessages (:func:`scan`) that records requests, tool calls and their
outcomes, errors and whether they were later resolved, and the user and assistant texts worth mining for
constraints and decisions; plus the per-exchange view (:func:`exchange_bounds`, :func:`build_exchange`) that
the abridged history is made from. Work per message is constant and text mining is bounded, so a session
of 100k messages scans in a fraction of a second.
"""

from __future__ import annotations

import gc
import re
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ctxd.compaction.fileops import FileOp, call_command, call_file_ops, classify_call
from ctxd.compaction.summarizers.serialize import content_text, middle_truncate
from ctxd.formats.injected import split_user_text

Message = Mapping[str, Any]

CONSTRAINT_RE = re.compile(
    r"\b(?:must(?:n't| not)?|should(?:n't| not)?|don'?t|do not|never|always|prefer(?:s|red|ably)?|"
    r"please use|avoid|make sure|ensure|required?|only use|instead of|no need to|keep it)\b",
    re.IGNORECASE,
)
DECISION_RE = re.compile(
    r"\b(?:(?:I'll|I will|I'm going to|we'll|let's) (?:use|go with|keep|switch|stick|avoid|replace|try|take)|"
    r"decided|decide to|decision|instead|because|chose|opted|going with|rather than|switch(?:ed|ing)? to|"
    r"root cause|trade-?off|the (?:fix|cause|problem|issue|approach) (?:is|was))\b",
    re.IGNORECASE,
)
NEXT_RE = re.compile(
    r"\b(?:next|then I|remaining|todo|to do|still need|needs? to|will need|follow[- ]up|after that|once)\b",
    re.IGNORECASE,
)
_FENCE_RE = re.compile(r"```.*?(?:```|\Z)", re.S)
_SPLIT_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'`(\[])|\n+")
_BULLET_RE = re.compile(r"^\s*(?:[-*+>]|\d+[.)])\s+")
_EXIT_RE = re.compile(
    r"(?:(?:the )?(?:command|process) )?(?:exit(?:ed)?(?: with)? (?:code|status)|exit code)[:\s]+([1-9]\d*)",
    re.IGNORECASE,
)

MINE_CHARS = 4000
"""Only the first this-many characters of a message are mined for sentences (long pastes are data)."""


def sentences(text: str, pattern: re.Pattern[str], limit: int, *, max_len: int = 300) -> list[str]:
    """Up to ``limit`` sentences of ``text`` (code blocks removed) that match ``pattern`` and are not questions."""
    out: list[str] = []
    if "```" in text:
        text = _FENCE_RE.sub(" ", text)
    for raw in _SPLIT_RE.split(text[:MINE_CHARS]):
        sentence = _BULLET_RE.sub("", raw).strip()
        if len(sentence) < 12 or sentence.endswith(("?", ":")) or sentence.startswith("#"):
            continue
        if not pattern.search(sentence):
            continue
        out.append(middle_truncate(" ".join(sentence.split()), max_len))
        if len(out) >= limit:
            break
    return out


def first_line(text: str, limit: int) -> str:
    """The first line of ``text`` with words in it, preferring one that is not a heading; whitespace collapsed,
    cut to ``limit``."""
    heading = ""
    for raw in text.splitlines():
        line = raw.strip().lstrip("#>*- ").strip()
        if not any(c.isalnum() for c in line):
            continue
        if not raw.lstrip().startswith("#"):
            return middle_truncate(" ".join(line.split()), limit)
        heading = heading or line
    return middle_truncate(" ".join(heading.split()), limit)


def user_words(message: Message) -> str:
    """The user's own words in a user message: the text without what an agent injected (see
    :mod:`ctxd.formats.injected`); "" when the whole message was injected."""
    marked = message.get("ctxdInjected")
    return split_user_text(content_text(message.get("content")), marked if isinstance(marked, str) else None).own


def substantive(text: str) -> bool:
    """Whether a user message asks for something (not just "ok", "continue", "yes please")."""
    return len(text.split()) >= 4 or len(text.strip()) >= 24


def short(text: str, limit: int) -> str:
    return middle_truncate(" ".join(text.split()), limit)


@attrs.define(slots=True)
class Call:
    """One tool call and, once seen, its outcome."""

    index: int
    name: str
    arguments: Any
    command: str | None
    ops: list[tuple[FileOp, str]]
    ok: bool | None = None

    @property
    def key(self) -> str:
        """What a later success must match to resolve this call's failure."""
        if self.command:
            return f"cmd:{self.command}"
        return f"{self.name}:{self.ops[0][1]}" if self.ops else f"tool:{self.name}"

    @property
    def label(self) -> str:
        return _describe(self.name, self.arguments, self.command, self.ops)


@attrs.define
class ErrorFact:
    index: int
    key: str | None
    text: str


def _describe(name: str, arguments: Any, command: str | None, ops: list[tuple[FileOp, str]]) -> str:
    if command:
        return f"`{short(command, 160)}`"
    if ops:
        return f"{name} {short(ops[0][1], 160)}"
    if isinstance(arguments, Mapping):
        for value in arguments.values():
            if isinstance(value, str) and value.strip():
                return f"{name}({short(value, 60)})"
    return name


def _failed(result: Message, call: Call) -> bool:
    if not call.command:
        return bool(result.get("isError"))
    text = content_text(result.get("content"), images=False)
    start = max(0, len(text) - 300)
    exit_code = _EXIT_RE.search(text, start) if "xit" in text[start:] else None
    if exit_code is not None and exit_code.group(1) == "1":
        rest = (text[: exit_code.start()] + text[exit_code.end() :]).strip(" \n.:")
        if not rest or rest == "(no output)":
            return False  # exit 1 with no output: a search that found nothing (grep, rg, test), not a failure
    return bool(result.get("isError")) or exit_code is not None


@attrs.define
class Facts:
    messages: int = 0
    user_indices: list[int] = attrs.field(factory=list)
    first_user: str | None = None
    first_request: str | None = None
    """The first user message that asks for something (see :func:`substantive`)."""
    latest_user: str | None = None
    latest_request: str | None = None
    """The latest user message that asks for something (see :func:`substantive`)."""
    calls: dict[str, Call] = attrs.field(factory=dict)
    call_count: int = 0
    done_files: dict[str, FileOp] = attrs.field(factory=dict)
    """Paths successfully written, edited, created or deleted; most recent last."""
    reads: dict[str, None] = attrs.field(factory=dict)
    ok_commands: dict[str, None] = attrs.field(factory=dict)
    commands: dict[str, bool] = attrs.field(factory=dict)
    """Every command seen with whether its latest run succeeded; most recent last."""
    runs: dict[str, list[int]] = attrs.field(factory=dict)
    """Every command seen: ``[runs, failed runs]``."""
    errors: list[ErrorFact] = attrs.field(factory=list)
    last_success: dict[str, int] = attrs.field(factory=dict)
    constraint_texts: list[str] = attrs.field(factory=list)
    """User texts that may state constraints: the first :data:`MINED` and the last :data:`MINED`."""
    assistant_texts: list[str] = attrs.field(factory=list)
    """Assistant texts to mine for decisions: the first :data:`MINED` and the last ``3 * MINED``."""
    last_assistant_text: str | None = None

    @property
    def open_calls(self) -> list[Call]:
        """Calls of the last exchange that never got a result (older ones are history, not work in progress)."""
        since = self.user_indices[-1] if self.user_indices else 0
        return [c for c in self.calls.values() if c.ok is None and c.index >= since]

    @property
    def unresolved(self) -> list[ErrorFact]:
        """Errors not followed by a success of the same command, file operation or tool."""
        return [e for e in self.errors if e.key is None or self.last_success.get(e.key, -1) < e.index]


MINED = 16


def _touch(order: dict[str, Any], key: str, value: Any = None) -> None:
    """Move ``key`` to the end of an insertion-ordered dict (most recent last)."""
    order.pop(key, None)
    order[key] = value


def _count(runs: dict[str, list[int]], command: str, *, failed: bool) -> None:
    counts = runs.get(command)
    if counts is None:
        counts = runs[command] = [0, 0]
    counts[0] += 1
    counts[1] += failed


def scan(messages: Sequence[Message]) -> Facts:
    """One pass over ``messages`` collecting everything the offline summary reports."""
    # The pass allocates many small objects that all stay alive; cyclic GC runs would only cost time.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _scan(messages)
    finally:
        if collecting:
            gc.enable()


def _scan(messages: Sequence[Message]) -> Facts:
    facts = Facts(messages=len(messages))
    calls = facts.calls
    errors = facts.errors
    last_success = facts.last_success
    commands = facts.commands
    ok_commands = facts.ok_commands
    user_indices = facts.user_indices
    early_user: list[str] = []
    late_user: deque[str] = deque(maxlen=MINED)
    early_assistant: list[str] = []
    late_assistant: deque[str] = deque(maxlen=3 * MINED)
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "toolResult":
            call_id = message.get("toolCallId")
            found = calls.get(call_id) if isinstance(call_id, str) else None
            if found is None:
                continue
            if _failed(message, found):
                found.ok = False
                detail = short(content_text(message.get("content"), images=False) or "(no output)", 300)
                errors.append(ErrorFact(index, found.key, f"{found.label} failed: {detail}"))
                if found.command:
                    _touch(commands, found.command, False)
                    _count(facts.runs, found.command, failed=True)
                continue
            found.ok = True
            last_success[found.key] = index
            if found.command:
                _touch(commands, found.command, True)
                _touch(ok_commands, found.command)
                _count(facts.runs, found.command, failed=False)
            for op, path in found.ops:
                if op == "read":
                    _touch(facts.reads, path)
                else:
                    _touch(facts.done_files, path, op)
        elif role == "assistant":
            content = message.get("content")
            texts: list[str] = []
            for block in content if isinstance(content, list) else ():
                kind = block.get("type") if type(block) is dict or isinstance(block, Mapping) else None
                if kind == "toolCall":
                    name = str(block.get("name") or "?")
                    arguments = block.get("arguments")
                    command, ops = classify_call(name, arguments)
                    facts.call_count += 1
                    call_id = block.get("id")
                    key = call_id if isinstance(call_id, str) else f"#{facts.call_count}"
                    calls[key] = Call(index, name, arguments, command, ops)
                elif kind == "text":
                    value = block.get("text")
                    if isinstance(value, str) and value.strip():
                        texts.append(value)
            if texts:
                text = "\n".join(texts)
                facts.last_assistant_text = text
                if len(early_assistant) < MINED:
                    early_assistant.append(text)
                else:
                    late_assistant.append(text)
            if message.get("stopReason") == "error":
                detail = str(message.get("errorMessage") or "unknown error")
                errors.append(ErrorFact(index, "model", "Model error: " + short(detail, 300)))
            elif message.get("stopReason") in ("stop", "toolUse", "length"):
                last_success["model"] = index
        elif role == "user":
            user_indices.append(index)
            text = user_words(message)
            if text.strip():
                if facts.first_user is None:
                    facts.first_user = text
                if facts.first_request is None and substantive(text):
                    facts.first_request = text
                facts.latest_user = text
                if substantive(text):
                    facts.latest_request = text
                if CONSTRAINT_RE.search(text, 0, MINE_CHARS):
                    if len(early_user) < MINED:
                        early_user.append(text)
                    else:
                        late_user.append(text)
        elif role == "bashExecution":
            command = str(message.get("command") or "").strip()
            if not command or message.get("cancelled"):
                continue
            code = message.get("exitCode")
            key = f"cmd:{command}"
            if isinstance(code, int) and code != 0:
                output = short(str(message.get("output") or ""), 300)
                errors.append(ErrorFact(index, key, f"`{short(command, 160)}` exited with {code}: {output}"))
                _touch(commands, command, False)
                _count(facts.runs, command, failed=True)
            else:
                _count(facts.runs, command, failed=False)
                last_success[key] = index
                _touch(commands, command, True)
                _touch(ok_commands, command)
    facts.constraint_texts = early_user + list(late_user)
    facts.assistant_texts = early_assistant + list(late_assistant)
    return facts


# --- exchanges ---------------------------------------------------------------------------------------------------


@attrs.define
class Exchange:
    """One user message and the agent's work until the next user message."""

    user: str | None
    modified: dict[str, None] = attrs.field(factory=dict)
    created: dict[str, None] = attrs.field(factory=dict)
    deleted: dict[str, None] = attrs.field(factory=dict)
    viewed: dict[str, None] = attrs.field(factory=dict)
    commands: list[tuple[str, str]] = attrs.field(factory=list)
    """``(command, note)``; the note says who ran it and whether it failed ("" for an agent's success)."""
    response: str | None = None
    status: str | None = None
    """Why there is no final response: "interrupted", "error: ...", or "continues" (the agent was mid-work)."""

    @property
    def has_actions(self) -> bool:
        return bool(self.modified or self.created or self.deleted or self.viewed or self.commands)


def exchange_bounds(messages: Sequence[Message], user_indices: Sequence[int]) -> list[tuple[int, int]]:
    """``[start, end)`` of each exchange; messages before the first user message form their own exchange."""
    bounds: list[tuple[int, int]] = []
    starts = list(user_indices)
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(messages)
        if end > start:
            bounds.append((start, end))
    return bounds


_FILE_KIND = {"written": "modified", "edited": "modified", "created": "created", "deleted": "deleted"}


def build_exchange(messages: Sequence[Message], start: int, end: int, calls: Mapping[str, Call]) -> Exchange:
    """The :class:`Exchange` of ``messages[start:end]``; ``calls`` supplies tool-call outcomes."""
    first = messages[start] if start < end else {}
    user = content_text(first.get("content")) if first.get("role") == "user" else None
    exchange = Exchange(user=user)
    last_stop: str | None = None
    last_error: str | None = None
    pending_calls = False
    for index in range(start, end):
        message = messages[index]
        role = message.get("role")
        if role == "assistant":
            content = message.get("content")
            texts: list[str] = []
            pending_calls = False
            if isinstance(content, list):
                for block in content:
                    if not isinstance(block, Mapping):
                        continue
                    if block.get("type") == "text" and isinstance(block.get("text"), str) and block["text"].strip():
                        texts.append(block["text"])
                    elif block.get("type") == "toolCall":
                        pending_calls = True
                        call = calls.get(str(block.get("id")))
                        _add_call(exchange, call, str(block.get("name") or "?"), block.get("arguments"))
            if texts:
                exchange.response = "\n".join(texts)
            last_stop = message.get("stopReason") if isinstance(message.get("stopReason"), str) else None
            last_error = str(message.get("errorMessage") or "") if last_stop == "error" else None
        elif role == "bashExecution":
            command = str(message.get("command") or "").strip()
            if command:
                code = message.get("exitCode")
                failed = isinstance(code, int) and code != 0
                exchange.commands.append((command, f"by the user, exit {code}" if failed else "by the user"))
    if pending_calls:
        exchange.response = None
        exchange.status = "continues"
    if last_stop == "aborted":
        exchange.status = "interrupted"
    elif last_stop == "error":
        exchange.status = "error: " + (last_error or "unknown error")
    return exchange


def _add_call(exchange: Exchange, call: Call | None, name: str, arguments: Any) -> None:
    ops = call.ops if call is not None else call_file_ops(name, arguments)
    command = call.command if call is not None else call_command(name, arguments)
    for op, path in ops:
        if op == "read":
            exchange.viewed[path] = None
        else:
            getattr(exchange, _FILE_KIND[op])[path] = None
    if command:
        exchange.commands.append((command, "failed" if call is not None and call.ok is False else ""))
