"""The plan a session follows, as its own tool calls left it: for the offline summary's Plan section.

Owns finding the plan and its state without a model. A plan is either a document the agent wrote and keeps
up to date (a markdown file with ``- [ ]`` / ``- [x]`` checkboxes, or a numbered list whose finished items carry
a mark such as ✅ or ``(done)``), or the agent's todo tool (Claude Code's ``TodoWrite``, Codex's
``update_plan``). A document's text is rebuilt from the range's calls: a write (or a whole-file read) gives
the text, every successful edit after it is applied in order (an edit that does not apply makes the text
unknown again: nothing is guessed). The items of a plan are its work packages (the headings the checkboxes
sit under, when there are several such headings) or else its checkbox lines; a package is done when all its
boxes are ticked. :func:`render` tells the finished items in brief ("done: WP1–WP10") and the open ones in
order, the first with what is still unticked in it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from ctxd.compaction.reading.fileops import PATH_KEYS, tool_kind
from ctxd.compaction.reading.mining import head
from ctxd.compaction.summary.serialize import content_text

_BOX_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\[([ xX])\]\s+(.*\S)\s*$")
_NUMBERED_RE = re.compile(r"^\s*\d+[.)]\s+(.*\S)\s*$")
_HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)[\s#]*$")
_DONE_MARK_RE = re.compile(r"✅|✔|☑|~~.+~~|\((?:done|completed|finished)\)|\[(?:done|DONE)\]|\bDONE\b")
_ID_RE = re.compile(r"^([A-Za-z]{0,12}[ -]?)(\d+)(?=$|[:.)\s-])")
_MARKUP_RE = re.compile(r"\*\*|__|~~")
_NUMBERED_LINE_RE = re.compile(r"^\s*\d+\t|^\s*\d+→")
PLAN_SUFFIXES = (".md", ".markdown", ".txt", ".org", ".rst", ".todo")
TODO_TOOLS = frozenset({"todowrite", "updateplan", "writetodos", "todo"})
MIN_ITEMS = 2
"""A document is a plan when it has at least this many items."""
MAX_DOCUMENT_CHARS = 200_000
MAX_DOCUMENTS_CHARS = 400_000
"""Plan documents carried to the next compaction (``details.ctxd.plans``): each and all together at most this."""
NEXT_PLAN_LABEL = "Next open plan item: "
"""How Next Steps and the must-keep sheet name the plan's first open item."""


@attrs.frozen
class PlanItem:
    label: str
    done: bool
    boxes: int = 0
    ticked: int = 0
    open_boxes: tuple[str, ...] = ()
    """The unticked checkbox lines of a work package, in order."""


@attrs.frozen
class Plan:
    source: str
    """The plan document's path, or the todo tool's name."""
    items: tuple[PlanItem, ...]

    @property
    def open(self) -> list[PlanItem]:
        return [i for i in self.items if not i.done]

    @property
    def done(self) -> list[PlanItem]:
        return [i for i in self.items if i.done]


def _clean(text: str) -> str:
    return " ".join(_MARKUP_RE.sub("", text).split()).strip()


