"""What a conversation says, extracted without a model, for the offline summariser and the fact sheet.

Owns one linear pass over pi AgentMessages (:func:`scan`) that records the user's own words (what agents
inject into user turns is set aside, see :mod:`ctxd.formats.injected`), requests, constraints, the agent's
decisions and plans, tool calls and their outcomes, the files read and changed (by file tools and through the
shell), every distinct command with how often it ran and how it ended, and every error with whether it was
resolved: by a later success on the same target (the same command, re-run; the same tool on the same path; a
later write of the file) or by the agent stating, later in the same exchange, that it fixed it. Work per
message is constant and text mining is bounded, so a session of 100k messages scans in a fraction of a second.
"""

from __future__ import annotations

import gc
import re
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs

from ctxd.compaction.reading.calls import Call, CommandStat, ErrorFact, command_key, failed
from ctxd.compaction.reading.fileops import FileOp, classify_call
from ctxd.compaction.reading.mining import (
    CONSTRAINT_RE,
    CORRECTION_RE,
    ERROR_WORD_RE,
    FIXED_ANY_RE,
    FIXED_RE,
    MINE_CHARS,
    NEXT_RE,
    STATED_RE,
    TOKEN_RE,
    WITHDRAW_RE,
    choices,
    exit_codes,
    failure_line,
    head,
    is_request,
    key_lines,
    may_give_reasons,
    sentences,
    short,
    stated_next,
)
from ctxd.compaction.reading.shell import parse_shell
from ctxd.compaction.summary.serialize import content_text
from ctxd.formats.injected import split_user_text

Message = Mapping[str, Any]
__all__ = [
    "Call",
    "CommandStat",
    "ErrorFact",
    "Facts",
    "Message",
    "combined",
    "command_key",
    "resolve_later",
    "scan",
    "user_words",
]

_RUNNING_RE = re.compile(r"Process running with session ID (\d+)")
EARLY_TEXTS = 100
LATE_TEXTS = 400
"""Decisions are mined from the agent's first and latest this-many texts, constraints from the user's."""
MAX_FIXED = 200
"""Texts saying something was fixed, kept per scan (the newest)."""
STATED_PER_MESSAGE = 4
LAST_TEXTS = 1
"""The agent's last stated plan is read from its last text only (an older one was carried out since)."""
LONG_MESSAGE = 200
"""User messages longer than this, over several lines, are treated as pastes: their error lines become facts of
their own."""


def user_words(message: Message) -> str:
    """The user's own words in a user message: the text without what an agent injected (see
    :mod:`ctxd.formats.injected`); "" when the whole message was injected."""
    marked = message.get("ctxdInjected")
    return split_user_text(content_text(message.get("content")), marked if isinstance(marked, str) else None).own


def injected_kind(message: Message) -> str | None:
    """The kind of injection when a user message holds none of the user's own words."""
    marked = message.get("ctxdInjected")
    return split_user_text(content_text(message.get("content")), marked if isinstance(marked, str) else None).kind


