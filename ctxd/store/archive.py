"""ctxd's own folders and its archive of other agents' transcripts.

Claude Code deletes transcripts after 30 days (``cleanupPeriodDays``) and a compaction leaves only a summary in
the model's view. The hooks (``ctxd hook``) keep a private copy of each transcript under ctxd's data folder, so
the history stays readable:

====================================================================  =============================================
path                                                                  what
====================================================================  =============================================
``<data>/archive/claude/<project>/<session>.jsonl``                   copy of ``~/.claude/projects/<project>/
                                                                      <session>.jsonl``, extended on every archive
``<data>/archive/claude/<project>/<session>/subagents/agent-*.jsonl``  copies of the session's subagent transcripts
``<data>/archive/claude/<project>/<session>/earlier/<UTC>.jsonl``      the previous copy, kept when the live file
                                                                      stopped extending it (rewritten, truncated)
``<data>/archive/codex/YYYY/MM/DD/rollout-*.jsonl``                   copy of ``~/.codex/sessions/YYYY/MM/DD/
                                                                      rollout-*.jsonl`` (Codex's hooks)
``<data>/archive/opencode/<project>/<session>.jsonl``                 an opencode session's database rows
                                                                      (:mod:`ctxd.store.opencode_archive`)
====================================================================  =============================================

``<data>`` is ``$XDG_DATA_HOME/ctxd`` (default ``~/.local/share/ctxd``); ctxd's state (the hooks' log and their
per-session notes) lives in ``$XDG_STATE_HOME/ctxd`` (default ``~/.local/state/ctxd``). Folders are 0700, files
0600. The layout mirrors Claude's, so an archive opens like any transcript (read-only) and the listing pairs it
with the live file (:func:`link_archives`).

Archiving copies only complete lines and, when the copy is a prefix of the live file (checked on its first and
last 4 KiB), appends just what is new: a hook stays fast on long transcripts.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable
from typing import Any, NamedTuple, Protocol

from ctxd.store.dirs import archive_root, makedirs_private
from ctxd.store.files import PRIVATE_MODE, locked, replacing, write_all

CHUNK = 1 << 20
PROBE = 4096
"""Bytes compared at the start and the end of the archived copy to recognise the live file as its extension."""
EARLIER = "earlier"


def is_safe_name(part: str) -> bool:
    """True for a name that is one path component (not empty, no separator, not . or ..)."""
    return bool(part) and part not in (".", "..") and "/" not in part and "\\" not in part and "\0" not in part


def claude_archive_path(transcript: str, root: str) -> str | None:
    """Where the archive keeps ``transcript`` (a Claude Code session or subagent file), or None for other paths."""
    parts = os.path.normpath(os.path.abspath(transcript)).split(os.sep)
    if not parts[-1].endswith(".jsonl"):
        return None
    tail = parts[-4:] if len(parts) >= 5 and parts[-2] == "subagents" else parts[-2:]
    if len(tail) < 2 or not all(is_safe_name(p) for p in tail):
        return None
    return os.path.join(root, "claude", *tail)


class ArchiveResult(NamedTuple):
    path: str
    copied: int
    """Bytes written to the copy (0: it was up to date)."""
    rotated: str | None = None
    """Where the previous copy went, when the live file no longer extended it."""


def archive_transcript(transcript: str, root: str | None = None) -> list[ArchiveResult]:
    """Copy a Claude Code transcript and its subagent transcripts into the archive; the results, main file first.

    Raises OSError (the hook logs it); a transcript that does not exist yet archives nothing.
    """
    root = root or archive_root()
    dst = claude_archive_path(transcript, root)
    if dst is None or not os.path.isfile(transcript):
        return []
    results = [mirror(transcript, dst)]
    subagents = os.path.join(transcript[: -len(".jsonl")], "subagents")
    if os.path.isdir(subagents):
        for name in sorted(os.listdir(subagents)):
            src = os.path.join(subagents, name)
            sub = claude_archive_path(src, root)
            if sub is not None and name.endswith(".jsonl") and os.path.isfile(src):
                results.append(mirror(src, sub))
    return results


def codex_archive_path(rollout: str, root: str) -> str | None:
    """Where the archive keeps a Codex rollout: ``<root>/codex/YYYY/MM/DD/rollout-*.jsonl`` (Codex's own layout
    under ``~/.codex/sessions``), or ``<root>/codex/<name>`` for a rollout elsewhere; None for other names."""
    parts = os.path.normpath(os.path.abspath(rollout)).split(os.sep)
    name = parts[-1]
    if not (name.startswith("rollout-") and name.endswith(".jsonl") and is_safe_name(name)):
        return None
    dated = parts[-4:-1]
    if len(parts) >= 5 and all(p.isdigit() for p in dated):
        return os.path.join(root, "codex", *dated, name)
    return os.path.join(root, "codex", name)


def archive_codex_rollout(rollout: str, root: str | None = None) -> list[ArchiveResult]:
    """Copy a Codex rollout into the archive (as :func:`archive_transcript` does for Claude Code)."""
    dst = codex_archive_path(rollout, root or archive_root())
    if dst is None or not os.path.isfile(rollout):
        return []
    return [mirror(rollout, dst)]


def mirror(src: str, dst: str) -> ArchiveResult:
    """Bring ``dst`` up to ``src``'s complete lines: append what is new, or keep the old copy aside and start over."""
    folder = os.path.dirname(dst)
    makedirs_private(folder)
    lock = os.open(os.path.join(folder, ".lock"), os.O_RDWR | os.O_CREAT, PRIVATE_MODE)
    try:
        with locked(lock):
            return _mirror_locked(src, dst)
    finally:
        os.close(lock)


