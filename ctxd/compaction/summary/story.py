"""The offline summary's account of what happened: the state now, each task's block, the commands, the files.

Owns how the episodes of :mod:`.episodes` and the facts of :mod:`.facts` read to a resuming agent: the state
first (the task under way, what is changed and not committed, what still fails, the last step, the next one),
then one block per task (what was asked, what was done, each problem and its fix, the decisions and their
reasons, how it ended, where its details live), then how to build, test and run (every command that matters
once, with its count and last outcome), then the files. Paths are shown relative to the project's root when
most of them share one. Each block has levels of detail (:data:`DETAIL_LEVELS`): the summariser lowers the
oldest blocks' first when the summary is over its budget.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import attrs

from ctxd.compaction.reading.actions import brief
from ctxd.compaction.reading.calls import CommandStat
from ctxd.compaction.reading.episodes import Episode, Problem, Story, note
from ctxd.compaction.reading.facts import Facts
from ctxd.compaction.reading.fileops import relative
from ctxd.compaction.reading.mining import CHECK_RE, check_line, head, short
from ctxd.compaction.summary.commands import command_text, explored, mattering
from ctxd.compaction.summary.document import Task

DETAIL_LEVELS = 4
"""0: everything; 1: shorter reports and lists; 2: no report, definitions or decisions' second sentence;
3: one line (what it was, how it ended, its commits)."""
STEP_MARKS = {"completed": "✓", "done": "✓", "in_progress": "→", "inprogress": "→", "pending": "○", "plan": "-"}


def first_sentence(text: str, limit: int) -> str:
    """The first sentence of ``text`` (a request as a task's title), cut to ``limit``."""
    line = " ".join(text.split())
    end = re.search(r"(?<=[.!?])\s", line)
    return head(line[: end.start()] if end and end.start() >= 12 else line, limit)


def _quote(text: str, limit: int) -> str:
    return '"' + short(text, limit) + '"'


def _file_list(episode: Episode, root: str | None, level: int) -> str:
    groups: dict[str, list[str]] = {"created": [], "modified": [], "deleted": []}
    for path, kind in episode.files.items():
        name = relative(path, root)
        defs = episode.defs.get(path) if level == 0 else None
        if defs and kind != "deleted":
            name += " (" + ", ".join(defs) + ")"
        groups.setdefault(kind, []).append(name)
    limit = (14, 10, 6, 4)[level]
    parts: list[str] = []
    for kind, names in groups.items():
        if names:
            shown = names[:limit]
            more = f" (+{len(names) - len(shown)} more)" if len(names) > len(shown) else ""
            parts.append(f"{kind} " + ", ".join(shown) + more)
    return "; ".join(parts)


def _check(check_key: str, episode: Episode) -> str:
    check = episode.checks[check_key]
    text = f"`{head(check.command, 90)}`"
    if check.runs > 1:
        text += f" x{check.runs}"
    line = check.line
    if check.ok:
        text += " ok" + (f" ({line})" if line else "")
        if check.failed:
            text += f", after {check.failed} failed"
    else:
        text += " FAILED" + (f" ({line})" if line else "")
    return text


def problem_text(problem: Problem, limit: int = 500) -> str:
    times = f" {problem.times} times" if problem.times > 1 else ""
    again = " again (it had been fixed before)" if problem.again < 0 else ""
    text = f"{problem.what} failed{again}{times}: {_quote(problem.line, 200)}"
    if problem.also and limit > 400:  # a task block's, not the state's one-line account
        text += " (also " + "; ".join(_quote(line, 110) for line in problem.also) + ")"
    if problem.fixed:
        text += " -> fixed" + (f": {problem.fix}" if problem.fix else "")
        if problem.again:
            text += f" (but the same failure came back {problem.again} time{'s' if problem.again > 1 else ''} later)"
    else:
        said = " / ".join(problem.tried)
        text += " -> still open" + (f"; the agent: {said}" if said else "")
        if problem.claimed:
            text += f"; it says it is fixed, but nothing ran again since: {_quote(problem.claimed, 200)}"
    return short(text, limit)


def _anchor(episode: Episode) -> str:
    first, last = episode.first_id[:8], episode.last_id[:8]
    if not first:
        return ""
    return f"entries {first}..{last}" if last and last != first else f"entry {first}"


def ending(episode: Episode, current: bool, git: bool = True) -> str:
    """How a task ended, in a few words, for its heading."""
    parts: list[str] = []
    if episode.closed is not None:
        parts.append("closed")
    if episode.commits:
        parts.append("committed " + ", ".join(h for h, _ in episode.commits))
    if episode.pushed:
        parts.append("pushed")
    if not parts:
        if current and episode.interrupted:
            parts.append("interrupted")
        elif current:
            parts.append("answered" if episode.answered else "under way")
        elif episode.changes:
            parts.append("done, not committed" if git else "done")
        else:
            parts.append("answered" if episode.answered else "left for the next task")
    elif current and episode.closed is None and not episode.answered:
        parts.append("still under way")
    return ", ".join(parts)


def task_block(
    episode: Episode,
    number: int,
    root: str | None,
    *,
    current: bool,
    level: int = 0,
    git: bool = True,
    about: str = "",
    episode_titles: dict[str, str] | None = None,
) -> Task:
    """The block of one task at detail ``level`` (see :data:`DETAIL_LEVELS`)."""
    title = (
        episode.title or (first_sentence(episode.asked[0], 90) if episode.asked else "") or "(work without a request)"
    )
    ref = f"{episode.ref} · " if episode.ref else ""
    for more in episode.also:  # claimed together before any work: one task
        ref = ref.replace(" · ", f" + {more} · ", 1)
        named = (episode_titles or {}).get(more, "")
        if named and named not in title:
            title += f" + {head(named, 80)}"
    heading = f"T{number} · {ref}{title} [{ending(episode, current, git)}]"
    lines: list[str] = []
    if level >= 3:
        if episode.commits:
            lines.append("Commits: " + "; ".join(f"{h} {_quote(s, 90)}" for h, s in episode.commits))
        lines.extend(
            f"Problem: {_quote(p.line, 120)} -> {'fixed' if p.fixed else 'open'}" for p in episode.problems[-2:]
        )
        anchor = _anchor(episode)
        if anchor:
            lines.append(f"Details: {anchor}")
        return Task(heading, lines)
    asked = [a for a in episode.asked if a.strip()]
    if asked:
        each = (600, 300, 200)[level]
        lines.append("Asked: " + " / ".join(_quote(a, each) for a in asked[:3]))
    if about and level < 2:
        # The task under way's description is its spec: what is still to do is in it.
        lines.append("Tracker's description: " + brief(about, ((2_400 if current else 900), 300)[level]))
    if episode.steps:
        marks = [f"{STEP_MARKS.get(status.lower().replace(' ', ''), '○')} {text}" for status, text in episode.steps]
        lines.append("Steps: " + "; ".join(marks[: (12, 8, 5)[level]]))
    files = _file_list(episode, root, level)
    if files:
        lines.append("Files: " + files)
    if episode.work and level == 0 and (current or not episode.concluded):
        described = episode.work[-(10 if current else 5) :]
        lines.append("Changes, as the agent described them: " + " | ".join(described))
    if episode.delegated and level == 0:
        lines.append("Delegated to subagents: " + "; ".join(_quote(d, 80) for d in episode.delegated))
    if episode.commits:
        where = f" on {episode.branch}" if episode.branch else ""
        pushed = f"; pushed to {episode.pushed}" if episode.pushed else "; not pushed"
        lines.append("Commits" + where + ": " + "; ".join(f"{h} {_quote(s, 120)}" for h, s in episode.commits) + pushed)
    elif episode.branch:
        lines.append(f"Branch: {episode.branch}")
    if episode.checks:
        keys = list(episode.checks)[-(6, 4, 3)[level] :]
        lines.append("Checks (last run): " + "; ".join(_check(k, episode) for k in keys))
    if episode.problems:
        each = (900, 480, 260, 160)[level]
        lines.extend("Problem: " + problem_text(p, each) for p in episode.problems[-(6, 4, 2, 2)[level] :])
    if episode.corrections:
        lines.extend("User's correction: " + _quote(c, 240) for c in episode.corrections[-3:])
    if episode.findings and level < 2:
        shown_findings = [f for f in episode.findings if not any(f in d or d in f for d in episode.decisions)]
        lines.extend("Found: " + f for f in shown_findings[-(4, 2)[level] :])
    if episode.decisions and level < 2:
        lines.extend("Decision: " + d for d in episode.decisions[-(8, 3)[level] :])
    if episode.closed is not None:
        reason = _quote(episode.closed, (400, 240, 160)[level]) if episode.closed else "(no reason given)"
        lines.append(f"Closed: {reason}")
    for ref, reason in episode.also_closed[:3]:
        lines.append(f"Also closed {ref}" + (f": {_quote(reason, 160)}" if reason and level < 2 else ""))
    if episode.concluded and level < 2:
        lines.append("Agent's report: " + head(" ".join(episode.concluded.split()), (900, 400)[level]))
    elif current and episode.report and level < 2:
        lines.append("Agent's notes while working: " + head(" ".join(episode.report.split()), (900, 400)[level]))
    last_note = episode.last_note or (note(episode.last_text) if current and episode.last_text else "")
    if current and last_note and level < 2 and last_note not in episode.report:
        lines.append("Agent's last note: " + _quote(last_note, 300))
    anchor = _anchor(episode)
    if anchor:
        lines.append(f"Details: {anchor}")
    return Task(heading, lines)


def state_now(story: Story, facts: Facts, root: str | None, plan_next: str | None, number: int) -> list[str]:
    """The "State now" bullets: what a resuming agent must know before anything else."""
    lines: list[str] = []
    current = story.current
    if current is not None:
        title = current.title or (first_sentence(current.asked[0], 120) if current.asked else "the latest request")
        ref = f"{current.ref} " if current.ref else ""
        lines.append(f"Task: T{number} {ref}{_quote(title, 160)} [{ending(current, True, story.git)}]")
    if story.git or story.commits:
        changed = [relative(p, root) for p in story.uncommitted]
        if changed:
            shown = changed[-12:]
            more = f" (+{len(changed) - len(shown)} more)" if len(changed) > len(shown) else ""
            lines.append(f"Changed and not committed: {', '.join(shown)}{more}")
        elif story.commits:
            lines.append("Changed and not committed: nothing (every change is in a commit)")
        if not story.commits:
            lines.append("No commit was made in this part of the session.")
    elif story.uncommitted:
        changed = [relative(p, root) for p in story.uncommitted]
        shown = changed[-12:]
        more = f" (+{len(changed) - len(shown)} more)" if len(changed) > len(shown) else ""
        lines.append(f"Changed (no git commit or push was run in this part of the session): {', '.join(shown)}{more}")
    if current is not None and current.changes and not current.checks and not current.answered:
        lines.append("Not yet built or tested: no check ran in this task since its changes.")
    for problem in story.failing()[-4:]:
        lines.append("Still failing: " + problem_text(problem, 320))
    if story.last_step:
        lines.append("Last step: " + short(story.last_step, 320))
    lines.extend(f"No result recorded for {label}: check its outcome" for label in story.waiting)
    said_next = " ".join(facts.plan)
    if story.last_note and current is not None and not story.ended_in_answer and story.last_note not in said_next:
        lines.append("Agent's last note: " + _quote(story.last_note, 300))
    lines.extend(next_steps(story, facts, plan_next, number))
    return lines


def sub_items(story: Story, number: int) -> list[tuple[str, str, str, str]]:
    """The sub-items of the work (an epic's children), ``(parent, id, state, title)``: the state is what this
    range did to them (closed, under way, worked on), else the tracker's as last shown. ``number`` is the
    current task's (the tasks are told as ``T<n>``)."""
    first = number - len(story.episodes) + 1
    worked: dict[str, int] = {}
    for n, episode in enumerate(story.episodes):
        for ref in (episode.ref, *episode.also):
            if ref:
                worked[ref] = first + n
    current = story.current
    out: list[tuple[str, str, str, str]] = []
    for parent, children in story.children.items():
        for ref, shown, title in children:
            task = worked.get(ref)
            where = f", T{task}" if task is not None else ""
            if ref in story.closed_refs:
                state = "closed" + where
            elif task is not None and current is not None and ref in (current.ref, *current.also):
                state = "closed" + where if current.closed is not None else f"under way{where}"
            elif task is not None:
                state = f"worked on{where}, not closed"
            elif shown.startswith("under way"):  # as an earlier summary left it; no task here goes on with it
                state = shown.replace("under way", "worked on", 1) + ", not closed"
            else:
                state = shown or "open"
            out.append((parent, ref, state, title))
    return out


def next_steps(story: Story, facts: Facts, plan_next: str | None, number: int = 0) -> list[str]:
    """What comes next: the task under way (with its open steps), the plan's next open item, the tracker's
    ready items, the agent's last stated plan. Each is a whole sentence a resuming agent can act on."""
    out: list[str] = []
    current = story.current
    if current is not None and current.closed is None and not story.ended_in_answer:
        title = current.title or (first_sentence(current.asked[0], 100) if current.asked else "the latest request")
        open_steps = [text for status, text in current.steps if status.lower() not in ("completed", "done")]
        more = f" (open steps: {'; '.join(open_steps[:4])})" if open_steps else ""
        out.append(f"Next: finish {current.ref + ' ' if current.ref else ''}{_quote(title, 140)}{more}.")
    if plan_next:
        out.append(f"Next open plan item: {plan_next}")
    ready = [(ref, title) for ref, title in story.ready if current is None or ref != current.ref]
    if ready:
        items = "; ".join(f"{ref} {_quote(title, 90)}" for ref, title in ready[:5])
        out.append(f"Tracker's ready items (as last listed, closed ones removed): {items}")
    under_way = current is not None and current.closed is None and not story.ended_in_answer
    if not under_way and not ready:
        for parent, ref, state, title in sub_items(story, number):
            if state.startswith(("open", "in progress")):
                out.append(f"Next item of {parent} (the first not closed as listed): {ref} {_quote(title, 120)}")
                break
    if facts.plan:
        out.append("The agent's last stated plan: " + " ".join(_quote(s, 200) for s in facts.plan[:3]))
    if current is not None and story.ended_in_answer and not out:
        out.append("Next: wait for the user's next request (the agent answered the last one).")
    return out


TRACKERS = ("bd", "beads", "gh", "glab")


def commands(facts: Facts, told: Story, root: str | None, budget: int) -> list[str]:
    """Every command that matters, once, with its runs and last outcome (the must-keep sheet names the same):
    builds, tests and linters first (with the line that told their outcome), then git and the rest; a tracker's
    commands (``bd show``, ``bd close``: the tasks tell what they did) are counted by kind in one line. Within
    ``budget`` characters."""
    groups: tuple[list[str], list[str], list[str]] = ([], [], [])
    tracked: Counter[str] = Counter()
    for stat, original in _merged(mattering(facts.commands)):
        words = stat.command.split()
        program = words[0] if words else ""
        if program in TRACKERS and stat.last_ok is not False:
            tracked[" ".join(words[:2])] += max(1, stat.runs)
            continue
        text = command_text(stat)
        if root and stat.cwd:
            text = text.replace(stat.cwd, relative(stat.cwd, root) or ".")
        outcome = check_line(told.outcomes.get(original) or "")
        if outcome and stat.last_ok is not None:
            text += f": {outcome}"
        groups[0 if CHECK_RE.search(stat.command) else 1 if program == "git" else 2].append(text)
    lines: list[str] = []
    used = 0
    left = 0
    for text in (t for group in groups for t in group):
        if lines and used + len(text) > budget:
            left += 1
            continue
        lines.append(text)
        used += len(text) + 3
    if left:
        lines.append(f"(+{left} more commands; search the history for them)")
    if tracked:
        lines.append(
            "Tracker commands (what they did is in the tasks): "
            + ", ".join(f"`{kind}` x{n}" if n > 1 else f"`{kind}`" for kind, n in tracked.most_common())
        )
    looked = explored(facts.commands)
    if looked:
        lines.append(looked)
    return lines


COMMAND_CHARS = 80
"""A command is shown with at most this many characters: a long one goes on with file arguments (``git add``
of ten paths, a linter run on each file it changed), whose head tells what it runs."""
SAME_HEAD = 60
"""Long commands alike in this many characters are told as one (a linter run on one file, then on three): as many
as a must-keep sheet's probe reads (:data:`ctxd.compaction.ledger.mustkeep.PROBE_CHARS`), so none is added back."""


def _merged(stats: Sequence[CommandStat]) -> list[tuple[CommandStat, str]]:
    """``stats`` with each command cut to :data:`COMMAND_CHARS`, and long ones that begin alike
    (:data:`SAME_HEAD`) merged into one: their runs and failures added, the newest run's command and outcome
    kept, in the place of the first. Each with the command it shows as it was run."""
    out: list[tuple[CommandStat, str]] = []
    alike: dict[str, int] = {}
    for stat in stats:
        command = stat.command
        shown = attrs.evolve(stat, command=head(command, COMMAND_CHARS) if len(command) > COMMAND_CHARS else command)
        if len(command) <= SAME_HEAD:
            out.append((shown, stat.command))
            continue
        key = f"{stat.cwd}\0{command[:SAME_HEAD]}"
        at = alike.get(key)
        if at is None:
            alike[key] = len(out)
            out.append((shown, stat.command))
            continue
        known, original = out[at]
        newer, original = (shown, stat.command) if stat.last_index > known.last_index else (known, original)
        out[at] = (
            attrs.evolve(
                newer,
                runs=max(1, known.runs) + max(1, stat.runs),
                failed=known.failed + stat.failed,
                last_index=max(known.last_index, stat.last_index),
            ),
            original,
        )
    return out


def files(facts: Facts, root: str | None, budget: int, told: Story | None = None) -> list[str]:
    """The files changed (those no task block names) and read, most recent first, within ``budget`` characters
    each list."""
    out: list[str] = []
    if root:
        out.append(f"Project root: {root} (paths are relative to it)")
    named = {path for episode in (told.episodes if told is not None else ()) for path in episode.files}
    changed = [
        relative(p, root) + (f" ({op})" if op in ("created", "deleted") else "")
        for p, op in reversed(facts.done_files.items())
        if p not in named
    ]
    if changed:
        out.append("Changed: " + _joined(changed, budget))
    read = [relative(p, root) for p in reversed(facts.reads) if p not in facts.done_files]
    if read:
        out.append("Read: " + _joined(read, budget))
    return out


def _joined(items: Sequence[str], budget: int) -> str:
    out: list[str] = []
    used = 0
    for item in items:
        if out and used + len(item) + 2 > budget:
            break
        out.append(item)
        used += len(item) + 2
    more = len(items) - len(out)
    return ", ".join(out) + (f" (+{more} more)" if more else "")