@attrs.define
class Facts:
    messages: int = 0
    user_indices: list[int] = attrs.field(factory=list)
    """Every user message (injected ones too: they bound exchanges)."""
    requests: list[tuple[int, str]] = attrs.field(factory=list)
    """``(index, own words)`` of the user messages that ask for something (see :func:`is_request`)."""
    first_user: str | None = None
    latest_user: str | None = None
    calls: dict[str, Call] = attrs.field(factory=dict)
    call_count: int = 0
    done_files: dict[str, FileOp] = attrs.field(factory=dict)
    """Paths successfully written, edited, created or deleted (by tools or the shell); most recent last."""
    reads: dict[str, None] = attrs.field(factory=dict)
    """Paths read (by tools or the shell); most recent last."""
    commands: dict[str, CommandStat] = attrs.field(factory=dict)
    """Every distinct command (by :func:`command_key`), most recently run last."""
    errors: list[ErrorFact] = attrs.field(factory=list)
    constraints: list[tuple[int, str]] = attrs.field(factory=list)
    """``(index, sentence)``: constraint sentences of the user's own prose."""
    decisions: list[str] = attrs.field(factory=list)
    decided_at: list[int] = attrs.field(factory=list)
    """The index of the message each of :attr:`decisions` was said in (parallel to it)."""
    plan: list[str] = attrs.field(factory=list)
    """The agent's last stated plan: the next-step sentences of its most recent text that has any."""
    last_assistant_text: str | None = None
    reported: list[str] = attrs.field(factory=list)
    """Error lines the user pasted or stated (a one-sentence report of an error that names it counts)."""
    stated: list[tuple[int, str]] = attrs.field(factory=list)
    """``(index, sentence)``: user sentences worth keeping whatever the message's length: a path, a `command`,
    how to validate the work (constraints are listed apart)."""
    fixed: list[tuple[int, str]] = attrs.field(factory=list)
    """``(index, text head)``: texts (the agent's or the user's) that say something was fixed, newest last."""
    withdrawn: list[tuple[int, str]] = attrs.field(factory=list)
    """``(index, sentence)``: user sentences that take back an earlier constraint."""
    said: dict[int, str] = attrs.field(factory=dict)
    """The user's own words of each user message that has any, by index."""

    @property
    def first_request(self) -> str | None:
        return self.requests[0][1] if self.requests else None

    @property
    def latest_request(self) -> str | None:
        return self.requests[-1][1] if self.requests else None

    @property
    def open_calls(self) -> list[Call]:
        """Calls of the last exchange that never got a result (older ones are history, not work in progress)."""
        since = self.user_indices[-1] if self.user_indices else 0
        return [c for c in self.calls.values() if c.ok is None and c.index >= since]

    @property
    def unresolved(self) -> list[ErrorFact]:
        return [e for e in self.errors if not e.resolved and not e.reported]

    # Older names, kept for callers of the first version.
    @property
    def runs(self) -> dict[str, list[int]]:
        return {key: [c.runs, c.failed] for key, c in self.commands.items()}


_MAY_SAY_FIXED_RE = re.compile("ix|esolv|ass|ork|rror|uild|ompil|ucceed|IX|ASS")


def _may_say_fixed(text: str) -> bool:
    """A cheap test before :data:`FIXED_RE`: the words it looks for, in any case."""
    return _MAY_SAY_FIXED_RE.search(text, 0, MINE_CHARS) is not None


def _touch(order: dict[str, Any], key: str, value: Any = None) -> None:
    """Move ``key`` to the end of an insertion-ordered dict (most recent last)."""
    order.pop(key, None)
    order[key] = value


class Observer(Protocol):
    """What else wants to see the one pass of :func:`scan` (the episodes of :mod:`.episodes`): each event with
    what the scan already worked out."""

    def user(self, index: int, text: str) -> None:
        """A user message with words of the user's own (``text``)."""

    def call(self, index: int, call: Call) -> None:
        """A tool call an assistant message makes."""

    def text(self, index: int, text: str, called: bool) -> None:
        """An assistant message: its text ("" when none) after its calls; ``called``: it made any."""

    def result(self, index: int, call: Call, ok: bool, output: str | None, message: Message) -> None:
        """A call's outcome (for a command: its output)."""

    def bash(self, index: int, command: str, ok: bool, output: str, code: object) -> None:
        """A command the user ran themselves."""

    def model(self, index: int, error: str | None, stop: object) -> None:
        """How an assistant message ended: ``stop`` (its stop reason), ``error`` with a model error."""


