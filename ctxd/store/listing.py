"""Where sessions live and how they are listed: pi's directory layout, newest first, named from
their ``session_info`` entries.

Listing opens regular files only (a FIFO or a device named ``*.jsonl`` is skipped) and reads each
one boundedly: a file up to :data:`LIST_READ_CAP` whole, a larger one by its head and its tail
(its lines are counted as it streams past).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from typing import Any

import attrs

from ctxd.errors import SessionError
from ctxd.formats.codec import decode_any
from ctxd.formats.transcripts.opencode import ms_iso
from ctxd.formats.transcripts.opencode_archive import decode_archive, first_user_text
from ctxd.store.archive import link_archives
from ctxd.store.files import open_regular, read_bounded

SESSION_SUFFIX = ".jsonl"
REPAIRED_SUFFIX = ".repaired.jsonl"
"""``ctxd check --repair``'s copies: not sessions of their own (they repeat the original's id)."""
LIST_READ_CAP = 32 << 20
"""Files up to this size are read whole for a listing; larger ones by their head and tail."""
LIST_WINDOW = 4 << 20
"""How much of a large file's head (header, title) and tail (name) a listing reads."""


def default_roots() -> list[str]:
    """pi's session root: ``$PI_CODING_AGENT_DIR/sessions`` or ``~/.pi/agent/sessions``."""
    agent_dir = os.environ.get("PI_CODING_AGENT_DIR") or os.path.join(os.path.expanduser("~"), ".pi", "agent")
    return [os.path.join(agent_dir, "sessions")]


def default_transcript_roots() -> list[str]:
    """Claude Code's and Codex's session folders, where they exist."""
    home = os.path.expanduser("~")
    claude = os.path.join(os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(home, ".claude"), "projects")
    codex = os.path.join(os.environ.get("CODEX_HOME") or os.path.join(home, ".codex"), "sessions")
    return [root for root in (claude, codex) if os.path.isdir(root)]


def cwd_dirname(cwd: str) -> str:
    """pi's directory name for a working directory: ``--home-me-proj--``."""
    trimmed = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    return "--" + trimmed.replace("/", "-").replace("\\", "-").replace(":", "-") + "--"


def session_filename(timestamp_iso: str, session_id: str) -> str:
    return f"{timestamp_iso.replace(':', '-').replace('.', '-')}_{session_id}{SESSION_SUFFIX}"


@attrs.define
class SessionSummary:
    path: str
    id: str
    cwd: str
    root: str
    name: str | None
    title: str
    created: str
    modified: float
    size: int
    entries: int
    parentSession: str | None = None
    error: str | None = None
    agent: str = "pi"
    """Whose session: "pi" (read-write), or "claude" / "codex" (read-only transcripts)."""
    readOnly: bool = False
    archived: bool = False
    """A copy kept by ctxd's archive (see :mod:`ctxd.store.archive`)."""
    archiveOf: str | None = None
    """For a copy: the live transcript it copies, while that still exists."""
    archives: list[str] = attrs.field(factory=list)
    """For a live transcript: its copies in ctxd's archive."""

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _line_at(data: bytes, pos: int) -> bytes:
    start = data.rfind(b"\n", 0, pos) + 1
    end = data.find(b"\n", pos)
    return data[start : end if end >= 0 else len(data)]


def _read_for_listing(path: str) -> tuple[os.stat_result, bytes, int]:
    """The file's stat, the bytes a listing looks at, and its number of newlines."""
    st, data, newlines, _ = read_for_listing(path)
    return st, data, newlines


def read_for_listing(path: str) -> tuple[os.stat_result, bytes, int, int]:
    """The file's stat, the bytes a listing looks at, its number of newlines, and the offset after
    its last newline (where a listing that follows the file's growth goes on reading; -1 if unknown)."""
    fd = open_regular(path)
    try:
        st = os.fstat(fd)
        if st.st_size <= LIST_READ_CAP:
            data = read_bounded(fd, LIST_READ_CAP)
            return st, data, data.count(b"\n"), data.rfind(b"\n") + 1
        head = read_bounded(fd, LIST_WINDOW)
        newlines = 0
        pos = 0
        while True:  # count lines in bounded chunks: never the whole file in memory
            chunk = os.pread(fd, 1 << 23, pos)
            if not chunk:
                break
            newlines += chunk.count(b"\n")
            pos += len(chunk)
        start = max(len(head), pos - LIST_WINDOW)
        tail = os.pread(fd, pos - start, start)
        end = start + tail.rfind(b"\n") + 1 if b"\n" in tail else -1  # -1: not known (a last line of MBs)
        tail = tail[tail.find(b"\n") + 1 :] if start > len(head) else tail
        head = head[: head.rfind(b"\n") + 1]
        return st, head + tail, newlines, end
    finally:
        os.close(fd)


