"""What happened, task by task: the episodes of a conversation, read without a model.

Owns one pass over pi AgentMessages (:func:`episodes`) that cuts the conversation into tasks and tells, for
each, what was asked (the user's own words; the tracker item's title and description), what was done (files
created, changed and deleted with the definitions they gained; commits with hash and subject; pushes; checks
with their outcome line), each problem and what fixed it (or that it is still open, and how often it came
back), decisions with the reason given, the user's corrections, the agent's own report, the steps of its todo
list, and how the task ended (closed with what reason, committed, pushed, replaced, or still under way).

A task starts at a request in the user's own words, or at a tracker's claim (``bd update ID --status
in_progress``, ``gh issue develop``): a claim while a task already has one starts the next task, and a claim
in a task that has none yet names it. Branches, commits, pushes and closes belong to the task under way. The
pass also keeps the state a resuming agent needs first (:class:`Story`): what is changed and not committed,
what still fails, the tracker's ready list, the agent's last note and last step.

Work per message is constant and text mining is bounded (see :mod:`.mining`), so 100,000 messages take a
fraction of a second.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ctxd.compaction.reading.actions import Action, actions_of, segments
from ctxd.compaction.reading.agent_plans import TODO_TOOLS as PLAN_KINDS
from ctxd.compaction.reading.agent_plans import PlanTracker, is_plan_path
from ctxd.compaction.reading.artifacts import DEF_CHARS, MAX_NAMES, changed_names
from ctxd.compaction.reading.calls import Call
from ctxd.compaction.reading.chains import changed_step, edit_gist, finding_lines, fix_text, merge_step, said_about
from ctxd.compaction.reading.facts import Facts, scan
from ctxd.compaction.reading.fileops import tool_kind
from ctxd.compaction.reading.mining import (
    ACK_RE,
    CHECK_RE,
    CHOICE_RE,
    CORRECTION_RE,
    FIXED_ANY_RE,
    MINE_CHARS,
    TOKEN_RE,
    check_line,
    failure_line,
    findings,
    head,
    plain_sentences,
    prose,
    short,
)
from ctxd.compaction.reading.shell import command_matters, looks_only, parse_shell
from ctxd.compaction.summary.serialize import content_text
from ctxd.formats.lazy_re import lazy_compile

Message = Mapping[str, Any]

TODO_TOOLS = frozenset({"todowrite", "writetodos", "todo"})
PLAN_TOOLS = frozenset({"updateplan"})
PLAN_MODE_TOOLS = frozenset({"exitplanmode"})
SUBAGENT_TOOLS = frozenset({"task", "agent", "spawnagent", "subagent", "dispatchagent"})
OUTCOME_TAIL = 4_000
"""Characters kept of a check's last output: its outcome line is read from them when the summary shows it."""
MAX_WORK = 14
MAX_FINDINGS = 6
_FINDING_START_RE = lazy_compile(
    r"I see|[Tt]urns out|Found|Looks like|It seems|Apparently|Interesting|Aha|"
    r"The (?:issue|problem|cause|culprit|reason)|doesn't|does not|isn't|is not|only|Good|reports|complains|flags|warns"
)
"""A cheap test before :func:`~.mining.findings`."""
MAX_TRIED = 6
"""What the agent said about an open problem: its diagnosis and attempts, at most this many."""
REPORT_MIN = 160
"""An agent text with this many characters of prose can be a task's report."""
REPORT_CHARS = 900
MAX_PROBLEMS = 8
MAX_DECISIONS = 5
MAX_CHECKS = 6
MAX_ASKED = 6


@attrs.define
class Check:
    """The last run of a check (a build, test, lint or run) in a task."""

    command: str
    ok: bool
    tail: str = ""
    """The end of the last run's output, where its outcome line is (read when shown: :attr:`line`)."""
    runs: int = 1
    failed: int = 0

    @property
    def line(self) -> str | None:
        """The line that told the last run's outcome ("31 tests, 0 failures")."""
        return check_line(self.tail) if self.tail else None


@attrs.define
class Problem:
    """A failure and what came of it."""

    what: str
    """What failed: a command in backticks, a tool and its path."""
    line: str
    """The line of the output that says how."""
    key: str
    """What a later success must match to fix it (a command's core, a file)."""
    index: int
    fix: str | None = None
    """How it was fixed: the agent's diagnosis and what it changed or ran before the next success."""
    tried: list[str] = attrs.field(factory=list)
    """What the agent said about it while it was open, in order (its diagnosis, each attempt)."""
    claimed: str = ""
    """The agent's words when it said it fixed this without a successful run to show it."""
    fixed: bool = False
    again: int = 0
    """How often the same failure came back after this one was fixed (-1: this one is such a return)."""
    times: int = 1
    """How often it failed before anything fixed it."""
    also: list[str] = attrs.field(factory=list)
    """The run's other findings besides :attr:`line` (a linter's second finding), at most a few."""
    fixed_at: int = -1
    """The index of the message whose success fixed it (-1 while open)."""