class _Scanner:
    def __init__(self, n: int, observer: Observer | None = None) -> None:
        self.facts = Facts(messages=n)
        self.observer = observer
        self.exchange = 0
        self.pending: dict[str, list[ErrorFact]] = {}
        """Unresolved errors by key."""
        self.exchange_texts: list[str] = []
        """The agent's texts since the last user message (its last stated plan is among them)."""
        self.open_errors = 0
        """Errors of this exchange so far (a statement that something was fixed resolves them)."""
        self.sessions: dict[str, Call] = {}
        """Codex exec sessions still running, by session id."""
        self.early_user: list[tuple[int, str]] = []
        self.late_user: deque[tuple[int, str]] = deque(maxlen=LATE_TEXTS)
        self.early: list[tuple[int, str]] = []
        self.late: deque[tuple[int, str]] = deque(maxlen=LATE_TEXTS)
        self.fixed: deque[tuple[int, str]] = deque(maxlen=MAX_FIXED)

    def error(self, index: int, key: str | None, label: str, line: str) -> None:
        fact = ErrorFact(index, key, short(label, 200), head(line, 240), self.exchange)
        self.facts.errors.append(fact)
        self.open_errors += 1
        if key is not None:
            self.pending.setdefault(key, []).append(fact)

    def success(self, key: str) -> None:
        if not self.pending:
            return
        for fact in self.pending.pop(key, ()):
            fact.resolved = True

    def files(self, ops: Sequence[tuple[FileOp, str]]) -> None:
        """Files a successful call read or changed: noted (most recent last), their errors resolved."""
        for op, path in ops:
            if op == "read":
                _touch(self.facts.reads, path)
            else:
                _touch(self.facts.done_files, path, op)
                if self.pending:
                    self.success(f"file:{path}")

    def command(self, index: int, command: str, ok: bool | None) -> None:
        parsed = parse_shell(command)
        if ok is not False:
            self.files(parsed.ops)
        if parsed.file_only:
            return
        core = parsed.core or " ".join(command.split())
        key = f"{core} [in {parsed.cwd}]" if parsed.cwd else core
        stat = self.facts.commands.pop(key, None)
        if stat is None:
            stat = CommandStat(core, parsed.cwd)
        self.facts.commands[key] = stat
        if ok is None:
            return
        stat.runs += 1
        stat.failed += not ok
        stat.last_ok = ok
        stat.last_index = index

    def tool_result(self, index: int, message: Message) -> None:
        call_id = message.get("toolCallId")
        found = self.facts.calls.get(call_id) if isinstance(call_id, str) else None
        if found is None:
            return
        text: str | None = None
        if found.command or found.name in ("write_stdin", "writeStdin"):
            text = content_text(message.get("content"), images=False)
            running = _RUNNING_RE.search(text, 0, 400) if "running" in text[:200] else None
            if running is not None and found.command:
                # Codex's unified exec: the command goes on in a session; a later write_stdin reports its end.
                self.sessions[running.group(1)] = found
                return
            if found.command is None:
                arguments = found.arguments if isinstance(found.arguments, Mapping) else {}
                original = self.sessions.get(str(arguments.get("session_id")))
                if original is None or not exit_codes(text):
                    found.ok = True
                    return
                found.ok = True
                found = original
        if failed(message, found, text):
            found.ok = False
            output = text if text is not None else content_text(message.get("content"), images=False)
            self.error(index, found.key, found.label + " failed", failure_line(output))
            if found.command:
                self.command(index, found.command, False)
            if self.observer is not None:
                self.observer.result(index, found, False, output, message)
            return
        found.ok = True
        if self.pending:
            self.success(found.key)
        if found.command:
            self.command(index, found.command, True)
        self.files(found.ops)
        if self.observer is not None:
            self.observer.result(index, found, True, text, message)

    def assistant(self, index: int, message: Message) -> None:
        facts = self.facts
        content = message.get("content")
        texts: list[str] = []
        called = False
        for block in content if isinstance(content, list) else ():
            kind = block.get("type") if type(block) is dict or isinstance(block, Mapping) else None
            if kind == "toolCall":
                called = True
                name = str(block.get("name") or "?")
                arguments = block.get("arguments")
                command, ops = classify_call(name, arguments)
                facts.call_count += 1
                call_id = block.get("id")
                key = call_id if isinstance(call_id, str) else f"#{facts.call_count}"
                made = facts.calls[key] = Call(index, name, arguments, command, ops)
                if self.observer is not None:
                    self.observer.call(index, made)
            elif kind == "text":
                value = block.get("text")
                if isinstance(value, str) and value.strip():
                    texts.append(value)
        if isinstance(content, str) and content.strip():
            texts.append(content)
        if self.observer is not None:
            self.observer.text(index, "\n".join(texts), called)
        if texts:
            text = "\n".join(texts)
            facts.last_assistant_text = text
            # Mined at the end, and only a bounded number: the plan of the last exchange, the decisions of the
            # first and the latest texts (mining every text of a long session costs seconds).
            self.exchange_texts.append(text)
            if len(self.early) < EARLY_TEXTS:
                self.early.append((index, text))
            else:
                self.late.append((index, text))
            said_fixed = _may_say_fixed(text) and FIXED_RE.search(text[:MINE_CHARS].lower()) is not None
            if said_fixed:
                self.fixed.append((index, text[:MINE_CHARS]))
            if self.open_errors and said_fixed:
                # The agent says it fixed something: this exchange's open failures are behind it.
                for fact in facts.errors[-self.open_errors :]:
                    if not fact.resolved and fact.exchange == self.exchange and fact.key != "model":
                        fact.resolved = True
                self.open_errors = 0
        stop = message.get("stopReason")
        if stop == "error":
            detail = str(message.get("errorMessage") or "unknown error")
            self.error(index, "model", "Model error", detail)
            if self.observer is not None:
                self.observer.model(index, detail, stop)
        elif stop in ("stop", "toolUse", "length"):
            self.success("model")
            if self.observer is not None:
                self.observer.model(index, None, stop)
        elif self.observer is not None:
            self.observer.model(index, None, stop)

    def user(self, index: int, message: Message) -> None:
        facts = self.facts
        facts.user_indices.append(index)
        text = user_words(message)
        if not text.strip():
            return
        facts.said[index] = text
        if self.observer is not None:
            self.observer.user(index, text)
        self.exchange += 1
        self.exchange_texts = []  # a plan stated before this message was for an earlier request
        self.open_errors = 0
        if facts.first_user is None:
            facts.first_user = text
        facts.latest_user = text
        if is_request(text):
            facts.requests.append((index, text))
        if CONSTRAINT_RE.search(text, 0, MINE_CHARS) or any(map(CORRECTION_RE.match, text[:MINE_CHARS].split("\n"))):
            # Mined at the end: the user's first and latest texts that state constraints.
            if len(self.early_user) < EARLY_TEXTS:
                self.early_user.append((index, text))
            else:
                self.late_user.append((index, text))
        if len(text) > LONG_MESSAGE and "\n" in text:
            for line in key_lines(text):
                self.reported(index, line)
        self.statements(index, text)

    def reported(self, index: int, line: str) -> None:
        self.facts.reported.append(line)
        self.error(index, None, "User reported", line)
        self.facts.errors[-1].reported = True  # what the user reported is context, not an open failure

    def statements(self, index: int, text: str) -> None:
        """The user's one-sentence facts, whatever the message's length: an error they name, a path, a
        `command`, how to validate; and sentences taking back a constraint."""
        head = text[:MINE_CHARS]
        if ERROR_WORD_RE.search(head) and TOKEN_RE.search(head):
            known = set(self.facts.reported)
            for sentence in sentences(text, ERROR_WORD_RE, STATED_PER_MESSAGE):
                if TOKEN_RE.search(sentence) and sentence not in known:
                    self.reported(index, sentence)
        if STATED_RE.search(head):
            for sentence in sentences(text, STATED_RE, STATED_PER_MESSAGE):
                if not CONSTRAINT_RE.search(sentence) and not ERROR_WORD_RE.search(sentence):
                    self.facts.stated.append((index, sentence))
        if WITHDRAW_RE.search(head):
            self.facts.withdrawn.extend((index, s) for s in sentences(text, WITHDRAW_RE, STATED_PER_MESSAGE))
        if _may_say_fixed(head) and FIXED_ANY_RE.search(head):
            self.fixed.append((index, head))

    def bash(self, index: int, message: Message) -> None:
        command = str(message.get("command") or "").strip()
        if not command or message.get("cancelled"):
            return
        code = message.get("exitCode")
        key = f"cmd:{command_key(command)}"
        if isinstance(code, int) and code != 0:
            output = str(message.get("output") or "")
            self.error(
                index,
                key,
                f"`{short(command, 160)}` (run by the user) exited with {code}",
                failure_line(output),
            )
            self.command(index, command, False)
        else:
            self.success(key)
            self.command(index, command, True)
        if self.observer is not None:
            ok = not (isinstance(code, int) and code != 0)
            self.observer.bash(index, command, ok, str(message.get("output") or ""), code)


