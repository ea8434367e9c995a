"""The offline summariser: a deterministic, model-free structured summary with an abridged history.

Owns the summary's assembly when no model is configured (or the model failed): the sections
(:mod:`.sections`) filled from one scan of the messages (:mod:`.facts`), an earlier summary merged in, the
session's first request kept as the goal, the size scaled to what the summary replaces (a small range gets
no empty sections, an almost empty one a single line; never more than half the input). It appends an
abridged history, newest exchange first within a character budget: for each
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
from ctxd.compaction.summarizers import sections
from ctxd.compaction.summarizers.base import Progress, SummaryRequest, SummaryResult, report
from ctxd.compaction.summarizers.document import SummaryDoc, dedupe, merge, parse_summary, render
from ctxd.compaction.summarizers.exchanges import Exchange, build_exchange, exchange_bounds
from ctxd.compaction.summarizers.facts import Facts, combined, scan
from ctxd.compaction.summarizers.mining import sentences, short
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
COMPACT_BELOW = 6_000
"""Ranges smaller than this (characters) get a summary without empty sections or a single line."""
MIN_ONE_LINE = 60
LIST_BUDGET_AT = 800_000
"""Inputs this large (characters) get the largest budget for the lists of files, commands and errors."""


def list_budget(input_chars: int) -> int:
    """Characters for Critical Context's lists: they grow with the input (a long session ran many distinct
    commands), from 3,000 to 30,000 (one twentieth of the input)."""
    return max(3_000, min(30_000, input_chars // 20))


_THREAD_THRESHOLD = 5_000
"""Requests with more messages than this are summarised in a worker thread, off the event loop."""


def _join(items: Sequence[str], limit: int, each: int) -> str:
    shown = [middle_truncate(i, each) for i in items[:limit]]
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" (+{more} more)" if more > 0 else "")


class OfflineSummarizer:
    """Builds the summary from the messages alone (see the module docstring)."""

    name = "offline"

    def __init__(
        self, limits: AbridgedLimits | None = None, *, total_chars: int | None = None, scale: bool = True
    ) -> None:
        limits = limits or AbridgedLimits()
        if total_chars is not None:
            limits = attrs.evolve(limits, total_chars=total_chars)
        self.limits = limits
        self.scale = scale
        """False: the full layout whatever the input's size (for tests of the layout)."""

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

    def _scaled(self, input_chars: int) -> OfflineSummarizer:
        """A summariser whose history budget is at most half of what it summarises: a summary must
        make the context smaller, never larger."""
        budget = max(MIN_HISTORY_CHARS, input_chars // 2)
        if budget >= self.limits.total_chars:
            return self
        return OfflineSummarizer(attrs.evolve(self.limits, total_chars=budget))

    # -- the whole summary -------------------------------------------------------------------------------------

    def build(self, request: SummaryRequest) -> str:
        """The summary text for ``request`` (synchronous, deterministic). A small range (under
        :data:`COMPACT_BELOW` characters) gets a summary of at most three quarters of its size: without empty
        sections, else only its facts, else a single line."""
        input_chars = self.input_chars(request, COMPACT_BELOW)
        if not self.scale:
            return self._build(request, input_chars=self.input_chars(request, LIST_BUDGET_AT))
        if input_chars >= COMPACT_BELOW:
            total = self.input_chars(request, LIST_BUDGET_AT)
            return self._scaled(total)._build(request, input_chars=total)
        limit = max(MIN_ONE_LINE, input_chars * 3 // 4)
        small = OfflineSummarizer(attrs.evolve(self.limits, total_chars=input_chars // 4), scale=False)
        for mode in ("compact", "facts"):
            text = small._build(request, mode=mode, input_chars=input_chars)
            if text.strip() and len(text) <= limit:
                return text
        facts = scan([*request.messages, *request.turn_prefix])
        return sections.one_line(facts, limit) + "\n"

    def _build(self, request: SummaryRequest, *, mode: str = "full", input_chars: int = 0) -> str:
        """The summary; ``mode`` "compact" leaves out empty sections, "facts" also the narrative (answered
        requests, decisions, history): only what must be kept."""
        messages = request.messages
        facts = scan(messages)
        bounds = exchange_bounds(messages, facts.user_indices)
        newest, cut_short = self._exchanges_newest_first(messages, bounds, facts)
        prefix_facts = scan(request.turn_prefix) if request.turn_prefix else None
        latest_request = (
            (prefix_facts.latest_request or prefix_facts.latest_user if prefix_facts else None)
            or facts.latest_request
            or facts.latest_user
        )

        goal_text = (
            request.first_request
            or facts.first_request
            or (prefix_facts.first_request if prefix_facts else None)
            or facts.first_user
        )
        doc = SummaryDoc()
        sections.goal(doc, facts, latest_request, goal_text)
        sections.constraints(doc, facts, max(3_000, list_budget(input_chars) // 2))
        sections.decisions(doc, facts)
        sections.progress(doc, facts, newest, latest_request, prefix_facts)
        whole = combined(facts, prefix_facts)
        sections.requests(doc, whole, list_budget(input_chars), (goal_text, latest_request))
        sections.critical(doc, whole, list_budget(input_chars))
        self._focus(doc, messages, request.custom_instructions)
        if prefix_facts is not None:
            exchange = build_exchange(request.turn_prefix, 0, len(request.turn_prefix), prefix_facts.calls)
            doc.turn_context = sections.turn_context(
                request.turn_prefix, prefix_facts, exchange, self.limits.action_chars
            )

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
        if request.first_request:
            first = short(request.first_request, 400)
            doc.goal = [first, *(g for g in doc.goal if " ".join(g.lower().split()) != " ".join(first.lower().split()))]
        history, note = self._abridged(newest, doc.history, cut_short)
        if mode == "facts":
            doc = attrs.evolve(doc, done=[], decisions=[], in_progress=doc.in_progress[:1], history=[], extra=[])
            history, note = [], None
        return render(doc, history, note, skip_empty=mode != "full")

    def _focus(self, doc: SummaryDoc, messages: Sequence[Mapping[str, Any]], focus: str | None) -> None:
        if focus and focus.strip():
            at = len(doc.critical) - 1  # before the statistics line
            items = ["Requested focus: " + short(focus, 300)]
            items.extend(f"On that focus: {s}" for s in self._focus_sentences(messages, focus))
            doc.critical[at:at] = items

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
    return sections.status_text(status, limit)
