"""The offline summariser: a deterministic, model-free structured summary.

Owns the summary's assembly when no model is configured (or the model failed): the sections
(:mod:`.sections`) filled from one scan of the messages (:mod:`.facts`), an earlier summary merged in, the
session's first request kept as the goal, the size scaled to what the summary replaces. What a resuming agent
needs is kept whole: the requests, the user's constraints, every file modified and read, the commands that
matter with their last outcome, the failures, decisions and the next step. The story around them (the newest
answered requests, the user's other requests, the agent's last answer) gets a budget of about a hundredth
of the input (:class:`~.sections.Budget`); read-only exploration (``ls``, ``grep``, ``sed -n``, ``git log``) is
only counted, and there is no exchange-by-exchange history: the session keeps every message, and search and
expand recover them. A small range gets no empty sections, an almost empty one a single line; never more than
three quarters of the input. An earlier summary is merged, not replaced. Same input, same bytes.
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
from ctxd.compaction.summarizers.document import (
    ANSWER_LABEL,
    LATER,
    SummaryDoc,
    dedupe,
    merge,
    parse_summary,
    render,
)
from ctxd.compaction.summarizers.exchanges import Exchange, build_exchange, exchange_bounds
from ctxd.compaction.summarizers.facts import Facts, combined, resolve_later, scan
from ctxd.compaction.summarizers.mining import sentences, short
from ctxd.compaction.summarizers.plans import latest_plan, next_item
from ctxd.compaction.summarizers.serialize import content_text
from ctxd.context.tokens import estimate_tokens


@attrs.frozen
class AbridgedLimits:
    """Limits of the summary's story: ``total_chars`` caps the parts that tell what happened (answered
    requests, other requests, the agent's last answer; they get a hundredth of the input up to this);
    ``action_chars`` caps a path in the split turn's context. The other fields are kept for callers of the
    first layout, whose per-exchange history is gone."""

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
COMPACT_BELOW = 6_000
"""Ranges smaller than this (characters) get a summary without empty sections or a single line."""
MIN_ONE_LINE = 60
LIST_BUDGET_AT = 800_000
"""Inputs this large (characters) get the largest budget (see :class:`~.sections.Budget`)."""


_THREAD_THRESHOLD = 5_000
"""Requests with more messages than this are summarised in a worker thread, off the event loop."""


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

    # -- the whole summary -------------------------------------------------------------------------------------

    def build(self, request: SummaryRequest) -> str:
        """The summary text for ``request`` (synchronous, deterministic). A small range (under
        :data:`COMPACT_BELOW` characters) gets a summary of at most three quarters of its size: only its facts
        (the messages kept after it tell the rest), else without empty sections, else a single line."""
        input_chars = self.input_chars(request, COMPACT_BELOW)
        if not self.scale or input_chars >= COMPACT_BELOW:
            return self._build(request, input_chars=self.input_chars(request, LIST_BUDGET_AT))
        limit = max(MIN_ONE_LINE, input_chars * 3 // 4)
        for mode in ("facts", "compact"):
            text = self._build(request, mode=mode, input_chars=input_chars)
            if text.strip() and len(text) <= limit:
                return text
        facts = scan([*request.messages, *request.turn_prefix])
        return sections.one_line(facts, limit) + "\n"

    def _build(self, request: SummaryRequest, *, mode: str = "full", input_chars: int = 0) -> str:
        """The summary; ``mode`` "compact" leaves out empty sections, "facts" also the story (answered
        requests, the last answer, other sections of earlier summaries): only what must be kept."""
        budget = sections.Budget.of(input_chars, self.limits.total_chars)
        messages = request.messages
        facts = scan(messages)
        bounds = exchange_bounds(messages, facts.user_indices)
        newest = self._exchanges_newest_first(messages, bounds, facts, budget.done + 1)
        prefix_facts = scan(request.turn_prefix) if request.turn_prefix else None
        if prefix_facts is not None:
            resolve_later(facts, prefix_facts)
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
        sections.constraints(doc, facts, max(3_000, budget.lists // 2))
        sections.decisions(doc, facts, budget.decisions, prefix_facts)
        found_plan = latest_plan([*messages, *request.turn_prefix], request.plan_texts)
        deleted = [p for p, op in combined(facts, prefix_facts).done_files.items() if op == "deleted"]
        sections.plan(doc, found_plan, budget.plan)
        plan_next = next_item(found_plan) if found_plan is not None else None
        sections.progress(doc, facts, newest, latest_request, prefix_facts, budget.done, plan_next)
        whole = combined(facts, prefix_facts)
        sections.requests(doc, whole, budget.requests, (goal_text, latest_request))
        sections.critical(doc, whole, budget)
        self._focus(doc, messages, request.custom_instructions)
        if prefix_facts is None:
            sections.last_answer(doc, newest, budget.answer)
        if prefix_facts is not None:
            exchange = build_exchange(request.turn_prefix, 0, len(request.turn_prefix), prefix_facts.calls)
            doc.turn_context = sections.turn_context(
                request.turn_prefix, prefix_facts, exchange, self.limits.action_chars, latest_request
            )

        earlier: SummaryDoc | None = None
        previous_texts = [request.previous_summary or ""] + [
            str(m.get("summary") or "") for m in messages if m.get("role") in ("compactionSummary", "branchSummary")
        ]
        for text in previous_texts:
            text = strip_file_blocks(text).strip()
            if not text:
                continue
            parsed = parse_summary(text) or SummaryDoc(extra=[("Earlier Summary", text)])
            earlier = merge(earlier, parsed) if earlier else parsed
        if earlier is not None:
            doc = merge(earlier, doc)
            if not doc.plan[:1] or any(doc.plan[0].startswith(p + ":") for p in deleted):
                doc.plan = []  # the plan document was deleted since
            doc.extra = sections.other_sections(doc.extra, budget.story)
        if request.first_request:
            first = short(request.first_request, 300)
            same = " ".join(first.lower().split())
            doc.goal = [first, *(g for g in doc.goal if " ".join(g.removeprefix(LATER).lower().split()) != same)]
        if mode == "facts":
            doc = attrs.evolve(doc, done=[], in_progress=doc.in_progress[:1], extra=[])
            doc.critical = [c for c in doc.critical if not c.startswith(ANSWER_LABEL)]
        return render(doc, [], skip_empty=mode != "full")

    def _focus(self, doc: SummaryDoc, messages: Sequence[Mapping[str, Any]], focus: str | None) -> None:
        if focus and focus.strip():
            doc.critical.append("Requested focus: " + short(focus, 300))
            doc.critical.extend(f"On that focus: {s}" for s in self._focus_sentences(messages, focus))

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

    # -- exchanges ---------------------------------------------------------------------------------------------

    @staticmethod
    def _exchanges_newest_first(
        messages: Sequence[Mapping[str, Any]], bounds: list[tuple[int, int]], facts: Facts, count: int
    ) -> list[Exchange]:
        """The newest ``count`` exchanges, newest first (only those are shown; older ones stay unbuilt)."""
        return [build_exchange(messages, start, end, facts.calls) for start, end in reversed(bounds[-count:])]
