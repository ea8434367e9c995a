"""The structured summary as data: parsing a summary's sections, merging an earlier summary into a new one,
and rendering it back to markdown.

Owns the section layout shared with the model summariser (Goal; Constraints & Preferences; Progress with
Done / In Progress / Blocked; Key Decisions; Next Steps; Critical Context) plus the offline summariser's
Plan (open items) and Turn Context parts. A plan's state is the newest known: a summary whose range did not
touch the plan carries the earlier one. Parsing is lenient: any ``## `` heading starts a section, bullets and
checkboxes are stripped, unknown sections are carried along verbatim. An Abridged History (the offline
summariser wrote one before version 18 of its layout) is read, and dropped when merged: the session keeps
every exchange.
"""

from __future__ import annotations

import functools
import re

import attrs

HISTORY_TITLE = "Abridged History (newest first)"
TURN_TITLE = "Turn Context (split turn)"
PLAN_TITLE = "Plan (open items)"
NONE_ITEMS = frozenset({"none", "(none)", "(none recorded)", "(nothing recorded)", "n/a", "-", "nothing yet"})
EARLIER = "(earlier) "
LATEST = "Latest request: "
LATER = "Later request: "
STATS = "Newly summarised: "
ANSWERED = "(answered; awaiting the user's next message)"
UNDER_WAY = "(under way; see Turn Context)"
"""The state of a request the split turn works on (an earlier summary's Turn Context is gone: not carried)."""
LATEST_POINTER = "The latest request (see Goal)"
"""In Progress names the latest request by this pointer: Goal states it."""
CONTINUE_LATEST = "Continue with the latest request (see Goal)"
COMMANDS_LABEL = "Commands that matter (runs, last outcome):"
OLD_COMMANDS_LABEL = "Commands (runs, outcome):"
"""The label of every command's list in earlier summaries; a new list of the commands that matter replaces it."""
EXPLORED_LABEL = "Exploration not listed:"
ANSWER_LABEL = "Agent's last answer:"
DERIVED_LABELS = (
    "Files modified:",
    "Files read:",
    OLD_COMMANDS_LABEL,
    COMMANDS_LABEL,
    EXPLORED_LABEL,
    ANSWER_LABEL,
    "Other requests (oldest first):",
    "User reported:",
    "Recently changed files:",
    "Recently read files:",
    "Recent commands:",
    "Error seen:",
    "Requested focus:",
    "On that focus:",
)
"""Critical-context items the offline summariser derives afresh; an earlier one gives way to a new one."""

_ITEM_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(.*)$")
_EXCHANGE_RE = re.compile(r"<exchange>\n.*?\n</exchange>", re.S)


@attrs.define
class SummaryDoc:
    goal: list[str] = attrs.field(factory=list)
    constraints: list[str] = attrs.field(factory=list)
    done: list[str] = attrs.field(factory=list)
    in_progress: list[str] = attrs.field(factory=list)
    blocked: list[str] = attrs.field(factory=list)
    decisions: list[str] = attrs.field(factory=list)
    next_steps: list[str] = attrs.field(factory=list)
    plan: list[str] = attrs.field(factory=list)
    """The plan the session follows: where it is and what is done, then its open items in order."""
    critical: list[str] = attrs.field(factory=list)
    extra: list[tuple[str, str]] = attrs.field(factory=list)
    """Other sections, ``(title, body)``, kept verbatim."""
    turn_context: list[str] = attrs.field(factory=list)
    history: list[str] = attrs.field(factory=list)
    """Abridged exchanges, newest first, each a rendered ``<exchange>`` block."""


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


def _section_key(title: str) -> str:
    t = title.strip().lower()
    for key, prefix in (
        ("goal", "goal"),
        ("constraints", "constraints"),
        ("progress", "progress"),
        ("decisions", "key decisions"),
        ("decisions", "decisions"),
        ("next", "next steps"),
        ("plan", "plan (open items)"),
        ("critical", "critical context"),
        ("turn", "turn context"),
        ("history", "abridged history"),
    ):
        if t.startswith(prefix):
            return key
    return ""


