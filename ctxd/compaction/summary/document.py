"""The offline summary as a document: its sections, read back from text, merged with an earlier one, rendered.

Owns the layout a resuming agent reads, in this order: ``## State now`` (the task under way, what is not
committed, what still fails, the last step, what comes next), ``## Goal``, ``## Sub-items of the work`` (an
epic's items as its tracker lists them, each with its state now), ``## What the user said``,
``## Constraints & Preferences``, ``## Plan (open items)``, ``## Tasks`` (one ``### T<n> · ...`` block per
task, oldest first), ``## How to build, test and run``, ``## Files``, sections it does not know (kept verbatim),
and ``## Recall`` (how to read what the summary leaves out).

Parsing is lenient: any ``## `` heading starts a section; the headings of ctxd's earlier layout (Progress, Key
Decisions, Next Steps, Critical Context, Turn Context) and a model's own headings are kept as sections of their
own, so nothing an earlier summary said is dropped unread. :func:`merge` folds an earlier summary into a new
one: lasting facts add up (the goal, what the user said, constraints, tasks, commands, files), the state is the
new one's, with what the earlier one left open carried until the new range shows it done.
"""

from __future__ import annotations

import re

import attrs

from ctxd.compaction.reading.mining import CHECK_RE
from ctxd.compaction.summary.serialize import OMITTED_RE

NONE_ITEMS = frozenset({"none", "(none)", "(none recorded)", "(nothing recorded)", "n/a", "-", "nothing yet"})
STATE_TITLE = "State now"
GOAL_TITLE = "Goal"
SAID_TITLE = "What the user said (oldest first)"
CONSTRAINTS_TITLE = "Constraints & Preferences"
PLAN_TITLE = "Plan (open items)"
ITEMS_TITLE = "Sub-items of the work (tracker's list; state now)"
TASKS_TITLE = "Tasks (oldest first)"
COMMANDS_TITLE = "How to build, test and run"
FILES_TITLE = "Files"
RECALL_TITLE = "Recall"
EARLIER_TITLE = "Earlier Summary"
LATER = "Later request: "
EXPLORED_LABEL = "Exploration not listed:"
UNCOMMITTED_LABEL = "Changed and not committed: "
FAILING_LABEL = "Still failing: "
_ITEM_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(.*)$")
_TASK_RE = re.compile(r"^T(\d+) · ")
_COUNT_RE = re.compile(r"^`(?P<cmd>.+?)`(?P<cwd> in \S+)?(?: x(?P<runs>\d+))?(?P<rest>.*)$")


@attrs.define
class Task:
    """One task's block: its heading (after ``### ``) and its bullet lines (without ``- ``)."""

    heading: str
    lines: list[str] = attrs.field(factory=list)

    @property
    def number(self) -> int | None:
        found = _TASK_RE.match(self.heading)
        return int(found.group(1)) if found else None

    def render(self) -> list[str]:
        return [f"### {self.heading}", *(f"- {line}" for line in self.lines)]


@attrs.define
class SummaryDoc:
    state: list[str] = attrs.field(factory=list)
    goal: list[str] = attrs.field(factory=list)
    items: list[str] = attrs.field(factory=list)
    """The sub-items of the work with their state (``<id> [<state>] <title> (of <parent>)``)."""
    said: list[str] = attrs.field(factory=list)
    constraints: list[str] = attrs.field(factory=list)
    plan: list[str] = attrs.field(factory=list)
    tasks: list[Task] = attrs.field(factory=list)
    commands: list[str] = attrs.field(factory=list)
    files: list[str] = attrs.field(factory=list)
    extra: list[tuple[str, str]] = attrs.field(factory=list)
    """Other sections, ``(title, body)``, kept verbatim (an earlier layout's, a model's, a must-keep patch)."""
    recall: list[str] = attrs.field(factory=list)

    @property
    def task_count(self) -> int:
        numbers = [t.number for t in self.tasks if t.number is not None]
        return max(numbers) if numbers else len(self.tasks)


