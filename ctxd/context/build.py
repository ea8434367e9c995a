"""A context asked for once: the command line, facts, checks and tests build through here.

There is one context builder, :class:`ctxd.context.live.LiveContext` (pi 1.5.2's projection at a leaf,
see ``ctxd.context.project``: the latest compaction's system message and summary, the kept entries,
everything after it, with context edits applied; settings from the whole path; pi's projected size).
The daemon keeps one per session and moves it as the session changes; :func:`build_context` makes
one for a single answer, so that every caller gets the same answer at the same cost.
"""

from __future__ import annotations

import attrs

from ctxd.context.answers import Context, Size
from ctxd.context.live import LiveContext, size_at
from ctxd.context.rows import ContextMessage, materialize
from ctxd.context.rules import compaction_summary, entry_message, timestamp_ms
from ctxd.store.session_file import SessionFile
from ctxd.tree.index import TreeIndex

__all__ = [
    "Context",
    "ContextMessage",
    "Size",
    "build_context",
    "compaction_message",
    "context_size",
    "entry_message",
    "materialize",
    "timestamp_ms",
]

compaction_message = compaction_summary


@attrs.frozen
class _Once:
    """A file and its tree, with estimates for one answer (see :class:`ctxd.context.live_state.Source`)."""

    file: SessionFile
    tree: TreeIndex
    estimates: dict[int, int]


def build_context(
    session: SessionFile,
    tree: TreeIndex,
    leaf_id: str | None = None,
    *,
    estimates: dict[int, int] | None = None,
) -> Context:
    """The context at ``leaf_id`` (default: the session's leaf).

    ``estimates`` is an optional cache of per-entry token estimates, keyed by entry index, valid for
    one generation of the file (a ``Session``'s); it is filled as the context is built.
    """
    return LiveContext(_Once(session, tree, {} if estimates is None else estimates)).context(leaf_id)


def context_size(
    session: SessionFile, tree: TreeIndex, leaf_id: str | None = None, *, estimates: dict[int, int]
) -> Size:
    """Equal to ``build_context(...).contextTokens`` (and the last message), reading only bodies whose
    estimate is not cached: appending one message costs one body decode, not a build."""
    return size_at(_Once(session, tree, estimates), leaf_id)
