"""The tree over a session file's entries: parents, children, depth, labels, name, and what each
entry inherits from its path (latest compaction, model and thinking-level settings).

Everything is iterative: a chain of a million entries needs no recursion. Entries whose parent
does not exist (orphans) are reported and treated as roots; cycles cannot loop forever.
"""

from __future__ import annotations

from array import array
from itertools import pairwise
from typing import Any

from ctxd.formats.codec import LineHead
from ctxd.store.scan import Diagnostic
from ctxd.store.session_file import LEAF_MARKER, PIN_MARKER, SessionFile
from ctxd.tree.runs import carry, chain_starts, link_children, models_down

NONE = -1
MAX_PROBLEMS = 200
"""At most this many tree problems are listed one by one (then one line says how many more)."""


class TreeIndex:
    """Derived from a :class:`SessionFile`; call :meth:`update` after the file's refresh or append."""

    def __init__(self, session: SessionFile) -> None:
        self.session = session
        self.relinks = 0
        """Bumped whenever entries already indexed get a new parent (a parent that arrived late):
        views that follow paths must start over."""
        self._rebuild()

    def _rebuild(self) -> None:
        self.generation = self.session.generation
        self.parent: array[int] = array("q")
        self.depth: array[int] = array("q")
        self._children: dict[int, list[int]] | None = None
        """Built from the parents on first use, then kept up to date."""
        self.roots: list[int] = []
        self._orphans: dict[int, None] = {}
        self.cycles: list[int] = []
        self.has_context_edits = False
        """Whether any context_edit entry exists (they change what a context's size means)."""
        self.size_memo_key: Any = None
        """What the memo was computed under, besides the tree (the context layer's pins)."""
        self.size_memo: tuple[int, int, Any, bool] | None = None
        """(leaf, context size, last message, usage-based) of the last size computed, reused by the next one."""
        """Entries whose parent link would close a cycle (a corrupt file): kept as orphans."""
        self.labels: dict[int, str] = {}
        self.name: str | None = None
        self.last_compaction: array[int] = array("q")
        self.last_model: array[int] = array("q")
        self.last_thinking: array[int] = array("q")
        self._waiting: dict[str, list[int]] = {}
        self._pending_labels: dict[str, str | None] = {}
        self._unindexed = 0
        """Entries the id index does not lead to (a duplicate id, or none): when it grows, an id can
        name another entry than before, so the size memo is dropped."""
        self.update(0)

    def __len__(self) -> int:
        return len(self.parent)

    @property
    def children(self) -> dict[int, list[int]]:
        """Each entry's children in file order (entries without children are absent)."""
        if self._children is None:
            children: dict[int, list[int]] = {}
            for i, p in enumerate(self.parent):
                if p != NONE:
                    kids = children.get(p)
                    if kids is None:
                        children[p] = [i]
                    else:
                        kids.append(i)
            self._children = children
        return self._children

    # --- the persistent index (ctxd.store.index_cache keeps it with the file's) ------------------

    _ARRAYS = ("parent", "depth", "last_compaction", "last_model", "last_thinking")

    def snapshot(self) -> dict[str, Any]:
        """The tree as plain data, for :meth:`restore` in another process."""
        return {
            "count": len(self.parent),
            "arrays": [getattr(self, name).tobytes() for name in self._ARRAYS],
            "roots": list(self.roots),
            "orphans": list(self._orphans),
            "cycles": list(self.cycles),
            "labels": [[k, v] for k, v in self.labels.items()],
            "name": self.name,
            "contextEdits": self.has_context_edits,
            "waiting": {k: list(v) for k, v in self._waiting.items()},
            "pendingLabels": dict(self._pending_labels),
            "relinks": self.relinks,
            "unindexed": self._unindexed,
        }

    @classmethod
    def restore(cls, session: SessionFile, snap: Any) -> TreeIndex | None:
        """The tree from :meth:`snapshot` of the same file's first entries (then the rest indexed),
        or None when ``snap`` does not fit the file."""
        try:
            count = snap["count"]
            if not isinstance(count, int) or not 0 <= count <= len(session.heads):
                return None
            tree = cls.__new__(cls)
            tree.session = session
            tree.generation = session.generation
            for name, data in zip(cls._ARRAYS, snap["arrays"], strict=True):
                values = array("q")
                values.frombytes(data)
                if len(values) != count:
                    return None
                setattr(tree, name, values)
            tree._children = None
            tree.roots = [int(i) for i in snap["roots"]]
            tree._orphans = dict.fromkeys(int(i) for i in snap["orphans"])
            tree.cycles = [int(i) for i in snap["cycles"]]
            tree.labels = {int(k): str(v) for k, v in snap["labels"]}
            name = snap["name"]
            tree.name = name if isinstance(name, str) else None
            tree.has_context_edits = bool(snap["contextEdits"])
            tree.size_memo = None
            tree.size_memo_key = None
            tree._waiting = {str(k): [int(i) for i in v] for k, v in snap["waiting"].items()}
            tree._pending_labels = {str(k): v if isinstance(v, str) else None for k, v in snap["pendingLabels"].items()}
            tree.relinks = int(snap["relinks"])
            tree._unindexed = int(snap["unindexed"])
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        tree.update()
        return tree

    def update(self, start: int | None = None) -> range:
        """Index entries from ``start`` (default: those not yet indexed). Returns the new indices.

        A reloaded file (new generation) is re-indexed from scratch.
        """
        if self.session.generation != self.generation:
            self._rebuild()
            return range(len(self.parent))
        start = len(self.parent) if start is None else start
        heads = self.session.heads
        new_heads = heads[start:]
        if len(new_heads) < 64 or self._waiting or len(self.session.index) != len(heads):
            self._index(start, new_heads)
        else:
            # The usual shape (every id names its own entry, nothing waits for its parent): runs of
            # entries each the child of the one before. A run's first entry is indexed as any, the
            # rest at once; from an entry that waits for its parent on, they go one by one.
            cuts = chain_starts(new_heads)
            for a, b in pairwise(cuts):
                self._index(start + a, new_heads[a : a + 1])
                if self._waiting:
                    self._index(start + a + 1, new_heads[a + 1 :])
                    break
                if b - a > 1:
                    self._index_chain(start + a + 1, new_heads[a + 1 : b])
        unindexed = len(heads) - len(self.session.index)
        if unindexed != self._unindexed:
            self._unindexed = unindexed
            self.size_memo = None
        return range(start, len(heads))

    def _index_chain(self, start: int, run: list[LineHead]) -> None:
        """Index ``run``, entries from ``start`` each the child of the one before (``start - 1`` is
        indexed): depths count up, and each inherits what the latest entry above it set."""
        n = len(run)
        first = start - 1
        self.parent.fromlist(list(range(first, first + n)))
        self.depth.fromlist(list(range(self.depth[first] + 1, self.depth[first] + 1 + n)))
        models, others = models_down(run, start, self.last_model[first])
        self.last_model.fromlist(models)
        for kind, values in (("compaction", self.last_compaction), ("thinking_level_change", self.last_thinking)):
            carry(values, first, [k for k, head in others if head.type == kind], start + n)
        for k, head in others:
            self._index_meta(k, head)
        if self._children is not None:  # kept up to date once built
            link_children(self._children, first, start, start + n)

    def _index(self, start: int, new_heads: list[LineHead]) -> None:
        """Index ``new_heads``, entries from ``start``, one by one."""
        index = self.session.index
        depth, children = self.depth, self._children
        last_c, last_m, last_t = self.last_compaction, self.last_model, self.last_thinking
        waiting = self._waiting
        get = index.get
        parents = [NONE if (pid := h.parentId) is None else get(pid, NONE) for h in new_heads]
        roots, orphans = self.roots, self._orphans
        depth_add, c_add, m_add, t_add = depth.append, last_c.append, last_m.append, last_t.append
        adoptions: list[tuple[int, list[int]]] = []
        # The hot loop: one pass in file order, inlined (a million entries per open, at most).
        i = start
        for head, p in zip(new_heads, parents, strict=True):
            if NONE < p < i:
                depth_add(depth[p] + 1)
                c_add(last_c[p])
                t_add(last_t[p])
                if head.type == "message":
                    message = head.message
                    m_add(i if message is not None and message.role == "assistant" else last_m[p])
                else:
                    m_add(last_m[p])
                    self._own(i, head)
                    self._index_meta(i, head)
            else:
                parents[i - start] = NONE  # a root, an orphan, or a parent that appears later in the file
                depth_add(0)
                c_add(NONE)
                m_add(NONE)
                t_add(NONE)
                pid = head.parentId
                if pid is None:
                    roots.append(i)
                else:
                    orphans[i] = None
                    waiting.setdefault(pid, []).append(i)
                if head.type == "message":
                    message = head.message
                    if message is not None and message.role == "assistant":
                        last_m[i] = i
                else:
                    self._own(i, head)
                    self._index_meta(i, head)
            if waiting and head.id in waiting:
                adoptions.append((i, waiting.pop(head.id)))  # type: ignore[arg-type]
            i += 1
        self.parent.fromlist(parents)
        if children is not None:  # else built from the parents when first asked for
            for i, p in enumerate(parents, start):
                if p != NONE:
                    kids = children.get(p)
                    if kids is None:
                        children[p] = [i]
                    else:
                        kids.append(i)
        if adoptions:
            self._children = None  # rebuilt in index order, the order adoption gives too
        adopted = False
        for i, kids in adoptions:
            adopted = self._adopt(i, kids) or adopted
        if adopted:
            self._rederive()
            self.relinks += 1
            self.size_memo = None  # paths changed under the memo's leaf

    def _own(self, i: int, head: LineHead) -> None:
        """What an entry itself sets for its subtree."""
        kind = head.type
        if kind == "compaction":
            self.last_compaction[i] = i
        elif kind == "model_change":
            self.last_model[i] = i
        elif kind == "thinking_level_change":
            self.last_thinking[i] = i
        elif kind == "message" and head.message is not None and head.message.role == "assistant":
            self.last_model[i] = i

    def _inherit(self, i: int, p: int, head: LineHead) -> None:
        if p != NONE:
            self.depth[i] = self.depth[p] + 1
            self.last_compaction[i] = self.last_compaction[p]
            self.last_model[i] = self.last_model[p]
            self.last_thinking[i] = self.last_thinking[p]
        else:
            self.depth[i] = 0
            self.last_compaction[i] = self.last_model[i] = self.last_thinking[i] = NONE
        self._own(i, head)

    def _index_meta(self, i: int, head: LineHead) -> None:
        if head.type == "context_edit":
            self.has_context_edits = True
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

    @property
    def orphans(self) -> list[int]:
        """Entries whose parent does not exist (treated as roots)."""
        return list(self._orphans)

    def problems(self) -> list[Diagnostic]:
        """A diagnostic (line, entry id) for each entry whose parent is missing, is itself, or
        would close a cycle: each is served as a root of its own."""
        heads = self.session.heads
        lines = self.session.lines
        path = self.session.path
        cycles = set(self.cycles)
        bad = sorted(cycles.union(self._orphans))
        out: list[Diagnostic] = []
        for i in bad[:MAX_PROBLEMS]:
            head = heads[i]
            if head.parentId == head.id:
                kind, message = "self-parent", f"entry {head.id!r} names itself as its parent; served as a root"
            elif i in cycles:
                kind = "cycle"
                message = f"entry {head.id!r}: its parent {head.parentId!r} descends from it (a cycle)"
                message += "; served as a root"
            else:
                kind = "orphan"
                message = f"entry {head.id!r}: its parent {head.parentId!r} does not exist; served as a root"
            out.append(Diagnostic(path, lines[i], message, severity="warning", entryId=head.id, kind=kind))
        if len(bad) > MAX_PROBLEMS:
            rest = len(bad) - MAX_PROBLEMS
            more = f"{rest} more entries with a missing or cyclic parent"
            out.append(Diagnostic(path, lines[bad[MAX_PROBLEMS]], more, kind="more"))
        return out

    def _adopt(self, parent: int, waiting: list[int]) -> bool:
        """``parent`` arrived after children that name it: link them (inherited state is re-derived
        once, at the end of the update)."""
        linked = False
        for child in waiting:
            if self._is_above(child, parent):
                self.cycles.append(child)  # linking would close a cycle: it stays an orphan
                continue
            self._orphans.pop(child, None)
            self.parent[child] = parent
            if self._children is not None:
                self._children.setdefault(parent, []).append(child)
            linked = True
        return linked

    def _rederive(self) -> None:
        """Depth and inherited state for the whole tree, parents before children (O(n))."""
        stack = [*reversed(self.roots), *reversed(self._orphans)]
        heads = self.session.heads
        while stack:
            node = stack.pop()
            self._inherit(node, self.parent[node], heads[node])
            stack.extend(reversed(self.children.get(node, ())))

    def _is_above(self, node: int, start: int) -> bool:
        """True if ``node`` is ``start`` or one of its ancestors."""
        limit = len(self.parent) + 1
        while start != NONE and limit:
            if start == node:
                return True
            start = self.parent[start]
            limit -= 1
        return False

    # --- queries ------------------------------------------------------------------------------

    def id_of(self, i: int) -> str:
        return self.session.heads[i].id or ""

    def child_ids(self, i: int) -> list[int]:
        return self.children.get(i, [])

    def path_to_root(self, i: int) -> list[int]:
        """Indices from the root down to ``i`` (inclusive)."""
        parent = self.parent
        k = self.depth[i] + 1 if 0 <= i < len(self.depth) else 0
        if 0 < k <= len(parent):
            # Filled from the end, ``depth`` slots: a cold build walks tens of thousands of entries.
            out = [0] * k
            node = i
            while node != NONE and k:
                k -= 1
                out[k] = node
                node = parent[node]
            if node == NONE and not k:
                return out
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

    def is_bookkeeping(self, i: int) -> bool:
        """A leaf marker or a pin entry: ctxd's own records, not part of the conversation's shape."""
        head = self.session.heads[i]
        return head.type == "custom" and head.customType in (LEAF_MARKER, PIN_MARKER)

    def is_leaf_marker(self, i: int) -> bool:
        head = self.session.heads[i]
        return head.type == "custom" and head.customType == LEAF_MARKER

    def label_of(self, i: int) -> str | None:
        return self.labels.get(i)
