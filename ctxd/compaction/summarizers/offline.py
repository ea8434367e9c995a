"""The offline summariser: a deterministic, model-free structured summary with an abridged history.

Owns what goes into each section when no model is configured (or the model failed): the goal from the
first and latest requests, constraints from the user's own sentences, progress from tool outcomes, decisions
from the agent's sentences, next steps from what is unfinished, critical context from recent files, commands
and errors. It appends an abridged history, newest exchange first within a character budget: for each
exchange the user's message, the files changed, created, deleted and viewed, the commands run and the agent's
final answer, each field cut in the middle to its own limit. An earlier summary is merged, not replaced.
Same input, same bytes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ctxd.compaction.fileops import strip_file_blocks
from ctxd.compaction.summarizers.base import Progress, SummaryRequest, SummaryResult, report
from ctxd.compaction.summarizers.document import (
    ANSWERED,
    LATEST,
    STATS,
    SummaryDoc,
    cap,
    dedupe,
    merge,
    parse_summary,
    render,
)
from ctxd.compaction.summarizers.facts import (
    CONSTRAINT_RE,
    DECISION_RE,
    MINE_CHARS,
    NEXT_RE,
    Exchange,
    Facts,
    build_exchange,
    exchange_bounds,
    first_line,
    scan,
    sentences,
    short,
)
from ctxd.compaction.summarizers.serialize import content_text, middle_truncate
from ctxd.context.tokens import estimate_tokens


@attrs.frozen
class AbridgedLimits:
    """Character limits of the abridged history (per field, and in total)."""

    total_chars: int = 12_000
    user_chars: int = 1_000
    response_chars: int = 2_000
    action_chars: int = 200
    files_per_kind: int = 10
    commands: int = 10


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
MIN_HISTORY_CHARS = 1_500
"""The abridged history's smallest budget, however little there is to summarise."""
_THREAD_THRESHOLD = 5_000
"""Requests with more messages than this are summarised in a worker thread, off the event loop."""


def _join(items: Sequence[str], limit: int, each: int) -> str:
    shown = [middle_truncate(i, each) for i in items[:limit]]
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" (+{more} more)" if more > 0 else "")


def _recent(order: Mapping[str, Any], limit: int) -> list[str]:
    """The ``limit`` most recently touched keys of an insertion-ordered mapping, newest first."""
    keys = list(order)
    return keys[: -limit - 1 : -1] if limit else []


