"""Chains: the usual shape of a session file, where each entry's parent is the entry before it.

:class:`ctxd.tree.index.TreeIndex` indexes a chain at once rather than entry by entry: parents and
depths are ranges, and what each entry inherits (the latest compaction, model, thinking level
above it) is carried down the chain from the entries that set it. These are the pieces it uses.
"""

from __future__ import annotations

from array import array
from itertools import compress
from operator import ne

from ctxd.formats.codec import LineHead


def chain_starts(run: list[LineHead]) -> list[int]:
    """Where the chains of ``run`` start (each entry after a chain's first names the one before it
    as its parent), then ``len(run)``."""
    parents = [h.parentId for h in run[1:]]
    before = [h.id for h in run[:-1]]
    return [0, *compress(range(1, len(run)), map(ne, parents, before)), len(run)]


def models_down(run: list[LineHead], start: int, model: int) -> tuple[list[int], list[tuple[int, LineHead]]]:
    """For a chain of entries from ``start`` below one whose model entry is ``model``: each one's
    latest entry setting the model (an assistant message or a model change), and the entries that
    are not messages (with their indices)."""
    models: list[int] = []
    add = models.append
    others: list[tuple[int, LineHead]] = []
    for k, head in enumerate(run, start):
        if head.type == "message":
            message = head.message
            if message is not None and message.role == "assistant":
                model = k
        else:
            others.append((k, head))
            if head.type == "model_change":
                model = k
        add(model)
    return models, others


def carry(values: array[int], first: int, marks: list[int], stop: int) -> None:
    """Append the values of the chain below entry ``first`` down to ``stop``: each the latest of
    ``marks`` (ascending indices) at or above it, else the value of ``first``."""
    value, pos = values[first], first + 1
    out: list[int] = []
    for k in marks:
        out += [value] * (k - pos)
        value, pos = k, k
    out += [value] * (stop - pos)
    values.fromlist(out)


def link_children(children: dict[int, list[int]], first: int, start: int, stop: int) -> None:
    """Add the chain of entries from ``start`` to ``stop`` below ``first`` to ``children``."""
    kids = children.get(first)
    if kids is None:
        children[first] = [start]
    else:
        kids.append(start)
    children.update(zip(range(start, stop - 1), ([k] for k in range(start + 1, stop)), strict=True))
