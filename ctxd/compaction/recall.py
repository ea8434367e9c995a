"""How a resuming agent reads what a summary left out: one sentence, the same wherever ctxd says it (the block of
facts re-injected after a compaction, the MCP tools' descriptions, the offline summary).

The anchors it names are the ones ``history/expand`` takes (:mod:`ctxd.service.history`): an entry id, a unique
prefix of one of at least 8 characters (the offline summary names entries by their first 8), or ``L<line>`` (the
1-based line of the session file, for files whose entries have no ids), and a range of them (from/to).
"""

from __future__ import annotations

RECALL_HINT = (
    "What a summary left out is still in the session's history: search it with the `search_history` tool and "
    "read entries in full with `expand` (an entry id, its first 8 characters, or `L<line>`; from/to for a "
    "range), or run `ctxd search WORDS` in a shell."
)