class OfflineSummarizer:
    """Builds the summary from the messages alone (see the module docstring)."""

    name = "offline"

    def __init__(self, limits: AbridgedLimits | None = None, *, total_chars: int | None = None) -> None:
        limits = limits or AbridgedLimits()
        if total_chars is not None:
            limits = attrs.evolve(limits, total_chars=total_chars)
        self.limits = limits

    async def summarize(self, request: SummaryRequest, progress: Progress | None = None) -> SummaryResult:
        report(progress, "offline summary", 0.0)
        size = len(request.messages) + len(request.turn_prefix)
        builder = self._scaled(request)
        text = await asyncio.to_thread(builder.build, request) if size > _THREAD_THRESHOLD else builder.build(request)
        report(progress, "done", 1.0)
        return SummaryResult(text=text, summarizer=self.name, model=None, path="offline", calls=0)

    def _scaled(self, request: SummaryRequest) -> OfflineSummarizer:
        """A summariser whose history budget is at most half of what it summarises: a summary must
        make the context smaller, never larger."""
        # Measure only until the input is clearly big enough for the full budget.
        enough = 2 * self.limits.total_chars
        chars = 0
        for m in (*request.turn_prefix, *reversed(request.messages)):
            chars += 4 * estimate_tokens(m)
            if chars >= enough:
                return self
        budget = max(MIN_HISTORY_CHARS, chars // 2)
        if budget >= self.limits.total_chars:
            return self
        return OfflineSummarizer(attrs.evolve(self.limits, total_chars=budget))

    # -- the whole summary -------------------------------------------------------------------------------------

    def build(self, request: SummaryRequest) -> str:
        """The summary text for ``request`` (synchronous, deterministic)."""
        messages = request.messages
        facts = scan(messages)
        bounds = exchange_bounds(messages, facts.user_indices)
        newest, cut_short = self._exchanges_newest_first(messages, bounds, facts)
        prefix_facts = scan(request.turn_prefix) if request.turn_prefix else None
        latest_request = (
            (prefix_facts.latest_user if prefix_facts else None) or facts.latest_request or facts.latest_user
        )

        doc = SummaryDoc()
        self._goal(doc, facts, latest_request)
        self._progress(doc, facts, newest, latest_request, prefix_facts)
        self._critical(doc, facts, messages, request.custom_instructions)
        if prefix_facts is not None:
            doc.turn_context = self._turn_context(request.turn_prefix, prefix_facts)

        earlier: SummaryDoc | None = None
        previous_texts = [request.previous_summary or ""] + [
            str(m.get("summary") or "") for m in messages if m.get("role") in ("compactionSummary", "branchSummary")
        ]
        for text in previous_texts:
            text = strip_file_blocks(text).strip()
            if not text:
                continue
            parsed = parse_summary(text) or SummaryDoc(extra=[("Earlier Summary", middle_truncate(text, 8_000))])
            earlier = merge(earlier, parsed) if earlier else parsed
        if earlier is not None:
            doc = merge(earlier, doc)
        history, note = self._abridged(newest, doc.history, cut_short)
        return render(doc, history, note)

    def _goal(self, doc: SummaryDoc, facts: Facts, latest: str | None) -> None:
        first = facts.first_request or facts.first_user
        if first:
            doc.goal.append(short(first, 400))
        if latest and (first is None or latest.strip() != first.strip()):
            doc.goal.append(LATEST + short(latest, 400))
        found: list[str] = []
        for text in facts.constraint_texts:
            found.extend(sentences(text, CONSTRAINT_RE, 4))
        doc.constraints = cap(dedupe(found), 15, head=6)
        decisions: list[str] = []
        for text in facts.assistant_texts:
            if DECISION_RE.search(text, 0, MINE_CHARS):
                decisions.extend(sentences(text, DECISION_RE, 2, max_len=240))
        doc.decisions = cap(dedupe(decisions), 12)

    def _progress(
        self,
        doc: SummaryDoc,
        facts: Facts,
        newest: list[Exchange],
        latest: str | None,
        prefix_facts: Facts | None,
    ) -> None:
        completed = [e for e in newest if e.user and e.response and e.status is None][:6]
        for exchange in reversed(completed):
            answer = first_line(exchange.response or "", 200)
            doc.done.append(f"{short(exchange.user or '', 160)} -> {answer}")
        changed: dict[str, list[str]] = {"created": [], "deleted": [], "changed": []}
        for path in reversed(facts.done_files):
            op = facts.done_files[path]
            changed["created" if op == "created" else "deleted" if op == "deleted" else "changed"].append(path)
        for label, paths in (("Changed", changed["changed"]), ("Created", changed["created"])):
            if paths:
                doc.done.append(f"{label}: {_join(paths, 12, 160)}")
        if changed["deleted"]:
            doc.done.append(f"Deleted: {_join(changed['deleted'], 12, 160)}")
        ok_commands = _recent(facts.ok_commands, 6)
        if ok_commands:
            doc.done.append("Ran successfully: " + "; ".join(f"`{short(c, 160)}`" for c in ok_commands))

        last = newest[0] if newest else None
        if latest:
            state = ""
            if prefix_facts is not None:
                state = " (under way; see Turn Context)"
            elif last is not None and last.status:
                state = f" ({_status_text(last.status)})"
            elif last is not None and last.response:
                state = " " + ANSWERED
            doc.in_progress.append(short(latest, 300) + state)
        open_calls = facts.open_calls[-5:]
        doc.in_progress.extend(f"No result recorded for {c.label}" for c in open_calls)
        unresolved = facts.unresolved[-5:]
        doc.blocked = [e.text for e in unresolved]

        steps: list[str] = [f"Check the outcome of {c.label} (no result was recorded)" for c in open_calls[-3:]]
        steps.extend(f"Resolve: {short(e.text, 200)}" for e in unresolved[-3:])
        if facts.last_assistant_text:
            steps.extend(sentences(facts.last_assistant_text, NEXT_RE, 3, max_len=240))
        if latest and last is not None and (last.status or not last.response or prefix_facts is not None):
            steps.append("Continue with the latest request: " + short(latest, 200))
        doc.next_steps = dedupe(steps)[:8] or ["Wait for the user's next request."]

    def _critical(
        self, doc: SummaryDoc, facts: Facts, messages: Sequence[Mapping[str, Any]], focus: str | None
    ) -> None:
        changed = _recent(facts.done_files, 10)
        if changed:
            doc.critical.append("Recently changed files: " + ", ".join(short(p, 160) for p in changed))
        reads = [p for p in _recent(facts.reads, 14) if p not in facts.done_files][:10]
        if reads:
            doc.critical.append("Recently read files: " + ", ".join(short(p, 160) for p in reads))
        commands = _recent(facts.commands, 8)
        if commands:
            doc.critical.append(
                "Recent commands: "
                + "; ".join(f"`{short(c, 160)}`{'' if facts.commands[c] else ' (failed)'}" for c in commands)
            )
        open_errors = {id(e) for e in facts.unresolved}
        for error in facts.errors[-3:]:
            resolved = "" if id(error) in open_errors else " (resolved later)"
            doc.critical.append(f"Error seen: {error.text}{resolved}")
        if focus and focus.strip():
            doc.critical.append("Requested focus: " + short(focus, 300))
            doc.critical.extend(f"On that focus: {s}" for s in self._focus_sentences(messages, focus))
        errors = len(facts.errors)
        doc.critical.append(
            f"{STATS}{facts.messages} ({len(facts.user_indices)} from the user, {facts.call_count} tool calls, "
            f"{errors} error{'s' if errors != 1 else ''})"
        )

    @staticmethod
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
                found.extend(sentences(text, pattern, 2, max_len=240))
            if len(found) >= 6:
                break
        return list(reversed(dedupe(found)[:6]))

    def _turn_context(self, prefix: Sequence[Mapping[str, Any]], facts: Facts) -> list[str]:
        exchange = build_exchange(prefix, 0, len(prefix), facts.calls)
        items: list[str] = []
        if exchange.user:
            items.append("Request: " + short(exchange.user, 600))
        each = self.limits.action_chars
        if exchange.modified or exchange.created or exchange.deleted:
            paths = [*exchange.modified, *exchange.created, *exchange.deleted]
            items.append("Changed so far: " + _join(paths, 12, each))
        if exchange.viewed:
            items.append("Read so far: " + _join(list(exchange.viewed), 12, each))
        if exchange.commands:
            items.append("Commands so far: " + "; ".join(_command(c, n, each) for c, n in exchange.commands[-8:]))
        items.extend("Error: " + e.text for e in facts.errors[-2:])
        if facts.last_assistant_text:
            items.append("Agent's latest note: " + short(facts.last_assistant_text, 600))
        return items

    # -- abridged history --------------------------------------------------------------------------------------

    def _exchanges_newest_first(
        self, messages: Sequence[Mapping[str, Any]], bounds: list[tuple[int, int]], facts: Facts
    ) -> tuple[list[Exchange], bool]:
        """Exchanges from the newest back, only as many as the history budget could possibly show; and whether
        older ones were left unbuilt."""
        out: list[Exchange] = []
        floor = 48  # each rendered exchange takes at least this many characters
        for start, end in reversed(bounds):
            if len(out) * floor > self.limits.total_chars and len(out) >= 6:
                return out, True
            out.append(build_exchange(messages, start, end, facts.calls))
        return out, False

    def render_exchange(self, exchange: Exchange) -> str:
        lim = self.limits
        lines = ["<exchange>"]
        user = exchange.user if exchange.user is not None else "(no user message; context before the first request)"
        lines.append("User: " + middle_truncate(user.strip() or "(empty message)", lim.user_chars))
        for label, paths in (
            ("Changed", exchange.modified),
            ("Created", exchange.created),
            ("Deleted", exchange.deleted),
            ("Viewed", exchange.viewed),
        ):
            if paths:
                lines.append(f"{label}: {_join(list(paths), lim.files_per_kind, lim.action_chars)}")
        if exchange.commands:
            shown = [_command(c, note, lim.action_chars) for c, note in exchange.commands[: lim.commands]]
            more = len(exchange.commands) - len(shown)
            lines.append("Commands: " + "; ".join(shown) + (f" (+{more} more)" if more > 0 else ""))
        if exchange.response:
            lines.append("Agent: " + middle_truncate(exchange.response.strip(), lim.response_chars))
        if exchange.status:
            lines.append(f"Agent: ({_status_text(exchange.status, lim.action_chars)})")
        lines.append("</exchange>")
        return "\n".join(lines)

    def _abridged(
        self, newest: list[Exchange], older_blocks: list[str], cut_short: bool = False
    ) -> tuple[list[str], str | None]:
        """Rendered exchanges, newest first, until the total budget is spent; plus a note on what was left out."""
        budget = self.limits.total_chars
        blocks: list[str] = []
        used = 0
        new_blocks = [self.render_exchange(e) for e in newest if e.user is not None or e.has_actions or e.response]
        candidates = new_blocks + [b for b in older_blocks if b not in new_blocks]
        for block in candidates:
            if used + len(block) + 1 > budget:
                if not blocks and budget > 0:
                    blocks.append(middle_truncate(block, budget))
                break
            blocks.append(block)
            used += len(block) + 1
        left_out = cut_short or len(blocks) < len(candidates)
        return blocks, ("(older exchanges not shown)" if left_out else None)


def _command(command: str, note: str, limit: int) -> str:
    return f"`{middle_truncate(command, limit)}`" + (f" ({note})" if note else "")


def _status_text(status: str, limit: int = 200) -> str:
    if status == "continues":
        return "still working when this part of the history ends"
    if status == "interrupted":
        return "interrupted before finishing"
    return middle_truncate("stopped by an " + status, limit)
