"""A loaded session: the file, its tree, and the caches derived from them, kept in step."""

from __future__ import annotations

import gc
import os
from array import array
from collections.abc import Sequence
from itertools import compress
from typing import Any

from ctxd.formats.codec import CURRENT_VERSION
from ctxd.store import index_cache
from ctxd.store.create import create_session
from ctxd.store.files import new_entry_id
from ctxd.store.index_cache import MIN_ENTRIES as INDEX_MIN_ENTRIES
from ctxd.store.opening import open_session_file
from ctxd.store.reader import SessionReader
from ctxd.store.scan import Diagnostic
from ctxd.store.session_file import LEAF, LEAF_MARKER, Durability, RefreshResult, SessionFile
from ctxd.tree.index import NONE, TreeIndex

ESTIMATES_WORTH_SAVING = 256
"""New token estimates that make closing a session keep its index again (a context of a few hundred
messages then builds from the index alone on the next open, without reading a body)."""
PER_ESTIMATE = 100
"""Bytes a token estimate holds (an int in a dict)."""
RELEASE_AT = 100_000
"""Files with at least this many entries let their heads go once the tree is built (see
:mod:`ctxd.store.heads`): a million entries would otherwise hold 700 MB of them. Below it they are
kept (about 0.3 KB each: 10 MB for 33,000 entries), so that the first context built needs not
decode the heads of its path again."""


