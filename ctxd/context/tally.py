"""The sums of a context's composition, kept between answers and moved with the context.

:class:`Tally` holds, for the context it last saw, each message's share by part, the totals by
part and by tool, the runs of messages that belong to one entry, and the heaviest of those runs.
Asked about the context again (after an append, a leaf move, a rebuild) it finds the first message
that is not the one it saw at that position (messages are compared by identity: the kept context
shares its dicts between answers) and redoes the sums from there only, so an append costs what it
adds. A change of the pinned set starts over.
"""

from __future__ import annotations

import heapq
from operator import is_
from typing import Any

import attrs

from ctxd.context.live_state import State

Split = tuple[tuple[str, str | None, int], ...]
"""One message's share: (part, tool name for tool results, tokens)."""
Group = tuple[int, int, int]
"""A run of one entry's messages: (tokens, first message, end)."""


def _same_entry(state: State, p: int, q: int) -> bool:
    """Whether messages ``p`` and ``q`` come from one entry: the same id on the same line (an id
    may be duplicated in a damaged file; two entries that share it are still two)."""
    return state.ids[p] == state.ids[q] and state.messages[p].line == state.messages[q].line


def _heaviest(group: Group) -> tuple[int, int]:
    return group[0], -group[1]


@attrs.define(eq=False)
class Tally:
    parts: dict[str, int]
    """Tokens by part, every part present."""
    by_tool: dict[str, int] = attrs.field(factory=dict)
    pinned: frozenset[str] = frozenset()
    messages: list[Any] = attrs.field(factory=list)
    shares: list[Split] = attrs.field(factory=list)
    groups: list[Group] = attrs.field(factory=list)
    best: list[Group] = attrs.field(factory=list)
    """The heaviest of ``groups[:settled]`` (``best_count`` of them)."""
    best_count: int = 0
    settled: int = 0
    splits: dict[int, tuple[Any, int, Split]] = attrs.field(factory=dict)
    """Each message's split by part, by the message's identity (message, tokens, split)."""

    def update(self, state: State, pinned: set[str], split: Any) -> None:
        """Follow ``state`` (``split(message, tokens)`` splits a message not seen yet)."""
        agent, ids, rows = state.agent, state.ids, state.messages
        frozen = frozenset(pinned)
        k = 0
        if frozen == self.pinned:
            same = list(map(is_, self.messages, agent))  # the identity test in C: a 10k context in ~0.1 ms
            k = same.index(False) if False in same else len(same)
        else:
            self.pinned = frozen
        self._drop(k, state)
        for p in range(k, len(agent)):
            row = rows[p]
            if ids[p] in frozen:
                share: Split = (("pinned", None, row.tokens),)
            else:
                key = id(row.message)
                kept = self.splits.get(key)
                if kept is None or kept[0] is not row.message or kept[1] != row.tokens:
                    kept = self.splits[key] = (row.message, row.tokens, split(row.message, row.tokens))
                share = kept[2]
            self.messages.append(agent[p])
            self.shares.append(share)
            self._add(share, 1)
        self._regroup(state)
        if len(self.splits) > 2 * len(agent) + 64:
            live = {id(m) for m in agent}
            for key in [key for key in self.splits if key not in live]:
                del self.splits[key]

    def _drop(self, k: int, state: State) -> None:
        ids = state.ids
        for share in self.shares[k:]:
            self._add(share, -1)
        del self.messages[k:], self.shares[k:]
        groups = self.groups
        while groups and groups[-1][2] > k:
            groups.pop()
        if groups and groups[-1][2] == k and k < len(ids) and _same_entry(state, k, groups[-1][1]):
            groups.pop()  # the run that ends at k goes on past it: redone
        if len(groups) < self.settled:
            self.best, self.settled = [], 0

    def _add(self, share: Split, sign: int) -> None:
        parts, by_tool = self.parts, self.by_tool
        for part, tool, tokens in share:
            parts[part] += sign * tokens
            if tool is not None:
                left = by_tool.get(tool, 0) + sign * tokens
                if left:
                    by_tool[tool] = left
                else:
                    by_tool.pop(tool, None)

    def _regroup(self, state: State) -> None:
        n = len(state.ids)
        cum = state.cum
        start = self.groups[-1][2] if self.groups else 0
        for p in range(start + 1, n + 1):
            if p == n or not _same_entry(state, p, start):
                self.groups.append((cum[p] - cum[start], start, p))
                start = p

    def top(self, count: int) -> list[Group]:
        """The ``count`` heaviest runs, heaviest first (ties: the earlier first)."""
        if count != self.best_count:
            self.best, self.settled, self.best_count = [], 0, count
        if count <= 0:
            return []
        self.best = heapq.nlargest(count, [*self.best, *self.groups[self.settled :]], key=_heaviest)
        self.settled = len(self.groups)
        return self.best
