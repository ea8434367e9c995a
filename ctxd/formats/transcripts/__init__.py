"""Read-only adapters mapping other agents' transcripts (Claude Code, Codex) onto pi v3 entries.

Pure functions over a file's bytes: only complete lines are mapped (a final partial line is still being
written), nothing raises, and every line that cannot be mapped is reported in ``diagnostics`` while the rest is
served. The mapping rules and the decisions behind them are documented in :mod:`.claude` and :mod:`.codex`.
"""

from __future__ import annotations

from typing import Any

from ctxd.formats.transcripts._base import Transcript, first_json_line
from ctxd.formats.transcripts.claude import map_claude
from ctxd.formats.transcripts.claude_files import claude_subagent_files
from ctxd.formats.transcripts.codex import map_codex
from ctxd.formats.transcripts.opencode_archive import is_archive_header, map_opencode_archive

__all__ = ["Transcript", "claude_subagent_files", "detect", "map_claude", "map_codex", "map_transcript"]

CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
CLAUDE_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "progress",
        "attachment",
        "file-history-snapshot",
        "queue-operation",
        "custom-title",
        "tag",
    }
)
CLAUDE_KEYS = ("uuid", "parentUuid", "sessionId", "leafUuid", "isSidechain")


def detect(first_line: bytes) -> str | None:
    """``"pi"``, ``"claude"``, ``"codex"``, ``"opencode"`` (ctxd's archive of an opencode session) or None, from
    the first non-empty line of a file."""
    obj: Any = first_json_line(first_line)
    if not isinstance(obj, dict):
        return None
    if is_archive_header(obj):
        return "opencode"
    kind = obj.get("type")
    if kind == "session":
        return "pi"
    if isinstance(obj.get("payload"), dict) or (kind in CODEX_TYPES and "payload" in obj):
        return "codex"
    if any(key in obj for key in CLAUDE_KEYS) or kind in CLAUDE_TYPES:
        return "claude"
    if kind is None and "id" in obj and "timestamp" in obj and ("instructions" in obj or "git" in obj):
        return "codex"  # rollouts from before the {timestamp, type, payload} envelope
    return None


def map_transcript(data: bytes, path: str = "") -> Transcript | None:
    """Detect the format of ``data`` and map it; None for pi files and unknown formats."""
    kind = detect(data)
    if kind == "claude":
        return map_claude(data, path)
    if kind == "codex":
        return map_codex(data, path)
    if kind == "opencode":
        return map_opencode_archive(data, path)
    return None
