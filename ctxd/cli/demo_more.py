"""Later chapters of the demo (compaction, branch summaries, the daemon)."""

from __future__ import annotations

from collections.abc import Callable

from ctxd.tree.session import Session


def run(session: Session, root: str, say: Callable[[str], None], heading: Callable[[str], None]) -> None:
    """Nothing yet beyond the session store and context: see the compaction chapters."""