def summarize_file(path: str, root: str = "") -> SessionSummary:
    """Header, name, first user message and size of one session file, without indexing it.

    Raises SessionError for anything but a regular file, OSError if it cannot be read."""
    st, data, newlines = _read_for_listing(path)
    return summarize_bytes(path, root, st, data, newlines)


def summarize_bytes(path: str, root: str, st: os.stat_result, data: bytes, newlines: int) -> SessionSummary:
    """:func:`summarize_file` of what :func:`read_for_listing` read."""
    first_nl = data.find(b"\n")
    summary = SessionSummary(path, "", "", root, None, "", "", st.st_mtime, st.st_size, newlines - 1)
    from ctxd.formats.transcripts import detect

    kind = detect(data[: first_nl if first_nl >= 0 else len(data)])
    if kind in ("claude", "codex"):
        _summarize_transcript(kind, data, summary)
        return summary
    if kind == "opencode":
        _summarize_opencode_archive(data, summary)
        return summary
    try:
        header = decode_any(data[: first_nl if first_nl >= 0 else len(data)])
    except Exception:
        header = None
    if not isinstance(header, dict) or header.get("type") != "session":
        summary.error = "line 1 is not a session header"
        return summary
    summary.id = str(header.get("id", ""))
    summary.cwd = str(header.get("cwd", ""))
    summary.created = str(header.get("timestamp", ""))
    parent = header.get("parentSession") or header.get("branchedFrom")
    summary.parentSession = parent if isinstance(parent, str) else None
    found = last_name(data)
    if found is not None:
        summary.name = found[0]
    title = first_title(data)
    if title is not None:
        summary.title = title
    return summary


def last_name(data: bytes) -> tuple[str | None] | None:
    """The name the last ``session_info`` line in ``data`` sets (as a 1-tuple), or None without one."""
    for info in _lines_with(data, b'"session_info"', last=True):
        if info.get("type") == "session_info":
            name = info.get("name")
            return (name if isinstance(name, str) and name else None,)
    return None


def first_title(data: bytes) -> str | None:
    """The first user message's text in ``data``, shortened for a listing (None without one)."""
    for entry in _lines_with(data, b'"role":"user"'):
        message = entry.get("message")
        if isinstance(message, dict) and message.get("role") == "user":
            return " ".join(_text_of(message.get("content")).split())[:120]
    return None


def _lines_with(data: bytes, needle: bytes, *, last: bool = False) -> Iterable[Any]:
    """Decoded JSON objects of the lines containing ``needle`` (first to last, or last to first)."""
    pos = data.rfind(needle) if last else data.find(needle)
    while pos >= 0:
        try:
            obj = decode_any(_line_at(data, pos))
        except Exception:
            obj = None
        if isinstance(obj, dict):
            yield obj
        pos = (
            data.rfind(needle, 0, data.rfind(b"\n", 0, pos) + 1)
            if last
            else data.find(needle, data.find(b"\n", pos) + 1 or len(data))
        )
        if pos < 0:
            return