@attrs.define
class Episode:
    """One task of the conversation (see the module docstring)."""

    start: int
    end: int = 0
    ref: str = ""
    """The tracker item (``bd``'s id, a GitHub issue ``#N``) the task works on, or ""."""
    also: list[str] = attrs.field(factory=list)
    """More items claimed with it before any work (the agent works on them together)."""
    title: str = ""
    branch: str = ""
    asked: list[str] = attrs.field(factory=list)
    about: str = ""
    """The tracker item's title as the tracker shows it."""
    files: dict[str, str] = attrs.field(factory=dict)
    """Paths changed, in order: ``"created"``, ``"modified"``, ``"deleted"``."""
    defs: dict[str, list[str]] = attrs.field(factory=dict)
    """Definitions a file gained (functions, modules, classes, constants with their value)."""
    commits: list[tuple[str, str]] = attrs.field(factory=list)
    pushed: str = ""
    checks: dict[str, Check] = attrs.field(factory=dict)
    problems: list[Problem] = attrs.field(factory=list)
    decisions: list[str] = attrs.field(factory=list)
    corrections: list[str] = attrs.field(factory=list)
    report: str = ""
    """The agent's own account of the task: its last long prose (see :attr:`concluded`)."""
    reported_at: int = -1
    """How many changes the task had made when :attr:`report` was written."""
    closed: str | None = None
    """The close reason (``""`` when closed without one); None while open."""
    also_closed: list[tuple[str, str]] = attrs.field(factory=list)
    steps: list[tuple[str, str]] = attrs.field(factory=list)
    """The agent's todo list or plan as last written in this task: ``(status, text)``."""
    delegated: list[str] = attrs.field(factory=list)
    findings: list[str] = attrs.field(factory=list)
    """What the agent found out on the way ("I see - `set_text_map_propagator/1` takes one propagator")."""
    work: list[str] = attrs.field(factory=list)
    """What the agent said it was changing, in order: the first sentence of each text beside a change."""
    calls: int = 0
    changes: int = 0
    first_id: str = ""
    last_id: str = ""
    last_note: str = ""
    """The agent's last words in the task (its first sentences)."""
    last_text: str = ""
    answered: bool = False
    """The agent's last message in the task was text after its last call (an answer, not work under way)."""
    continued: bool = False
    """The task an earlier summary left under way, going on in this range."""
    interrupted: bool = False
    """The agent's last message in the task was stopped (aborted) before it finished."""

    @property
    def concluded(self) -> str:
        """The agent's report when it came after the task's last change (a conclusion, not a step on the way)."""
        return self.report if self.reported_at == self.changes and self.changes else ""

    @property
    def state(self) -> str:
        """How the task ended, in words: "closed", "committed", "answered", "replaced", "under way"."""
        parts: list[str] = []
        if self.closed is not None:
            parts.append("closed")
        if self.commits:
            parts.append("committed " + ", ".join(h for h, _ in self.commits if h))
        if self.pushed:
            parts.append("pushed")
        return ", ".join(parts)


@attrs.define
class Story:
    """Every task of a range and the state it left (see the module docstring)."""

    episodes: list[Episode] = attrs.field(factory=list)
    said: list[tuple[int, str]] = attrs.field(factory=list)
    """Everything the user typed (their own words), ``(index, text)``, oldest first."""
    uncommitted: dict[str, str] = attrs.field(factory=dict)
    """Files changed since the last commit, with how (``"created"``, ``"modified"``, ``"deleted"``); a file
    created and deleted since is not a change. Every change when the session does not commit with git."""
    git: bool = False
    """The session ran git (so "not committed" means something)."""
    commits: int = 0
    ready: list[tuple[str, str]] = attrs.field(factory=list)
    """The tracker's ready list as last shown, items closed since left out."""
    closed_refs: dict[str, str] = attrs.field(factory=dict)
    trackers: dict[str, str] = attrs.field(factory=dict)
    """Tracker item titles by id, as shown."""
    epics: dict[str, str] = attrs.field(factory=dict)
    """Items claimed and then worked on through their sub-items (an epic): id -> title."""
    about: dict[str, str] = attrs.field(factory=dict)
    """Tracker item descriptions by id, as shown (their head)."""
    children: dict[str, list[tuple[str, str, str]]] = attrs.field(factory=dict)
    """The sub-items of each item shown with some (an epic's children), ``(id, state, title)``, as last shown
    (or as an earlier summary left them): ``state`` is the tracker's, before what this range did to them."""
    branch: str = ""
    """The git branch of the newest commit or branch made."""
    last_text: str = ""
    last_note: str = ""
    last_step: str = ""
    """The agent's last call and what it gave."""
    ended_in_answer: bool = False
    carried: list[Problem] = attrs.field(factory=list)
    """Failures an earlier summary left open (fixed here when a later success shows it)."""
    waiting: list[str] = attrs.field(factory=list)
    """Calls of the task under way that got no result (what the agent was doing when the range ended)."""
    outcomes: dict[str, str] = attrs.field(factory=dict)
    """The end of each check's last output (where "31 tests, 0 failures" is), by the command's core."""

    @property
    def current(self) -> Episode | None:
        return self.episodes[-1] if self.episodes else None

    def failing(self) -> list[Problem]:
        """Failures that nothing fixed, one per key (the newest), oldest first: the task under way's, and the
        checks, commits and model errors of earlier tasks (a one-off command an earlier task left failing is
        told in that task's block). The agent's word that it fixed one is not a fix (see :attr:`Problem.claimed`)."""
        out: dict[str, Problem] = {p.key: p for p in self.carried if not p.fixed}
        last = self.episodes[-1] if self.episodes else None
        for episode in self.episodes:
            for problem in episode.problems:
                if not problem.fixed and (episode is last or _lasting(problem.key)):
                    out.pop(problem.key, None)
                    out[problem.key] = problem
                else:
                    out.pop(problem.key, None)
        return list(out.values())


def _ordinal(ref: str) -> tuple[int, ...]:
    """A sub-item's place among its parent's (``x.10`` after ``x.9``)."""
    return tuple(int(part) for part in re.findall(r"(?<=\.)\d+", ref))


