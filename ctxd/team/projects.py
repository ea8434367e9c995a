"""Which project a session belongs to, and whether it is published.

A session's project comes from the folder it was started in (its ``cwd``):

1. a folder listed in ``team.projects`` (``"~/src/web"``) that holds the cwd: the project is that folder's name;
2. else the top of the git work tree holding the cwd (the nearest folder above it with a ``.git``): its name;
3. else the cwd's own name.

So the same repository checked out as ``/home/alice/src/parser`` and ``/Users/bob/parser`` is one project,
``parser``, on both machines. A session is published when its project's name is listed, its folder is listed, or
the list holds ``"*"``.
"""

from __future__ import annotations

import os
from functools import lru_cache

from ctxd.team.settings import ALL, TeamSettings


def _is_path(entry: str) -> bool:
    return "/" in entry or entry.startswith("~")


@lru_cache(maxsize=4096)
def _git_top(cwd: str) -> str | None:
    folder = cwd
    while True:
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


class Projects:
    """The project rules of one configuration (folders normalised once)."""

    def __init__(self, settings: TeamSettings) -> None:
        self.names = {p for p in settings.projects if not _is_path(p) and p != ALL}
        folders = [os.path.normpath(os.path.abspath(os.path.expanduser(p))) for p in settings.projects if _is_path(p)]
        self.folders = sorted(folders, key=len, reverse=True)  # the deepest listed folder names the project
        self.all = settings.publishes_all

    def name_of(self, cwd: str) -> str | None:
        """The project of a session started in ``cwd`` (None without a cwd)."""
        if not cwd:
            return None
        cwd = os.path.normpath(cwd)
        for folder in self.folders:
            if cwd == folder or cwd.startswith(folder + os.sep):
                return os.path.basename(folder) or folder
        top = _git_top(cwd)
        return os.path.basename(top or cwd) or cwd

    def published(self, cwd: str) -> str | None:
        """The project to publish a session started in ``cwd`` under, or None if it is not published."""
        name = self.name_of(cwd)
        if name is None:
            return None
        if self.all or name in self.names:
            return name
        cwd = os.path.normpath(cwd)
        if any(cwd == f or cwd.startswith(f + os.sep) for f in self.folders):
            return name
        return None
