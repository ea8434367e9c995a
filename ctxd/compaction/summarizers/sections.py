"""The offline summary's sections, filled from the scanned :class:`~.facts.Facts`.

Owns what goes where: the Goal (the session's first request, then the latest one), the user's constraints
(every constraint sentence of their own prose), Progress (the newest answered requests; what is under way;
only the failures nothing resolved), the agent's decisions, Next Steps (the agent's last stated plan and the
calls still waiting for a result, never failures), and Critical Context: every file modified and read, the
commands that matter with their runs and last outcome (builds, tests, runs, installs, git changes, anything
whose last run failed; read-only exploration such as ``ls``/``grep``/``git log`` is only counted, see
:func:`ctxd.compaction.shell.command_matters`), the error lines not already under Blocked, what the user
reported, the user's other requests and the agent's last answer, each within a character budget
(:class:`Budget`) that grows with what the summary replaces.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ctxd.compaction.shell import command_matters
from ctxd.compaction.summarizers import plans
from ctxd.compaction.summarizers.commands import commands_that_matter, explored
from ctxd.compaction.summarizers.document import (
    ANSWER_LABEL,
    ANSWERED,
    COMMANDS_LABEL,
    CONTINUE_LATEST,
    LATEST,
    LATEST_POINTER,
    UNDER_WAY,
    SummaryDoc,
    cap,
    dedupe,
)
from ctxd.compaction.summarizers.exchanges import Exchange
from ctxd.compaction.summarizers.facts import ErrorFact, Facts
from ctxd.compaction.summarizers.mining import first_line, head, prose, short
from ctxd.compaction.summarizers.plans import NEXT_PLAN_LABEL, Plan
from ctxd.compaction.summarizers.serialize import middle_truncate

FILES_LABEL = "Files modified:"
READS_LABEL = "Files read:"
ERROR_LABEL = "Error seen:"
REPORTED_LABEL = "User reported:"
REQUESTS_LABEL = "Other requests (oldest first):"


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


@attrs.frozen
class Budget:
    """How much each part of a summary may take. The lists that must be whole (constraints, files) get
    ``lists`` characters; the rest scales with the input so that a summary stays near 2% of what it replaces
    (see :meth:`of`)."""

    lists: int = 3_000
    """Characters for the lists that must be whole: each list of files gets a fourth, the constraints a half
    (from 3,000 to 30,000: one twentieth of the input; a long session touched many files)."""
    done: int = 2
    """Answered requests shown under Done (the newest)."""
    decisions: int = 8
    """The newest decisions, each with its reason (as many as the must-keep sheet asks for)."""
    requests: int = 200
    """Characters for the user's other requests (the newest kept)."""
    commands: int = 1_000
    """Characters for the commands that matter (all of them, as a rule: the must-keep check wants each)."""
    errors: int = 600
    """Characters for the error lines not under Blocked."""
    answer: int = 200
    """Characters of the agent's last answer."""
    plan: int = 600
    """Characters for the open items of the plan the session follows."""
    story: int = 600
    """Characters for the story as a whole (a hundredth of the input, at most the summariser's ``total_chars``);
    sections of earlier summaries that this layout does not have share it."""

    @classmethod
    def of(cls, input_chars: int, narrative_chars: int = 12_000) -> Budget:
        """The budget for a summary of ``input_chars`` characters; ``narrative_chars`` caps the parts that tell
        the story (answered requests, other requests, the last answer)."""
        story = _clamp(input_chars // 100, 600, max(600, narrative_chars))
        lists = _clamp(input_chars // 20, 3_000, 30_000)
        return cls(
            lists=lists,
            done=2,
            decisions=8,
            requests=_clamp(story // 16, 200, 800),
            commands=max(1_200, lists // 2),
            errors=_clamp(input_chars // 250, 600, 3_000),
            answer=_clamp(story // 12, 200, 600),
            plan=_clamp(story // 5, 400, 1_200),
            story=story,
        )


def joined(items: Sequence[str], budget: int, sep: str = ", ") -> str:
    """``items`` joined until ``budget`` characters, then "(+N more)"."""
    out: list[str] = []
    used = 0
    for item in items:
        if out and used + len(sep) + len(item) > budget:
            break
        out.append(item)
        used += len(item) + (len(sep) if len(out) > 1 else 0)
    more = len(items) - len(out)
    return sep.join(out) + (f" (+{more} more)" if more > 0 else "")


def goal(doc: SummaryDoc, facts: Facts, latest: str | None, first: str | None) -> None:
    del facts
    if first:
        doc.goal.append(short(first, 300))
    if latest and (first is None or latest.strip() != first.strip()):
        doc.goal.append(LATEST + short(latest, 160))


def constraints(doc: SummaryDoc, facts: Facts, budget: int) -> None:
    """Every constraint sentence of the user's, the newest kept when they exceed ``budget`` characters."""
    items = dedupe([s for _, s in facts.constraints])
    kept: list[str] = []
    used = 0
    for item in reversed(items):
        if kept and used + len(item) > budget:
            break
        kept.append(item)
        used += len(item) + 3
    doc.constraints = kept[::-1]


def gist(text: str, limit: int) -> str:
    """A user message in brief: its prose (a pasted log or listing left out) cut to ``limit``, or its head."""
    words = prose(text)
    if words and len(words) < len(text) * 0.8:
        return short(" … ".join(words.splitlines()), limit)
    return short(text, limit)


def requests(doc: SummaryDoc, facts: Facts, budget: int, shown: Sequence[str | None]) -> None:
    """The user's other requests, oldest first (the goal and the latest request, ``shown``, are in Goal):
    the first of the range and the newest that fit ``budget`` characters."""
    skip = {" ".join(t.split()) for t in shown if t}
    texts = dedupe([head(t, 80) for _, t in facts.requests if " ".join(t.split()) not in skip])
    if not texts:
        return
    kept: list[str] = []
    used = len(texts[0])
    for text in reversed(texts[1:]):
        if kept and used + len(text) + 3 > budget:
            break
        kept.append(text)
        used += len(text) + 3
    left_out = len(texts) - 1 - len(kept)
    items = [texts[0], *([f"(+{left_out} more)"] if left_out else []), *reversed(kept)]
    doc.critical.append(f"{REQUESTS_LABEL} {' | '.join(items)}")


def decisions(doc: SummaryDoc, facts: Facts, limit: int = 30, prefix_facts: Facts | None = None) -> None:
    """The agent's decisions, each with its reason when it gave one (the newest ``limit``)."""
    found = [*facts.decisions, *(prefix_facts.decisions if prefix_facts is not None else ())]
    doc.decisions = cap(dedupe([short(d, 240) for d in found]), limit)


def plan(doc: SummaryDoc, found: Plan | None, budget: int) -> None:
    """The plan the session follows (see :mod:`.plans`): what is done, the open items in order."""
    if found is not None:
        doc.plan = plans.render(found, budget)


def progress(
    doc: SummaryDoc,
    facts: Facts,
    newest: list[Exchange],
    latest: str | None,
    prefix_facts: Facts | None,
    done: int = 6,
    plan_next: str | None = None,
) -> None:
    """Done (the newest ``done`` answered requests), In Progress, Blocked and Next Steps."""
    completed = [e for e in newest if e.user and e.response and e.status is None and not e.user.startswith("(")]
    for exchange in reversed(completed[:done]):
        answer = first_line(exchange.response or "", 80)
        doc.done.append(f"{head(exchange.user or '', 60)} -> {answer}")

    last = newest[0] if newest else None
    if latest:
        state = ""
        if prefix_facts is not None:
            state = " " + UNDER_WAY
        elif last is not None and last.status:
            state = f" ({status_text(last.status)})"
        elif last is not None and last.response:
            state = " " + ANSWERED
        doc.in_progress.append(LATEST_POINTER + state)
    open_calls = facts.open_calls[-5:]
    doc.in_progress.extend(f"No result recorded for {c.label}" for c in open_calls)
    lines: dict[str, str] = {}  # one failure per error line (the newest): a re-run that failed alike adds nothing
    for error in facts.unresolved:
        lines.pop(error.line, None)
        lines[error.line] = error_text(error)
    doc.blocked = list(lines.values())[-8:]

    steps: list[str] = [f"Check the outcome of {c.label} (no result was recorded)" for c in open_calls[-3:]]
    if plan_next:
        steps.append(NEXT_PLAN_LABEL + plan_next)
    steps.extend((prefix_facts.plan if prefix_facts is not None else None) or facts.plan)
    unfinished = last is not None and (last.status or not last.response or prefix_facts is not None)
    if latest and unfinished:
        steps.append(CONTINUE_LATEST)
    doc.next_steps = dedupe(steps)[:8]


def _file(path: str, op: str) -> str:
    path = short(path, 160)
    return f"{path} ({op})" if op in ("created", "deleted") else path


def error_text(error: ErrorFact) -> str:
    """What failed (cut to 100 characters) and the line saying how."""
    return f"{short(error.label, 80)}: {error.line}"


def critical(doc: SummaryDoc, facts: Facts, budget: Budget) -> None:
    """Files, the commands that matter, errors and what the user reported, each list within its share of
    ``budget``."""
    lists = budget.lists
    modified = [_file(p, facts.done_files[p]) for p in reversed(facts.done_files)]
    if modified:
        doc.critical.append(f"{FILES_LABEL} {joined(modified, max(1_000, lists // 4))}")
    reads = [short(p, 160) for p in reversed(facts.reads) if p not in facts.done_files]
    if reads:
        doc.critical.append(f"{READS_LABEL} {joined(reads, max(1_000, lists // 4))}")
    blocked = " ".join(doc.blocked)
    # A command that failed last and is named under Blocked (with its error) is not listed twice.
    stats = {k: c for k, c in facts.commands.items() if c.last_ok is not False or c.command[:60] not in blocked}
    commands = commands_that_matter(stats)
    if commands:
        doc.critical.append(f"{COMMANDS_LABEL} {joined(commands, budget.commands, '; ')}")
    looked = explored(facts.commands)
    if looked:
        doc.critical.append(looked)
    _errors(doc, facts, budget.errors)
    reported = dedupe(facts.reported)[:12]
    if reported:
        doc.critical.append(f"{REPORTED_LABEL} {' | '.join(short(line, 200) for line in reported)}")


def _failed(key: str, error: ErrorFact) -> str:
    """What failed: a command by its core and directory (one name for its runs with other output filters)."""
    if not key.startswith("cmd:"):
        return short(error.label, 80)
    core, _, cwd = key[4:].partition(" [in ")
    return f"`{short(core, 80)}`" + (f" in {short(cwd[:-1], 60)}" if cwd else "") + " failed"


def _errors(doc: SummaryDoc, facts: Facts, budget: int) -> None:
    """The distinct error lines not under Blocked, unresolved first, then the newest, grouped by what failed
    (one bullet for the failures of a command), within ``budget`` characters."""
    blocked = set(doc.blocked)
    seen: set[str] = set()
    groups: dict[tuple[str, bool], list[ErrorFact]] = {}
    for error in sorted(reversed(facts.errors), key=lambda e: e.resolved):
        if error.label == "User reported" or error.line in seen or error_text(error) in blocked:
            continue
        seen.add(error.line)
        groups.setdefault((error.key or error.label, error.resolved), []).append(error)
    left = budget
    hidden = 0
    for (key, resolved), errors in groups.items():
        item = f"{ERROR_LABEL} {_failed(key, errors[0])}{' (resolved)' if resolved else ''}: "
        lines: list[str] = []
        for error in errors:
            if lines and left < len(item) + len(error.line):
                hidden += 1
                continue
            lines.append(error.line)
            left -= len(error.line) + 3
        if lines and (left >= len(item) or not hidden):
            doc.critical.append(item + " | ".join(lines))
            left -= len(item)
        else:
            hidden += len(lines)
    if hidden:
        doc.critical.append(f"{ERROR_LABEL} (+{hidden} more, not shown)")


def last_answer(doc: SummaryDoc, newest: list[Exchange], limit: int) -> None:
    """The agent's answer to the latest request, in brief (it is what the user last read)."""
    last = newest[0] if newest else None
    if last is not None and last.response and last.status is None:
        doc.critical.append(f"{ANSWER_LABEL} {short(gist(last.response, limit * 2), limit)}")


def other_sections(extra: list[tuple[str, str]], budget: int) -> list[tuple[str, str]]:
    """Sections of earlier summaries that this layout does not have (a model's own headings), each cut in the
    middle so that together they take about ``budget`` characters (at least 2,000); a must-keep section stays
    whole (the check reads it back)."""
    cut = [t for t, _ in extra if not t.lower().startswith("must keep")]
    if not cut:
        return extra
    each = max(300, max(2_000, budget) // len(cut))
    return [(t, b if t not in cut else middle_truncate(b, each)) for t, b in extra]


def turn_context(
    prefix: Sequence[Mapping[str, Any]], facts: Facts, exchange: Exchange, each: int, latest: str | None = None
) -> list[str]:
    """The split turn in brief: its request (a pointer when it is the ``latest`` request, which the Goal states)
    and how far the agent got (its files, commands and errors are in the lists of Critical Context)."""
    items: list[str] = []
    if exchange.user and latest is not None and exchange.user.strip() == latest.strip():
        items.append("Request: the latest request (see Goal)")
    elif exchange.user:
        items.append("Request: " + short(exchange.user, 200))
    paths = [*exchange.modified, *exchange.created, *exchange.deleted]
    if paths:
        items.append(
            f"Changed so far: {len(paths)} file{'s' if len(paths) != 1 else ''}, the latest {short(paths[-1], each)}"
        )
    if facts.last_assistant_text:
        items.append("Agent's latest note: " + short(facts.last_assistant_text, 300))
    del prefix
    return items


def status_text(status: str, limit: int = 200) -> str:
    if status == "continues":
        return "still working when this part of the history ends"
    if status == "interrupted":
        return "interrupted before finishing"
    return short("stopped by an " + status, limit)


def one_line(facts: Facts, limit: int) -> str:
    """The whole summary in one line, for a range with almost nothing in it."""
    parts: list[str] = []
    if facts.requests:
        parts.append("asked: " + " / ".join(head(t, 120) for _, t in facts.requests[-2:]))
    if facts.done_files:
        parts.append("changed: " + ", ".join(list(facts.done_files)[-4:]))
    ran = [c for c in facts.commands.values() if command_matters(c.command, c.last_ok)] or list(facts.commands.values())
    if ran:
        parts.append("ran: " + ", ".join(f"`{head(c.command, 60)}`" for c in ran[-3:]))
    if facts.last_assistant_text:
        parts.append("agent: " + head(first_line(facts.last_assistant_text, 200), 160))
    noun = "message" if facts.messages == 1 else "messages"
    line = f"{facts.messages} earlier {noun}" + (": " + "; ".join(parts) if parts else ": context only, no requests.")
    return head(line, max(24, limit))