def _key(core: str) -> str:
    """What a later success must match to fix a failure of the simple command ``core``: ``git commit`` for any
    commit (its message differs every time), else the command's words."""
    words = core.split()
    if words[:1] == ["git"] and len(words) > 1:
        return "git " + words[1]
    return " ".join(words)


def _on_plan(call: Call) -> bool:
    """Whether a call may change the plan (see :func:`~.plans.is_plan_call`), judged from what the scan read."""
    if call.ops:
        return any(is_plan_path(path) for _, path in call.ops)
    return tool_kind(call.name) in PLAN_KINDS


_GO_ON_RE = lazy_compile(
    r"\b(?:again|continue|continuing|go on|go ahead|keep going|keep at it|proceed|retry|resume|carry on|once more|"
    r"finish(?: it| up)?|try harder|do it|fix (?:it|that|this)|commit|push|test (?:it|that|this)|check (?:it|that)|"
    r"verify|run (?:it|them|the tests?))\b",
    re.I,
)


def _follow_up(text: str) -> bool:
    """Whether a user's message only tells the agent to go on with the task under way ("continue", "try again",
    "commit it", "run the tests"): a few words that say so and name nothing new (no path, `code`, issue id);
    "now document it" is a new request."""
    words = text.rstrip(".!").split()
    if len(words) > 3 or "\n" in text or "?" in text or TOKEN_RE.search(text) is not None:
        return False
    if any(ch in word for word in words for ch in "./_:#"):  # a file, a module, an id: something new
        return False
    return _GO_ON_RE.search(text) is not None


def _lasting(key: str) -> bool:
    """Whether a failure of ``key`` stays the session's problem after its task: a check, git, the model."""
    return key == "model" or key.startswith("git ") or _is_check(key)


@functools.lru_cache(maxsize=4096)
def _is_check(core: str) -> bool:
    return CHECK_RE.search(core) is not None


@functools.lru_cache(maxsize=4096)
def _keys(command: str) -> list[str]:
    """The keys (see :func:`_key`) of the simple commands of ``command`` that matter, in order; a failure is
    the last one's (the one that ran last), a success fixes them all."""
    out: list[str] = []
    for part in segments(parse_shell(command).core or command):
        core = parse_shell(part).core or part
        if core and not looks_only(core):
            out.append(_key(core.split("<<", 1)[0]))
    return out or [_key(parse_shell(command).core or command)]


@functools.lru_cache(maxsize=4096)
def _family(key: str) -> tuple[str, frozenset[str]]:
    """A check's program with its subcommand, and its other words (``mix test`` with the files it ran)."""
    words = key.split()
    program = words[:2] if len(words) > 1 and not words[1].startswith("-") else words[:1]
    return " ".join(program), frozenset(w for w in words[len(program) :] if not w.startswith("-"))


def _covers(success: str, failure: str) -> bool:
    """Whether a success of ``success`` shows that ``failure`` is fixed: the same command, or the same program
    run on all of the project (no operands) or on some of the same targets."""
    if success == failure:
        return True
    (program, targets), (failed_program, failed_targets) = _family(success), _family(failure)
    if program != failed_program or not program:
        return False
    return not targets or bool(targets & failed_targets)


def _display(command: str, limit: int = 120) -> str:
    """A command as a summary shows it: its core (no ``cd DIR &&``, output filters, redirections), a heredoc
    left out, cut to ``limit``."""
    core = parse_shell(command).core or command
    first = core.split("<<", 1)[0].strip() if "<<" in core else core
    return head(first, limit)


def _todo_steps(name: str, arguments: Any) -> list[tuple[str, str]] | None:
    """``(status, text)`` of a todo list (Claude Code's ``TodoWrite``) or a plan (Codex's ``update_plan``)."""
    if not isinstance(arguments, Mapping):
        return None
    items = arguments.get("todos") if name in TODO_TOOLS else arguments.get("plan")
    if not isinstance(items, list):
        return None
    out: list[tuple[str, str]] = []
    for item in items:
        if not isinstance(item, Mapping):
            continue
        text = item.get("content") or item.get("step") or item.get("title") or item.get("text")
        status = item.get("status")
        if isinstance(text, str) and text.strip():
            out.append((str(status or "pending"), head(text, 160)))
    return out


@attrs.frozen
class Carried:
    """What an earlier summary left open: files changed and not committed (absolute paths where it could tell),
    failures nothing fixed (``(command, error line)``), and the task under way when it ended (``ref`` and
    ``title``, when it was not finished): the range's first work before any request goes on with that task."""

    uncommitted: list[str] = attrs.field(factory=list)
    failing: list[tuple[str, str]] = attrs.field(factory=list)
    task: tuple[str, str] | None = None
    """``(refs, title)``: the items (``A + B`` when claimed together) and title of the task left under way."""
    children: dict[str, list[tuple[str, str, str]]] = attrs.field(factory=dict)
    """The sub-items it listed (see :attr:`Story.children`)."""


