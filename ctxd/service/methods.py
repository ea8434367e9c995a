"""The method table: every JSON-RPC method the daemon serves, in one place, with the params class its request is
structured into (:func:`ctxd.service.protocol.structure_params`, -32602 naming the field that does not fit) and
the job's handler that answers it. The server registers from it (:func:`ctxd.server.app.create_server`), and so
do ``ctxd mcp``'s tools (:data:`TOOLS`) and the CLI's daemon-less calls (:func:`call`).

A handler is called as ``handler(service, params, request)``: ``request`` says what the typed params cannot
(which members the request gave: ``session/append``'s ``parentId: null`` starts a new root, an absent one appends
at the leaf) and carries the work-done progress of long-running methods.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

from ctxd.service import protocol as p

if TYPE_CHECKING:  # the service is given to each handler: this module only names its jobs' methods
    from ctxd.compaction.summary import Progress
    from ctxd.service.service import Service


@attrs.frozen
class Request:
    """What a handler may need beyond its typed params."""

    given: frozenset[str] = frozenset()
    """The members of the request's params object."""
    progress: Progress | None = None
    """Reports work-done progress (``$/progress``), when the client gave a ``workDoneToken``."""


Handler = Callable[["Service", Any, Request], Awaitable[Any]]


@attrs.frozen
class Method:
    name: str
    params: type
    handler: Handler
    own_text: bool = False
    """The result carries ctxd's own text (failures a provider answered with, a summary, ...): it is scrubbed of
    secrets (a session's content is the agent's data, answered as it is)."""
    progress: str | None = None
    """A long-running method: the title of its work-done progress (none for a dry run). Its result is scrubbed
    like ``own_text``'s."""


METHODS: tuple[Method, ...] = (
    # --- sessions (ctxd.service.sessions) ---------------------------------------------------------------------
    Method(p.SESSION_LIST, p.SessionListParams, lambda s, a, r: s.sessions.session_list(a)),
    Method(p.SESSION_OPEN, p.SessionParams, lambda s, a, r: s.sessions.session_open(a)),
    Method(p.SESSION_CREATE, p.SessionCreateParams, lambda s, a, r: s.sessions.session_create(a)),
    Method(
        p.SESSION_APPEND,
        p.SessionAppendParams,
        lambda s, a, r: s.sessions.session_append(a, explicit_parent="parentId" in r.given),
    ),
    Method(p.SESSION_TREE, p.SessionTreeParams, lambda s, a, r: s.sessions.session_tree(a)),
    Method(p.SESSION_ENTRY, p.SessionEntryParams, lambda s, a, r: s.sessions.session_entry(a)),
    Method(p.SESSION_LABEL, p.SessionLabelParams, lambda s, a, r: s.sessions.session_label(a)),
    Method(p.SESSION_FORK, p.SessionEntryParams, lambda s, a, r: s.sessions.session_fork(a)),
    Method(p.SESSION_STATS, p.SessionParams, lambda s, a, r: s.sessions.session_stats(a)),
    Method(p.SESSION_CHECK, p.SessionCheckParams, lambda s, a, r: s.sessions.session_check(a)),
    Method(p.SESSION_PIN, p.SessionPinParams, lambda s, a, r: s.sessions.session_pin(a)),
    # --- context (ctxd.service.context) -----------------------------------------------------------------------
    Method(p.CONTEXT_BUILD, p.ContextBuildParams, lambda s, a, r: s.context.context_build(a)),
    Method(p.CONTEXT_COMPOSITION, p.ContextCompositionParams, lambda s, a, r: s.context.context_composition(a)),
    # --- compaction (ctxd.service.compacting) -----------------------------------------------------------------
    Method(
        p.COMPACT, p.CompactParams, lambda s, a, r: s.compaction.compact(a, r.progress), progress="ctxd: compacting"
    ),
    Method(p.BRANCH, p.BranchParams, lambda s, a, r: s.compaction.branch(a), own_text=True),
    Method(p.SESSION_LEDGER, p.SessionParams, lambda s, a, r: s.compaction.session_ledger(a), own_text=True),
    # --- history (ctxd.service.history, ctxd.service.team) ----------------------------------------------------
    Method(p.HISTORY_SEARCH, p.HistorySearchParams, lambda s, a, r: s.history_search(a)),
    Method(p.HISTORY_EXPAND, p.HistoryExpandParams, lambda s, a, r: s.history_expand(a)),
    # --- agents (ctxd.service.agents) -------------------------------------------------------------------------
    # An agent's own compaction (pi's extension): summarised, never written; $/cancelRequest cancels it.
    Method(
        p.COMPACT_SUMMARIZE,
        p.CompactSummarizeParams,
        lambda s, a, r: s.agents.compact_summarize(a, r.progress),
        progress="ctxd: summarising",
    ),
    Method(p.BRANCH_SUMMARIZE, p.BranchSummarizeParams, lambda s, a, r: s.agents.branch_summarize(a), own_text=True),
    Method(p.CONTEXT_TRUNCATE, p.ContextTruncateParams, lambda s, a, r: s.agents.context_truncate(a)),
    Method(p.COMPACT_PROMPT, p.CompactPromptParams, lambda s, a, r: s.agents.compact_prompt(a)),
    Method(p.COMPACT_FACTS, p.SessionParams, lambda s, a, r: s.agents.compact_facts(a), own_text=True),
    Method(p.SESSION_FACTS, p.SessionParams, lambda s, a, r: s.agents.session_facts(a), own_text=True),
    Method(p.SESSION_ARCHIVE, p.SessionParams, lambda s, a, r: s.agents.session_archive(a)),
)
BY_NAME = {m.name: m for m in METHODS}

TOOLS = {
    "search_history": p.HISTORY_SEARCH,
    "expand": p.HISTORY_EXPAND,
    "session_facts": p.SESSION_FACTS,
}
"""``ctxd mcp``'s tools (:mod:`ctxd.mcp.tools`) -> the method each answers through."""


async def call(service: Service, name: str, params: Any, request: Request | None = None) -> Any:
    """The method ``name`` with typed ``params``, as the server calls it (``ctxd mcp`` and the CLI do)."""
    return await BY_NAME[name].handler(service, params, request or Request())
