"""The offline summary's sections, filled from the scanned :class:`~.facts.Facts`.

Owns what goes where: the Goal (the session's first request, then the latest one), the user's constraints
(every constraint sentence of their own prose), Progress (answered requests; what is under way; only the
failures nothing resolved), the agent's decisions, Next Steps (the agent's last stated plan and the calls still
waiting for a result, never failures), and Critical Context: every file modified and read, every distinct
command with its runs and outcome, every distinct error line, what the user reported, each list compressed
(not dropped) to a character budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxd.compaction.summarizers.document import ANSWERED, LATEST, STATS, SummaryDoc, cap, dedupe
from ctxd.compaction.summarizers.exchanges import Exchange
from ctxd.compaction.summarizers.facts import CommandStat, Facts
from ctxd.compaction.summarizers.mining import first_line, head, prose, short

FILES_LABEL = "Files modified:"
READS_LABEL = "Files read:"
COMMANDS_LABEL = "Commands (runs, outcome):"
ERROR_LABEL = "Error seen:"
REPORTED_LABEL = "User reported:"
REQUESTS_LABEL = "Other requests (oldest first):"


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
        doc.goal.append(short(first, 400))
    if latest and (first is None or latest.strip() != first.strip()):
        doc.goal.append(LATEST + short(latest, 400))


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
    """The user's other requests, oldest first (the goal and the latest request, ``shown``, are in Goal)."""
    skip = {" ".join(t.split()) for t in shown if t}
    texts = dedupe([head(t, 160) for _, t in facts.requests if " ".join(t.split()) not in skip])
    if texts:
        doc.critical.append(f"{REQUESTS_LABEL} {joined(texts, max(1_000, budget // 4), ' | ')}")


def decisions(doc: SummaryDoc, facts: Facts, limit: int = 30) -> None:
    doc.decisions = cap(dedupe(facts.decisions), limit, head=3)


def progress(
    doc: SummaryDoc, facts: Facts, newest: list[Exchange], latest: str | None, prefix_facts: Facts | None
) -> None:
    completed = [e for e in newest if e.user and e.response and e.status is None and not e.user.startswith("(")][:6]
    for exchange in reversed(completed):
        answer = first_line(exchange.response or "", 200)
        doc.done.append(f"{short(exchange.user or '', 160)} -> {answer}")

    last = newest[0] if newest else None
    if latest:
        state = ""
        if prefix_facts is not None:
            state = " (under way; see Turn Context)"
        elif last is not None and last.status:
            state = f" ({status_text(last.status)})"
        elif last is not None and last.response:
            state = " " + ANSWERED
        doc.in_progress.append(short(latest, 300) + state)
    open_calls = facts.open_calls[-5:]
    doc.in_progress.extend(f"No result recorded for {c.label}" for c in open_calls)
    doc.blocked = [e.text for e in facts.unresolved[-8:]]

    steps: list[str] = [f"Check the outcome of {c.label} (no result was recorded)" for c in open_calls[-3:]]
    steps.extend(facts.plan)
    unfinished = last is not None and (last.status or not last.response or prefix_facts is not None)
    if latest and unfinished:
        steps.append("Continue with the latest request: " + gist(latest, 200))
    doc.next_steps = dedupe(steps)[:8]


def _file(path: str, op: str) -> str:
    path = short(path, 160)
    return f"{path} ({op})" if op in ("created", "deleted") else path


def _commands(stats: Mapping[str, CommandStat]) -> list[str]:
    """Distinct commands, the most often run first, then the most recent."""
    ordered = sorted(stats.values(), key=lambda c: (-c.runs, -c.last_index))
    return [c.text for c in ordered]


def critical(doc: SummaryDoc, facts: Facts, budget: int) -> None:
    """Files, commands and errors, each list within its share of ``budget`` characters."""
    modified = [_file(p, facts.done_files[p]) for p in reversed(facts.done_files)]
    if modified:
        doc.critical.append(f"{FILES_LABEL} {joined(modified, max(1_000, budget // 4))}")
    reads = [short(p, 160) for p in reversed(facts.reads) if p not in facts.done_files]
    if reads:
        doc.critical.append(f"{READS_LABEL} {joined(reads, max(1_000, budget // 4))}")
    commands = _commands(facts.commands)
    if commands:
        doc.critical.append(f"{COMMANDS_LABEL} {joined(commands, max(1_200, budget // 2), '; ')}")
    seen: set[str] = set()
    errors = []
    # Unresolved first, then the newest; one bullet per distinct error line.
    for error in sorted(reversed(facts.errors), key=lambda e: e.resolved):
        if error.label == "User reported" or error.line in seen:
            continue
        seen.add(error.line)
        errors.append(f"{ERROR_LABEL} {error.text}{' (resolved)' if error.resolved else ''}")
    left = max(1_000, budget // 4)
    for shown, item in enumerate(errors):
        if shown and left < len(item):
            doc.critical.append(f"{ERROR_LABEL} (+{len(errors) - shown} more, not shown)")
            break
        doc.critical.append(item)
        left -= len(item)
    for line in dedupe(facts.reported)[:12]:
        doc.critical.append(f"{REPORTED_LABEL} {short(line, 300)}")
    errors_count = len(facts.errors)
    doc.critical.append(
        f"{STATS}{facts.messages} ({len(facts.user_indices)} from the user, {facts.call_count} tool calls, "
        f"{errors_count} error{'s' if errors_count != 1 else ''})"
    )


def turn_context(prefix: Sequence[Mapping[str, Any]], facts: Facts, exchange: Exchange, each: int) -> list[str]:
    items: list[str] = []
    if exchange.user:
        items.append("Request: " + short(exchange.user, 600))
    if exchange.modified or exchange.created or exchange.deleted:
        paths = [*exchange.modified, *exchange.created, *exchange.deleted]
        items.append("Changed so far: " + joined([short(p, each) for p in paths], 1_500))
    if exchange.viewed:
        items.append("Read so far: " + joined([short(p, each) for p in exchange.viewed], 1_500))
    if facts.commands:
        items.append("Commands so far: " + joined(_commands(facts.commands), 1_500, "; "))
    items.extend("Error: " + e.text for e in facts.errors[-2:])
    if facts.last_assistant_text:
        items.append("Agent's latest note: " + short(facts.last_assistant_text, 600))
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
    if facts.commands:
        parts.append("ran: " + ", ".join(f"`{head(c.command, 60)}`" for c in list(facts.commands.values())[-3:]))
    if facts.last_assistant_text:
        parts.append("agent: " + head(first_line(facts.last_assistant_text, 200), 160))
    noun = "message" if facts.messages == 1 else "messages"
    line = f"{facts.messages} earlier {noun}" + (": " + "; ".join(parts) if parts else ": context only, no requests.")
    return head(line, max(24, limit))