class _Builder:
    """The episodes, built as :func:`~.facts.scan` passes over the messages (an :class:`~.facts.Observer`)."""

    def __init__(self, ids: Sequence[str] | None, carried: Carried | None, plans: PlanTracker | None = None) -> None:
        self.story = Story()
        self.plans = plans
        """The plan the session follows, tracked in the same pass (see :mod:`.plans`)."""
        self.ids = ids
        self.facts: Facts | None = None
        self.calls: dict[int, Episode] = {}
        """The task each call waiting for its result was made in (by the call's identity)."""
        self.pending: dict[str, list[Problem]] = {}
        self.fixed: dict[str, Problem] = {}
        """The newest fixed problem of each key (a failure after it is the same one coming back)."""
        self.since: dict[str, list[str]] = {}
        """What was done since each open problem's failure, by key: the steps that may have fixed it."""
        self.episode: Episode | None = None
        self.last: tuple[Call, Message] | None = None
        """The newest call with a result (the agent's last step)."""
        self.staged: list[str] = []
        """What ``git add`` named since the last commit (a commit takes those files only)."""
        self.changing: str | None = None
        """The file the assistant message being read changes (its text then says what the change is)."""
        self.now = 0
        """The index of the message being read (a success fixes its failures there)."""
        self.change_args: list[Any] = []
        """The arguments of that message's changes: what they write is read when its text says what it does (a
        note naming what they do not hold is not what they did)."""
        if carried is not None and carried.task is not None:
            refs, title = carried.task
            ref, *also = [r.strip() for r in refs.split(" + ")] if refs else [""]
            first = ids[0] if ids else ""
            self.episode = Episode(
                start=0, ref=ref, also=also, title=title, continued=True, first_id=first, last_id=first
            )
            self.story.episodes.append(self.episode)
        if carried is not None:
            self.story.children = {ref: list(items) for ref, items in carried.children.items()}
            self.story.uncommitted = dict.fromkeys(carried.uncommitted, "modified")
            self.story.git = bool(carried.uncommitted)
            for command, line in carried.failing:
                problem = Problem(f"`{command}`", line, _keys(command)[-1], -1)
                self.story.carried.append(problem)
                self.pending.setdefault(problem.key, []).append(problem)
                self.since.setdefault(problem.key, [])

    # -- tasks ---------------------------------------------------------------------------------------------

    def anchor(self, index: int) -> str:
        if self.ids is None or index >= len(self.ids):
            return ""
        return self.ids[index] or ""

    def open(self, index: int, *, ref: str = "", asked: str | None = None) -> Episode:
        if self.episode is not None:
            self.episode.end = index - 1
        episode = Episode(start=index, ref=ref, first_id=self.anchor(index), last_id=self.anchor(index))
        if ref:
            episode.title = self.story.trackers.get(ref, "")
        if asked:
            episode.asked.append(asked)
        self.story.episodes.append(episode)
        self.episode = episode
        return episode

    def current(self, index: int) -> Episode:
        return self.episode if self.episode is not None else self.open(index)

    def claim(self, index: int, ref: str) -> None:
        episode = self.episode
        if episode is not None and (episode.ref == ref or ref in episode.also):
            return
        untouched = episode is not None and episode.changes == 0 and not episode.commits
        if episode is not None and untouched and (not episode.ref or ref.startswith(episode.ref + ".")):
            # The task under way (a request, or its epic: nothing changed yet) is about this item.
            if episode.ref:
                self.story.epics.setdefault(episode.ref, self.story.trackers.get(episode.ref, ""))
            episode.ref = ref
            episode.title = self.story.trackers.get(ref, episode.title)
            return
        if episode is not None and untouched and episode.ref:
            episode.also.append(ref)  # claimed together before any work: worked on together
            return
        self.open(index, ref=ref)

    # -- what the scan saw (see :class:`~.facts.Observer`) ---------------------------------------------------

    def user(self, index: int, text: str) -> None:
        text = text.strip()
        if not text:
            return
        acknowledgement = bool(ACK_RE.match(text)) and len(text.split()) <= 2
        if not (text.startswith("/") and " " not in text):  # a lone slash command ("/model") tells nothing
            self.story.said.append((index, text))
        episode = self.episode
        if CORRECTION_RE.match(text) and episode is not None and episode.calls:
            episode.corrections.append(short(text, 240))  # said about the task under way: not a new one
            return
        if acknowledgement or len(text.split()) < 2:
            return
        if episode is not None and episode.calls and _follow_up(text):
            episode.asked.append(text)  # "check again", "try once more": about the task under way
            return
        if episode is None or episode.calls or episode.ref or episode.continued:
            self.open(index, asked=text)
        elif len(episode.asked) < MAX_ASKED:
            episode.asked.append(text)

    def call(self, index: int, call: Call) -> None:
        episode = self.current(index)
        self.calls[id(call)] = episode
        episode.calls += 1
        episode.answered = False
        if call.ops and any(op != "read" for op, _ in call.ops):
            self.changing = call.ops[0][1]
            self.change_args.append(call.arguments)
        kind = tool_kind(call.name)
        arguments = call.arguments
        if kind in TODO_TOOLS or kind in PLAN_TOOLS:
            steps = _todo_steps(kind, arguments)
            if steps:
                episode.steps = steps
        elif kind in PLAN_MODE_TOOLS and isinstance(arguments, Mapping):
            plan = arguments.get("plan")
            if isinstance(plan, str) and plan.strip():
                episode.steps = [("plan", head(line, 160)) for line in prose(plan).splitlines()[:8]]
        elif kind in SUBAGENT_TOOLS and isinstance(arguments, Mapping):
            what = arguments.get("description") or arguments.get("prompt")
            if isinstance(what, str) and what.strip() and len(episode.delegated) < 4:
                episode.delegated.append(head(what, 100))

    def text(self, index: int, text: str, called: bool) -> None:
        episode = self.episode if self.episode is not None else self.current(index)
        said = bool(text) and not text.isspace()
        if said:
            self.said_text(episode, text)
            if self.changing and len(episode.work) < MAX_WORK:
                written = "\n".join(_new_text(arguments) for arguments in self.change_args)
                step = _work_note(text, f"{self.changing}\n{written}")
                if step and step not in episode.work:
                    episode.work.append(step)
        self.changing = None
        self.change_args = []
        episode.answered = not called and said
        self.story.ended_in_answer = episode.answered
        ids = self.ids
        if ids is not None and index < len(ids) and ids[index]:
            episode.last_id = ids[index]
        episode.end = index

    def said_text(self, episode: Episode, text: str) -> None:
        episode.last_text = text
        self.story.last_text = text
        if self.pending and _may_say_fixed(text):
            # The agent says it fixed what failed, without running it again: told as its claim, not as proof; a
            # claim counts for a failure of this task it speaks of (not "all tests pass" for a refused commit).
            for problems in self.pending.values():
                for problem in problems:
                    if problem in episode.problems and not problem.claimed:
                        problem.claimed = _claim_about(problem, text) or ""
        if (
            self.pending
            and (
                _DIAGNOSIS_WORDS_RE.search(text, 0, MINE_CHARS) is not None
                or CHOICE_RE.search(text, 0, MINE_CHARS) is not None
            )
            and any(len(p[-1].tried) < MAX_TRIED for p in self.pending.values() if p)
        ):
            for said in said_about(text):
                for problems in self.pending.values():
                    for problem in problems[-1:]:
                        if said not in problem.tried and len(problem.tried) < MAX_TRIED:
                            problem.tried.append(said)
        if len(episode.findings) < MAX_FINDINGS and _FINDING_START_RE.search(text, 0, MINE_CHARS) is not None:
            for found in findings(text):
                if found not in episode.findings:
                    episode.findings.append(found)
        if len(text) >= REPORT_MIN:
            words = prose(text, 6_000)
            if len(words) >= REPORT_MIN and (
                episode.reported_at != episode.changes or len(words) > len(episode.report)
            ):
                episode.report = words  # the longest text since the task's last change
                episode.reported_at = episode.changes

    def result(self, index: int, call: Call, ok: bool, output: str | None, message: Message) -> None:
        episode = self.calls.pop(id(call), None)
        if episode is None:
            return
        self.now = index
        ids = self.ids
        if ids is not None and index < len(ids) and ids[index]:
            episode.last_id = ids[index]
        episode.end = max(episode.end, index)
        command, ops = call.command, call.ops
        self.last = (call, message)
        if ok and self.plans is not None and _on_plan(call):
            self.plans.take(index, call.name, call.arguments, message)
        if command:
            self.command(index, episode, command, output or "", ok)
        if not ok:
            if output is None:
                output = content_text(message.get("content"), images=False)
            if len(output) < 400 and _STOPPED_RE.match(output):
                return  # the user stopped it: not a failure a resuming agent must fix
            key = _keys(command)[-1] if command else (f"file:{ops[0][1]}" if ops else f"tool:{call.name}")
            what = f"`{_display(command, 100)}`" if command else short(call.label, 120)
            line = failure_line(output)
            self.fail(index, episode, key, what, line, finding_lines(output, line))
            return
        if ops:
            self.files(episode, ops, call.arguments, message)
        if not self.pending:
            return
        if command:
            for key in _keys(command):
                self.succeed(key, f"ran `{_display(command, 80)}`")
        elif ops:
            self.succeed(f"file:{ops[0][1]}", None)

    def bash(self, index: int, command: str, ok: bool, output: str, code: object) -> None:
        """A command the user ran themselves (pi's ``!cmd``)."""
        episode = self.current(index)
        self.now = index
        self.command(index, episode, command, output, ok)
        if ok:
            for key in _keys(command):
                self.succeed(key, f"ran `{_display(command, 80)}`")
        else:
            what = f"`{_display(command, 100)}` (run by the user)"
            self.fail(index, episode, _keys(command)[-1], what, failure_line(output) if output else f"exit code {code}")

    def model(self, index: int, error: str | None, stop: object) -> None:
        self.now = index
        if error is None and stop != "aborted":
            if self.episode is not None:
                self.episode.interrupted = False
            if "model" in self.pending and stop in ("stop", "toolUse", "length"):
                self.succeed("model", None)
            return
        episode = self.current(index)
        episode.interrupted = stop == "aborted"
        if episode.interrupted:
            episode.answered = self.story.ended_in_answer = False
        if error is not None:
            self.fail(index, episode, "model", "The model", error)
        elif stop in ("stop", "toolUse", "length") and "model" in self.pending:
            self.succeed("model", None)

    def finish(self, count: int) -> Story:
        story = self.story
        if self.facts is not None:
            _assign_decisions(story.episodes, self.facts)
        if story.episodes and story.episodes[0].continued and not story.episodes[0].calls:
            del story.episodes[0]  # the range did not go on with the earlier task
        if story.episodes:
            story.episodes[-1].end = max(story.episodes[-1].end, count - 1)
            if story.episodes[-1].last_text:
                story.episodes[-1].last_note = note(story.episodes[-1].last_text)
        if story.last_text:
            story.last_note = note(story.last_text)
        if self.facts is not None:
            story.waiting = [c.label for c in self.facts.open_calls[-5:]]
        if self.last is not None:
            call, message = self.last
            output = " ".join(content_text(message.get("content"), images=False)[:600].split())
            story.last_step = f"{short(call.label, 160)} -> {head(output, 240) or '(no output)'}"
        return story

    # -- what calls did ------------------------------------------------------------------------------------

    def files(self, episode: Episode, ops: Sequence[tuple[str, str]], arguments: Any, message: Message) -> None:
        story = self.story
        for op, path in ops:
            if op == "read":
                continue
            before = episode.files.get(path)
            if op == "deleted":
                kind = "deleted"
            elif op == "created" or (op == "written" and _says_created(message)):
                kind = "created" if before in (None, "created") else before
            else:
                kind = before if before in ("created",) else "modified"
            episode.files.pop(path, None)
            episode.files[path] = kind
            episode.changes += 1
            _changed(story.uncommitted, path, kind)
            if self.since:
                step = changed_step(path.rsplit("/", 1)[-1], edit_gist(arguments))
                for steps in self.since.values():
                    if len(steps) < 6 or step.startswith(tuple(s.split(" (", 1)[0] for s in steps)):
                        merge_step(steps, step)
            if kind != "deleted" and (type(arguments) is dict or isinstance(arguments, Mapping)):
                known = episode.defs.get(path)
                # What an edit takes out matters only for names known of the file already.
                change = changed_names(path, arguments, removals=known is not None)
                if known is not None and (change.whole or change.removed):
                    # A whole file written again, or names taken out: what it held before is not what it holds.
                    gone = set(change.removed)
                    known[:] = [] if change.whole else [d for d in known if d not in gone]
                if change.added:
                    known = episode.defs.setdefault(path, [])
                    known.extend(d for d in change.added if d not in known)
                    del known[MAX_NAMES:]

    def command(self, index: int, episode: Episode, command: str, output: str, ok: bool) -> None:
        story = self.story
        if _MAY_ACT_RE.search(command):
            story.git = story.git or any(part.lstrip().startswith("git ") for part in segments(command))
            for action in actions_of(command, output, ok):
                self.act(index, episode, action)
        parsed = parse_shell(command)
        if ok:
            for op, path in parsed.ops:
                if op not in ("read",):
                    kind = "deleted" if op == "deleted" else episode.files.get(path, "modified")
                    episode.files.pop(path, None)
                    episode.files[path] = kind
                    episode.changes += 1
                    _changed(story.uncommitted, path, kind)
        if parsed.file_only or not command_matters(parsed.core or command, ok):
            return
        if _is_check(parsed.core or command):
            key = _keys(command)[-1]
            check = episode.checks.pop(key, None)
            tail = output[-OUTCOME_TAIL:] if output else ""
            story.outcomes[parsed.core or command] = tail
            if check is None:
                check = Check(_display(command), ok, tail, 1, int(not ok))
            else:
                check.tail = tail
                check.runs += 1
                check.failed += not ok
                check.ok = ok
            episode.checks[key] = check
            if self.since and ok:
                for problems in self.since.values():
                    if len(problems) < 6:
                        problems.append(f"ran `{_display(command, 60)}`")

    def act(self, index: int, episode: Episode, action: Action) -> None:
        story = self.story
        kind = action.kind
        if kind in ("commit", "push", "stage", "branch", "discard"):
            story.git = True
        if kind == "show" and action.ref:
            if action.text:
                story.trackers[action.ref] = action.text
            if action.about:
                story.about[action.ref] = action.about
            if action.children:
                story.children[action.ref] = list(action.children)
            if episode.ref == action.ref and not episode.title:
                episode.title = action.text
        elif kind == "claim":
            self.claim(index, action.ref)
            if action.text:
                story.trackers[action.ref] = action.text
                self.episode.title = self.episode.title or action.text  # type: ignore[union-attr]
        elif kind == "close":
            story.closed_refs[action.ref] = action.text
            target = self.episode
            if target is not None and target.ref == action.ref:
                target.closed = action.text
            elif (target is not None and action.ref in target.also) or target is not None:
                target.also_closed.append((action.ref, action.text))
            story.ready = [item for item in story.ready if item[0] != action.ref]
        elif kind == "ready":
            story.ready = [item for item in action.items if item[0] not in story.closed_refs]
        elif kind == "list":
            for ref, state, title in action.children:
                story.trackers.setdefault(ref, title)
                parent = ref.rpartition(".")[0]
                children = story.children.get(parent)
                if children is not None:  # a sub-item made since its parent was shown, or its state now
                    known = next((n for n, child in enumerate(children) if child[0] == ref), None)
                    if known is None:
                        children.append((ref, state, title))
                        children.sort(key=lambda child: _ordinal(child[0]))
                    elif state:
                        children[known] = (ref, state, title)
        elif kind == "stage":
            self.staged.extend(action.text.split())
        elif kind == "commit" and action.ref:
            episode.commits.append((action.ref, action.text))
            story.commits += 1
            if action.branch:
                story.branch = action.branch
            _commit(story.uncommitted, self.staged)
            self.staged = []
        elif kind == "discard":
            _discard(story.uncommitted, action.text.split())
        elif kind == "push":
            # A push takes every commit made so far, an earlier task's too.
            for earlier in story.episodes:
                if earlier.commits and not earlier.pushed:
                    earlier.pushed = action.text or "pushed"
            episode.pushed = action.text or "pushed"
        elif kind == "branch":
            episode.branch = action.ref
            if not episode.ref and episode.changes == 0:
                episode.title = episode.title or f"branch {action.ref}"

    # -- problems ------------------------------------------------------------------------------------------

    def fail(self, index: int, episode: Episode, key: str, what: str, line: str, also: Sequence[str] = ()) -> None:
        line = head(line, 240)
        same = next((p for p in reversed(episode.problems) if p.key == key and p.line == line and not p.fixed), None)
        if same is not None:
            same.times += 1  # the same failure again before anything fixed it
            return
        problem = Problem(what, line, key, index, also=list(also))
        earlier = self.fixed.pop(key, None)
        if earlier is not None and _same_failure(earlier.line, problem.line):
            earlier.again += 1
            problem.again = -1  # the same failure as one fixed before: it came back
        episode.problems.append(problem)
        self.pending.setdefault(key, []).append(problem)
        self.since.setdefault(key, [])
        del episode.problems[: -MAX_PROBLEMS * 2]

    def succeed(self, key: str, how: str | None) -> None:
        if not self.pending:
            return
        fixed = [key] if key in self.pending else []
        if len(self.pending) > len(fixed):
            fixed = [k for k in self.pending if _covers(key, k)]
        for failed_key in fixed:
            problems = self.pending.pop(failed_key)
            done = self.since.pop(failed_key, [])
            for problem in problems:
                problem.fixed = True
                problem.fixed_at = self.now
                problem.fix = fix_text(problem.tried, done, how)
            self.fixed[failed_key] = problems[-1]


