"""What fills a context: its per-message estimates split by part, and the entries that weigh most.

Each context message's estimate (the ``tokens`` ``context/build`` reports) is split over the parts
its characters belong to (pi's estimator counts characters; see ``ctxd.context.tokens``): an
assistant message's text, thinking and tool calls, a tool result's text (under its tool's name) and
images, a system message's prompt and its tools. The split of one message rounds so that its parts
add up to its estimate exactly, so the parts of a context add up to its ``estimatedTokens``.

A message whose entry is pinned counts as ``pinned`` whole (carried after a summary or not).

Computed from :class:`ctxd.context.live.LiveContext`'s kept state; the sums are kept with the
session (:class:`ctxd.context.tally.Tally`) and redone only from the first message that changed,
so after an append only the new messages are looked at.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

from ctxd.context.live import live_context
from ctxd.context.live_state import State
from ctxd.context.pins import pinned
from ctxd.context.tally import Split, Tally
from ctxd.context.timeline import Marker, TimelinePoint, timeline
from ctxd.context.tokens import assistant_chars, js_json_len, js_len, js_truthy, text_and_image_chars
from ctxd.tree.session import Session

__all__ = ["PARTS", "Composition", "Parts", "TopEntry", "composition", "parts_of", "split_message", "top_entries"]

PARTS = (
    "system",
    "tools",
    "summary",
    "branchSummary",
    "pinned",
    "user",
    "assistant",
    "thinking",
    "toolCalls",
    "toolResults",
    "images",
    "custom",
    "bashExecution",
)
"""The parts, in the order a bar stacks them."""


@attrs.define
class Parts:
    """Tokens by part (every part of :data:`PARTS`, 0 when absent) and tool results by tool name."""

    parts: dict[str, int]
    toolResultsByTool: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.parts.values())


@attrs.define
class TopEntry:
    entryId: str
    line: int
    role: str
    tool: str | None
    """The tool of a tool result, or the first tool an assistant message calls."""
    tokens: int
    pinned: bool = False


def _chars(message: Mapping[str, Any]) -> list[tuple[str, str | None, int]]:
    """(part, tool, characters) as pi's estimator counts them (``message_chars``), by part."""
    role = message.get("role")
    content = message.get("content")
    if role in ("user", "toolResult", "custom"):
        part = {"user": "user", "toolResult": "toolResults", "custom": "custom"}[role]
        tool = _name(message.get("toolName")) if role == "toolResult" else None
        text, images = text_and_image_chars(content)
        return [(part, tool, text), ("images", None, images)]
    if role == "assistant":
        text, thinking, calls = assistant_chars(content)
        return [("assistant", None, text), ("thinking", None, thinking), ("toolCalls", None, calls)]
    if role == "bashExecution":
        return [("bashExecution", None, _len(message.get("command")) + _len(message.get("output")))]
    if role in ("branchSummary", "compactionSummary"):
        return [("summary" if role == "compactionSummary" else "branchSummary", None, _len(message.get("summary")))]
    if role == "system":
        prompt, images = text_and_image_chars(content)
        sections = message.get("sections")
        if isinstance(sections, Mapping):
            prompt += sum(js_len(v) for v in sections.values() if isinstance(v, str))
        added = message.get("toolsAdded")
        tools = js_json_len(added) if js_truthy(added) else 0
        return [("system", None, prompt), ("tools", None, tools), ("images", None, images)]
    return []


def _len(value: Any) -> int:
    return js_len(value) if isinstance(value, str) else 0


def _name(value: Any) -> str:
    return value if isinstance(value, str) and value else "(unnamed)"