def _items(body: str) -> list[str]:
    items: list[str] = []
    for line in body.splitlines():
        if not line.strip():
            continue
        match = _ITEM_RE.match(line)
        if match:
            items.append(match.group(1).strip())
        elif items and line[:1].isspace():
            items[-1] = f"{items[-1]} {line.strip()}"
        else:
            items.append(line.strip())
    return [i for i in items if i and i.lower() not in NONE_ITEMS]


def _split(text: str, marker: str) -> list[tuple[str, str]]:
    """``(title, body)`` for each ``marker`` heading; text before the first heading has title ""."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    for line in text.splitlines():
        if line.startswith(marker) and not line.startswith(marker + "#"):
            sections.append((line[len(marker) :].strip(), []))
        else:
            sections[-1][1].append(line)
    return [(title, "\n".join(lines).strip()) for title, lines in sections]


_KEYS = (
    ("state", "state now"),
    ("goal", "goal"),
    ("items", "sub-items of the work"),
    ("said", "what the user said"),
    ("constraints", "constraints"),
    ("plan", "plan (open items)"),
    ("tasks", "tasks"),
    ("commands", "how to build"),
    ("files", "files"),
    ("recall", "recall"),
)


def _key(title: str) -> str:
    lowered = title.strip().lower()
    for key, prefix in _KEYS:
        if lowered.startswith(prefix):
            return key
    return ""


_HISTORY_RE = re.compile(r"^## Abridged History.*$", re.M)
_EXCHANGE_END = "</exchange>"
_OLDER = "(older exchanges not shown)"


def _cut_history(text: str) -> str:
    """``text`` without the abridged history an older layout of ctxd's wrote (an agent's answer quoted in it may
    hold ``## `` headings, which are not the summary's sections): the session keeps every exchange."""
    match = _HISTORY_RE.search(text)
    end = text.rfind(_EXCHANGE_END)
    if match is None or end < match.start():
        return text
    rest = text[end + len(_EXCHANGE_END) :].lstrip("\n")
    return f"{text[: match.start()]}\n{rest.removeprefix(_OLDER)}"


_OLD_LAYOUT = {
    "progress": "Progress",
    "key decisions": "Decision",
    "decisions": "Decision",
    "next steps": "Next step then",
    "turn context": "Turn",
}
"""Sections of ctxd's earlier layout (and of a model's summary in that shape) read into an earlier task's block."""


def _upgrade(title: str, body: str, doc: SummaryDoc) -> bool:
    """Read a section of the earlier layout into the block of an "Earlier work" task; False when ``title`` is
    not one of them. Done items and decisions stay; what was under way, blocked or next is marked as then."""
    lowered = title.strip().lower()
    label = next((v for k, v in _OLD_LAYOUT.items() if lowered.startswith(k)), None)
    if label is None:
        return False
    lines: list[str] = []
    if label == "Progress":
        for sub, sub_body in _split(body, "### "):
            kind = sub.lower()
            prefix = (
                "Was under way"
                if kind.startswith("in progress")
                else "Was blocked"
                if kind.startswith("blocked")
                else "Done"
            )
            lines.extend(f"{prefix}: {item}" for item in _items(sub_body))
    else:
        lines.extend(f"{label}: {item}" for item in _items(body))
    if not lines:
        return True
    if not doc.tasks or doc.tasks[-1].heading != EARLIER_WORK:
        doc.tasks.append(Task(EARLIER_WORK))
    doc.tasks[-1].lines.extend(lines)
    return True


EARLIER_WORK = "T0 · Earlier work (from an earlier summary) [as it stood then]"


def parse_summary(text: str) -> SummaryDoc | None:
    """The sections of ``text``; None when it has no ``## `` heading ctxd knows (an unstructured summary)."""
    doc = SummaryDoc()
    known = False
    text = _cut_history(text)
    for title, body in _split(text, "## "):
        if not title:
            continue
        key = _key(title)
        if key == "tasks":
            known = True
            for heading, block in _split(body, "### "):
                if heading:
                    doc.tasks.append(Task(heading, _items(block)))
        elif key:
            known = True
            getattr(doc, key).extend(_items(body))
        elif _upgrade(title, body, doc):
            known = True
        elif title.strip().lower().startswith("critical context"):
            known = True
            if body:
                doc.extra.append(("Earlier context", body))
        elif body:
            doc.extra.append((title, body))
    return doc if known else None