_VARYING_RE = lazy_compile(r"[0-9]+|\S*/\S*")


@functools.lru_cache(maxsize=1024)
def _failure_words(line: str) -> tuple[str, ...]:
    return tuple(_VARYING_RE.sub("", line.lower()).split())


def _same_failure(a: str, b: str) -> bool:
    """Whether two error lines tell the same failure (numbers and paths aside)."""
    return a == b or _failure_words(a) == _failure_words(b)


_MAY_ACT_RE = lazy_compile(r"\b(?:git|bd|beads|gh)\b")
_STOPPED_RE = lazy_compile(
    r"(?i)\A\s*(?:command aborted|aborted(?: by (?:the )?user)?|\[?request interrupted by user[^\n]*"
    r"|the user doesn't want to proceed with this tool use[^\n]*)\.?\s*\Z"
)
"""What a tool's result says when the user stopped the call (pi's Esc, Claude Code's interrupt or rejection,
Codex's abort): the call was stopped, nothing failed."""
"""Commands that may do something :func:`~.actions.actions_of` tells (a cheap test before it)."""


def _assign_decisions(told: list[Episode], facts: Facts) -> None:
    """The scan's decisions (see :func:`~.facts.scan`), each given to the task it was said in: one said while a
    failure was open names that failure (what forced it), one its failure's chain tells already is left out."""
    if not told or not facts.decisions:
        return
    starts = [e.start for e in told]
    for index, sentence in zip(facts.decided_at, facts.decisions, strict=False):
        at = max(0, bisect_right(starts, index) - 1)
        trigger = _open_at(told[at].problems, index)
        if trigger is not None:
            if any(sentence in said or said in sentence for said in trigger.tried):
                continue  # told in the failure's chain
            sentence += f" (when {head(trigger.what, 70)} had failed: {short(trigger.line, 100)})"
        known = told[at].decisions
        if not any(sentence in d for d in known):
            known[:] = [d for d in known if d not in sentence]  # a longer telling replaces a shorter one
            known.append(sentence)