def _split(text: str, marker: str) -> list[tuple[str, str]]:
    """``(title, body)`` for each ``marker`` heading; text before the first heading has title ""."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    for line in text.splitlines():
        if line.startswith(marker) and not line.startswith(marker + "#"):
            sections.append((line[len(marker) :].strip(), []))
        else:
            sections[-1][1].append(line)
    return [(title, "\n".join(lines).strip()) for title, lines in sections]


_HISTORY_RE = re.compile(r"^## Abridged History.*$", re.M)
_END = "</exchange>"
_OLDER = "(older exchanges not shown)"


def _cut_history(text: str) -> tuple[str, list[str]]:
    """``text`` without its abridged history, and the history's exchanges. The history is cut out whole:
    an agent's answer quoted in it may hold ``## `` headings, which are not the summary's sections."""
    match = _HISTORY_RE.search(text)
    end = text.rfind(_END)
    if match is None or end < match.start():
        return text, []
    end += len(_END)
    blocks = _EXCHANGE_RE.findall(text, match.end(), end)
    rest = text[end:].lstrip("\n")
    rest = rest[len(_OLDER) :] if rest.startswith(_OLDER) else rest
    return f"{text[: match.start()]}\n{rest}", blocks


def parse_summary(text: str) -> SummaryDoc | None:
    """The sections of ``text``, or None when it has none of the known headings (an unstructured summary)."""
    doc = SummaryDoc()
    known = False
    text, doc.history = _cut_history(text)
    for title, body in _split(text, "## "):
        key = _section_key(title)
        if not title:
            continue
        if key == "progress":
            known = True
            for sub, sub_body in _split(body, "### "):
                s = sub.lower()
                target = (
                    doc.in_progress
                    if s.startswith("in progress")
                    else doc.blocked
                    if s.startswith("blocked")
                    else doc.done
                )
                target.extend(_items(sub_body))
        elif key == "history":
            doc.history.extend(_EXCHANGE_RE.findall(body))
        elif key:
            known = True
            target_list = {
                "goal": doc.goal,
                "constraints": doc.constraints,
                "decisions": doc.decisions,
                "next": doc.next_steps,
                "plan": doc.plan,
                "critical": doc.critical,
                "turn": doc.turn_context,
            }[key]
            target_list.extend(_items(body))
        elif body:
            doc.extra.append((title, body))
    return doc if known else None


@functools.lru_cache(maxsize=16_384)
def _norm(item: str) -> str:
    if item.startswith(EARLIER):
        item = item[len(EARLIER) :]
    return " ".join(item.lower().split())


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


def _carried(old: list[str], limit: int, latest: str | None = None) -> list[str]:
    """Items of an earlier state, marked as such; items already carried once, or finished, are dropped. The
    pointer to the earlier latest request becomes that request (``latest``): the new Goal states another."""
    out: list[str] = []
    for item in old:
        if item.startswith(EARLIER) or item.endswith(ANSWERED):
            continue
        if item.startswith(LATEST_POINTER):
            if not latest:
                continue
            item = _head(latest, 80) + item[len(LATEST_POINTER) :]
        out.append(EARLIER + item.removesuffix(" " + UNDER_WAY))
    return out[:limit]


def _head(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


_DERIVED = frozenset(DERIVED_LABELS)


def _label(item: str) -> str | None:
    # Every derived label ends at the item's first colon.
    end = item.find(":")
    head = item[: end + 1] if end >= 0 else ""
    if head == OLD_COMMANDS_LABEL:
        return COMMANDS_LABEL
    return head if head in _DERIVED else None


MAX_DONE = 2
"""Answered requests a merged summary keeps (the newest, as many as a range's summary shows): the session has
the rest; the room goes to the facts the ledger carries."""
MAX_DECISIONS = 8
UNION_LABELS: tuple[str, ...] = ()
"""Derived lists that accumulate across summaries. None do: the files of earlier ranges are named in the
``<read-files>``/``<modified-files>`` blocks every summary ends with, the body names those of its range."""
MAX_UNION = 400
_MORE_RE = re.compile(r" \(\+\d+ more\)$")


def _items_of(item: str, label: str) -> list[str]:
    return [p for p in _MORE_RE.sub("", item[len(label) :]).strip().split(", ") if p]


def _merge_critical(old: list[str], new: list[str]) -> list[str]:
    fresh = {_label(i) for i in new} - {None}
    merged = list(new)
    for label in UNION_LABELS:
        before = next((i for i in old if i.startswith(label)), None)
        if before is None or label not in fresh:
            continue
        at = next(n for n, i in enumerate(merged) if i.startswith(label))
        paths = list(dict.fromkeys([*_items_of(merged[at], label), *_items_of(before, label)]))
        more = len(paths) - MAX_UNION
        merged[at] = f"{label} {', '.join(paths[:MAX_UNION])}" + (f" (+{more} more)" if more > 0 else "")
    kept = [i for i in old if not i.startswith(STATS) and _label(i) not in fresh]
    return cap(dedupe(merged + kept), 200, head=200)


def _merge_extra(old: list[tuple[str, str]], new: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Other sections: a new one replaces an old one of its title; old ones of one title (a must-keep patch
    of each earlier compaction) become one, their lines deduplicated."""
    titles = {t for t, _ in new}
    bodies: dict[str, list[str]] = {}
    for title, body in old:
        if title not in titles:
            lines = bodies.setdefault(title, [])
            lines.extend(line for line in body.splitlines() if line not in lines or not line.strip())
    return [(t, "\n".join(lines).strip()) for t, lines in bodies.items()] + new


def merge(old: SummaryDoc, new: SummaryDoc) -> SummaryDoc:
    """``new`` with ``old`` folded in: lasting facts kept and added to, current state taken from ``new``."""
    goal = [g for g in old.goal if not g.startswith(LATEST)]
    known = {_norm(g.removeprefix(LATER)) for g in goal}
    for item in new.goal:
        plain = _norm(item.removeprefix(LATEST).removeprefix(LATER))
        if item.startswith(LATEST):
            goal.append(item)
        elif plain not in known:
            goal.append(LATER + item.removeprefix(LATER) if goal else item)
        known.add(plain)
    goal = dedupe(goal)
    # The request an earlier In Progress points to: its Goal's latest request, or its goal when that was the latest.
    old_latest = next((g[len(LATEST) :] for g in old.goal if g.startswith(LATEST)), old.goal[0] if old.goal else None)
    latest = [g for g in goal if g.startswith(LATEST)]
    rest = [g for g in goal if not g.startswith(LATEST)]
    return SummaryDoc(
        goal=cap(rest, 3, head=1) + latest[-1:],
        constraints=cap(dedupe(old.constraints + new.constraints), 150, head=30),
        done=cap(dedupe(old.done + new.done), MAX_DONE),
        in_progress=dedupe(new.in_progress + _carried(old.in_progress, 2, old_latest)),
        blocked=dedupe(new.blocked + _carried(old.blocked, 2)),
        decisions=cap(dedupe(old.decisions + new.decisions), MAX_DECISIONS),
        next_steps=new.next_steps,  # an earlier plan is stale once new work happened
        plan=new.plan or old.plan,  # a range that did not touch the plan leaves it as it was
        critical=_merge_critical(old.critical, new.critical),
        extra=_merge_extra(old.extra, new.extra),
        turn_context=list(new.turn_context),
        history=new.history + old.history,
    )


def _bullets(items: list[str], prefix: str = "- ", empty: str = "(none recorded)") -> list[str]:
    if not items:
        return [f"- {empty}"]
    return [f"{prefix}{item}" for item in items]


def render(
    doc: SummaryDoc, history: list[str] | None = None, history_note: str | None = None, *, skip_empty: bool = False
) -> str:
    """Markdown for ``doc``; ``history`` overrides ``doc.history`` (already cut to a budget). With
    ``skip_empty``, sections with nothing in them are left out (for summaries of small ranges)."""
    lines: list[str] = []

    def add(title: str, items: list[str]) -> None:
        if items or not skip_empty:
            lines.extend([title, *items, ""])

    def listed(items: list[str], empty: str = "(none recorded)") -> list[str]:
        return _bullets(items) if items else [] if skip_empty else _bullets([], empty=empty)

    add("## Goal", listed(doc.goal, "(not stated)"))
    add("## Constraints & Preferences", listed(doc.constraints))
    progress_empty = not (doc.done or doc.in_progress or doc.blocked)
    if not (skip_empty and progress_empty):
        lines += ["## Progress"]
        if doc.done or not skip_empty:
            lines += ["### Done", *_bullets(doc.done, "- [x] ", "(nothing recorded)"), ""]
        if doc.in_progress or not skip_empty:
            lines += ["### In Progress", *_bullets(doc.in_progress, "- [ ] ", "(nothing under way)"), ""]
        if doc.blocked or not skip_empty:
            lines += ["### Blocked", *_bullets(doc.blocked, empty="(none)"), ""]
    add("## Key Decisions", listed(doc.decisions))
    steps = [f"{n}. {s}" for n, s in enumerate(doc.next_steps, 1)] or ([] if skip_empty else ["- (none recorded)"])
    add("## Next Steps", steps)
    if doc.plan:
        lines.extend([f"## {PLAN_TITLE}", *_bullets(doc.plan), ""])
    critical = doc.critical
    if skip_empty:
        critical = [c for c in critical if not c.startswith(STATS)]
    add("## Critical Context", listed(critical))
    for title, body in doc.extra:
        lines += [f"## {title}", body, ""]
    if doc.turn_context:
        lines += [f"## {TURN_TITLE}", *_bullets(doc.turn_context), ""]
    blocks = doc.history if history is None else history
    if blocks:
        lines += [f"## {HISTORY_TITLE}", *blocks]
        if history_note:
            lines.append(history_note)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
