"""A session's must-keep facts, for ``ctxd mcp``'s ``session_facts`` tool (and any front door).

One function on purpose: today it renders the must-keep fact sheet of the context at the session's
leaf (:func:`ctxd.service.claude_facts.transcript_facts`, which reads pi files and transcripts alike);
the fact ledger (issue 18, item 1) replaces what it reads, not who calls it.
"""

from __future__ import annotations

from typing import Any

from ctxd.service.claude_facts import transcript_facts

FACTS_CHARS = 9000
"""The rendered sheet's size, as the Claude Code hooks re-inject it."""


def session_facts(path: str) -> dict[str, Any]:
    """``{"session", "facts": [{"kind", "text", "probes"}], "text", "compactions"}`` of the session file."""
    found = transcript_facts(path)
    return {
        "session": path,
        "facts": found.sheet.to_json(),
        "text": found.sheet.render(FACTS_CHARS),
        "compactions": found.compactions,
    }