def _open_at(problems: Sequence[Problem], index: int) -> Problem | None:
    """The newest of ``problems`` that was open when message ``index`` was said."""
    for problem in reversed(problems):
        if problem.index < index and (not problem.fixed or problem.fixed_at >= index):
            return problem
    return None


_TRIVIAL_RE = lazy_compile(
    r"^(?:now |ok(?:ay)?,? |good\.? |great\.? |perfect\.? )?(?:let me |i'll )?(?:fix|do|try) (?:it|that|this)\b", re.I
)


_ACTION_RE = lazy_compile(
    r"\b(?:add|adds|adding|update|updating|create|creating|remove|removing|rename|replace|move|extract|wire|"
    r"implement|write|rewrite|change|refactor|delete|merge|split|introduce|register|hook up|switch|convert|fix|make)\b",
    re.I,
)


_QUOTED_RE = lazy_compile(r"`([^`\n]{2,80})`")


def _new_text(arguments: Any) -> str:
    """What a write or edit puts in (the new text of each edit, a file's content), its head."""
    if not isinstance(arguments, Mapping):
        return ""
    new = arguments.get("content") or arguments.get("new_string") or arguments.get("newText") or ""
    edits = arguments.get("edits")
    if isinstance(edits, list):
        new = "\n".join(str(e.get("new_string") or e.get("newText") or "") for e in edits if isinstance(e, Mapping))
    return new[:DEF_CHARS] if isinstance(new, str) else ""


