"""The summariser contract: request and result types, the error a summariser raises, and the protocol.

The compaction engine builds a :class:`SummaryRequest`, asks a :class:`Summarizer` for a
:class:`SummaryResult`, and falls back to another summariser when :class:`SummarizerError` is raised.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, Protocol

import attrs

Progress = Callable[[str, float | None], None]
"""``progress(stage, fraction)``: a human-readable stage ("chunk 2/5") and completion in [0, 1] if known."""

SummaryKind = Literal["compaction", "branch"]


@attrs.frozen
class SummaryRequest:
    """What to summarise.

    ``messages`` are pi AgentMessages, oldest first. ``turn_prefix`` is the start of a turn that the cut
    point split (its tail is kept verbatim); it is summarised separately and concurrently.
    """

    messages: list[dict[str, Any]]
    previous_summary: str | None = None
    turn_prefix: list[dict[str, Any]] = attrs.field(factory=list)
    custom_instructions: str | None = None
    file_context: str | None = None
    """The files read and modified so far (``<read-files>``/``<modified-files>`` blocks), shown to a
    model for context; the engine appends the final lists to the summary itself."""
    kind: SummaryKind = "compaction"
    first_request: str | None = None
    """The session's first request (the user's own words) when it comes before ``messages`` (an earlier
    compaction summarised it): the goal a summary must keep, whatever an earlier summary made of it."""
    plan_texts: dict[str, str] | None = None
    """Plan documents (path -> text) as earlier ranges left them: the range's edits to them apply (see
    :mod:`ctxd.compaction.reading.agent_plans`); from the previous compaction's ``details.ctxd.plans``."""
    must_keep: str | None = None
    """The fact sheet of ``messages`` (see :mod:`ctxd.compaction.ledger.mustkeep`), rendered: a model is told up
    front what its summary must keep (the engine checks and patches afterwards either way)."""
    entry_ids: list[str] | None = None
    """The entry id of each of ``messages`` (parallel to it; "" where an entry has none): a summary names where
    each task's details live, for ``expand``."""
    turn_prefix_entry_ids: list[str] | None = None
    """The entry id of each of ``turn_prefix``."""
    cwd: str | None = None
    """The session's working directory, when known: a summary names paths relative to it."""
    entry_lines: list[int] | None = None
    """The 1-based line of each of ``messages`` in the session file (parallel to it; 0 where unknown): the anchor
    ``L<line>`` that ``expand`` takes for files whose entries have no ids (see :mod:`ctxd.history.anchors`)."""
    turn_prefix_entry_lines: list[int] | None = None
    """The line of each of ``turn_prefix``."""


@attrs.frozen
class SummaryResult:
    """A summary without file-list blocks (the engine appends ``<read-files>``/``<modified-files>``)."""

    text: str
    summarizer: str
    model: str | None
    path: str
    usage: dict[str, int] | None = None
    cost: float | None = None
    calls: int = 0


class SummarizerError(Exception):
    """The summariser gave up (timeouts, HTTP errors, empty or oversized output after retries).

    ``reason`` is a short, key-free explanation meant for logs and for the engine's fallback record.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Summarizer(Protocol):
    name: str

    async def summarize(self, request: SummaryRequest, progress: Progress | None = None) -> SummaryResult: ...


def add_usage(total: dict[str, int] | None, usage: Mapping[str, int] | None) -> dict[str, int] | None:
    """Sum two usage dicts key by key (None stays None until a real usage arrives)."""
    if not usage:
        return total
    out = dict(total or {})
    for key, value in usage.items():
        out[key] = out.get(key, 0) + int(value)
    return out


def add_costs(costs: Iterable[float | None]) -> float | None:
    """Sum the known costs; None when no call reported one."""
    known = [c for c in costs if c is not None]
    return sum(known) if known else None


def report(progress: Progress | None, stage: str, fraction: float | None = None) -> None:
    """Call ``progress`` if given; a failing callback must not break summarisation."""
    if progress is None:
        return
    try:
        progress(stage, fraction)
    except Exception:  # progress reporting is best effort
        pass
