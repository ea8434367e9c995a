"""The model summariser: structured summaries from any litellm-supported model, robust to size and failures.

Owns the call strategy. The transcript goes to the model in one call when it fits the summariser model's
own window (estimated at 4 characters per token); otherwise it is cut into chunks that fit, and the chunks are
summarised in order, each chunk's summary becoming the previous summary of the next ("model-chunked"). A
context-overflow answer shrinks the chunks and carries on; 429, 5xx, timeouts and connection errors are
retried with exponential backoff; empty or oversized output counts as a failed attempt. When the attempts
run out, :class:`SummarizerError` tells the engine to fall back. A split turn's prefix is summarised
concurrently with the history and appended under its own heading.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar

from ctxd import llm
from ctxd.compaction.reading.fileops import strip_file_blocks
from ctxd.compaction.summary.base import (
    Progress,
    SummarizerError,
    SummaryRequest,
    SummaryResult,
    add_costs,
    add_usage,
    report,
)
from ctxd.compaction.summary.prompts import PromptKind, build_messages, overhead_chars
from ctxd.compaction.summary.serialize import SEPARATOR, chunk_text, plan_chunks, serialize_messages
from ctxd.redact import add_secret

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_CONTEXT_WINDOW = 128_000
"""Assumed window (tokens) when neither the caller nor litellm's model map knows the model's."""
CHARS_PER_TOKEN = 4
SAFETY = 0.85
"""Fraction of the estimated free window a chunk may fill (chars/4 underestimates code and non-Latin text)."""
MIN_CHUNK_CHARS = 1200
TURN_CONTEXT_HEADING = "## Turn Context (split turn)"
NO_HISTORY = "No prior history."


class _Overflow(Exception):
    """The model said the prompt did not fit its window."""


class _Run:
    """Totals over all calls of one :meth:`LiteLLMSummarizer.summarize`."""

    def __init__(self) -> None:
        self.usage: dict[str, int] | None = None
        self.costs: list[float | None] = []
        self.calls = 0
        self.chunked = False
        self.file_context: str | None = None
        self.must_keep: str | None = None


def clean_output(text: str) -> str:
    """The summary inside a model answer: unwrapped from ``<summary>`` tags or a code fence, file blocks removed."""
    text = text.strip()
    match = re.search(r"<summary>\s*(.*?)\s*</summary>", text, re.S)
    if match:
        text = match.group(1)
    fence = re.fullmatch(r"```[a-zA-Z]*\n(.*?)\n```", text, re.S)
    if fence:
        text = fence.group(1)
    return strip_file_blocks(text).strip()


async def gather_or_cancel(*aws: Awaitable[T]) -> list[T]:
    """``asyncio.gather`` that cancels the remaining awaitables as soon as one fails."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


