"""The must-keep facts of a Claude Code conversation, read from its transcript (for ``ctxd hook``).

The transcript is mapped like any Claude transcript (read-only) and the facts come from the context ctxd builds at
its leaf: what Claude's next request holds, so what a compaction is about to summarise. The newest compaction's
summary there (Claude's earlier summary) is passed as the previous summary, so facts it kept stay must-keep.
"""

from __future__ import annotations

from typing import Any

import attrs

from ctxd.compaction.fileops import extract_file_ops, file_lists
from ctxd.compaction.mustkeep import FactSheet, must_keep_facts
from ctxd.context.build import build_context
from ctxd.tree.session import Session


@attrs.frozen
class TranscriptFacts:
    sheet: FactSheet
    compactions: int
    """Compaction summaries in the transcript (a new one means Claude has written this compaction's summary)."""
    newest_summary: str | None
    """The newest compaction's summary text, if there is one."""


def transcript_facts(path: str) -> TranscriptFacts:
    """The fact sheet of the context at the transcript's leaf, and what the transcript says of its compactions."""
    session = Session.open(path)
    ctx = build_context(session.file, session.tree, estimates=session.estimates)
    previous: str | None = None
    messages: list[dict[str, Any]] = []
    for m in ctx.messages:
        if m.role == "compactionSummary":
            summary = m.message.get("summary")
            previous = summary if isinstance(summary, str) else None
        else:
            messages.append(m.message)
    read, modified = file_lists(extract_file_ops(messages))
    sheet = must_keep_facts(messages, previous_summary=previous, read_files=read, modified_files=modified)
    compactions, newest = compaction_summaries(session)
    return TranscriptFacts(sheet, compactions, newest)


def compaction_summaries(session: Session) -> tuple[int, str | None]:
    """How many compactions with a summary the transcript holds, and the newest one's summary."""
    heads = session.file.heads
    found = [i for i, head in enumerate(heads) if head.type == "compaction"]
    count = 0
    newest: str | None = None
    for body in session.file.entries(found):
        summary = body.get("summary")
        if isinstance(summary, str) and summary:
            count += 1
            newest = summary
    return count, newest
