"""The offline summariser: a deterministic, model-free summary that tells what happened.

Owns the summary's assembly when no model is configured (or the model failed). A resuming agent reads, in
order: the state now (the task under way and how it stands, what is changed and not committed, what still
fails, the last step, what comes next), the goal, what the user said, the user's constraints, the plan it
follows, each task with what was asked, done, broken and fixed, decided and why, and how it ended (with the
entry ids where its details live), how to build, test and run, and the files (see :mod:`.story` and
:mod:`.episodes`). An earlier summary is merged, not replaced: its tasks stay, a task the new range goes on
with is continued, and what it left uncommitted or failing is carried until the new range settles it.

The summary takes what the agents' own summaries take: about a tenth of what it replaces, at most
``max_tokens`` (5,000 by default); past that, the oldest tasks are told with less detail first. A small range
gets a summary of at most three quarters of its size, but never less than ``FLOOR_CHARS`` (a few messages are
still told as a task with its request and files, not cut mid-line). Same input, same bytes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ctxd.compaction.reading import agent_plans as plans
from ctxd.compaction.reading.actions import brief
from ctxd.compaction.reading.chains import brief_fix
from ctxd.compaction.reading.episodes import Carried, Episode, Story, scan_story
from ctxd.compaction.reading.facts import Facts
from ctxd.compaction.reading.fileops import project_root, strip_file_blocks
from ctxd.compaction.reading.mining import head, plain_sentences, short
from ctxd.compaction.summary import sections, story
from ctxd.compaction.summary.base import Progress, SummaryRequest, SummaryResult, report
from ctxd.compaction.summary.document import (
    EARLIER_TITLE,
    FAILING_LABEL,
    UNCOMMITTED_LABEL,
    SummaryDoc,
    Task,
    dedupe,
    is_empty,
    merge,
    parse_summary,
    render,
)
from ctxd.compaction.summary.serialize import content_text
from ctxd.context.tokens import estimate_tokens

GOAL_ABOUT_CHARS = 2_600
"""Of the description of the tracker item the goal names (an epic: its problem, constraints, acceptance)."""
DEFAULT_MAX_TOKENS = 5_000
"""The largest summary, in tokens, by default: what the agents' own summaries take."""
SHARE = 0.10
"""A summary takes about this share of what it replaces (up to its maximum)."""
MIN_CHARS = 6_000
"""The smallest budget (the state, the goal and the current task take most of it), unless the range itself is
smaller (a summary never takes more than three quarters of what it replaces) or the maximum is small (at most
half of it)."""
FLOOR_CHARS = 1_000
"""The smallest budget of a small range: the state, the request and the task of a few messages fit in it."""
NOT_STARTED_TITLE = "Tracker items shown, not started"


def _quote(text: str) -> str:
    return '"' + short(text, 120) + '"'


RECALL = (
    "Every message before this summary is kept in the session: find more with the `search_history` tool (or "
    "`ctxd search WORDS`), and read a task's messages with the `expand` tool and the entry ids its Details name."
)
_THREAD_THRESHOLD = 5_000
"""Requests with more messages than this are summarised in a worker thread, off the event loop."""


@attrs.frozen
class AbridgedLimits:
    """Kept for callers of the earlier layout: ``total_chars`` caps the summary (in characters) when no
    ``max_tokens`` is given."""

    total_chars: int = 12_000
    user_chars: int = 1_000
    response_chars: int = 2_000
    action_chars: int = 200
    files_per_kind: int = 10
    commands: int = 10


