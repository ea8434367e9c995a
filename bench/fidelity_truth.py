"""The facts a summary of a range of messages should keep, as a careful person reading the transcript finds them.

Used by ``bench/fidelity.py``. Nothing here imports ctxd: the bench grades ctxd's summariser by its own
definitions (``bench/fidelity_text.py`` for what people wrote, ``bench/fidelity_shell.py`` for commands), never
by the summariser's extractors. The range is pi AgentMessages (user, assistant, toolResult, bashExecution), as
ctxd maps a pi, Claude Code or Codex session; the agents' tools are read by their documented arguments:
``bash``/``Bash`` (``command``), Codex's ``exec_command`` (``cmd``) and ``shell`` (``command`` as a list),
``read``/``Read``, ``edit``/``Edit``/``MultiEdit``/``write``/``Write``/``NotebookEdit`` (``path``,
``file_path``, ``notebook_path``), ``apply_patch`` (its ``*** ... File:`` lines), pi's user shell runs
(``bashExecution``).

The facts (each kept when its probe, normalised, occurs in the summary; see ``bench/fidelity_score.py``):

- **key commands**: every distinct key command run in the range (``fidelity_shell``: builds, tests, runs,
  installs, git commands that change something); probe: its first 40 characters (a commit: its message's).
- **constraints**: the sentences of the user's own words that state a rule (``fidelity_text.rules``); probe:
  the first :data:`HEAD` characters.
- **errors**: each failed call in the range (a tool result with ``isError`` or a non-zero exit code, a user
  shell run with a non-zero ``exitCode``; not one the user stopped) with the line that says what went wrong
  (``fidelity_text.error_line``); distinct lines by their probe, the first :data:`HEAD` characters. A failure
  that printed nothing (a search that found nothing) has no line and is no fact. A model's own API error is not
  a call's failure.
- **requests**: the first and the last genuine request of the range (``fidelity_text.genuine_request``).
- **files modified / read**: the files the tools and shell commands wrote, and those only read; kept when the
  path relative to the project (or, deeper than three parts, its last three parts) is in the summary's body.
- planted facts of generated sessions (``bench`` on a message; see ``bench/fidelity_gen.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fidelity_shell as sh
import fidelity_text as tx

HEAD = 50
"""Characters of a constraint, error line or request a summary must contain (normalised)."""
_SHELL_TOOLS = {"bash": "command", "exec_command": "cmd", "shell": "command", "local_shell": "command"}
_READ_TOOLS = {"read", "view"}
_WRITE_TOOLS = {"edit", "multiedit", "write", "notebookedit", "create", "str_replace_based_edit_tool"}
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$|^\*\*\* Move to: (.+)$", re.M)


@dataclass
class Truth:
    commands: dict[str, str] = field(default_factory=dict)
    """probe -> command, for the key commands"""
    looked: set[str] = field(default_factory=set)
    """Read-only looks (counted, not a target)."""
    tracker: set[str] = field(default_factory=set)
    """A tracker's writes (``bd``, ``gh``; counted, not a target)."""
    constraints: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    """probe -> error line"""
    requests: dict[str, str] = field(default_factory=dict)
    modified: dict[str, list[str]] = field(default_factory=dict)
    """path -> the keys any of which the summary must name"""
    read: dict[str, list[str]] = field(default_factory=dict)
    planted: dict[str, dict[str, str]] = field(default_factory=dict)
    """kind -> probe -> text (generated sessions only: constraint, decision, next, paste, injected)"""
    failures: int = 0
    """Failed calls seen (with or without an error line)."""
    failed_calls: dict[str, str] = field(default_factory=dict)
    """error probe -> what the call that failed ran or touched (its command, its files)"""


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(b["text"] for b in content if isinstance(b, Mapping) and isinstance(b.get("text"), str))


def user_words(message: Mapping[str, Any]) -> str:
    """The user's own words in a user message (``fidelity_text.own_words``)."""
    return tx.own_words(text_of(message.get("content")))


def shell_command(name: str, arguments: Any) -> str | None:
    """The command line a shell tool call runs, if ``name`` is one."""
    key = _SHELL_TOOLS.get(name.lower())
    if key is None or not isinstance(arguments, Mapping):
        return None
    command = arguments.get(key)
    if isinstance(command, list) and all(isinstance(w, str) for w in command):
        if len(command) >= 3 and command[0].endswith("sh") and command[1] in ("-c", "-lc"):
            return str(command[2])
        return " ".join(command)
    return command if isinstance(command, str) and command.strip() else None


def tool_files(name: str, arguments: Any) -> tuple[list[str], list[str]]:
    """(read, written) files of a non-shell tool call."""
    if not isinstance(arguments, Mapping):
        return [], []
    lower = name.lower()
    if lower == "apply_patch":
        patch = arguments.get("input") or arguments.get("patch") or ""
        found = [a or b for a, b in _PATCH_FILE.findall(str(patch))]
        return [], [f.strip() for f in found if f.strip()]
    path = next((arguments[k] for k in ("path", "file_path", "notebook_path") if isinstance(arguments.get(k), str)), "")
    if not path:
        return [], []
    if lower in _READ_TOOLS:
        return [path], []
    if lower in _WRITE_TOOLS:
        return [], [path]
    return [], []