class LiteLLMSummarizer:
    """Summarises through ``llm.complete`` with ``model`` (any litellm model string)."""

    name = "litellm"

    def __init__(
        self,
        model: str,
        api_base: str | None = None,
        api_key: str | None = None,
        max_output_tokens: int = 8192,
        timeout: float = 120.0,
        retries: int = 2,
        context_window: int | None = None,
        *,
        backoff: float = 1.0,
        max_backoff: float = 20.0,
        max_chunks: int = 32,
    ) -> None:
        self.model = model
        self.api_base = api_base
        self._api_key = api_key
        add_secret(api_key)  # never shown, whatever the provider echoes
        self.max_output_tokens = max(64, int(max_output_tokens))
        self.timeout = timeout
        self.retries = max(0, int(retries))
        self.context_window = context_window
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_chunks = max(1, max_chunks)
        self._file_chars = 0

    def __repr__(self) -> str:  # never show the key
        return f"LiteLLMSummarizer(model={self.model!r}, api_base={self.api_base!r})"

    # -- public --------------------------------------------------------------------------------------------------

    async def summarize(self, request: SummaryRequest, progress: Progress | None = None) -> SummaryResult:
        run = _Run()
        run.file_context = request.file_context
        run.must_keep = request.must_keep
        self._file_chars = len(request.file_context or "") + 200 if request.file_context else 0
        self._file_chars += len(request.must_keep) + 400 if request.must_keep else 0
        window = self.context_window or await asyncio.to_thread(llm.model_context_window, self.model)
        window = window or DEFAULT_CONTEXT_WINDOW
        out_tokens = min(self.max_output_tokens, max(256, window // 4))
        previous = strip_file_blocks(request.previous_summary).strip() if request.previous_summary else None
        report(progress, "summarizing", 0.0)

        main = self._summarize_part(
            request.kind,
            request.messages,
            previous or None,
            request.custom_instructions,
            window,
            out_tokens,
            run,
            progress,
            "",
        )
        if request.turn_prefix:
            prefix = self._summarize_part(
                "turn_prefix",
                request.turn_prefix,
                None,
                None,
                window,
                max(256, out_tokens // 2),
                run,
                progress,
                "turn prefix ",
            )
            history, prefix_text = await gather_or_cancel(main, prefix)
            text = history
            if prefix_text:
                text = f"{history}\n\n---\n\n{TURN_CONTEXT_HEADING}\n\n{prefix_text}"
        else:
            text = await main
        report(progress, "done", 1.0)
        path = "empty" if run.calls == 0 else "model-chunked" if run.chunked else "model"
        return SummaryResult(
            text=text,
            summarizer=self.name,
            model=self.model,
            path=path,
            usage=run.usage,
            cost=add_costs(run.costs),
            calls=run.calls,
        )

    # -- planning ------------------------------------------------------------------------------------------------

    def _budget(self, kind: PromptKind, window: int, out_tokens: int, previous_chars: int, custom: str | None) -> int:
        """Transcript characters that fit next to the prompt, the previous summary and the output."""
        free_tokens = int((window - out_tokens) * SAFETY) - 64
        fixed = overhead_chars(kind, has_previous=previous_chars > 0, custom_instructions=custom)
        fixed += self._file_chars if kind != "turn_prefix" else 0
        return free_tokens * CHARS_PER_TOKEN - fixed - previous_chars

    async def _summarize_part(
        self,
        kind: PromptKind,
        messages: Sequence[Mapping[str, Any]],
        previous: str | None,
        custom: str | None,
        window: int,
        out_tokens: int,
        run: _Run,
        progress: Progress | None,
        label: str,
    ) -> str:
        pieces = serialize_messages(messages)
        if not pieces:
            if kind == "turn_prefix":
                return ""
            return previous or NO_HISTORY
        # A rolling summary may grow to the output limit; plan chunks with room for it.
        reserve = out_tokens * CHARS_PER_TOKEN
        limit: int | None = None  # after an overflow: at most half of what the model refused
        whole = len(SEPARATOR.join(pieces))
        single = self._budget(kind, window, out_tokens, len(previous or ""), custom)
        if whole <= single:
            report(progress, f"{label}single call", 0.0)
            try:
                return await self._call(kind, SEPARATOR.join(pieces), previous, custom, out_tokens, run)
            except _Overflow:
                log.info("summariser %s overflowed on a single call; chunking", self.model)
                limit = whole // 2
        run.chunked = True
        pieces = self._drop_oldest(pieces, kind, window, out_tokens, reserve, custom)
        rolling = previous
        start = 0
        done = 0
        while start < len(pieces):
            previous_chars = max(len(rolling or ""), reserve)
            budget = self._budget(kind, window, out_tokens, previous_chars, custom)
            if limit is not None:
                budget = min(budget, limit)
            if budget < MIN_CHUNK_CHARS:
                raise SummarizerError(
                    f"{self.model}: context window of {window} tokens leaves no room for a transcript chunk"
                )
            ranges = plan_chunks(pieces, budget, start)
            total = done + len(ranges)
            begin, end = ranges[0]
            report(progress, f"{label}chunk {done + 1}/{total}", done / total)
            text = chunk_text(pieces, begin, end, budget)
            try:
                rolling = await self._call(kind, text, rolling, custom, out_tokens, run)
            except _Overflow:
                limit = len(text) // 2
                log.info("summariser %s overflowed on chunk %d; chunks now <= %d chars", self.model, done + 1, limit)
                continue
            start = end
            done += 1
        return rolling or NO_HISTORY

    def _drop_oldest(
        self, pieces: list[str], kind: PromptKind, window: int, out_tokens: int, reserve: int, custom: str | None
    ) -> list[str]:
        """Keep at most ``max_chunks`` chunks' worth of the newest pieces, noting how many were left out."""
        budget = self._budget(kind, window, out_tokens, reserve, custom)
        if budget < MIN_CHUNK_CHARS or len(plan_chunks(pieces, budget)) <= self.max_chunks:
            return pieces
        limit = budget * self.max_chunks
        size = 0
        start = len(pieces)
        while start > 0 and size + len(pieces[start - 1]) + len(SEPARATOR) <= limit:
            start -= 1
            size += len(pieces[start]) + len(SEPARATOR)
        start = min(start, len(pieces) - 1)
        note = f"[Note]: {start} earlier messages were left out of this summary because the session is too long."
        log.info("summariser %s: leaving out %d oldest messages (over %d chunks)", self.model, start, self.max_chunks)
        return [note, *pieces[start:]]

    # -- one model call, with retries -----------------------------------------------------------------------------

    def _delay(self, attempt: int) -> float:
        base: float = min(self.max_backoff, self.backoff * (2 ** (attempt - 1)))
        return base * (0.75 + 0.5 * random.random())

    async def _call(
        self,
        kind: PromptKind,
        conversation: str,
        previous: str | None,
        custom: str | None,
        out_tokens: int,
        run: _Run,
    ) -> str:
        files = run.file_context if kind != "turn_prefix" else None
        facts = run.must_keep if kind != "turn_prefix" else None
        messages = build_messages(
            kind,
            conversation,
            previous_summary=previous,
            custom_instructions=custom,
            file_context=files,
            must_keep=facts,
        )
        failure = "no attempt made"
        attempts = self.retries + 1
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(self._delay(attempt))
            run.calls += 1
            try:
                completion = await llm.complete(
                    self.model,
                    messages,
                    api_base=self.api_base,
                    api_key=self._api_key,
                    max_tokens=out_tokens,
                    timeout=self.timeout,
                )
            except llm.LLMError as exc:
                if exc.kind == "overflow":
                    raise _Overflow() from None
                failure = llm.redact(str(exc), self._api_key)
                if not exc.retryable:
                    raise SummarizerError(f"{self.model}: {failure}") from None
                log.warning("summariser %s attempt %d/%d failed: %s", self.model, attempt + 1, attempts, failure)
                continue
            run.usage = add_usage(run.usage, completion.usage)
            run.costs.append(completion.cost)
            text = clean_output(completion.text)
            if not text:
                failure = "the model returned an empty summary"
            elif len(text) > 2 * out_tokens * CHARS_PER_TOKEN:
                failure = f"the model returned an oversized summary (~{len(text) // CHARS_PER_TOKEN} tokens)"
            else:
                return text
            log.warning("summariser %s attempt %d/%d: %s", self.model, attempt + 1, attempts, failure)
        raise SummarizerError(f"{self.model}: {failure} (after {attempts} attempts)")