def _norm(item: str) -> str:
    return " ".join(item.lower().split())


def same_text(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are one text, each possibly cut in the middle to a different length (an earlier
    summary's goal and the same request read again from the range)."""
    pa = [_norm(p) for p in OMITTED_RE.split(a)]
    pb = [_norm(p) for p in OMITTED_RE.split(b)]
    if len(pa) == 1 and len(pb) == 1:
        return pa[0] == pb[0]
    head = min(len(pa[0]), len(pb[0]))
    tail = min(len(pa[-1]), len(pb[-1]))
    return head >= 40 and pa[0][:head] == pb[0][:head] and pa[-1][len(pa[-1]) - tail :] == pb[-1][len(pb[-1]) - tail :]


def dedupe(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = _norm(item)
        if key and key not in seen:
            seen.add(key)
            out.append(item)
    return out


def cap(items: list[str], limit: int, *, head: int = 0) -> list[str]:
    """At most ``limit`` items: the first ``head`` and the most recent rest."""
    if len(items) <= limit:
        return items
    return items[:head] + items[len(items) - (limit - head) :]


def _command_key(item: str) -> str:
    found = _COUNT_RE.match(item)
    return (found.group("cmd") + (found.group("cwd") or "")) if found else item


def _runs(item: str) -> int:
    found = _COUNT_RE.match(item)
    return int(found.group("runs") or 1) if found else 1


def merge_commands(old: list[str], new: list[str]) -> list[str]:
    """The commands of both, each once: a command in both gets the sum of its runs and the new outcome."""
    earlier = {_command_key(i): i for i in old if i.startswith("`")}
    out: list[str] = []
    for item in new:
        key = _command_key(item)
        before = earlier.pop(key, None)
        if before is not None and item.startswith("`"):
            found = _COUNT_RE.match(item)
            if found is not None:
                runs = _runs(before) + _runs(item)
                item = f"`{found.group('cmd')}`{found.group('cwd') or ''} x{runs}{found.group('rest')}"
        out.append(item)
    kept = [i for i in old if i.startswith("`") and _command_key(i) in earlier]
    others = [i for i in new if not i.startswith("`")]
    merged = kept + [i for i in out if i.startswith("`")]
    return sorted(merged, key=_group) + others


def _group(item: str) -> int:
    """Where a command goes in the list: builds, tests and linters, then git, the trackers, the rest."""
    command = _command_key(item)
    program = command.split(None, 1)[0] if command.strip() else ""
    if CHECK_RE.search(command):
        return 0
    return 1 if program == "git" else 2 if program in ("bd", "beads", "gh", "glab") else 3


def _files(old: list[str], new: list[str]) -> list[str]:
    """File lists of both: each label's paths, the new ones first, each once."""
    out: dict[str, list[str]] = {}
    order: list[str] = []
    for item in [*new, *old]:
        label, sep, rest = item.partition(": ")
        if not sep or label.startswith("Project root"):
            if item not in order:
                order.append(item)
            continue
        if label not in out:
            out[label] = []
            order.append(label)
        for path in re.sub(r" \(\+\d+ more\)$", "", rest).split(", "):
            if path and path not in out[label]:
                out[label].append(path)
    return [f"{key}: {', '.join(out[key])}" if key in out else key for key in order]


def merge(old: SummaryDoc, new: SummaryDoc, *, continued: bool = False) -> SummaryDoc:
    """``new`` with ``old`` folded in. With ``continued``, ``new``'s first task goes on with ``old``'s last (the
    range began in the middle of it): its lines are added to that block, under the new heading."""
    goal = old.goal[:1] or new.goal[:1]
    later: list[str] = []
    for g in [*old.goal[1:], *new.goal]:
        if not (goal and same_text(g.removeprefix(LATER), goal[0])) and not any(same_text(g, k) for k in later):
            later.append(g)
    tasks = list(old.tasks)
    fresh = list(new.tasks)
    if continued and tasks and fresh:
        last, first = tasks[-1], fresh.pop(0)
        superseded = ("Agent's last note", "Agent's report", "Details: ")
        lines = [line for line in last.lines if not line.startswith(superseded)]
        lines += [line for line in first.lines if not line.startswith("Details: ") and line not in lines]
        files = [n for n, line in enumerate(lines) if line.startswith("Files: ")]
        if len(files) > 1:  # one line for the files of both parts
            joined = "Files: " + "; ".join(lines[n].removeprefix("Files: ") for n in files)
            lines = [joined if n == files[0] else line for n, line in enumerate(lines) if n not in files[1:]]
        lines.extend(_details(last.lines, first.lines))
        tasks[-1] = Task(first.heading, lines)
    tasks.extend(fresh)
    return SummaryDoc(
        state=new.state,  # what an earlier range left open was carried into the new one by its episodes
        goal=goal + cap(later, 3),
        items=new.items or old.items,  # the new range began from the old list (see offline._carried)
        said=dedupe(old.said + new.said),
        constraints=cap(dedupe(old.constraints + new.constraints), 150, head=30),
        plan=new.plan or old.plan,
        tasks=tasks,
        commands=merge_commands(old.commands, new.commands),
        files=_files(old.files, new.files),
        extra=_merge_extra(old.extra, new.extra),
        recall=new.recall or old.recall,
    )


_DETAILS_RE = re.compile(r"^Details: entr(?:y|ies) (\S+?)(?:\.\.(\S+))?$")


def _details(old: list[str], new: list[str]) -> list[str]:
    """One "Details" line for a task told in two ranges: from the first entry of the earlier to the last of
    the later."""
    first = next((m for m in map(_DETAILS_RE.match, old) if m), None)
    last = next((m for m in map(_DETAILS_RE.match, new) if m), None)
    if first is None or last is None:
        return [line for line in (*old, *new) if line.startswith("Details: ")][-1:]
    return [f"Details: entries {first.group(1)}..{last.group(2) or last.group(1)}"]


def _merge_extra(old: list[tuple[str, str]], new: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Other sections: a new one replaces an old one of its title; old ones of one title (a must-keep patch of
    each earlier compaction) become one, their lines deduplicated."""
    titles = {t for t, _ in new}
    bodies: dict[str, list[str]] = {}
    for title, body in old:
        if title not in titles:
            lines = bodies.setdefault(title, [])
            lines.extend(line for line in body.splitlines() if line not in lines or not line.strip())
    return [(t, "\n".join(lines).strip()) for t, lines in bodies.items()] + new


def render(doc: SummaryDoc) -> str:
    """Markdown for ``doc``: its sections in the layout's order, empty ones left out."""
    out: list[str] = []

    def add(title: str, items: list[str]) -> None:
        if items:
            out.extend([f"## {title}", *(f"- {item}" for item in items), ""])

    add(STATE_TITLE, doc.state)
    add(GOAL_TITLE, doc.goal)
    add(ITEMS_TITLE, doc.items)
    add(SAID_TITLE, doc.said)
    add(CONSTRAINTS_TITLE, doc.constraints)
    add(PLAN_TITLE, doc.plan)
    if doc.tasks:
        out.append(f"## {TASKS_TITLE}")
        for task in doc.tasks:
            out.extend(task.render())
        out.append("")
    add(COMMANDS_TITLE, doc.commands)
    add(FILES_TITLE, doc.files)
    for title, body in doc.extra:
        out.extend([f"## {title}", body, ""])
    add(RECALL_TITLE, doc.recall)
    return "\n".join(out).rstrip() + "\n"


def is_empty(doc: SummaryDoc) -> bool:
    """Whether ``doc`` says nothing but how to recall (a range with nothing in it)."""
    return not (doc.state or doc.goal or doc.said or doc.constraints or doc.plan or doc.tasks or doc.commands)
