"""Where sessions live and how they are listed: pi's directory layout, newest first, named from
their ``session_info`` entries."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import attrs

from ctxd.formats.codec import decode_any

SESSION_SUFFIX = ".jsonl"


def default_roots() -> list[str]:
    """pi's session root: ``$PI_CODING_AGENT_DIR/sessions`` or ``~/.pi/agent/sessions``."""
    agent_dir = os.environ.get("PI_CODING_AGENT_DIR") or os.path.join(os.path.expanduser("~"), ".pi", "agent")
    return [os.path.join(agent_dir, "sessions")]


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


def summarize_file(path: str, root: str = "") -> SessionSummary:
    """Header, name, first user message and size of one session file, without indexing it."""
    st = os.stat(path)
    with open(path, "rb") as f:
        data = f.read()
    first_nl = data.find(b"\n")
    summary = SessionSummary(path, "", "", root, None, "", "", st.st_mtime, st.st_size, data.count(b"\n") - 1)
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
    pos = data.rfind(b'"session_info"')
    while pos >= 0:
        try:
            info = decode_any(_line_at(data, pos))
        except Exception:
            info = None
        if isinstance(info, dict) and info.get("type") == "session_info":
            name = info.get("name")
            summary.name = name if isinstance(name, str) and name else None
            break
        pos = data.rfind(b'"session_info"', 0, pos)
    pos = data.find(b'"role":"user"')
    while pos >= 0:
        try:
            entry = decode_any(_line_at(data, pos))
        except Exception:
            entry = None
        message = entry.get("message") if isinstance(entry, dict) else None
        if isinstance(message, dict) and message.get("role") == "user":
            summary.title = " ".join(_text_of(message.get("content")).split())[:120]
            break
        pos = data.find(b'"role":"user"', pos + 1)
    return summary


def iter_session_files(root: str) -> Iterable[str]:
    """Every ``*.jsonl`` under ``root`` (pi keeps one directory per cwd), skipping our sidecars."""
    if not os.path.isdir(root):
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            if name.endswith(SESSION_SUFFIX) and not name.startswith("."):
                yield os.path.join(dirpath, name)


def list_sessions(roots: Iterable[str], cwd: str | None = None) -> list[SessionSummary]:
    """Sessions under ``roots`` (optionally only those started in ``cwd``), newest first."""
    out: list[SessionSummary] = []
    for root in roots:
        for path in iter_session_files(root):
            try:
                summary = summarize_file(path, root)
            except OSError:
                continue  # vanished while listing
            if cwd is not None and os.path.normpath(summary.cwd) != os.path.normpath(cwd):
                continue
            out.append(summary)
    out.sort(key=lambda s: s.modified, reverse=True)
    return out
