"""A loaded session: the file, its tree, and the caches derived from them, kept in step."""

from __future__ import annotations

import gc
import os
from collections.abc import Sequence
from typing import Any

from ctxd.store.create import create_session
from ctxd.store.files import new_entry_id
from ctxd.store.scan import Diagnostic
from ctxd.store.session_file import LEAF, LEAF_MARKER, Durability, RefreshResult, SessionFile
from ctxd.store.transcript import open_session_file
from ctxd.tree.index import NONE, TreeIndex


class Session:
    """One session file with its tree index. Appends and refreshes keep the tree current."""

    def __init__(self, file: SessionFile) -> None:
        self.file = file
        enabled = gc.isenabled()
        gc.disable()  # many small lists at once: the collector would only slow this down
        try:
            self.tree = TreeIndex(file)
        finally:
            if enabled:
                gc.enable()
        self.estimates: dict[int, int] = {}
        """Token estimates by entry index (valid for one generation of the file)."""
        self.derived: dict[str, Any] = {}
        """Views the layers above keep with the session (``ctxd.context.live``'s kept context);
        each checks the file's generation itself."""
        self._generation = file.generation

    @classmethod
    def open(cls, path: str, *, durability: Durability = Durability.FLUSH) -> Session:
        """A pi session, or a read-only Claude Code / Codex transcript."""
        return cls(open_session_file(path, durability=durability))

    @property
    def path(self) -> str:
        return self.file.path

    def _sync(self) -> range:
        new = self.tree.update()
        if self.file.generation != self._generation:
            self.estimates.clear()
            self._generation = self.file.generation
        return new

    def refresh(self) -> tuple[RefreshResult, range]:
        """Catch up with the file on disk; returns what the store read and the new tree indices."""
        result = self.file.refresh()
        return result, self._sync()

    def append(self, entries: Sequence[dict[str, Any]], *, parent_id: str | None = LEAF, **kw: Any) -> list[str]:
        ids = self.file.append(entries, parent_id=parent_id, **kw)
        self._sync()
        return ids

    def move_leaf(self, entry_id: str | None) -> str:
        marker = self.file.move_leaf(entry_id)
        self._sync()
        return marker

    def leaf(self) -> int | None:
        return self.file.leaf_index()

    def diagnostics(self) -> list[Diagnostic]:
        """What is wrong with the file's lines, then with its tree (missing parents, cycles)."""
        self.tree.update()
        return [*self.file.diagnostics, *self.tree.problems()]

    def leaf_id(self) -> str | None:
        return self.file.leaf_id()

    def path_ids(self, leaf: int | None = None) -> list[str]:
        leaf = self.leaf() if leaf is None else leaf
        return [] if leaf is None else [self.tree.id_of(i) for i in self.tree.path_to_root(leaf)]

    def fork(self, entry_id: str, *, root: str | None = None) -> str:
        """A new session file holding the path from the root to ``entry_id`` (with its labels),
        whose header names this file as ``parentSession``. It goes next to this file, or into
        pi's layout under ``root``."""
        target = self.file.require(entry_id)
        path = self.tree.path_to_root(target)
        bodies = self.file.entries(path)
        on_path = {self.tree.id_of(i) for i in path}
        last = bodies[-1]["id"] if bodies else None
        for target_i, label in sorted(self.tree.labels.items()):
            target_id = self.tree.id_of(target_i)
            if target_id in on_path:
                bodies.append(
                    {
                        "type": "label",
                        "id": _fresh_id(on_path),
                        "parentId": last,
                        "timestamp": bodies[-1]["timestamp"],
                        "targetId": target_id,
                        "label": label,
                    }
                )
                last = bodies[-1]["id"]
        if bodies and bodies[-1]["id"] != entry_id:
            # Keep the fork's leaf on the chosen entry for pi too.
            bodies.append(
                {
                    "type": "custom",
                    "id": _fresh_id(on_path),
                    "parentId": entry_id,
                    "timestamp": bodies[-1]["timestamp"],
                    "customType": LEAF_MARKER,
                    "data": {"leafId": entry_id},
                }
            )
        return create_session(
            root or "",
            self.file.cwd,
            directory=None if root else os.path.dirname(self.path),
            parent_session=self.path,
            entries=bodies,
        )


def _fresh_id(taken: set[str]) -> str:
    new = new_entry_id(taken.__contains__)
    taken.add(new)
    return new


__all__ = ["NONE", "Session"]
