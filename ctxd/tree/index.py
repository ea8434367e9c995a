"""The tree over a session file's entries: parents, children, depth, labels, name, and what each
entry inherits from its path (latest compaction, model and thinking-level settings).

Everything is iterative: a chain of a million entries needs no recursion. Entries whose parent
does not exist (orphans) are reported and treated as roots; cycles cannot loop forever.
"""

from __future__ import annotations

from collections import deque

from ctxd.formats.codec import LineHead
from ctxd.store.session_file import LEAF_MARKER, SessionFile

NONE = -1


class TreeIndex:
    """Derived from a :class:`SessionFile`; call :meth:`update` after the file's refresh or append."""

    def __init__(self, session: SessionFile) -> None:
        self.session = session
        self._rebuild()

    def _rebuild(self) -> None:
        self.generation = self.session.generation
        self.parent: list[int] = []
        self.depth: list[int] = []
        self.children: dict[int, list[int]] = {}
        self.roots: list[int] = []
        self.orphans: list[int] = []
        self.labels: dict[int, str] = {}
        self.name: str | None = None
        self.last_compaction: list[int] = []
        self.last_model: list[int] = []
        self.last_thinking: list[int] = []
        self._waiting: dict[str, list[int]] = {}
        self._pending_labels: dict[str, str | None] = {}
        self.update(0)

    def __len__(self) -> int:
        return len(self.parent)

    def update(self, start: int | None = None) -> range:
        """Index entries from ``start`` (default: those not yet indexed). Returns the new indices.

        A reloaded file (new generation) is re-indexed from scratch.
        """
        if self.session.generation != self.generation:
            self._rebuild()
            return range(len(self.parent))
        start = len(self.parent) if start is None else start
        heads = self.session.heads
        index = self.session.index
        for i in range(start, len(heads)):
            head = heads[i]
            pid = head.parentId
            p = NONE
            if pid is not None:
                p = index.get(pid, NONE)
                if p == NONE or p >= i:
                    # Orphan, or a parent that appears later in the file: resolved when it arrives.
                    p = NONE
                    self._waiting.setdefault(pid, []).append(i)
            self.parent.append(p)
            self.depth.append(0)
            self.last_compaction.append(NONE)
            self.last_model.append(NONE)
            self.last_thinking.append(NONE)
            if p == NONE and pid is None:
                self.roots.append(i)
            elif p == NONE:
                self.orphans.append(i)
            else:
                self.children.setdefault(p, []).append(i)
            self._inherit(i, p, head)
            self._index_meta(i, head)
            if head.id is not None and head.id in self._waiting:
                self._adopt(i, self._waiting.pop(head.id))
        return range(start, len(heads))

    def _inherit(self, i: int, p: int, head: LineHead) -> None:
        if p != NONE:
            self.depth[i] = self.depth[p] + 1
            self.last_compaction[i] = self.last_compaction[p]
            self.last_model[i] = self.last_model[p]
            self.last_thinking[i] = self.last_thinking[p]
        kind = head.type
        if kind == "compaction":
            self.last_compaction[i] = i
        elif kind == "model_change":
            self.last_model[i] = i
        elif kind == "thinking_level_change":
            self.last_thinking[i] = i
        elif kind == "message" and head.message is not None and head.message.role == "assistant":
            self.last_model[i] = i

    def _index_meta(self, i: int, head: LineHead) -> None:
        if head.type == "label" and head.targetId:
            target = self.session.index.get(head.targetId)
            if target is None:
                self._pending_labels[head.targetId] = head.label
            elif head.label:
                self.labels[target] = head.label
            else:
                self.labels.pop(target, None)
        elif head.type == "session_info":
            self.name = head.name
        if head.id is not None and head.id in self._pending_labels:
            label = self._pending_labels.pop(head.id)
            if label:
                self.labels[i] = label

    def _adopt(self, parent: int, waiting: list[int]) -> None:
        """``parent`` arrived after children that name it: link them and re-derive their subtrees."""
        for child in waiting:
            if child in self.orphans:
                self.orphans.remove(child)
            self.parent[child] = parent
            self.children.setdefault(parent, []).append(child)
            queue = deque([child])
            seen = {parent}
            while queue:
                node = queue.popleft()
                if node in seen:
                    continue  # a cycle in a corrupt file: stop rather than loop
                seen.add(node)
                self._inherit(node, self.parent[node], self.session.heads[node])
                queue.extend(self.children.get(node, ()))

    # --- queries ------------------------------------------------------------------------------

    def id_of(self, i: int) -> str:
        return self.session.heads[i].id or ""

    def child_ids(self, i: int) -> list[int]:
        return self.children.get(i, [])

    def path_to_root(self, i: int) -> list[int]:
        """Indices from the root down to ``i`` (inclusive)."""
        path: list[int] = []
        node = i
        limit = len(self.parent) + 1
        while node != NONE and limit:
            path.append(node)
            node = self.parent[node]
            limit -= 1
        path.reverse()
        return path

    def path_until(self, i: int, stop: int) -> list[int]:
        """Indices from ``stop`` (inclusive, if it is an ancestor) down to ``i``."""
        path: list[int] = []
        node = i
        limit = len(self.parent) + 1
        while node != NONE and limit:
            path.append(node)
            if node == stop:
                break
            node = self.parent[node]
            limit -= 1
        path.reverse()
        return path

    def common_ancestor(self, a: int, b: int) -> int:
        """The deepest entry on both paths, or NONE if they share no root."""
        limit = 2 * len(self.parent) + 2
        while a != b and a != NONE and b != NONE and limit:
            if self.depth[a] >= self.depth[b]:
                a = self.parent[a]
            else:
                b = self.parent[b]
            limit -= 1
        return a if a == b else NONE

    def is_ancestor(self, a: int, b: int) -> bool:
        """True if ``a`` lies on the path from the root to ``b`` (inclusive)."""
        return self.common_ancestor(a, b) == a

    def is_leaf_marker(self, i: int) -> bool:
        head = self.session.heads[i]
        return head.type == "custom" and head.customType == LEAF_MARKER

    def label_of(self, i: int) -> str | None:
        return self.labels.get(i)
