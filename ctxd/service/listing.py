"""Every session ctxd serves, newest first: the one listing behind the daemon's ``session/list`` and
``ctxd sessions``.

pi's sessions (the roots), Claude Code's transcripts and Codex's rollouts (the transcript roots), ctxd's archived
copies of them and of opencode sessions (the archive roots, each copy paired with its live session), and opencode's
sessions in its SQLite databases, each row named as every method names the session (a file's real path;
``<database>#<session id>`` for opencode).
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxd.service.config import Config
from ctxd.service.registry import only_inside
from ctxd.store.archive import link_archives
from ctxd.store.listing import SessionSummary, list_sessions
from ctxd.store.opencode import list_databases

AGENTS = ("pi", "claude", "codex", "opencode")
"""The ``agent`` of a listed session."""


def list_served(
    config: Config, roots: Sequence[str] | None = None, cwd: str | None = None, *, keep: bool = False
) -> list[SessionSummary]:
    """The sessions under ``roots`` (default: every root and opencode database configured; the caller checks that
    the ones given are among them), optionally only those started in ``cwd``, newest first. ``keep``: the file
    rows are kept in the user's cache for the next process (:func:`ctxd.store.listing.list_sessions`)."""
    databases = [d for d in config.opencode_databases if not roots or d in roots]
    files = [r for r in (roots or config.all_roots) if r not in config.opencode_databases]
    found = list_sessions(files, cwd, config.archive_roots, keep=keep)
    # Real paths, as every other method and notification names sessions (symlinked roots); a link that leads
    # outside the configured roots is not listed.
    found = only_inside(found, config.all_roots)
    if databases:  # opencode's sessions live in SQLite databases (ctxd.store.opencode)
        found.extend(list_databases(databases, cwd))
        found.sort(key=lambda s: s.modified, reverse=True)
        link_archives(found, config.archive_roots)  # ctxd's copies of opencode sessions beside them
    return found
