"""The facts a summary of a range of pi AgentMessages should keep, and how a summary is scored against them.

Used by ``bench/fidelity.py``. The definitions are the benchmark's, written here on purpose apart from the
summariser's extraction (ctxd/compaction/summarizers/facts.py), so that the bench does not grade the
summariser by its own rules. Shared with ctxd are only the definitions every reader of a transcript needs:
what an agent injected into a user turn (ctxd.formats.injected), what a tool call or shell command does to
files and whether it only looks around (ctxd.compaction.fileops / shell); the generated sessions
(bench/fidelity_gen.py) check those with planted probes.

Presence is textual: a fact is kept when its probe (a short verbatim piece of the source: a path, the head
of a command, an error line, the head of a request) occurs in the summary, after both are normalised (lower
case, markdown emphasis, backticks and quotes removed, whitespace collapsed). File facts must be in the
summary's body, not only in the appended ``<read-files>``/``<modified-files>`` lists.

Commands are a target only when they matter (:func:`matters`): a command whose last run in the range failed
(the outcome is the bench's own reading of the results), or one that does more than look around. Looking
around (ctxd.compaction.shell.looks_only) is a pipeline of read-only programs (``ls``, ``grep``, ``rg``,
``find`` without ``-exec``/``-delete``, ``cat``, ``sed`` without ``-i``, ``git`` with a read-only subcommand,
...) that writes no file; builds, tests, runs, installs and git commands that change something are
everything else.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxd.compaction.fileops import classify_call, strip_file_blocks
from ctxd.compaction.shell import looks_only, parse_shell
from ctxd.formats.injected import split_user_text

PROBE = 60
_MARKUP = re.compile(r"[`*_\"'\u2018\u2019\u201c\u201d]|\[\.\.\.\d+ chars omitted\.\.\.\]")
_SPACE = re.compile(r"\s+")
_OMITTED = re.compile(r"\s*\[\.\.\.\d+ chars omitted\.\.\.\]\s*|\s*\u2026\s*")
CONSTRAINT = re.compile(
    r"\b(?:must|mustn't|should|shouldn't|don't|do not|dont|never|always|prefer|avoid|make sure|ensure|"
    r"only use|instead of|no need to)\b",
    re.I,
)
ERROR_WORDS = re.compile(
    r"\b(?:error|errors|exception|fatal|failed|failure|cannot|can't|not found|no such|denied|panic|traceback|"
    r"invalid|unexpected|undefined|refused|timed out|ERR!)\b",
    re.I,
)
PASTED_ERROR = re.compile(r"(?:\b[A-Z][A-Za-z]*(?:Error|Exception)\b|\bError:|\bERR!|\bFATAL\b|\bpanic:|not found:)")
_EXIT = re.compile(r"(?:exit(?:ed)?(?: with)? (?:code|status)|exit code)[:\s]+(-?\d+)", re.I)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'`(\[])|\n+")
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
NONE_ITEMS = {"none", "(none)", "(none recorded)", "(nothing recorded)", "n/a", "-", "nothing yet"}


def norm(text: str) -> str:
    text = _MARKUP.sub("", _ANSI.sub("", text).lower())
    return _SPACE.sub(" ", text).strip()


def probe(text: str) -> str:
    return norm(text)[:PROBE].rstrip()


def path_keys(path: str) -> list[str]:
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    keys = [norm(path)]
    if len(parts) > 3:
        keys.append(norm("/".join(parts[-3:])))
    return keys


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(b["text"] for b in content if isinstance(b, Mapping) and isinstance(b.get("text"), str))


def own_words(message: Mapping[str, Any]) -> str:
    marked = message.get("ctxdInjected")
    return split_user_text(text_of(message.get("content")), marked if isinstance(marked, str) else None).own


_ACK = re.compile(
    r"^(?:ok|okay|yes|yeah|yep|sure|thanks|thank you|continue|go on|go ahead|please do|do it|sounds good|"
    r"great|nice|cool|perfect|lgtm|hi|hello|hey|yes please|ok continue)[\s,.!]*$",
    re.I,
)


def genuine_request(text: str) -> bool:
    """A user message that asks for something: two words or more, not an acknowledgement or a greeting."""
    text = text.strip()
    return len(text.split()) >= 2 and not _ACK.match(text)


def prose_lines(text: str) -> list[str]:
    """Lines a person wrote as prose: no code fences, tables, headings, quotes, log or JSON lines."""
    out = []
    for line in _FENCE.sub("\n", text).splitlines():
        s = line.strip()
        if not s or s.startswith(("|", "#", ">", "{", "[", "}", "]", "at ", "$ ")) or _ANSI.search(line):
            continue
        if line.startswith(("    ", "\t")):
            continue
        out.append(s)
    return out


def constraint_sentences(text: str) -> list[str]:
    out = []
    for line in prose_lines(text):
        for raw in _SENTENCE_SPLIT.split(line):
            s = re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", raw).strip()
            if len(s) >= 12 and not s.endswith("?") and CONSTRAINT.search(s):
                out.append(s)
    return out


def output_text(message: Mapping[str, Any]) -> str:
    if message.get("role") == "bashExecution":
        return str(message.get("output") or "")
    return text_of(message.get("content"))


def error_line(output: str) -> str | None:
    """The line of a failed command's output that says what went wrong."""
    lines = [ln.strip() for ln in _ANSI.sub("", output).splitlines() if ln.strip()]
    lines = [ln for ln in lines if not re.match(r"^(?:Chunk ID|Wall time|Process exited with code|Original token)", ln)]
    lines = [ln for ln in lines if ln not in ("Output:", "(no output)")]
    for line in lines:
        if ERROR_WORDS.search(line) and not _EXIT.search(line):
            return line
    rest = [ln for ln in lines if not _EXIT.search(ln)]
    return rest[0] if rest else None


