"""``ctxd check --repair``: repair what :mod:`ctxd.context.check` found, never rewriting the file.

Two things, both safe beside a live agent:

- **appends** to the file, under the store's lock: a partial last line that stays unchanged for the
  grace period is terminated in place (the store's tail rule, :mod:`ctxd.store.tail`); and when the
  active path is broken (its leaf hangs below a missing parent or a cycle), a ctxd leaf marker moves
  the leaf back to the last sound entry (the newest entry, in file order, whose path reaches a real
  root), so ctxd and pi build the next request from a whole history;
- **a repaired copy** next to the file, ``<file>.repaired.jsonl`` (mode 0600, replaced atomically
  if it exists), when lines are damaged: one entry per line as served (two objects on one line
  split, pruned or UTF-8-replaced bodies as served), malformed, blank and torn lines dropped, the
  earlier of two entries with one id dropped (the later wins, as in pi), self-parents and cycles
  cut into roots, an old version migrated to v3.  The original is left as it is: replace it with
  the copy yourself, when no agent is writing to it.
"""

from __future__ import annotations

import os
from typing import Any

from ctxd.context.check import CheckReport, check_session
from ctxd.formats.codec import CURRENT_VERSION, dumps_line
from ctxd.store.files import atomic_write, open_regular
from ctxd.store.listing import REPAIRED_SUFFIX
from ctxd.tree.session import Session

COPY_SUFFIX = REPAIRED_SUFFIX
DAMAGE = frozenset(
    {
        "malformed",
        "two-objects",
        "blank-line",
        "too-deep",
        "bad-utf8",
        "too-long",
        "no-id",
        "second-header",
        "duplicate-id",
        "self-parent",
        "cycle",
        "torn",
        "glued",
        "unreadable",
    }
)
"""Finding kinds that a repaired copy leaves behind."""


def repair(session: Session) -> CheckReport:
    """Repair ``session`` (appends and a copy, never in place) and return the report of the file as
    it is afterwards, with ``repair`` saying what was done."""
    if session.file.read_only:
        report = check_session(session)
        report.repair = {"appended": [], "copy": None, "skipped": "read-only transcript: never written"}
        return report
    done: dict[str, Any] = {"appended": [], "copy": None, "leafFrom": None, "leafTo": None}
    before = check_session(session)
    kinds = {f.kind for f in before.findings}
    if "partial-tail" in kinds:
        session.file.settle()  # waits; terminates the tail in place if it stays unchanged
        session.refresh()
        done["tailSettled"] = session.file.pending_bytes() == 0
    leaf = session.leaf()
    if leaf is not None and not _sound(session, leaf):
        target = _last_sound(session)
        if target is not None:
            done["leafFrom"] = session.leaf_id()
            done["leafTo"] = session.tree.id_of(target)
            done["appended"].append(session.move_leaf(done["leafTo"]))
    after = check_session(session)
    if {f.kind for f in after.findings} & DAMAGE:
        done["copy"] = write_copy(session, after)
    after.repair = done
    return after


def _sound(session: Session, i: int) -> bool:
    """Whether ``i``'s path reaches a real root (parentId null) without a missing link or a cycle."""
    path = session.tree.path_to_root(i)
    cycles = set(session.tree.cycles)
    root = session.file.heads[path[0]]
    return root.parentId is None and not cycles.intersection(path)


def _last_sound(session: Session) -> int | None:
    for i in range(len(session.file) - 1, -1, -1):
        if not session.tree.is_leaf_marker(i) and _sound(session, i):
            return i
    return None


def write_copy(session: Session, report: CheckReport) -> str:
    """Write ``<file>.repaired.jsonl`` (see the module docstring) and return its path."""
    f = session.file
    tree = session.tree
    header = dict(f.header)
    header["version"] = max(f.version, CURRENT_VERSION)
    cut = set(tree.cycles)  # self-parents too
    out = [dumps_line(header)]
    fd = open_regular(f.path)
    try:
        for i, head in enumerate(f.heads):
            if head.id is not None and f.index.get(head.id) != i:
                continue  # an earlier entry with the id of a later one: the later wins
            raw = _raw(f, fd, i)
            if raw is not None and i not in cut:
                out.append(raw)
                continue
            body = f.entry(i)
            if i in cut:
                body["parentId"] = None
            out.append(dumps_line(body))
    finally:
        os.close(fd)
    path = f.path + COPY_SUFFIX
    atomic_write(path, b"".join(out))
    return path


def _raw(f: Any, fd: int, i: int) -> bytes | None:
    """Entry ``i``'s line exactly as on disk, when it is served as it is (else None)."""
    if f.recovered(i) or f.version < CURRENT_VERSION or f.offsets[i] < 0:
        return None
    data = os.pread(fd, f.lengths[i], f.offsets[i])
    return data + b"\n"