class OfflineSummarizer:
    """Builds the summary from the messages alone (see the module docstring)."""

    name = "offline"

    def __init__(
        self,
        limits: AbridgedLimits | None = None,
        *,
        total_chars: int | None = None,
        scale: bool = True,
        max_tokens: int | None = None,
    ) -> None:
        self.limits = limits or AbridgedLimits()
        if total_chars is not None:
            self.limits = attrs.evolve(self.limits, total_chars=total_chars)
        self.max_chars = 4 * (max_tokens or DEFAULT_MAX_TOKENS)
        if total_chars is not None and max_tokens is None:
            self.max_chars = max(MIN_CHARS, total_chars)
        self.scale = scale
        """False: the budget of a large input whatever the input's size (for tests of the layout)."""

    async def summarize(self, request: SummaryRequest, progress: Progress | None = None) -> SummaryResult:
        report(progress, "offline summary", 0.0)
        size = len(request.messages) + len(request.turn_prefix)
        text = await asyncio.to_thread(self.build, request) if size > _THREAD_THRESHOLD else self.build(request)
        report(progress, "done", 1.0)
        return SummaryResult(text=text, summarizer=self.name, model=None, path="offline", calls=0)

    @staticmethod
    def input_chars(request: SummaryRequest, enough: int | None = None) -> int:
        """Characters of what the summary replaces (messages, turn prefix, previous summary), measured from the
        newest back and only until ``enough``."""
        chars = len(request.previous_summary or "")
        for m in (*request.turn_prefix, *reversed(request.messages)):
            chars += 4 * estimate_tokens(m)
            if enough is not None and chars >= enough:
                break
        return chars

    def budget(self, request: SummaryRequest) -> int:
        """The summary's size limit in characters (see the module docstring): the file lists the engine appends
        (``request.file_context``) count against the maximum."""
        largest = max(min(MIN_CHARS, self.max_chars // 2), self.max_chars - len(request.file_context or ""))
        if not self.scale:
            return largest
        replaced = self.input_chars(request, int(self.max_chars / SHARE) + 1)
        floor = min(FLOOR_CHARS, largest)
        return max(floor, min(replaced * 3 // 4, largest, max(MIN_CHARS, int(replaced * SHARE))))

    # -- the whole summary -------------------------------------------------------------------------------------

    def build(self, request: SummaryRequest) -> str:
        """The summary text for ``request`` (synchronous, deterministic)."""
        budget = self.budget(request)
        messages = [*request.messages, *request.turn_prefix]
        ids = _ids(request, len(messages))
        earlier = _earlier(request)
        carried = _carried(earlier)
        tracker = plans.PlanTracker(request.plan_texts)
        facts, told = scan_story(messages, ids, carried, tracker)
        root = project_root([*facts.done_files, *facts.reads], _root_of(earlier) or request.cwd)
        found_plan = tracker.plan()
        first_number = (earlier.task_count if earlier is not None else 0) + 1
        continued = bool(told.episodes) and told.episodes[0].continued
        if continued:
            first_number -= 1
        doc, sources = self._doc(request, facts, told, found_plan, root, first_number, budget)
        if earlier is not None:
            doc = merge(earlier, doc, continued=continued)
            deleted = [p for p, op in facts.done_files.items() if op == "deleted"]
            if doc.plan and any(doc.plan[0].startswith(p + ":") for p in deleted):
                doc.plan = []  # the plan document was deleted since
            if continued:
                sources = sources[1:]  # its first block went into the earlier summary's last: condensed as text
        self._focus(doc, messages, request.custom_instructions)
        if is_empty(doc) and not doc.extra:
            return "(nothing to summarise: no messages in this part of the session)\n"
        return fit(doc, budget, sources, root, told.git or told.commits > 0, told.about, told.trackers)

    def _doc(
        self,
        request: SummaryRequest,
        facts: Facts,
        told: Story,
        found_plan: plans.Plan | None,
        root: str | None,
        first_number: int,
        budget: int,
    ) -> tuple[SummaryDoc, list[tuple[Episode, int] | None]]:
        """The range's own document, and for each of its task blocks the episode and number it tells (None for
        the block naming the oldest tasks)."""
        doc = SummaryDoc()
        sources: list[tuple[Episode, int] | None] = []
        plan_next = plans.next_item(found_plan) if found_plan is not None else None
        current = first_number + len(told.episodes) - 1
        doc.state = story.state_now(told, facts, root, plan_next, current)
        if request.turn_prefix:
            doc.state.append("The latest turn goes on in the messages kept after this summary.")
        goal = request.first_request or facts.first_request or facts.first_user
        goal_refs: set[str] = set()
        if goal:
            doc.goal.append(short(goal, 600))
            for ref, about in told.about.items():
                if ref in goal and not any(e.ref == ref for e in told.episodes):
                    goal_refs.add(ref)
                    title = told.trackers.get(ref, "")
                    doc.goal.append(f"{ref}{' (' + title + ')' if title else ''}: {brief(about, GOAL_ABOUT_CHARS)}")
        doc.items = [
            f"{ref} [{state}] {short(title, 160)} (of {parent})"
            for parent, ref, state, title in story.sub_items(told, current)
        ]
        doc.said = [short(text, 400) for _, text in told.said]
        sections.constraints(doc, facts, max(3_000, budget // 5))
        if found_plan is not None:
            doc.plan = plans.render(found_plan, max(400, budget // 12))
        waiting = [
            (ref, told.trackers.get(ref, ""), about)
            for ref, about in told.about.items()
            if ref not in told.closed_refs and not any(e.ref == ref for e in told.episodes) and ref not in goal_refs
        ]
        if waiting:
            doc.extra.append(
                (
                    NOT_STARTED_TITLE,
                    "\n".join(f"- {ref}{' ' + _quote(t) if t else ''}: {brief(a, 600)}" for ref, t, a in waiting[-8:]),
                )
            )
        git = told.git or told.commits > 0
        shown = told.episodes
        if len(shown) > MAX_TASKS:
            older, shown = shown[: len(shown) - MAX_TASKS + 1], shown[len(shown) - MAX_TASKS + 1 :]
            names = [e.ref or e.title or (e.asked[0] if e.asked else "") for e in older]
            doc.tasks.append(
                Task(
                    f"{EARLIER_TASKS} ({len(older)}: T{first_number}-T{first_number + len(older) - 1})",
                    ["Names: " + short("; ".join(head(n, 80) for n in names if n), 2_000)],
                )
            )
            sources.append(None)
            first_number += len(older)
        for n, episode in enumerate(shown):
            last = n == len(shown) - 1
            sources.append(None if last else (episode, first_number + n))
            about = told.about.get(episode.ref, "")
            doc.tasks.append(
                story.task_block(
                    episode,
                    first_number + n,
                    root,
                    current=last,
                    git=git,
                    about=about,
                    episode_titles=told.trackers,
                )
            )
        doc.commands = story.commands(facts, told, root, max(1_200, budget // 4))
        doc.files = story.files(facts, root, max(600, budget // 10), told)
        doc.recall = [RECALL]
        return doc, sources

    def _focus(self, doc: SummaryDoc, messages: Sequence[Mapping[str, Any]], focus: str | None) -> None:
        if focus and focus.strip():
            found = _focus_sentences(messages, focus)
            body = "\n".join([f"- Requested focus: {short(focus, 300)}", *(f"- {s}" for s in found)])
            doc.extra.insert(0, ("Requested focus", body))


def _ids(request: SummaryRequest, count: int) -> list[str] | None:
    """The anchor of each message for ``expand``: its entry id, or ``L<line>`` in a file whose entries have none
    (pi's v1 sessions)."""
    ids = [*(request.entry_ids or ()), *(request.turn_prefix_entry_ids or ())]
    lines = [*(request.entry_lines or ()), *(request.turn_prefix_entry_lines or ())]
    if len(lines) == len(ids):
        ids = [entry or (f"L{line}" if line else "") for entry, line in zip(ids, lines, strict=True)]
    return ids if len(ids) == count else None


def _earlier(request: SummaryRequest) -> SummaryDoc | None:
    """The earlier summaries this one replaces, as one document (a model's or an unknown layout's text is kept
    as a section of its own)."""
    texts = [request.previous_summary or ""] + [
        str(m.get("summary") or "") for m in request.messages if m.get("role") in ("compactionSummary", "branchSummary")
    ]
    earlier: SummaryDoc | None = None
    for text in texts:
        text = strip_file_blocks(text).strip()
        if not text:
            continue
        parsed = parse_summary(text) or SummaryDoc(extra=[(EARLIER_TITLE, text)])
        earlier = merge(earlier, parsed) if earlier is not None else parsed
    return earlier


_ROOT_RE = re.compile(r"^Project root: (\S+)")
_LIST_RE = re.compile(r" \(\+\d+ more\)$")
_FAILING_RE = re.compile(r'^`(.+?)`.*? failed(?: again \(.*?\))?(?: \d+ times)?: "(.*?)"(?: \(also .*?\))?(?: -> |$)')


def _root_of(earlier: SummaryDoc | None) -> str | None:
    if earlier is None:
        return None
    return next((m.group(1) for m in map(_ROOT_RE.match, earlier.files) if m), None)


_SUB_ITEM_RE = re.compile(r"^(\S+) \[([^\]]*)\] (.*) \(of (\S+)\)$")
_HEADING_RE = re.compile(r"^T\d+ · (?:(?P<ref>[^·\[]+?) · )?(?P<title>.*?) \[(?P<state>[^\]]*)\]$")


def _carried(earlier: SummaryDoc | None) -> Carried | None:
    """What an earlier summary left open: files changed and not committed, failures nothing fixed, and its last
    task when that was still under way."""
    if earlier is None:
        return None
    old_root = _root_of(earlier)
    uncommitted: list[str] = []
    failing: list[tuple[str, str]] = []
    for item in earlier.state:
        if item.startswith(UNCOMMITTED_LABEL) and not item.startswith(UNCOMMITTED_LABEL + "nothing"):
            for path in _LIST_RE.sub("", item[len(UNCOMMITTED_LABEL) :]).split(", "):
                path = path.strip()
                if path:
                    uncommitted.append(path if path.startswith("/") or not old_root else f"{old_root}/{path}")
        elif item.startswith(FAILING_LABEL):
            found = _FAILING_RE.match(item[len(FAILING_LABEL) :])
            if found is not None:
                failing.append((found.group(1), found.group(2)))
    task: tuple[str, str] | None = None
    heading = _HEADING_RE.match(earlier.tasks[-1].heading) if earlier.tasks else None
    if heading is not None and not _FINISHED_RE.search(heading.group("state")):
        task = ((heading.group("ref") or "").strip(), heading.group("title").strip())
    children: dict[str, list[tuple[str, str, str]]] = {}
    for item in earlier.items:
        found = _SUB_ITEM_RE.match(item)
        if found is not None:
            children.setdefault(found.group(4), []).append((found.group(1), found.group(2), found.group(3)))
    if not uncommitted and not failing and task is None and not children:
        return None
    return Carried(uncommitted, failing, task, children)


_FINISHED_RE = re.compile(r"\bclosed\b|^answered|left for the next task|^done|as it stood then")


MAX_TASKS = 40
"""Task blocks a summary shows; older tasks are named in one block (their messages stay in the session)."""


def fit(
    doc: SummaryDoc,
    budget: int,
    sources: Sequence[tuple[Episode, int] | None],
    root: str | None,
    git: bool,
    about: Mapping[str, str],
    titles: dict[str, str] | None = None,
) -> str:
    """``doc`` rendered within ``budget`` characters: the oldest tasks lose detail first (a task of this range
    is told again at a lower level, an earlier summary's block is condensed), then the lists are cut; the state,
    the goal and the current task stay whole as long as anything can. ``sources`` gives, for each task block,
    the episode and number it tells (None: condense its text)."""
    _fold_old_tasks(doc, MAX_TASKS)
    text = render(doc)
    if len(text) <= budget:
        return text
    total = len(text)
    offset = len(doc.tasks) - len(sources)
    for level in range(1, story.DETAIL_LEVELS):
        for n in range(len(doc.tasks) - 1):
            before = doc.tasks[n]
            source = sources[n - offset] if 0 <= n - offset < len(sources) else None
            if source is None:
                after = _condensed(before, level)
            else:
                episode, number = source
                after = story.task_block(
                    episode,
                    number,
                    root,
                    current=False,
                    level=level,
                    git=git,
                    about=about.get(episode.ref, ""),
                    episode_titles=titles,
                )
            doc.tasks[n] = after
            total += _size(after) - _size(before)
            if total <= budget:
                return render(doc)
    for shrink in (_cut_lists, _cut_said, _drop_old_tasks, _cut_goal, _cut_current, _cut_all_tasks):
        shrink(doc)
        text = render(doc)
        if len(text) <= budget:
            return text
    return text if len(text) <= budget else _hard_cut(text, budget)


EARLIER_TASKS = "Earlier tasks"


def _size(task: Task) -> int:
    return sum(len(line) + 1 for line in task.render())


def _fold_old_tasks(doc: SummaryDoc, limit: int) -> None:
    """At most ``limit`` task blocks: the oldest beyond are named in one block."""
    if len(doc.tasks) <= limit:
        return
    folded = doc.tasks[: len(doc.tasks) - limit + 1]
    names = [t.heading for t in folded]
    doc.tasks = [
        Task(f"{EARLIER_TASKS} ({len(folded)})", ["Names: " + short("; ".join(names), 2_000)]),
        *doc.tasks[-limit + 1 :],
    ]


_KEEP_AT: dict[int, tuple[str, ...]] = {
    1: (
        "Asked",
        "Files",
        "Commits",
        "Problem",
        "Closed",
        "Also closed",
        "User's",
        "Decision",
        "Agent's report",
        "Tracker",
        "Steps",
        "Details",
        "Was",
        "Done",
        "Next step then",
    ),
    2: (
        "Asked",
        "Files",
        "Commits",
        "Problem",
        "Closed",
        "User's",
        "Decision",
        "Agent's report",
        "Details",
        "Was",
        "Done",
    ),
    3: ("Commits", "Problem", "Closed", "Details", "Done"),
}
"""What an earlier task's block keeps at each level of detail (what it did and how it ended, before how)."""
_EACH_AT = {"Agent's report": (600, 300, 0), "Tracker": (300, 0, 0), "Decision": (260, 180, 0)}
_PROBLEM_RE = re.compile(
    r'^(Problem: )(.*?) failed(?: again \(.*?\))?(?: \d+ times)?: ("[^"]*")(?: \(also .*?\))?(?: -> (\S+)(?: (.*))?)?$'
)


def _condensed(task: Task, level: int) -> Task:
    """An earlier task's block at less detail: fewer kinds of lines, each shorter."""
    keep = ("Names", *_KEEP_AT.get(level, ()))
    each = (600, 320, 200, 140)[min(level, 3)]
    lines: list[str] = []
    for line in task.lines:
        if not line.removeprefix("Then: ").startswith(keep):
            continue
        limit = next((v[min(level, 3) - 1] for k, v in _EACH_AT.items() if line.startswith(k)), each)
        if not limit:
            continue
        problem = _PROBLEM_RE.match(line.removeprefix("Then: "))
        if problem is not None and level < 2 and problem.group(4) != "fixed:":
            problem = None  # an open failure keeps what the agent said of it while there is room
        if line.removeprefix("Then: ").startswith("Files: "):
            lines.append(_condensed_files(line, (160, 100, 40, 0)[min(level, 3)]))
        elif problem is not None:  # what failed and how it ended, the error line whole: it is what is looked for
            what = problem.group(2)  # a command read from its start: "`git add lib/a.ex …`"
            what = what if len(what) <= 72 else head(what.rstrip("`"), 70) + "`"
            line = f"{problem.group(1)}{what} failed: {problem.group(3)}"
            line += f" -> {problem.group(4).rstrip(':;,')}" if problem.group(4) else ""
            how = problem.group(5) or ""
            if how and level < 3 and problem.group(4) == "fixed:":
                line += ": " + brief_fix(how, (420, 240)[level - 1])  # in brief: the choice, the final form, the check
            lines.append(line)
        elif line.startswith(("Agent's report", "Tracker", "Closed")):
            lines.append(head(line, limit))  # an account reads from its start
        elif line.startswith("Commits: "):  # each commit's hash and its message's head, none cut in the middle
            cut = (160, 140, 120, 100)[min(level, 3)]  # a commit's message is what it did: most of it stays
            lines.append("Commits: " + "; ".join(head(c, cut) for c in line.removeprefix("Commits: ").split("; ")))
        else:
            lines.append(short(line, limit))
    return Task(task.heading, lines)


_PAREN_RE = re.compile(r" \(([^()]*)\)")
_VALUED_RE = re.compile(r"^\S+ (?:[~^<>=!]*\s*\d|:|\[was )|^@\w+ ")


def _artifact_rank(name: str) -> int:
    """What a condensed file keeps first of its names: those with a value (a constant, a dependency's version, a
    rename), then the definitions, then the literals it names."""
    return 0 if _VALUED_RE.match(name) else 2 if name.startswith(('"', "`")) else 1


def _condensed_files(line: str, each: int) -> str:
    """A task's Files line with every path kept and each file's definitions cut to ``each`` characters (none at
    0): the paths are what a later check looks for."""

    def cut(match: re.Match[str]) -> str:
        inner = match.group(1)
        if inner in ("created", "deleted") or not each:
            return "" if not each and inner not in ("created", "deleted") else match.group(0)
        return f" ({head(', '.join(sorted(inner.split(', '), key=_artifact_rank)), each)})"

    return _PAREN_RE.sub(cut, line)


def _cut_lists(doc: SummaryDoc) -> None:
    doc.commands = [short(c, 120) for c in doc.commands[:30]]
    doc.files = [short(f, 600) for f in doc.files]
    doc.constraints = [short(c, 240) for c in doc.constraints[-30:]]


def _cut_said(doc: SummaryDoc) -> None:
    said = [short(s, 200) for s in doc.said]
    doc.said = said if len(said) <= 12 else [*said[:3], f"(+{len(said) - 11} more)", *said[-8:]]


def _drop_old_tasks(doc: SummaryDoc) -> None:
    _fold_old_tasks(doc, 7)


def _cut_goal(doc: SummaryDoc) -> None:
    """The goal's descriptions to their head, and of the sub-items only those not closed (with a count)."""
    doc.goal = [doc.goal[0], *(short(g, 700) for g in doc.goal[1:])] if doc.goal else []
    closed = [item for item in doc.items if " [closed" in item]
    if len(closed) > 2:
        doc.items = [f"({len(closed)} closed: {', '.join(i.split(' ', 1)[0] for i in closed)})"] + [
            item for item in doc.items if item not in closed
        ]


def _cut_all_tasks(doc: SummaryDoc) -> None:
    doc.tasks = [_condensed(task, story.DETAIL_LEVELS - 1) for task in doc.tasks]


def _cut_current(doc: SummaryDoc) -> None:
    if doc.tasks:
        doc.tasks[-1] = _condensed(doc.tasks[-1], 1)
    doc.state = [short(s, 300) for s in doc.state]


def _hard_cut(text: str, budget: int) -> str:
    """The last resort for a tiny budget: the text cut at a line end, marked."""
    if budget < 80:
        return short(" ".join(text.split()), max(24, budget)) + "\n"
    cut = text.rfind("\n", 0, budget - 40)
    kept = text[: max(cut, budget // 2)].rstrip().split("\n")
    while len(kept) > 1 and (kept[-1].startswith("#") or not kept[-1].strip()):
        kept.pop()  # a heading whose section was cut away says nothing
    return "\n".join(kept) + "\n(summary cut to its size limit)\n"


_STOPWORDS = frozenset(
    re.findall(
        r"[a-z]+",
        """
        about above after again also because before being below between both could does doing during each
        from further have having here into just more most only other over same should some such than that
        their them then there these they this those through under until very what when where which while
        will with would your focus summary summarize summarise keep please especially mention include
        important details
        """,
    )
)


def _focus_sentences(messages: Sequence[Mapping[str, Any]], focus: str) -> list[str]:
    words = sorted({w.lower() for w in re.findall(r"[A-Za-z_][\w.-]{3,}", focus)} - _STOPWORDS)
    if not words:
        return []
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in words) + r")\b", re.IGNORECASE)
    found: list[str] = []
    for message in reversed(messages[-2_000:]):
        if message.get("role") not in ("user", "assistant"):
            continue
        text = content_text(message.get("content"), images=False)
        if text and pattern.search(text):
            found.extend(s for s in plain_sentences(text) if pattern.search(s))
        if len(found) >= 6:
            break
    return list(reversed(dedupe([short(s, 240) for s in found])[:6]))