class Session:
    """One session file with its tree index. Appends and refreshes keep the tree current.

    A big file's index and tree are kept in the user's cache (:mod:`ctxd.store.index_cache`) when it
    is first read and when it is closed, so opening it again reads only what was appended since.
    """

    def __init__(self, file: SessionFile, *, tree: TreeIndex | None = None) -> None:
        """``tree``: built while ``file`` was read (see :meth:`open`), else built or restored here."""
        self.file = file
        self._built = tree
        self.estimates: dict[int, int] = {}
        """Token estimates by entry index (valid for one generation of the file)."""
        self.derived: dict[str, Any] = {}
        """Views the layers above keep with the session (``ctxd.context.live``'s kept context);
        each checks the file's generation itself."""
        self._saved: tuple[int, int] | None = None
        """(entries, estimates) the cached index holds, when there is one."""
        self.tree = self._make_tree()
        self._take_scan_estimates()
        self._generation = file.generation
        self._settle()

    @classmethod
    def open(cls, path: str, *, durability: Durability = Durability.FLUSH) -> Session:
        """A pi session, or a read-only Claude Code / Codex transcript.

        The tree is built as the file is read, chunk by chunk, and a big file's heads go as soon as
        the tree has them: a million entries never hold all their heads at once."""
        builder = _TreeBuilder()
        file = open_session_file(path, durability=durability, on_chunk=builder)
        file.on_chunk = None
        return cls(file, tree=builder.result(file))

    @property
    def path(self) -> str:
        return self.file.path

    def _make_tree(self) -> TreeIndex:
        """The tree read back with the index (then the appended entries indexed), or built."""
        built, self._built = self._built, None
        if built is not None:
            return built
        restored = self.file.restored
        self._saved = None
        if restored is not None:
            count, extra = restored
            snap = extra.get("tree")
            tree = TreeIndex.restore(self.file, snap) if isinstance(snap, dict) and snap.get("count") == count else None
            if tree is not None:
                self.estimates = _estimates(extra.get("estimates"), count)
                self._saved = (count, len(self.estimates))
                return tree
        enabled = gc.isenabled()
        gc.disable()  # many small lists at once: the collector would only slow this down
        try:
            return TreeIndex(self.file)
        finally:
            if enabled:
                gc.enable()

    def _settle(self) -> None:
        """After a full read: let a big file's heads go, and keep its index."""
        n = len(self.file)
        if n >= RELEASE_AT:
            self.file.release_heads()
        saved = self._saved
        if n >= INDEX_MIN_ENTRIES and (saved is None or n - saved[0] >= max(INDEX_MIN_ENTRIES, n // 10)):
            self.save_index()

    def save_index(self) -> bool:
        """Keep the file's index, its tree and the token estimates in the user's cache."""
        if not index_cache.enabled():
            return False
        self.tree.update()
        n = len(self.file)
        if len(self.tree) != n:
            return False
        keys, values = array("q", self.estimates.keys()), array("q", self.estimates.values())
        lo = self._context_start()
        if keys and (lo > 0 or max(keys) >= n):
            # Only those a context at the leaf can use: a big file's scan estimated every entry.
            keep = list(map(range(lo, n).__contains__, keys))
            keys, values = array("q", compress(keys, keep)), array("q", compress(values, keep))
        extra: dict[str, Any] = {"estimates": [keys.tobytes(), values.tobytes()]}
        if len(self.file.index) == n:
            # With duplicate ids the tree depends on the order entries were read in (an id names
            # another entry once its duplicate arrives): a full read builds it again.
            extra["tree"] = self.tree.snapshot()
        if not self.file.save_index(extra):
            return False
        self._saved = (n, len(self.estimates))
        return True

    def _context_start(self) -> int:
        """The first entry a context at the leaf reads: its last compaction's first kept entry (or the
        compaction), 0 when there is none."""
        leaf = self.file.leaf_index()
        if leaf is None or leaf >= len(self.tree.last_compaction):
            return 0
        comp = self.tree.last_compaction[leaf]
        if comp == NONE:
            return 0
        kept_id = self.file.heads[comp].firstKeptEntryId
        kept = self.file.index.get(kept_id) if kept_id else None
        return min(comp, kept) if kept is not None else comp

    def weight(self) -> int:
        """About how many bytes this session holds: the file's index, the token estimates, and the views
        kept with it (each that can say: ``weight()``)."""
        views = sum(int(view.weight()) for view in self.derived.values() if hasattr(view, "weight"))
        return self.file.held_bytes() + PER_ESTIMATE * len(self.estimates) + views

    def close(self) -> None:
        """Keep the index if it grew since it was kept (a big file), and release the file."""
        try:
            n = len(self.file)
            saved = self._saved
            grown = saved is None or n != saved[0] or len(self.estimates) - saved[1] >= ESTIMATES_WORTH_SAVING
            if n >= INDEX_MIN_ENTRIES and grown and not self.file.read_only:
                self.save_index()
        finally:
            self.derived.clear()  # the kept views refer back to the session: let it all go at once
            self.file.close()

    def _take_scan_estimates(self) -> None:
        """Keep the estimates made while the file's new lines were indexed (``ctxd.store.native``)."""
        made = self.file.scan_estimates
        if made:
            self.estimates.update(made)
            made.clear()

    def _sync(self) -> range:
        if self.file.generation != self._generation:
            self.estimates.clear()
            self.tree = self._make_tree()
            self._take_scan_estimates()
            self._generation = self.file.generation
            self._settle()
            return range(len(self.file))
        self._take_scan_estimates()
        return self.tree.update()

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


class _TreeBuilder:
    """Builds a session's tree while its file is first read (given to the reader as ``on_chunk``)."""

    def __init__(self) -> None:
        self.tree: TreeIndex | None = None
        self.valid = True
        self.released = 0

    def __call__(self, reader: SessionReader) -> None:
        if not self.valid:
            return
        bad = not isinstance(reader, SessionFile) or reader.version != CURRENT_VERSION
        if bad or len(reader.index) != len(reader.heads):
            # Old files are migrated after the read, and with a duplicate id an earlier entry's
            # parent can be another entry once the whole file is read: built after the read.
            self.valid = False
            self.tree = None
            return
        if self.tree is None:
            assert isinstance(reader, SessionFile)
            self.tree = TreeIndex(reader)
        else:
            self.tree.update()
        if len(reader.heads) >= RELEASE_AT:
            reader.heads.release(self.released)
            self.released = len(reader.heads)

    def result(self, file: SessionReader) -> TreeIndex | None:
        """The tree, if it holds the whole file as read."""
        tree = self.tree
        if not self.valid or tree is None or file.restored is not None or len(tree) != len(file.heads):
            return None
        if len(file.index) != len(file.heads) or file.version != CURRENT_VERSION:
            return None
        tree.generation = file.generation  # built during the read that gave this generation
        return tree


def _estimates(saved: Any, count: int) -> dict[int, int]:
    """Token estimates read back with the index (entries before ``count`` only)."""
    try:
        keys, values = array("q"), array("q")
        keys.frombytes(saved[0])
        values.frombytes(saved[1])
    except (TypeError, ValueError, IndexError, KeyError):
        return {}
    if len(keys) != len(values):
        return {}
    if not keys or (min(keys) >= 0 and max(keys) < count and min(values) >= 0):
        return dict(zip(keys, values, strict=True))  # the usual case, checked in C: no Python per item
    return {k: v for k, v in zip(keys, values, strict=True) if 0 <= k < count and v >= 0}


def _fresh_id(taken: set[str]) -> str:
    new = new_entry_id(taken.__contains__)
    taken.add(new)
    return new


__all__ = ["NONE", "Session"]


def session_name(s: Session) -> str | None:
    """The session's name: its latest ``session_info`` name, else (opencode) the title opencode gave it."""
    title = s.file.header.get("title") if s.file.header.get("agent") == "opencode" else None
    return s.tree.name or (title if isinstance(title, str) and title else None)