def path_keys(path: str, root: str | None) -> list[str]:
    """The forms of ``path`` any of which a summary may name: relative to the project, its last three parts."""
    relative = tx.norm(path, root)
    parts = [p for p in relative.split("/") if p and p != "."]
    keys = [relative.removeprefix("./")]
    if len(parts) > 3:
        keys.append("/".join(parts[-3:]))
    return keys


def _label(command: str) -> str:
    """A command line as a summary may name it: its first simple command that is not a ``cd``."""
    simple = next((s for s in sh.simple_commands(command) if s.program != "cd"), None)
    return " ".join(simple.words) if simple is not None else command


def _failed(message: Mapping[str, Any], output: str) -> bool:
    if message.get("role") == "bashExecution":
        code = message.get("exitCode")
        return isinstance(code, int) and code != 0 and not message.get("cancelled")
    if tx.ABORTED.match(output):
        return False
    code = tx.exit_code(output)
    return bool(message.get("isError")) or (code is not None and code != 0)


class _Reader:
    """Walks a range once and fills a :class:`Truth`."""

    def __init__(self, root: str | None) -> None:
        self.root = root
        self.truth = Truth()
        self.calls: dict[str, str] = {}
        """tool call id -> what it ran or touched"""
        self.genuine: list[str] = []
        self.next_steps: dict[str, str] = {}

    def shell(self, command: str) -> None:
        self.truth.commands.update(sh.key_commands(command, self.root))
        self.truth.looked.update(sh.of_kind(command, sh.LOOK))
        self.truth.tracker.update(sh.of_kind(command, sh.TRACKER))
        read, written = sh.file_ops(command)
        self.files(read, written)

    def files(self, read: Iterable[str], written: Iterable[str]) -> None:
        for path in read:
            self.truth.read[path] = path_keys(path, self.root)
        for path in written:
            self.truth.modified[path] = path_keys(path, self.root)

    def error(self, output: str, call: str) -> None:
        self.truth.failures += 1
        line = tx.error_line(output)
        if line:
            probe = tx.head(line, HEAD, self.root)
            self.truth.errors.setdefault(probe, line)
            self.truth.failed_calls.setdefault(probe, call)

    def message(self, message: Mapping[str, Any]) -> None:
        role = message.get("role")
        self.planted(message)
        if role == "user":
            own = user_words(message)
            if tx.genuine_request(own):
                self.genuine.append(own)
            for sentence in tx.rules(own):
                self.truth.constraints.setdefault(tx.head(sentence, HEAD, self.root), sentence)
        elif role == "assistant":
            for block in message.get("content") or ():
                if isinstance(block, Mapping) and block.get("type") == "toolCall":
                    self.call(block)
        elif role == "toolResult":
            output = text_of(message.get("content"))
            if _failed(message, output):
                self.error(output, self.calls.get(str(message.get("toolCallId")), ""))
        elif role == "bashExecution":
            command = str(message.get("command") or "")
            if command.strip():
                self.shell(command)
            if _failed(message, str(message.get("output") or "")):
                self.error(str(message.get("output") or ""), _label(command))

    def call(self, block: Mapping[str, Any]) -> None:
        name, arguments = str(block.get("name") or ""), block.get("arguments")
        command = shell_command(name, arguments)
        read, written = tool_files(name, arguments)
        self.calls[str(block.get("id"))] = _label(command) if command is not None else " ".join([*read, *written])
        if command is not None:
            self.shell(command)
        else:
            self.files(*tool_files(name, arguments))

    def planted(self, message: Mapping[str, Any]) -> None:
        if message.get("role") == "assistant" and any(
            isinstance(b, Mapping) and b.get("type") == "text" for b in message.get("content") or ()
        ):
            self.next_steps = {}  # only the agent's last stated plan is a next step
        for item in message.get("bench") or ():
            if item["kind"] == "next":
                self.next_steps[tx.norm(item["probe"])] = item["probe"]
            elif item.get("probe"):
                self.truth.planted.setdefault(item["kind"], {})[tx.norm(item["probe"])] = item["probe"]

    def done(self) -> Truth:
        truth = self.truth
        if self.next_steps:
            truth.planted["next"] = self.next_steps
        for request in (self.genuine[:1] + self.genuine[-1:]) if self.genuine else []:
            truth.requests[tx.head(request, HEAD, self.root)] = request
        for path in truth.modified:
            truth.read.pop(path, None)
        return truth


def range_truth(messages: Sequence[Mapping[str, Any]], root: str | None = None) -> Truth:
    """The facts of ``messages`` (see the module docstring); ``root``: the session's project folder."""
    reader = _Reader(root)
    for message in messages:
        reader.message(message)
    return reader.done()


def first_request(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The session's goal: its first genuine request."""
    for message in messages:
        if message.get("role") == "user" and tx.genuine_request(own := user_words(message)):
            return own
    return None


def prose(messages: Sequence[Mapping[str, Any]], root: str | None = None) -> str:
    """The user's own prose in ``messages``, normalised (an item of the summary's constraints traces to it)."""
    lines = [line for m in messages if m.get("role") == "user" for line in tx.prose_lines(user_words(m))]
    return tx.norm("\n".join(lines), root)