def parse_plan(text: str) -> list[PlanItem]:
    """The items of a plan document (see the module docstring); [] when it has none. Code blocks are skipped."""
    headings: list[tuple[int, str, str]] = []
    """``(level, text, parent text)`` of every heading, in order."""
    stack: list[tuple[int, str]] = []
    groups: dict[int, list[tuple[bool, str]]] = {}
    numbered: list[tuple[bool, str]] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            continue
        heading = _HEADING_RE.match(line)
        if heading:
            level = len(heading.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            headings.append((level, _clean(heading.group(2)), stack[-1][1] if stack else ""))
            stack.append((level, _clean(heading.group(2))))
            continue
        box = _BOX_RE.match(line)
        if box:
            groups.setdefault(len(headings) - 1, []).append((box.group(1) != " ", _clean(box.group(2))))
            continue
        item = _NUMBERED_RE.match(line)
        if item:
            numbered.append((bool(_DONE_MARK_RE.search(item.group(1))), _clean(item.group(1))))
    if not groups:
        if len(numbered) >= MIN_ITEMS and any(done for done, _ in numbered):
            return [PlanItem(_DONE_MARK_RE.sub("", label).strip(" -:"), done) for done, label in numbered]
        return []
    titled = [g for g in groups if g >= 0]
    if len(titled) < 3:
        boxes = [b for g in groups.values() for b in g]
        return [PlanItem(label, done, 1, int(done)) for done, label in boxes]
    main_parent = headings[titled[0]][2]
    items: list[PlanItem] = []
    for index, boxes in groups.items():
        if index < 0:
            label = "(before the first heading)"
        else:
            _, title, parent = headings[index]
            label = title if parent == main_parent or not parent else f"{parent} › {title}"
        ticked = sum(done for done, _ in boxes)
        open_boxes = tuple(label for done, label in boxes if not done)
        items.append(PlanItem(label, ticked == len(boxes), len(boxes), ticked, open_boxes))
    return items


def _edits(arguments: Mapping[str, Any]) -> list[tuple[str, str, bool]] | None:
    """``(old, new, all occurrences)`` of an edit call; None when the call is not an edit this module reads."""
    edits = arguments.get("edits")
    pairs = edits if isinstance(edits, list) else [arguments]
    out: list[tuple[str, str, bool]] = []
    for pair in pairs:
        if not isinstance(pair, Mapping):
            return None
        old = pair.get("oldText", pair.get("old_string", pair.get("old_str")))
        new = pair.get("newText", pair.get("new_string", pair.get("new_str")))
        if not isinstance(old, str) or not isinstance(new, str):
            return None
        out.append((old, new, bool(pair.get("replace_all"))))
    return out


def _apply(text: str, edits: Sequence[tuple[str, str, bool]]) -> str | None:
    for old, new, every in edits:
        if not old or old not in text:
            return None
        text = text.replace(old, new) if every else text.replace(old, new, 1)
    return text


def _path(arguments: Mapping[str, Any]) -> str | None:
    for key in PATH_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _read_text(result: Mapping[str, Any]) -> str:
    text = content_text(result.get("content"), images=False)
    lines = text.splitlines()
    if lines and all(_NUMBERED_LINE_RE.match(line) for line in lines if line.strip()):
        text = "\n".join(_NUMBERED_LINE_RE.sub("", line, count=1) for line in lines)
    return text


def _todos(arguments: Mapping[str, Any]) -> list[PlanItem] | None:
    for key in ("todos", "plan", "items", "tasks"):
        value = arguments.get(key)
        if isinstance(value, list):
            items: list[PlanItem] = []
            for entry in value:
                if not isinstance(entry, Mapping):
                    continue
                label = next(
                    (entry[k] for k in ("content", "step", "text", "title") if isinstance(entry.get(k), str)), ""
                )
                if label.strip():
                    items.append(PlanItem(_clean(label), str(entry.get("status") or "").lower() == "completed"))
            return items
    return None


@functools.lru_cache(maxsize=4096)
def is_plan_path(path: str) -> bool:
    """Whether a file may hold a plan: a text or markdown document, or a name saying plan/todo/task."""
    low = path.lower()
    return low.endswith(PLAN_SUFFIXES) or any(w in low.rsplit("/", 1)[-1] for w in ("plan", "todo", "task"))


@attrs.define
class _Tracked:
    texts: dict[str, str | None]
    """Plan documents' texts as the calls left them (None: changed in a way that cannot be rebuilt)."""
    changed: dict[str, int]
    """The index of the message whose call last changed each document."""
    todos: tuple[int, str, list[PlanItem]] | None
    """The todo tool's last list: the index of its result, the tool's name, the items."""


def is_plan_call(name: str, arguments: Any) -> bool:
    """Whether a call may change the plan: the todo tool, or a call on a plan document (see :func:`is_plan_path`)."""
    if not isinstance(arguments, Mapping):
        return False
    return tool_kind(name) in TODO_TOOLS or ((p := _path(arguments)) is not None and is_plan_path(p))


class PlanTracker:
    """The plan documents and the todo list as a range's successful calls leave them (see the module docstring):
    :meth:`take` each such call with its result, in order; :meth:`plan` gives the newest plan."""

    def __init__(self, base: Mapping[str, str] | None = None) -> None:
        self.tracked = _Tracked(dict(base or {}), {}, None)

    def take(self, index: int, name: str, arguments: Mapping[str, Any], result: Mapping[str, Any]) -> None:
        """A successful call of :func:`is_plan_call` (``index``: its result's message)."""
        texts, changed = self.tracked.texts, self.tracked.changed
        kind = tool_kind(name)
        if kind in TODO_TOOLS:
            items = _todos(arguments)
            if items is not None:
                self.tracked.todos = (index, name, items)
            return
        path = _path(arguments)
        if path is None:
            return
        content = arguments.get("content", arguments.get("file_text"))
        if kind in ("write", "writefile", "createfile", "writetofile") and isinstance(content, str):
            texts[path] = content
            changed[path] = index
        elif kind in ("read", "readfile", "view"):
            whole = not any(arguments.get(k) for k in ("offset", "limit", "view_range", "start_line"))
            if whole and texts.get(path) is None:
                texts[path] = _read_text(result)
        else:
            edits = _edits(arguments)
            if edits is None:
                return
            before = texts.get(path)
            texts[path] = _apply(before, edits) if before is not None else None
            changed[path] = index

    def plan(self) -> Plan | None:
        """The plan the calls taken last changed, in the state they left it; None when there is none."""
        tracked = self.tracked
        found: list[tuple[int, Plan]] = []
        for path, at in tracked.changed.items():
            text = tracked.texts.get(path)
            items = parse_plan(text) if text is not None else []
            if len(items) >= MIN_ITEMS:
                found.append((at, Plan(path, tuple(items))))
        if tracked.todos is not None and tracked.todos[2]:
            found.append((tracked.todos[0], Plan(tracked.todos[1], tuple(tracked.todos[2]))))
        return max(found, key=lambda pair: pair[0])[1] if found else None


def _track(messages: Sequence[Mapping[str, Any]], base: Mapping[str, str] | None) -> PlanTracker:
    pending: dict[str, tuple[str, Mapping[str, Any]]] = {}
    """Calls on a plan document or the todo tool, until their result says they succeeded."""
    tracker = PlanTracker(base)
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if not isinstance(block, Mapping) or block.get("type") != "toolCall":
                    continue
                arguments = block.get("arguments")
                name = str(block.get("name") or "")
                if (
                    isinstance(block.get("id"), str)
                    and isinstance(arguments, Mapping)
                    and is_plan_call(name, arguments)
                ):
                    pending[block["id"]] = (name, arguments)
        elif role == "toolResult" and pending:
            call = pending.pop(str(message.get("toolCallId")), None)
            if call is not None and message.get("isError") is not True:
                tracker.take(index, call[0], call[1], message)
    return tracker


def latest_plan(messages: Sequence[Mapping[str, Any]], base: Mapping[str, str] | None = None) -> Plan | None:
    """The plan the range's calls last changed, in the state they left it; None when there is none. ``base``
    holds plan documents as earlier ranges left them (:func:`documents`): edits in the range apply to them."""
    return _track(messages, base).plan()


def documents(
    messages: Sequence[Mapping[str, Any]], base: Mapping[str, str] | None = None, gone: Iterable[str] = ()
) -> dict[str, str]:
    """The plan documents known after ``messages`` (``base`` updated by their calls; those in ``gone``, deleted,
    left out), for the next compaction to apply its range's edits to: the most recently changed first, each at
    most :data:`MAX_DOCUMENT_CHARS`, together at most :data:`MAX_DOCUMENTS_CHARS`."""
    tracked = _track(messages, base).tracked
    deleted = set(gone)
    order = sorted(tracked.texts, key=lambda p: -tracked.changed.get(p, -1))
    out: dict[str, str] = {}
    used = 0
    for path in order:
        text = tracked.texts[path]
        if text is None or path in deleted or len(text) > MAX_DOCUMENT_CHARS or used + len(text) > MAX_DOCUMENTS_CHARS:
            continue
        if len(parse_plan(text)) >= MIN_ITEMS:
            out[path] = text
            used += len(text)
    return out


def _ranges(labels: Sequence[str]) -> str | None:
    """``WP1–WP10, WP12`` for labels that all start with an id; None when one does not."""
    ids: list[tuple[str, int]] = []
    for label in labels:
        match = _ID_RE.match(label)
        if match is None:
            return None
        ids.append((match.group(1), int(match.group(2))))
    parts: list[str] = []
    start = 0
    for n in range(1, len(ids) + 1):
        if n == len(ids) or ids[n][0] != ids[n - 1][0] or ids[n][1] != ids[n - 1][1] + 1:
            first, last = ids[start], ids[n - 1]
            parts.append(f"{first[0]}{first[1]}" + (f"–{last[0]}{last[1]}" if n - 1 > start else ""))
            start = n
    return ", ".join(parts)


def next_item(plan: Plan) -> str | None:
    """The first open item, with its unticked boxes."""
    first = next(iter(plan.open), None)
    if first is None:
        return None
    todo = f" — to do: {'; '.join(head(b, 90) for b in first.open_boxes[:4])}" if first.open_boxes else ""
    more = f" (+{len(first.open_boxes) - 4} more)" if len(first.open_boxes) > 4 else ""
    return head(first.label, 120) + todo + more


def next_fact(plan: Plan | None) -> tuple[str, str] | None:
    """The plan's first open item as a must-keep fact: its text (where the plan is included) and the label a
    summary must name; None when the plan has no open item."""
    item = next_item(plan) if plan is not None else None
    if plan is None or item is None:
        return None
    return f"{NEXT_PLAN_LABEL}{item} (plan: {head(plan.source, 160)})", plan.open[0].label


def plan_source(fact_text: str) -> str | None:
    """The plan document a :func:`next_fact` text names, or None."""
    if not fact_text.startswith(NEXT_PLAN_LABEL) or not fact_text.endswith(")"):
        return None
    at = fact_text.rfind(" (plan: ")
    return fact_text[at + 8 : -1] if at >= 0 else None


def render(plan: Plan, budget: int) -> list[str]:
    """The Plan section's bullets within about ``budget`` characters: where the plan is and what is done, then
    the open items in order (the first is the next step), the rest counted."""
    done = plan.done
    label = _ranges([i.label for i in done])  # the finished ones by id ("WP1–WP10"); else only counted
    total = len(plan.items)
    where = head(plan.source, 160)
    if not plan.open:
        return [f"{where}: all {total} items done" + (f" ({label})" if label else "")]
    lines = [f"{where}: done {len(done)} of {total}" + (f" ({label})" if label else "") + "; open, in order:"]
    used = len(lines[0])
    for n, item in enumerate(plan.open):
        progress = f" ({item.ticked}/{item.boxes})" if item.ticked else ""
        text = head(item.label, 90) + progress
        if n and used + len(text) > budget and n < len(plan.open) - 1:
            lines.append(f"(+{len(plan.open) - n} more open, through {head(plan.open[-1].label, 60)})")
            break
        lines.append(text)
        used += len(text) + 3
    return lines
