"""The tree index on unusual shapes: very deep chains, children written before their parents,
orphans and cycles.  Nothing may recurse, loop forever, or stop serving the healthy entries."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxd.context.build import build_context
from ctxd.tree.index import NONE
from ctxd.tree.session import Session

TS = "2026-03-01T09:00:00.000Z"
HEADER = json.dumps({"type": "session", "version": 3, "id": "sess-deep", "timestamp": TS, "cwd": "/proj"})


def hid(n: int) -> str:
    return f"{n:08x}"


def line(eid: str, parent: str | None, text: str = "x", role: str = "user") -> str:
    """One message entry as a JSON line, formatted directly (fast enough for 200,000 lines)."""
    p = "null" if parent is None else f'"{parent}"'
    if role == "user":
        msg = f'{{"role":"user","content":"{text}","timestamp":1}}'
    else:
        msg = f'{{"role":"assistant","content":[{{"type":"text","text":"{text}"}}],"stopReason":"stop","timestamp":1}}'
    return f'{{"type":"message","id":"{eid}","parentId":{p},"timestamp":"{TS}","message":{msg}}}\n'


def write(path: Path, lines: list[str]) -> str:
    path.write_text(HEADER + "\n" + "".join(lines))
    return str(path)


@contextlib.contextmanager
def no_hang(seconds: int) -> Iterator[None]:
    """Fail (instead of hanging the suite) if the body takes longer than ``seconds``."""

    def expired(signum: int, frame: Any) -> None:
        raise TimeoutError(f"did not finish within {seconds}s: a loop that never ends?")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def ids(session: Session, indices: list[int]) -> list[str]:
    return [session.tree.id_of(i) for i in indices]


# --- a very deep chain ------------------------------------------------------------------------

N = 200_000
FORK_AT = 100_000
BRANCH = 5


def test_200k_entry_chain_needs_no_recursion(tmp_path: Path) -> None:
    assert sys.getrecursionlimit() < N  # any recursion over the chain would blow up
    chain = [line(hid(i), hid(i - 1) if i else None, role="user" if i % 2 == 0 else "assistant") for i in range(N)]
    # A short side branch off the middle, written last (so its tip is pi's leaf).
    branch = [line(f"b{k:07x}", hid(FORK_AT) if k == 0 else f"b{k - 1:07x}", "side") for k in range(BRANCH)]
    s = Session.open(write(tmp_path / "deep.jsonl", chain + branch))
    tree = s.tree
    assert len(s.file) == N + BRANCH and s.file.diagnostics == []
    assert tree.roots == [0] and tree.orphans == []

    last = N - 1
    path = tree.path_to_root(last)
    assert len(path) == N and path == list(range(N))
    assert tree.depth[last] == N - 1 and tree.depth[FORK_AT] == FORK_AT

    tip = s.file.index[f"b{BRANCH - 1:07x}"]
    assert s.leaf() == tip
    assert tree.depth[tip] == FORK_AT + BRANCH
    assert tree.common_ancestor(tip, last) == FORK_AT
    assert tree.common_ancestor(last, tip) == FORK_AT
    assert tree.common_ancestor(last, 12_345) == 12_345
    assert tree.common_ancestor(0, last) == 0
    assert tree.is_ancestor(FORK_AT, tip) and not tree.is_ancestor(FORK_AT + 1, tip)
    assert tree.path_until(last, N - 10) == list(range(N - 10, N))
    assert len(s.path_ids()) == FORK_AT + 1 + BRANCH

    # The context at the branch tip walks 100,006 entries, iteratively.
    ctx = build_context(s.file, s.tree)
    assert len(ctx.messages) == FORK_AT + 1 + BRANCH
    assert ctx.messages[0].entryId == hid(0) and ctx.messages[-1].entryId == f"b{BRANCH - 1:07x}"
    assert [m.role for m in ctx.messages[:4]] == ["user", "assistant", "user", "assistant"]

    # Appending at the far end of the chain works too.
    (new,) = s.append([{"type": "message", "message": {"role": "user", "content": "more"}}], parent_id=hid(last))
    assert s.tree.depth[s.file.index[new]] == N
    assert len(s.tree.path_to_root(s.file.index[new])) == N + 1


# --- children before their parents ------------------------------------------------------------


def test_child_line_before_parent_line_is_linked_when_the_parent_arrives(tmp_path: Path) -> None:
    # r <- p <- c <- d, written as r, d, c, p: two generations wait for their parents.
    path = write(
        tmp_path / "s.jsonl",
        [line("r", None), line("d", "c", "D"), line("c", "p", "C", "assistant"), line("p", "r", "P")],
    )
    s = Session.open(path)
    tree = s.tree
    r, d, c, p = (s.file.index[x] for x in "rdcp")
    assert tree.orphans == [] and tree.roots == [r]
    assert [tree.parent[x] for x in (r, p, c, d)] == [NONE, r, p, c]
    assert [tree.depth[x] for x in (r, p, c, d)] == [0, 1, 2, 3]
    assert ids(s, tree.path_to_root(d)) == ["r", "p", "c", "d"]
    assert tree.common_ancestor(d, p) == p
    assert s.leaf() == p  # pi's leaf: the last line
    ctx = build_context(s.file, s.tree, "d")
    assert [m.entryId for m in ctx.messages] == ["r", "p", "c", "d"]
    assert [m.line for m in ctx.messages] == [2, 5, 4, 3]  # file lines, as they are


def test_reversed_chain_gets_every_depth_right(tmp_path: Path) -> None:
    n = 300
    s = Session.open(write(tmp_path / "s.jsonl", [line(hid(i), hid(i - 1) if i else None) for i in reversed(range(n))]))
    tree = s.tree
    first = s.file.index[hid(0)]
    deepest = s.file.index[hid(n - 1)]
    assert tree.orphans == [] and tree.roots == [first]
    assert tree.depth[deepest] == n - 1
    assert all(tree.depth[s.file.index[hid(i)]] == i for i in range(n))
    assert ids(s, tree.path_to_root(deepest)) == [hid(i) for i in range(n)]


def test_parent_appended_after_its_child_is_adopted_on_refresh(tmp_path: Path) -> None:
    path = Path(write(tmp_path / "s.jsonl", [line("r", None)]))
    s = Session.open(str(path))
    with path.open("a") as f:
        f.write(line("c", "p", "child first"))
    s.refresh()
    c = s.file.index["c"]
    assert s.tree.orphans == [c]  # for now
    with path.open("a") as f:
        f.write(line("p", "r", "parent later"))
    s.refresh()
    p = s.file.index["p"]
    assert s.tree.orphans == [] and s.tree.parent[c] == p and s.tree.depth[c] == 2
    fresh = Session.open(str(path))
    assert fresh.tree.parent == s.tree.parent and fresh.tree.depth == s.tree.depth


# --- orphans ----------------------------------------------------------------------------------


def test_orphans_are_reported_and_the_rest_is_served(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.jsonl",
        [
            line("r", None, "root"),
            line("a", "r", "A", "assistant"),
            line("o", "deadbeef", "orphan"),  # its parent was never written
            line("oc", "o", "orphan's child"),
            line("b", "a", "B"),
        ],
    )
    s = Session.open(path)
    tree = s.tree
    o, oc, b = (s.file.index[x] for x in ("o", "oc", "b"))
    assert tree.orphans == [o]
    assert tree.roots == [s.file.index["r"]]
    assert tree.parent[o] == NONE and tree.depth[o] == 0 and tree.depth[oc] == 1
    assert ids(s, tree.path_to_root(oc)) == ["o", "oc"]
    assert tree.common_ancestor(oc, b) == NONE  # different roots
    assert [m.entryId for m in build_context(s.file, s.tree).messages] == ["r", "a", "b"]
    assert [m.entryId for m in build_context(s.file, s.tree, "oc").messages] == ["o", "oc"]
    # And the file still takes appends.
    (new,) = s.append([{"type": "message", "message": {"role": "user", "content": "next"}}])
    assert ids(s, s.tree.path_to_root(s.file.index[new])) == ["r", "a", "b", new]


# --- cycles -----------------------------------------------------------------------------------

CYCLES = {
    "two": [line("r", None), line("a", "b"), line("b", "a")],
    "self": [line("r", None), line("a", "a"), line("c", "r")],
    "three": [line("a", "c"), line("b", "a"), line("c", "b"), line("d", "c")],
}


@pytest.mark.parametrize("shape", sorted(CYCLES))
def test_cycles_do_not_hang(tmp_path: Path, shape: str) -> None:
    with no_hang(20):
        s = Session.open(write(tmp_path / "s.jsonl", CYCLES[shape]))
        tree = s.tree
        n = len(s.file)
        assert n == len(CYCLES[shape])
        for i in range(n):
            assert len(tree.path_to_root(i)) <= n + 1
            for j in range(n):
                tree.common_ancestor(i, j)
            tree.is_ancestor(i, (i + 1) % n)
            build_context(s.file, s.tree, tree.id_of(i))
        s.append([{"type": "message", "message": {"role": "user", "content": "after"}}])
        if "r" in s.file.index:  # the healthy part is served as usual
            r = s.file.index["r"]
            assert tree.path_to_root(r) == [r]


def test_a_long_ring_does_not_hang(tmp_path: Path) -> None:
    """10,000 entries whose first names the last as its parent: a cycle through the whole file."""
    n = 10_000
    lines = [line(hid(i), hid(i - 1 if i else n - 1)) for i in range(n)]
    with no_hang(30):
        s = Session.open(write(tmp_path / "ring.jsonl", lines))
        path = s.path_ids()
        assert len(path) == len(set(path)) <= n
        assert s.file.index[path[0]] in s.tree.orphans
        assert s.tree.common_ancestor(0, n - 1) in (NONE, *range(n))
        build_context(s.file, s.tree)


@pytest.mark.parametrize("shape", sorted(CYCLES))
def test_a_path_through_a_cycle_lists_each_entry_once(tmp_path: Path, shape: str) -> None:
    s = Session.open(write(tmp_path / "s.jsonl", CYCLES[shape]))
    tree = s.tree
    starts = set(tree.roots) | set(tree.orphans)
    for i in range(len(s.file)):
        path = tree.path_to_root(i)
        assert len(path) == len(set(path))
        assert path[0] in starts  # every path begins at a root or a reported orphan
        ctx = build_context(s.file, s.tree, tree.id_of(i))
        assert len({m.entryId for m in ctx.messages}) == len(ctx.messages)