def _mirror_locked(src: str, dst: str) -> ArchiveResult:
    fd = os.open(src, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not block the hook
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{src}: not a regular file")
        end = _complete_end(fd, st.st_size)
        try:
            size = os.stat(dst).st_size
        except FileNotFoundError:
            size = -1
        rotated: str | None = None
        if size >= 0:
            if size <= end and _extends(fd, dst, size):
                if size == end:
                    return ArchiveResult(dst, 0, None)
                out = os.open(dst, os.O_WRONLY | os.O_APPEND)
                try:
                    _copy(fd, out, size, end)
                finally:
                    os.close(out)
                return ArchiveResult(dst, end - size, None)
            rotated = rotate_copy(dst)
        with replacing(dst, durable=False) as out:
            _copy(fd, out, 0, end)
        return ArchiveResult(dst, end, rotated)
    finally:
        os.close(fd)


def _complete_end(fd: int, size: int) -> int:
    """The offset just after the last newline at or before ``size`` (a line still being written is left out)."""
    pos = size
    while pos > 0:
        start = max(0, pos - CHUNK)
        chunk = os.pread(fd, pos - start, start)
        nl = chunk.rfind(b"\n")
        if nl >= 0:
            return start + nl + 1
        pos = start
    return 0


def _extends(fd: int, dst: str, size: int) -> bool:
    """Does the live file (``fd``) start with the archived copy's bytes (compared at both ends of the copy)?"""
    with open(dst, "rb") as f:
        head = f.read(min(PROBE, size))
        f.seek(max(0, size - PROBE))
        tail = f.read(PROBE)
    return os.pread(fd, len(head), 0) == head and os.pread(fd, len(tail), max(0, size - PROBE)) == tail


def _copy(src: int, dst: int, start: int, end: int) -> None:
    pos = start
    while pos < end:
        chunk = os.pread(src, min(CHUNK, end - pos), pos)
        if not chunk:
            raise OSError("the transcript shrank while it was being archived")
        write_all(dst, chunk)
        pos += len(chunk)


def rotate_copy(dst: str) -> str:
    """Move the current copy to ``<session>/earlier/<UTC>.jsonl``; its path."""
    folder = os.path.join(dst[: -len(".jsonl")], EARLIER)
    makedirs_private(folder)
    stamp = time.strftime("%Y-%m-%dT%H-%M-%SZ", time.gmtime())
    target = os.path.join(folder, f"{stamp}.jsonl")
    n = 1
    while os.path.exists(target):
        target = os.path.join(folder, f"{stamp}-{n}.jsonl")
        n += 1
    os.replace(dst, target)
    return target


# --- the listing: archives beside their live transcripts ------------------------------------------------------


class _Listed(Protocol):
    path: str
    id: str
    agent: str
    archived: bool
    archiveOf: str | None
    archives: list[str]


def _under(path: str, roots: Iterable[str]) -> bool:
    real = os.path.realpath(path)
    for root in roots:
        base = os.path.realpath(root)
        if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
            return True
    return False


def _role(path: str) -> str:
    """Which file of a session a path is: "" for the main transcript (or an earlier copy of it), else its name."""
    parts = path.split(os.sep)
    return parts[-1] if len(parts) >= 2 and parts[-2] == "subagents" else ""


def link_archives(summaries: Iterable[Any], archive_roots: Iterable[str]) -> None:
    """Mark the listed files under ``archive_roots`` as archives and pair each with its live transcript.

    Pairs share the agent, the session id and the file's role (main transcript or one subagent's). A live file
    gets ``archives`` (its copies: the mirror first, then earlier ones, newest first); a copy gets ``archiveOf``
    (the live path, or None once Claude has deleted it).
    """
    roots = list(archive_roots)
    listed: list[_Listed] = list(summaries)
    if not roots or not listed:
        return
    live: dict[tuple[str, str, str], _Listed] = {}
    copies: list[_Listed] = []
    for s in listed:
        if _under(s.path, roots):
            s.archived = True
            copies.append(s)
        elif s.id:
            live.setdefault((s.agent, s.id, _role(s.path)), s)
    mirrors = [c for c in copies if EARLIER not in c.path.split(os.sep)]
    earlier = sorted((c for c in copies if EARLIER in c.path.split(os.sep)), key=lambda s: s.path, reverse=True)
    for copy in [*mirrors, *earlier]:
        owner = live.get((copy.agent, copy.id, _role(copy.path)))
        if owner is not None:
            copy.archiveOf = owner.path
            if copy.path not in owner.archives:  # pairing again (opencode's rows join the listing later) adds none
                owner.archives.append(copy.path)
