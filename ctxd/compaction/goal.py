"""The session's goal: its first genuine user request, found on the path from the root.

A compaction summarises the messages after the previous one's kept boundary; the session's first request is
usually long gone from that range (an earlier summary holds it, often paraphrased, or, for a Claude Code or
Codex transcript, in a form ctxd cannot parse). The goal of every summary is that request, in the user's
own words: :func:`first_request` reads it from the path, skipping what agents inject into user turns and
mere acknowledgements. Only user message entries are decoded, and the walk stops at the first request or at
the summarised range, so it costs a few entry reads however long the session is.
"""

from __future__ import annotations

from collections.abc import Collection

from ctxd.compaction.summarizers.facts import user_words
from ctxd.compaction.summarizers.mining import is_request
from ctxd.tree.session import Session

MAX_USER_MESSAGES = 200
"""Give up after this many user messages without a request (an automated session)."""


def first_request(session: Session, leaf_id: str, *, stop_at: Collection[str] = ()) -> str | None:
    """The user's own words of the first request on the path to ``leaf_id``, or None when there is none
    before an entry of ``stop_at`` (the range being summarised: it will find the request itself)."""
    file, tree = session.file, session.tree
    index = file.index.get(leaf_id)
    if index is None:
        return None
    heads = file.heads
    seen = 0
    for i in tree.path_to_root(index):
        head = heads[i]
        if head.id in stop_at:
            return None
        if head.type != "message" or head.message is None or head.message.role != "user":
            continue
        seen += 1
        if seen > MAX_USER_MESSAGES:
            return None
        message = file.entry(i).get("message")
        if isinstance(message, dict):
            words = user_words(message)
            if is_request(words):
                return words
    return None