def failed(result: Mapping[str, Any], command: str | None) -> bool:
    if result.get("role") == "bashExecution":
        code = result.get("exitCode")
        return isinstance(code, int) and code != 0
    text = output_text(result)
    codes = [int(m.group(1)) for m in _EXIT.finditer(text[:300] + "\n" + text[-300:])]
    if command and codes and codes[-1] == 1:
        body = error_line(text)
        if body is None:
            return False  # a search that found nothing
    return bool(result.get("isError")) or any(c != 0 for c in codes)


@dataclass
class Truth:
    requests: dict[str, str] = field(default_factory=dict)
    constraints: dict[str, str] = field(default_factory=dict)
    modified: dict[str, list[str]] = field(default_factory=dict)
    read: dict[str, list[str]] = field(default_factory=dict)
    commands: dict[str, str] = field(default_factory=dict)
    """core -> probe, for the commands that matter (see :func:`matters`)"""
    looked: set[str] = field(default_factory=set)
    """Cores of read-only exploration that never failed last (not a target)."""
    errors: dict[str, str] = field(default_factory=dict)
    """probe -> line"""
    planted: dict[str, dict[str, str]] = field(default_factory=dict)
    """kind -> probe -> text (generated sessions only: decision, next, paste, injected)"""


def range_truth(messages: Sequence[Mapping[str, Any]]) -> Truth:
    truth = Truth()
    calls: dict[str, tuple[str, Any]] = {}
    last_failed: dict[str, bool] = {}
    """core -> whether its last run failed (absent: no result seen)"""
    genuine: list[str] = []
    last_next: dict[str, str] = {}
    for message in messages:
        role = message.get("role")
        if role == "assistant" and any(
            isinstance(b, Mapping) and b.get("type") == "text" for b in message.get("content") or ()
        ):
            last_next = {}  # only the agent's last stated plan is a next step
        for item in message.get("bench") or ():
            if item["kind"] == "next":
                last_next[norm(item["probe"])] = item["probe"]
            else:
                truth.planted.setdefault(item["kind"], {})[norm(item["probe"])] = item["probe"]
        if role == "user":
            own = own_words(message)
            if own.strip() and genuine_request(own):
                genuine.append(own)
            for sentence in constraint_sentences(own):
                truth.constraints[probe(sentence)] = sentence
            for line in own.splitlines():
                if PASTED_ERROR.search(line) and len(line.strip()) >= 12:
                    truth.errors[probe(line.strip())] = line.strip()
        elif role == "assistant":
            for block in message.get("content") or ():
                if isinstance(block, Mapping) and block.get("type") == "toolCall":
                    name, args = str(block.get("name") or ""), block.get("arguments")
                    calls[str(block.get("id"))] = (name, args)
                    command, ops = classify_call(name, args)
                    _ops(truth, ops)
                    if command:
                        _command(truth, command, last_failed, None)
            if message.get("stopReason") == "error" and message.get("errorMessage"):
                line = str(message["errorMessage"]).strip().splitlines()[0]
                truth.errors[probe(line)] = line
        elif role == "toolResult":
            call = calls.get(str(message.get("toolCallId")))
            command = classify_call(*call)[0] if call else None
            bad = bool(call) and failed(message, command)
            if command:
                _outcome(command, last_failed, bad)
            if bad:
                line = error_line(output_text(message))
                if line:
                    truth.errors[probe(line)] = line
        elif role == "bashExecution":
            command = str(message.get("command") or "").strip()
            if command and not message.get("cancelled"):
                _command(truth, command, last_failed, failed(message, command))
                if failed(message, command):
                    line = error_line(output_text(message))
                    if line:
                        truth.errors[probe(line)] = line
    if last_next:
        truth.planted["next"] = last_next
    for core in list(truth.commands):
        if not matters(core, last_failed.get(core)):
            truth.looked.add(core)
            del truth.commands[core]
    for request in (genuine[:1] + genuine[-1:]) if genuine else []:
        truth.requests[probe(request)] = request
    for path in truth.modified:
        truth.read.pop(path, None)
    return truth