def _work_note(text: str, written: str) -> str | None:
    """What the agent says it is changing, in one sentence ("Now update PaneListLive to subscribe to
    `session_activity` and show status badges."): its first sentence that says what it does and names nothing
    (`in backticks`) the change does not hold (an intention it did not carry out is not a change); None for "Let
    me fix that." and the like."""
    for sentence in plain_sentences(text[:1_500])[:3]:
        if len(sentence) < 30 or _TRIVIAL_RE.match(sentence) or not _ACTION_RE.search(sentence):
            continue
        names = [m.group(1).strip("<>/:()") for m in _QUOTED_RE.finditer(sentence)]
        if all(name in written for name in names if name) and (any(names) or _names_what(sentence, written)):
            return short(sentence, 220)
    return None


_IDENT_RE = lazy_compile(r"\b[A-Z][a-z0-9]+[A-Z]\w*|\b[a-z]\w*_\w+|\b[\w-]+\.[a-z]{1,5}\b")
_GENERIC = frozenset(
    re.findall(
        r"[a-z]+",
        """
        about again change changes check class code correct correctly error errors everything file files
        first fixed function functions handle issue logic method methods module modules other place places
        properly really right should something still thing things those these update updates which while
        would
        """,
    )
)


def _names_what(sentence: str, written: str) -> bool:
    """Whether a sentence names what it changes: an identifier, a file, or a word of the change itself ("Let me
    update the code to do this properly." names nothing)."""
    if _IDENT_RE.search(sentence):
        return True
    low = written.lower()
    return any(
        len(word) >= 5 and word not in _GENERIC and _ACTION_RE.fullmatch(word) is None and word in low
        for word in re.findall(r"[a-z]+", sentence.lower())
    )


