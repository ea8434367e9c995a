"""What a session's facts are read from, for ``session/facts`` (:mod:`ctxd.service.facts`) and the Claude Code
hooks (:mod:`ctxd.service.claude_facts`): the context at the leaf since its newest compaction, and the blocks of
facts ctxd re-injected into a transcript.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from ctxd.compaction.ledger import Seen
from ctxd.compaction.plan_ledger import iso_time
from ctxd.context.live import live_context
from ctxd.context.rows import materialize
from ctxd.formats.injected import CTXD_MARK, ctxd_blocks
from ctxd.tree.session import Session

MAX_BLOCK_ENTRIES = 2_000
"""Attachment entries read (the newest) when looking for ctxd's re-injected blocks (only without a ledger)."""


@attrs.frozen
class SinceCompaction:
    """The context at the leaf, split at its newest compaction."""

    summary: str | None
    compaction_id: str | None
    messages: list[dict[str, Any]]
    """The messages after the summary, oldest first."""
    where: list[Seen | None]
    """Where each of ``messages`` lies in the session."""


def since_compaction(session: Session) -> SinceCompaction:
    """The newest compaction's summary in the context at the leaf, and the messages after it with where each is."""
    ctx = live_context(session).context()
    materialize(ctx.messages)  # one batched read, not one per message
    summary: str | None = None
    compaction_id: str | None = None
    messages: list[dict[str, Any]] = []
    where: list[Seen | None] = []
    for m in ctx.messages:
        if m.role == "compactionSummary":
            text = m.message.get("summary")
            summary, compaction_id = (text if isinstance(text, str) else None), m.entryId
            messages, where = [], []
        else:
            messages.append(m.message)
            where.append(Seen(entryId=m.entryId, line=m.line, time=iso_time(m.message.get("timestamp"))))
    return SinceCompaction(summary, compaction_id, messages, where)


def applied_through(where: Sequence[Seen | None], through: str | None) -> int:
    """The index of the first message after the entry ``through`` (its calls are in the notes' plan documents);
    0 when the messages do not hold it."""
    ids = [seen.entryId if seen is not None else None for seen in where]
    return len(ids) - ids[::-1].index(through) if through is not None and through in ids else 0


def reinjected_blocks(session: Session) -> list[str]:
    """The blocks of facts ctxd re-injected into the transcript (Claude Code records a hook's
    ``additionalContext`` as an attachment entry), oldest first."""
    heads = session.file.heads
    found = [i for i, head in enumerate(heads) if head.type == "custom"][-MAX_BLOCK_ENTRIES:]
    blocks: list[str] = []
    for body in session.file.entries(found):
        data = body.get("data")
        attachment = data.get("attachment") if isinstance(data, dict) else None
        if not isinstance(attachment, dict) or attachment.get("type") != "hook_additional_context":
            continue
        content = attachment.get("content")
        for text in content if isinstance(content, list) else [content]:
            if isinstance(text, str) and CTXD_MARK in text:
                blocks.extend(ctxd_blocks(text))
    return blocks