def _ops(truth: Truth, ops: Iterable[tuple[str, str]]) -> None:
    for op, path in ops:
        target = truth.read if op == "read" else truth.modified
        target[path] = path_keys(path)


def _command(truth: Truth, command: str, last_failed: dict[str, bool], bad: bool | None) -> None:
    parsed = parse_shell(command)
    _ops(truth, parsed.ops)
    if not parsed.file_only and parsed.core:
        truth.commands[parsed.core] = probe(parsed.core)
        if bad is not None:
            last_failed[parsed.core] = bad


def _outcome(command: str, last_failed: dict[str, bool], bad: bool) -> None:
    parsed = parse_shell(command)
    if not parsed.file_only and parsed.core:
        last_failed[parsed.core] = bad


def matters(core: str, last_failed: bool | None) -> bool:
    """Whether a summary must name a command: its last run failed, or it does more than look around."""
    return bool(last_failed) or not looks_only(core)


# --- scoring ----------------------------------------------------------------------------------------------------


def sections(summary: str) -> dict[str, list[str]]:
    """Bullets of each ``## `` section (``### `` subsections folded in), by lower-case title."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in summary.splitlines():
        if line.startswith("## "):
            current = out.setdefault(line[3:].strip().lower(), [])
            continue
        if current is None or line.startswith("### "):
            continue
        match = re.match(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(.*)$", line)
        if match:
            item = match.group(1).strip()
            if item.lower() not in NONE_ITEMS:
                current.append(item)
    return out


def section(summary: str, prefix: str) -> list[str]:
    for title, items in sections(summary).items():
        if title.startswith(prefix):
            return items
    return []


def traced(item: str, sources: str) -> bool:
    """Whether every piece of ``item`` (split at omission markers) occurs in ``sources`` (normalised)."""
    item = re.sub(r"^\((?:earlier)\)\s*", "", item)
    pieces = [norm(p) for p in _OMITTED.split(item)]
    pieces = [p for p in pieces if len(p) >= 8]
    return bool(pieces) and all(p in sources for p in pieces)


@dataclass
class Score:
    found: dict[str, int] = field(default_factory=dict)
    total: dict[str, int] = field(default_factory=dict)
    missed: dict[str, list[str]] = field(default_factory=dict)

    def add(self, kind: str, hit: bool, what: str) -> None:
        self.total[kind] = self.total.get(kind, 0) + 1
        self.found[kind] = self.found.get(kind, 0) + hit
        if not hit:
            self.missed.setdefault(kind, []).append(what)


def score(
    summary: str,
    truth: Truth,
    *,
    first_request: str | None,
    user_prose: str,
    agent_prose: str,
    calls: Sequence[str],
    tokens_in: int,
    written: str = "",
) -> Score:
    body = norm(strip_file_blocks(summary))
    s = Score()
    for key, text in truth.requests.items():
        s.add("requests", key in body, text[:80])
    for key, text in truth.constraints.items():
        s.add("constraints", key in body, text[:80])
    for path, keys in truth.modified.items():
        s.add("files modified", any(k in body for k in keys), path)
    for path, keys in truth.read.items():
        s.add("files read", any(k in body for k in keys), path)
    for core, key in truth.commands.items():
        s.add("commands", key in body, core[:80])
    for key, line in truth.errors.items():
        s.add("errors", key in body, line[:80])
    for kind, planted in truth.planted.items():
        for key, text in planted.items():
            if kind == "injected":
                leaked = any(key in norm(i) for i in section(summary, "goal") + section(summary, "constraints"))
                s.add("injected kept out", not leaked, text[:80])
            else:
                s.add(kind, key in body, text[:80])
    if first_request:
        goal = section(summary, "goal")
        head = norm(first_request)[:40]
        s.add("goal = first request", bool(goal) and norm(goal[0]).startswith(head[: max(8, len(head) - 1)]), head)
    for item in section(summary, "constraints"):
        s.add("precision constraints", traced(item, user_prose), item[:80])
    for item in section(summary, "key decisions"):
        s.add("precision decisions", traced(item, agent_prose), item[:80])
    for item in section(summary, "next steps"):
        s.add("precision next steps", _next_traced(item, agent_prose, user_prose, calls, written), item[:80])
    tokens_out = math.ceil(len(summary) / 4)
    s.add("not larger than input", tokens_out <= tokens_in, f"{tokens_out} > {tokens_in}")
    return s


_CHECK = re.compile(r"^Check the outcome of (.+?) \(no result was recorded\)\.?$")
_CONTINUE = re.compile(r"^Continue with the latest request: (.+)$")
_POINTER = "Continue with the latest request (see Goal)"
"""A pointer to the Goal's latest request (which is scored as a request)."""
_PLAN_ITEM = re.compile(r"^Next open plan item: (.+?)(?: — to do: (.+?))?(?: \(\+\d+ more\))?$")
"""The first open item of the plan document the agent wrote (``written``: what its write/edit calls wrote)."""


def _next_traced(item: str, agent: str, user: str, calls: Sequence[str], written: str = "") -> bool:
    if item == _POINTER:
        return True
    plan = _PLAN_ITEM.match(item)
    if plan:
        pieces = [plan.group(1), *(plan.group(2) or "").split("; ")]
        return all(traced(p, written) for p in pieces if p)
    match = _CHECK.match(item)
    if match:
        label = norm(match.group(1))
        return any(label and (label in norm(c) or norm(c) in label) for c in calls)
    match = _CONTINUE.match(item)
    if match:
        return traced(match.group(1), user)
    return traced(item, agent)