def scan(messages: Sequence[Message], observer: Observer | None = None) -> Facts:
    """One pass over ``messages`` collecting everything the offline summary and the fact sheet report;
    ``observer`` sees each event as the pass works it out."""
    # The pass allocates many small objects that all stay alive; cyclic GC runs would only cost time.
    collecting = gc.isenabled()
    gc.disable()
    try:
        scanner = _Scanner(len(messages), observer)
        for index, message in enumerate(messages):
            role = message.get("role")
            if role == "toolResult":
                scanner.tool_result(index, message)
            elif role == "assistant":
                scanner.assistant(index, message)
            elif role == "user":
                scanner.user(index, message)
            elif role == "bashExecution":
                scanner.bash(index, message)
        facts = scanner.facts
        for call in facts.calls.values():
            if call.ok is None and call.command:
                scanner.command(call.index, call.command, None)  # run, but no result seen
        for index, text in (*scanner.early_user, *scanner.late_user):
            facts.constraints.extend((index, s) for s in sentences(text, CONSTRAINT_RE, 8, also=CORRECTION_RE))
        for index, text in (*scanner.early, *scanner.late):
            if may_give_reasons(text):
                for sentence in choices(text):
                    facts.decisions.append(sentence)
                    facts.decided_at.append(index)
        facts.fixed = list(scanner.fixed)
        for text in reversed(scanner.exchange_texts[-LAST_TEXTS:]):
            if NEXT_RE.search(text, 0, MINE_CHARS):
                facts.plan = stated_next(text)
                if facts.plan:
                    break
        return facts
    finally:
        if collecting:
            gc.enable()


def resolve_later(facts: Facts, more: Facts) -> None:
    """Mark the errors of ``facts`` that ``more`` (what came after: a split turn's prefix) resolved: a later
    successful run of the same command, a later successful change of the same file."""
    later = {f"cmd:{key}" for key, c in more.commands.items() if c.last_ok}
    later.update(f"file:{path}" for path in more.done_files)
    for error in facts.errors:
        if not error.resolved and error.key in later:
            error.resolved = True


def combined(facts: Facts, more: Facts | None) -> Facts:
    """``facts`` with the files, commands and errors of ``more`` (a split turn's prefix) added, for the lists
    that cover the whole summarised range."""
    if more is None:
        return facts
    out = attrs.evolve(
        facts,
        done_files={**facts.done_files, **more.done_files},
        reads={**facts.reads, **more.reads},
        errors=[*facts.errors, *more.errors],
        reported=[*facts.reported, *more.reported],
        requests=[*facts.requests, *more.requests],
    )
    commands = dict(facts.commands)
    for key, stat in more.commands.items():
        mine = commands.pop(key, None)
        if mine is not None:
            stat = attrs.evolve(stat, runs=stat.runs + mine.runs, failed=stat.failed + mine.failed)
        commands[key] = stat
    out.commands = commands
    return out
