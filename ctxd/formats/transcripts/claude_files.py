"""Where a Claude Code session's subagent transcripts live, and which session a subagent file belongs to."""

from __future__ import annotations

from pathlib import Path

from ctxd.formats.transcripts._base import (
    decode_line,
)


def claude_subagent_files(session_path: str) -> list[str]:
    """Subagent transcripts of a Claude session: ``<session>/subagents/agent-*.jsonl`` (newer layout) and
    ``agent-*.jsonl`` beside the session whose lines carry the session's id (older layout). Never raises."""
    try:
        main = Path(session_path)
        if main.name.startswith("agent-"):
            return []
        found: list[str] = []
        nested = main.parent / main.stem / "subagents"
        try:
            if nested.is_dir():
                found.extend(str(p) for p in sorted(nested.glob("agent-*.jsonl")) if p.is_file())
        except OSError:
            pass
        session_id = _first_session_id(main) or main.stem
        try:
            beside = sorted(main.parent.glob("agent-*.jsonl"))
        except OSError:
            beside = []
        found.extend(str(p) for p in beside if p.is_file() and _first_session_id(p) == session_id)
        return found
    except Exception:
        return []


def _first_session_id(path: Path, max_lines: int = 20) -> str | None:
    """The first ``sessionId`` in the first few lines of a file, or None."""
    try:
        with path.open("rb") as f:
            for number, raw in enumerate(f, 1):
                if number > max_lines:
                    break
                obj, _ = decode_line(number, raw)
                if obj is not None and isinstance(obj.get("sessionId"), str):
                    return str(obj["sessionId"])
    except OSError:
        return None
    return None


def parent_session(path: str, session_id: str | None) -> str | None:
    """The main session file of a subagent file at ``path``."""
    p = Path(path)
    if p.parent.name == "subagents":
        return str(p.parent.parent) + ".jsonl"
    if session_id:
        return str(p.parent / f"{session_id}.jsonl")
    return None