def note(text: str) -> str:
    """The agent's words in brief: the first two sentences of a text."""
    first = plain_sentences(text[:1_500])
    return short(" ".join(first[:2]) if first else head(text, 240), 300)


_DIAGNOSIS_WORDS_RE = lazy_compile(
    r"issue|problem|cause|because|due to|means|turns out|reason|need|should|instead|want|expect|error|fail|bug|fix",
    re.I,
)


def _may_say_fixed(text: str) -> bool:
    """Whether the agent may say it fixed something ("I fixed it", "the build works now")."""
    head_text = text[:MINE_CHARS]
    return any(w in head_text for w in ("ix", "esolv", "ork", "ass")) and FIXED_ANY_RE.search(head_text) is not None


_WORD_RE = lazy_compile(r"[a-z][a-z0-9]{3,}")
_PLAIN = frozenset(
    (
        "this",
        "that",
        "with",
        "from",
        "have",
        "been",
        "will",
        "should",
        "could",
        "would",
        "there",
        "their",
        "them",
        "then",
        "than",
        "when",
        "what",
        "which",
        "while",
        "error",
        "errors",
        "failed",
        "fails",
        "failure",
        "fixed",
        "fixes",
        "works",
        "passes",
        "passing",
        "tests",
        "test",
        "now",
        "still",
        "again",
        "file",
        "files",
        "code",
        "done",
    )
)


def _stems(text: str) -> set[str]:
    return {w[:5] for w in _WORD_RE.findall(text.lower()) if w not in _PLAIN}


def _claim_about(problem: Problem, text: str) -> str | None:
    """The agent's sentence saying it fixed ``problem``: one with a word of "fixed" and a word of the failure
    (what ran, or its error line) in it; None when no sentence speaks of it."""
    subject = _stems(f"{problem.what} {problem.line}")
    for sentence in plain_sentences(text[:MINE_CHARS]):
        if FIXED_ANY_RE.search(sentence) and subject & _stems(sentence):
            return short(sentence, 240)
    return None


def _says_created(message: Message) -> bool:
    """Whether a write tool's result says the file is new ("File created successfully at ...")."""
    text = content_text(message.get("content"), images=False)[:300].lower()
    return "created" in text or "new file" in text


def _under(path: str, spec: str) -> bool:
    """Whether ``path`` is ``spec`` or lies in it (``spec`` may be relative to a folder ``path`` names in full)."""
    return path == spec or path.endswith("/" + spec) or ("/" + spec + "/") in path or path.startswith(spec + "/")


def _changed(uncommitted: dict[str, str], path: str, kind: str) -> None:
    """Note a change of ``path`` since the last commit (most recent last); a folder deleted takes what was
    noted in it."""
    before = uncommitted.pop(path, None)
    if kind == "deleted":
        folder = path.rstrip("/")
        same = [p for p in uncommitted if not folder.startswith("/") and p.endswith("/" + folder)]
        if any(uncommitted.pop(p) == "created" for p in same):
            before = "created"  # the same path, named in full when it was made
        inside = [p for p in uncommitted if p.startswith(folder + "/") or ("/" + folder + "/") in p]
        made = [uncommitted.pop(p) == "created" for p in inside]
        if before == "created" or (before is None and made and all(made)):
            return  # created and deleted since the last commit: no change at all
    uncommitted[path] = "created" if before == "created" else kind


def _discard(uncommitted: dict[str, str], specs: list[str]) -> None:
    """Take out what a discard (``git checkout -- .``, ``git reset --hard`` ...) put back as committed: every
    tracked change under ``specs`` (all of them when empty). A file created since stays: git does not track it."""
    for path, kind in list(uncommitted.items()):
        if kind != "created" and (not specs or any(_under(path, s.rstrip("/")) for s in specs)):
            del uncommitted[path]


_ALL = frozenset({".", "-A", "--all", "-u", "--update", ":/", "*"})


def _commit(uncommitted: dict[str, str], staged: list[str]) -> None:
    """Take what a commit took out of ``uncommitted``: the files ``git add`` named (a folder takes what is in
    it; ``.`` or ``-A`` takes everything), or everything when nothing was staged by name."""
    specs = [s.rstrip("/") for s in staged if not s.startswith("-") or s in _ALL]
    if not specs or any(s in _ALL for s in specs):
        uncommitted.clear()
        return
    for path in list(uncommitted):
        if any(_under(path, s) for s in specs):
            del uncommitted[path]


def scan_story(
    messages: Sequence[Message],
    ids: Sequence[str] | None = None,
    carried: Carried | None = None,
    plans: PlanTracker | None = None,
) -> tuple[Facts, Story]:
    """The facts of ``messages`` (:func:`~.facts.scan`) and their tasks, in one pass: ``ids`` are the messages'
    entry ids (parallel to ``messages``) for the anchors each task names; ``carried`` is what an earlier summary
    left open (a later success fixes a carried failure; a commit takes carried files; a range that begins
    without a request goes on with its task under way); ``plans`` takes the plan's calls in the same pass."""
    builder = _Builder(ids, carried, plans)
    facts = scan(messages, builder)
    builder.facts = facts
    return facts, builder.finish(len(messages))


def episodes(messages: Sequence[Message], ids: Sequence[str] | None = None, carried: Carried | None = None) -> Story:
    """The tasks of ``messages`` (see :func:`scan_story`)."""
    return scan_story(messages, ids, carried)[1]