def _summarize_transcript(kind: str, data: bytes, summary: SessionSummary) -> None:
    """Id, cwd, name and first request of a Claude Code or Codex transcript (read-only)."""
    summary.agent = kind
    summary.readOnly = True
    if kind == "claude":
        for obj in _lines_with(data, b'"sessionId"'):
            if not summary.id:
                summary.id = str(obj.get("sessionId", ""))
                summary.created = str(obj.get("timestamp", ""))
            # Claude Code 2.1.330 opens with queue-operation lines, which carry no cwd.
            cwd = obj.get("cwd")
            if isinstance(cwd, str) and cwd:
                summary.cwd = cwd
                break
        for obj in _lines_with(data, b'"summary"', last=True):
            if obj.get("type") == "summary" and isinstance(obj.get("summary"), str):
                summary.name = obj["summary"]
                break
        for obj in _lines_with(data, b'"user"'):
            message = obj.get("message")
            if obj.get("type") == "user" and not obj.get("isMeta") and isinstance(message, dict):
                text = _text_of(message.get("content"))
                if text and not text.startswith("<"):
                    summary.title = " ".join(text.split())[:120]
                    break
        parts = summary.path.split(os.sep)
        if len(parts) >= 3 and parts[-2] == "subagents":
            summary.parentSession = os.sep.join(parts[:-2]) + SESSION_SUFFIX
    else:
        for obj in _lines_with(data, b'"session_meta"'):
            payload = obj.get("payload") if isinstance(obj.get("payload"), dict) else {}
            summary.id = str(payload.get("id", ""))
            summary.cwd = str(payload.get("cwd", ""))
            summary.created = str(payload.get("timestamp", obj.get("timestamp", "")))
            break
        for obj in _lines_with(data, b'"user"'):
            payload = obj.get("payload") if isinstance(obj.get("payload"), dict) else {}
            if payload.get("type") == "message" and payload.get("role") == "user":
                text = " ".join(
                    str(b.get("text", "")) for b in payload.get("content") or [] if isinstance(b, dict)
                ).strip()
                if text and not text.startswith("<") and not text.startswith("#"):
                    summary.title = " ".join(text.split())[:120]
                    break
    summary.entries += 1  # every line is an entry: a transcript has no header line


def _summarize_opencode_archive(data: bytes, summary: SessionSummary) -> None:
    """Id, cwd, title and first request of ctxd's archive of an opencode session (as the database's listing)."""
    summary.agent = "opencode"
    summary.readOnly = True
    rows, _ = decode_archive(data)
    if rows is None:
        summary.error = "line 1 is not an opencode archive's session line"
        return
    row = rows.session
    summary.id = str(row.get("id") or "")
    summary.cwd = str(row.get("directory") or "")
    summary.name = str(row["title"]) if row.get("title") else None
    summary.title = " ".join(first_user_text(rows).split())[:120]
    summary.created = ms_iso(row.get("time_created")) or ""
    summary.entries = len(rows.messages) + len(rows.parts)


def iter_session_files(root: str) -> Iterable[str]:
    """Every regular ``*.jsonl`` file under ``root`` (pi keeps one directory per cwd), skipping our
    sidecars and anything that is not a regular file (a FIFO, a device, a dangling symlink)."""
    for path, _ in iter_session_stats(root):
        yield path


def iter_session_stats(root: str) -> Iterable[tuple[str, os.stat_result]]:
    """:func:`iter_session_files` with each file's stat (following symlinks; nothing is opened)."""
    if not os.path.isdir(root):
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(SESSION_SUFFIX) and not name.startswith(".") and not name.endswith(REPAIRED_SUFFIX):
                path = os.path.join(dirpath, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    yield path, st


def list_sessions(
    roots: Iterable[str], cwd: str | None = None, archive_roots: Iterable[str] = (), *, keep: bool = False
) -> list[SessionSummary]:
    """Sessions under ``roots`` (optionally only those started in ``cwd``), newest first; files under
    ``archive_roots`` are marked as archives and paired with their live transcripts.

    Each file is summarised once and then followed by its identity: an unchanged file costs its
    stat, a grown one its new lines (:mod:`ctxd.store.listing_cache`). ``keep``: the rows are also
    kept in the user's cache for the next process (``ctxd sessions``)."""
    from ctxd.store.listing_cache import LISTINGS

    if keep:
        LISTINGS.load()
    out: list[SessionSummary] = []
    for root in roots:
        for path, st in iter_session_stats(root):
            try:
                summary = LISTINGS.summarize(path, root, st)
            except (OSError, SessionError):
                continue  # vanished, or replaced by something that is not a file, while listing
            if cwd is not None and os.path.normpath(summary.cwd) != os.path.normpath(cwd):
                continue
            out.append(summary)
    out.sort(key=lambda s: s.modified, reverse=True)
    link_archives(out, archive_roots)
    if keep:
        LISTINGS.save()
    return out
