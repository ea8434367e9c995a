"""A conversation's tool calls, commands and errors as :func:`ctxd.compaction.reading.facts.scan` records them.

Owns the records (a call and its outcome, a distinct command with its runs, an error with whether it was
resolved), the key a later success must match to resolve a failure (:func:`command_key`), and whether a tool
result means the call failed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from ctxd.compaction.reading.fileops import FileOp
from ctxd.compaction.reading.mining import CHECK_RE, error_line, exit_codes, head, short
from ctxd.compaction.reading.shell import parse_shell
from ctxd.compaction.summary.serialize import content_text
from ctxd.formats.lazy_re import lazy_compile

Message = Mapping[str, Any]


@attrs.define(slots=True)
class Call:
    """One tool call and, once seen, its outcome."""

    index: int
    name: str
    arguments: Any
    command: str | None
    ops: list[tuple[FileOp, str]]
    ok: bool | None = None

    _key: str | None = None

    @property
    def key(self) -> str:
        """What a later success must match to resolve this call's failure."""
        if self._key is None:
            if self.command:
                self._key = f"cmd:{command_key(self.command)}"
            elif self.ops:
                self._key = f"file:{self.ops[0][1]}"
            else:
                self._key = f"tool:{self.name}"
        return self._key

    @property
    def label(self) -> str:
        return describe(self.name, self.arguments, self.command, self.ops)


def command_key(command: str) -> str:
    parsed = parse_shell(command)
    core = parsed.core or " ".join(command.split())
    return f"{core} [in {parsed.cwd}]" if parsed.cwd else core


@attrs.define
class ErrorFact:
    index: int
    key: str | None
    label: str
    """What failed: a command in backticks, a tool and path, "Model error", "User reported"."""
    line: str
    """The line saying what went wrong."""
    exchange: int = 0
    resolved: bool = False
    reported: bool = False
    """Pasted by the user: context to keep, not a failure that something must resolve."""

    @property
    def text(self) -> str:
        return f"{self.label}: {self.line}"


@attrs.define(slots=True)
class CommandStat:
    command: str
    """The core as first seen (see :func:`command_key`); ``cwd`` is kept apart."""
    cwd: str | None
    runs: int = 0
    failed: int = 0
    last_ok: bool | None = None
    last_index: int = 0

    @property
    def text(self) -> str:
        text = f"`{head(self.command, 140)}`"
        if self.cwd:
            text += f" in {short(self.cwd, 80)}"
        if self.runs > 1:
            text += f" x{self.runs}"
        if self.last_ok is None:
            text += " (no result)"
        elif self.failed:
            last = "ok" if self.last_ok else "failed"
            text += f" ({self.failed} failed, last {last})" if self.runs > 1 else " (failed)"
        return text


def describe(name: str, arguments: Any, command: str | None, ops: list[tuple[FileOp, str]]) -> str:
    if command:
        return f"`{short(command, 160)}`"
    if ops:
        return f"{name} {short(ops[0][1], 160)}"
    if isinstance(arguments, Mapping):
        for value in arguments.values():
            if isinstance(value, str) and value.strip():
                return f"{name}({short(value, 60)})"
    return name


_FILTERED_RE = lazy_compile(r"\|\s*(?:head|tail|grep|egrep|rg|less|more|cat|tee|sed|awk|cut|sort|uniq|wc)\b")
"""A command whose output goes through a filter: the exit status the tool reports is the filter's."""
_FAILED_OUTPUT_RE = lazy_compile(
    r"^\s*(?:\*\* \(\w|Traceback \(most recent call last\)|panic:|FATAL\b|npm ERR!|make: \*\*\*|error(?:\[\w+\])?:|"
    r"Error:|ERROR\b|FAILED\b|FAIL\b)|\b[1-9]\d* (?:failures?|failed|errors?)\b(?!\s*(?:in|of) 0)",
    re.M,
)
"""What a run's output says when it failed, whatever the exit status of a filter after it says."""


def masked_failure(command: str, text: str) -> bool:
    """Whether ``command``'s output says it failed although a filter after it (``| tail -20``) exited 0: a crash,
    a traceback, a failed count in the output's last lines (where test runners and builds print them)."""
    if not _FILTERED_RE.search(command) or not CHECK_RE.search(command):
        return False  # a look through logs (`grep ERROR log | head`) is not a run that failed
    tail = text[-3_000:]
    return _FAILED_OUTPUT_RE.search(tail) is not None


def failed(result: Message, call: Call, text: str | None = None) -> bool:
    if not call.command:
        return bool(result.get("isError"))
    if text is None:
        text = content_text(result.get("content"), images=False)
    codes = exit_codes(text)
    if codes and codes[-1] == 1 and error_line(text) is None:
        return False  # exit 1 with no output: a search that found nothing (grep, rg, test), not a failure
    if codes:
        return codes[-1] != 0 or bool(result.get("isError"))
    return bool(result.get("isError")) or masked_failure(call.command, text)
