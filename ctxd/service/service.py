"""The service: the daemon's jobs, composed.

Each job is a small class owning its state, given the shared parts it needs (:class:`ctxd.service.core.Core`:
the configuration, the registry of open sessions, background tasks, notifications) and, explicitly, what it needs
of another job:

- :class:`~ctxd.service.sessions.Sessions`: list, open, create, append, read, label, pin, fork, check;
- :class:`~ctxd.service.context.Context`: ``context/build``, ``context/composition``;
- :class:`~ctxd.service.compacting.Compaction`: compactions (manual, automatic), branches, the ledger;
- :class:`~ctxd.service.history.History` and :class:`~ctxd.service.team.Team`: searching the history, on this
  machine and in the team database;
- :class:`~ctxd.service.agents.Agents`: what the agents' own compactions ask of ctxd.

Two shared parts serve several jobs: the writer (:mod:`ctxd.service.writer`: appends, in order) and the live
part (:mod:`ctxd.service.live`: what the watcher saw). Which method a request calls is said in one place,
:data:`ctxd.service.methods.METHODS`.

Requests on one session are serialised by its lock and run off the event loop (disk I/O happens
in worker threads); different sessions proceed concurrently.  A compaction holds the lock only to
plan and to write, so ``context/build`` during a compaction answers from the state before it.
Notifications leave through ``notify(method, payload)``: the server sends them, tests record them.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

from ctxd.service import protocol as p
from ctxd.service.agents import Agents
from ctxd.service.compacting import Compaction
from ctxd.service.config import Config
from ctxd.service.context import Context
from ctxd.service.core import Core, Notify
from ctxd.service.history import History
from ctxd.service.live import Live
from ctxd.service.sessions import Sessions
from ctxd.service.team import Team
from ctxd.service.writer import Appends

if TYPE_CHECKING:
    from ctxd.service.core import SessionHook


class Service:
    """The jobs, composed; the server, ``ctxd mcp`` and the CLI's daemon-less calls go through it."""

    def __init__(self, config: Config, notify: Notify | None = None) -> None:
        self.core = Core(config, notify)
        self.config = config
        self.registry = self.core.registry
        self.compaction = Compaction(self.core)
        self.appends = Appends(self.core, self.compaction.maybe_auto)
        self.live = Live(self.core, self.compaction.maybe_auto)
        self.context = Context(self.core)
        self.sessions = Sessions(self.core, self.appends, self.live)
        self.history = History(self.core)
        self.team = Team(config, self.history)
        self.agents = Agents(self.core)
        # What the shared core needs of the jobs, passed in: a changed session is caught up (and announced) by
        # the live part; a followed composition is kept open and sent again after each change.
        self.core.freshen = self.live.freshen
        self.core.kept_open = self.context.follows
        self.core.changed = self.context.session_changed

    @property
    def hook(self) -> SessionHook | None:
        """The client's compact/willRun hook (the server sets it when the client declared support)."""
        return self.core.hook

    @hook.setter
    def hook(self, hook: SessionHook | None) -> None:
        self.core.hook = hook

    async def history_search(self, params: p.HistorySearchParams) -> dict[str, Any]:
        """``history/search``: this machine's history, or the team's (``scope: "team"``)."""
        if params.scope == "team":
            return await self.team.history_search(params)
        return await self.history.history_search(params)

    async def history_expand(self, params: p.HistoryExpandParams) -> dict[str, Any]:
        """``history/expand``: from a session file, or from the team database (``scope: "team"``)."""
        if params.scope == "team":
            return await self.team.history_expand(params)
        return await self.history.history_expand(params)

    def start(self) -> None:
        """Index the history in the background from now on (searches answer at once), and publish it to the team
        database if one is configured: the daemon and ``ctxd mcp`` do at start."""
        self.history.history_kick()
        self.team.team_start()

    async def close(self) -> None:
        self.team.close()
        self.history.close()
        await self.core.close()

    def run_task(self, coro: Any, name: str) -> Any:
        return self.core.run_task(coro, name)


ALIASES = {
    # The service's methods before it was split by job (one class of mixins): each still answers, from its job.
    "session_list": "sessions.session_list",
    "session_open": "sessions.session_open",
    "session_create": "sessions.session_create",
    "session_append": "sessions.session_append",
    "session_tree": "sessions.session_tree",
    "session_entry": "sessions.session_entry",
    "session_label": "sessions.session_label",
    "session_pin": "sessions.session_pin",
    "session_fork": "sessions.session_fork",
    "session_stats": "sessions.session_stats",
    "session_check": "sessions.session_check",
    "session_ledger": "compaction.session_ledger",
    "compact": "compaction.compact",
    "branch": "compaction.branch",
    "context_build": "context.context_build",
    "context_composition": "context.context_composition",
    "compact_summarize": "agents.compact_summarize",
    "branch_summarize": "agents.branch_summarize",
    "context_truncate": "agents.context_truncate",
    "compact_prompt": "agents.compact_prompt",
    "compact_facts": "agents.compact_facts",
    "session_facts": "agents.session_facts",
    "session_archive": "agents.session_archive",
    "history_indexer": "history.history_indexer",
    "history_kick": "history.history_kick",
    "history_touch": "history.history_touch",
    "history_newest": "history.history_newest",
    "team_start": "team.team_start",
    "team_sync": "team.team_sync",
    "team_status": "team.team_status",
    "team_publisher": "team.team_publisher",
    "file_changed": "live.file_changed",
    "database_changed": "live.database_changed",
    "catch_up": "live.catch_up",
    "opencode_baseline": "live.opencode_baseline",
}
"""Old name -> where it lives now (read-only: a job's method, bound)."""

for _old, _new in ALIASES.items():
    setattr(Service, _old, property(operator.attrgetter(_new), doc=f"The same as ``{_new}``."))