def split_message(message: Mapping[str, Any], tokens: int) -> Split:
    """``tokens`` (the message's estimate) split over its parts: each part gets what its characters
    add to the rounded-up running total, so the parts add up to ``ceil(chars / 4)``; an estimate that
    differs from that (an edited message estimated apart) puts the difference on the largest part."""
    found = [c for c in _chars(message) if c[2] > 0]
    if not found:
        role = message.get("role")
        fallback = {"user": "user", "custom": "custom", "toolResult": "toolResults"}.get(str(role), "assistant")
        tool = _name(message.get("toolName")) if role == "toolResult" else None
        return ((fallback, tool, tokens),) if tokens else ()
    out: list[tuple[str, str | None, int]] = []
    running = given = 0
    for part, tool, chars in found:
        running += chars
        share = math.ceil(running / 4) - given
        given += share
        out.append((part, tool, share))
    if given != tokens:
        big = max(range(len(out)), key=lambda j: out[j][2])
        part, tool, share = out[big]
        out[big] = (part, tool, share + tokens - given)
    return tuple(out)


def parts_of(tally: Tally) -> Parts:
    """The kept tokens by part, and tool results by tool (heaviest first)."""
    ordered = dict(sorted(tally.by_tool.items(), key=lambda kv: (-kv[1], kv[0])))
    return Parts(dict(tally.parts), ordered)


def top_entries(state: State, tally: Tally, count: int, pinned: set[str]) -> list[TopEntry]:
    """The ``count`` entries whose messages weigh most in the context, heaviest first (an entry's
    messages are adjacent; pinned messages carried after a summary are entries of their own)."""
    out = []
    for tokens, _, end in tally.top(count):
        last = state.messages[end - 1]
        out.append(
            TopEntry(
                entryId=last.entryId,
                line=last.line,
                role=last.role,
                tool=_tool_of(last.message),
                tokens=tokens,
                pinned=last.entryId in pinned,
            )
        )
    return out


def _tool_of(message: Mapping[str, Any]) -> str | None:
    if message.get("role") == "toolResult":
        return _name(message.get("toolName"))
    if message.get("role") == "assistant":
        for block in message.get("content") or ():
            if isinstance(block, Mapping) and block.get("type") == "toolCall":
                return _name(block.get("name"))
    return None


@attrs.define
class Composition:
    """What fills the context at ``leafId`` and how it grew (``context/composition``'s answer)."""

    leafId: str | None
    revision: str
    """``context/build``'s revision of the same context."""
    window: int
    threshold: int
    """The size above which a compaction is due (``window - reserve``, or the trigger share)."""
    reserve: int
    """Tokens kept free for the model's answer (``reserveTokens``)."""
    contextTokens: int
    """The context's size as auto-compaction judges it (``context/build``'s ``contextTokens``)."""
    estimatedTokens: int
    """The sum of the messages' estimates, which the parts add up to."""
    percent: float
    parts: dict[str, int]
    toolResultsByTool: dict[str, int]
    top: list[TopEntry]
    timeline: list[TimelinePoint]
    markers: list[Marker]

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def composition(
    session: Session, leaf_id: str | None = None, *, window: int, threshold: int, reserve: int, top: int = 10
) -> Composition:
    """The composition of the context at ``leaf_id`` (default: the leaf), from the kept context."""
    live = live_context(session)
    state = live.at(leaf_id)
    revision = live.revision()
    if state is None:
        empty = dict.fromkeys(PARTS, 0)
        return Composition(None, revision, window, threshold, reserve, 0, 0, 0.0, empty, {}, [], [], [])
    tally = session.derived.get("composition")
    if not isinstance(tally, Tally):
        tally = session.derived["composition"] = Tally(dict.fromkeys(PARTS, 0))
    chosen = pinned(session.file)
    tally.update(state, chosen, split_message)
    found = parts_of(tally)
    tokens = state.tokens()
    points, markers = timeline(session, state.leaf, tokens)
    return Composition(
        leafId=session.tree.id_of(state.leaf),
        revision=revision,
        window=window,
        threshold=threshold,
        reserve=reserve,
        contextTokens=tokens,
        estimatedTokens=state.cum[-1],
        percent=round(100.0 * tokens / window, 1) if window else 0.0,
        parts=found.parts,
        toolResultsByTool=found.toolResultsByTool,
        top=top_entries(state, tally, top, chosen),
        timeline=points,
        markers=markers,
    )
