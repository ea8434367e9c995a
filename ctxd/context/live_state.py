"""The state :class:`ctxd.context.live.LiveContext` keeps: pi's projection at one leaf with every
message decoded and estimated, in parallel lists, and the sums pi's projected size reads."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Protocol, overload

import attrs

from ctxd.context.project import ContextPath, ProjectedEntry, Projection
from ctxd.context.rows import ContextMessage, materialize
from ctxd.context.rules import current_system_message
from ctxd.context.tokens import estimate_tokens
from ctxd.store.session_file import SessionFile
from ctxd.tree.index import TreeIndex

__all__ = ["Agent", "LazyRow", "Source", "State"]


class Source(Protocol):
    """What a context is built from: a file, its tree, and the token estimates kept with them by entry
    index (a :class:`ctxd.tree.session.Session`, or the three given for one answer)."""

    @property
    def file(self) -> SessionFile: ...

    @property
    def tree(self) -> TreeIndex: ...

    @property
    def estimates(self) -> dict[int, int]: ...


@attrs.define(eq=False)
class State:
    """The projection at ``path.leaf`` and everything derived from it, in parallel lists.

    Per projected entry ``k``: ``entries[k]`` (messages after edits), ``raw[k]`` (before edits),
    ``start[k]`` (its first message's position). Per message ``p``: ``messages[p]``, ``agent[p]``
    (the message dict, decoded when read), ``ids[p]`` (its entry id), ``owners[p]`` (its entry's ``k``),
    ``cum[p + 1]`` / ``cum_other[p + 1]`` (running estimates: all, and all but system messages).
    """

    generation: int
    relinks: int
    duplicates: int
    path: ContextPath
    base: int
    """Position of an entry after the compaction: ``base + depth``."""
    kept_pos: dict[int, int]
    entries: list[ProjectedEntry | LazyRow] = attrs.field(factory=list)
    raw: list[list[dict[str, Any]] | LazyRow] = attrs.field(factory=list)
    start: list[int] = attrs.field(factory=list)
    messages: list[ContextMessage] = attrs.field(factory=list)
    ids: list[str] = attrs.field(factory=list)
    owners: list[int] = attrs.field(factory=list)
    cum: list[int] = attrs.field(factory=lambda: [0])
    cum_other: list[int] = attrs.field(factory=lambda: [0])
    usage: list[int] = attrs.field(factory=list)
    """Positions of messages with a usage pi trusts."""
    used: list[int] = attrs.field(factory=list)
    """The context size each of those usages reports (pi's ``getAssistantUsage``)."""
    systems: list[int] = attrs.field(factory=list)
    """Positions of system messages."""
    invalidators: list[int] = attrs.field(factory=list)
    """Entry positions of compactions and context edits (usage before them is stale)."""
    edits: dict[str, Any] = attrs.field(factory=dict)
    edit_pos: list[int] = attrs.field(factory=list)
    bodies: dict[int, dict[str, Any]] = attrs.field(factory=dict)
    system_version: int = 0
    system_cache: tuple[int, dict[str, Any] | None, int] | None = None
    plan_cache: Any = None
    """Owned by the compaction plan (its running file operations); dropped with the state."""
    carried: int = 0
    """Pinned messages carried right after the compaction's own (ctxd.context.pins): positions
    ``start[0] + own`` to ``start[1]``, owned by entry 0 though they are not its messages."""
    carried_tokens: int = 0
    pins: int = 0
    """The pins' version (ctxd.context.pins) the carried messages follow."""

    @property
    def leaf(self) -> int:
        return self.path.leaf

    @property
    def agent(self) -> Agent:
        """The message dicts (``messages[p].message``), decoded when read (slices in one batch)."""
        return Agent(self.messages)

    def projection(self) -> Projection:
        """The state as a :class:`Projection` (shared lists: read only; an entry may be a
        :class:`LazyRow`, which reads as a ProjectedEntry)."""
        return Projection(self.path, self.entries, self.bodies)  # type: ignore[arg-type]

    def entry_end(self, k: int) -> int:
        """Position after the last message of entry ``k``."""
        return self.start[k + 1] if k + 1 < len(self.start) else len(self.messages)

    def position(self, i: int, depth: Sequence[int]) -> int | None:
        """Where entry ``i`` is in the projection, or None."""
        if i == self.path.compaction:
            return 0
        k = self.base + depth[i]
        if self.path.after <= k < len(self.entries) and self.path.indices[k] == i:
            return k
        return self.kept_pos.get(i)

    def system(self) -> tuple[dict[str, Any] | None, int]:
        """pi's current system message over the context's system messages, and its estimate."""
        cached = self.system_cache
        if cached is not None and cached[0] == self.system_version:
            return cached[1], cached[2]
        found = current_system_message(self.agent[p] for p in self.systems)
        estimate = estimate_tokens(found) if found is not None else 0
        self.system_cache = (self.system_version, found, estimate)
        return found, estimate

    def tokens(self) -> int:
        """pi's projected estimate (``estimateProjectedContextTokens``) of the whole context."""
        n = len(self.messages)
        if self.usage:
            u = self.usage[-1]
            k = self.owners[u]
            if k >= self.path.after and (not self.invalidators or self.invalidators[-1] < k):
                return self.used[-1] + self.cum[n] - self.cum[u + 1]
        return self.system()[1] + self.cum_other[n]

    def sizes(self) -> _EntrySizes:
        return _EntrySizes(self)


class Agent(Sequence[dict[str, Any]]):
    """A state's message dicts, read through its rows (see :class:`ContextMessage`)."""

    def __init__(self, rows: list[ContextMessage]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, p: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, p: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, p: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(p, slice):
            rows = self.rows[p]
            materialize(rows)
            return [row.message for row in rows]
        return self.rows[p].message

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self[:])


class LazyRow(ContextMessage, gc=False, eq=False):
    """A message entry's one message, not decoded yet, standing in the state both as its row in
    ``messages`` and as its entry in ``entries`` (what a :class:`ProjectedEntry` would say of it:
    visible, not edited, its messages this one row); one object instead of four per entry."""

    visible: ClassVar[bool] = True
    edited: ClassVar[bool] = False

    @property
    def messages(self) -> Agent:
        return Agent([self])


class _EntrySizes(Sequence[int]):
    """Each projected entry's estimate (the sum of its messages'), without building a list."""

    def __init__(self, state: State) -> None:
        self.state = state

    def __len__(self) -> int:
        return len(self.state.entries)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        st = self.state
        if k < 0:
            k += len(st.entries)
        size = st.cum[st.entry_end(k)] - st.cum[st.start[k]]
        return size - st.carried_tokens if k == 0 else size
