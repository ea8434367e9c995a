"""The user's constraints as the offline summary lists them.

Owns which of the user's sentences stand as constraints (every constraint sentence of their own prose, the
newest kept when they exceed the budget), shared by the summary and read back by the must-keep check.
"""

from __future__ import annotations

from ctxd.compaction.reading.facts import Facts
from ctxd.compaction.summary.document import SummaryDoc, dedupe


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
