"""ctxd's archive of an opencode session: its database rows as JSON lines (encode, and decode back to rows).

opencode keeps sessions in SQLite, where deleting a session deletes its rows. ctxd's archive keeps a copy of
each row, one self-describing record per line, in the order :func:`ctxd.store.opencode.read_session` reads
them, so the same mapper (:func:`map_opencode`) reads the copy as it reads the database:

=====================================================================  ===========================================
line                                                                   what
=====================================================================  ===========================================
``{"type": "opencode.session", "ctxdArchive": 1, "row": {...}}``       the ``session`` row by column (first line)
``{"type": "opencode.message", "id", "time_created", "data"}``         a ``message`` row (``data``: opencode's JSON
                                                                       text, kept as text)
``{"type": "opencode.part", "message_id", "id", "data"}``              a ``part`` row
=====================================================================  ===========================================

A line that does not decode is reported in the diagnostics and left out; the rest is served.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ctxd.formats.transcripts._base import Transcript, parse_json_object

if TYPE_CHECKING:  # imported where used: telling an archive from other files (every open) needs neither
    from ctxd.formats.transcripts.opencode import OpencodeRows

SESSION = "opencode.session"
MESSAGE = "opencode.message"
PART = "opencode.part"
VERSION = 1


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def encode_archive(rows: OpencodeRows) -> bytes:
    """The archive's bytes for one session's rows (the same rows always give the same bytes)."""
    out = [_line({"type": SESSION, "ctxdArchive": VERSION, "row": rows.session})]
    out.extend(_line({"type": MESSAGE, "id": i, "time_created": t, "data": d}) for i, t, d in rows.messages)
    out.extend(_line({"type": PART, "message_id": m, "id": i, "data": d}) for m, i, d in rows.parts)
    return b"".join(out)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def is_archive_header(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("type") == SESSION and isinstance(obj.get("row"), dict)


def decode_archive(data: bytes) -> tuple[OpencodeRows | None, list[tuple[int, str]]]:
    """The rows an archive holds (None when line 1 is not an archive's session line) and the lines left out."""
    session: dict[str, Any] | None = None
    messages: list[tuple[str, int, str]] = []
    parts: list[tuple[str, str, str]] = []
    problems: list[tuple[int, str]] = []
    for number, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            problems.append((number, "not a JSON line"))
            continue
        kind = obj.get("type") if isinstance(obj, dict) else None
        if session is None:
            if not is_archive_header(obj):
                return None, problems
            session = obj["row"]
        elif kind == MESSAGE and isinstance(obj.get("time_created"), int):
            messages.append((_text(obj.get("id")), obj["time_created"], _text(obj.get("data"))))
        elif kind == PART:
            parts.append((_text(obj.get("message_id")), _text(obj.get("id")), _text(obj.get("data"))))
        else:
            problems.append((number, f"not an opencode archive record: {str(kind)[:40]!r}"))
    if session is None:
        return None, problems
    from ctxd.formats.transcripts.opencode import OpencodeRows

    return OpencodeRows(session, messages, parts), problems


def first_user_text(rows: OpencodeRows) -> str:
    """The first text part of the session's first user message that has one ("" when none)."""
    texts: dict[str, str] = {}
    for message_id, _, data in rows.parts:
        part = parse_json_object(data) or {}
        if message_id not in texts and part.get("type") == "text" and isinstance(part.get("text"), str):
            texts[message_id] = part["text"]
    for message_id, _, data in rows.messages:
        if message_id in texts and (parse_json_object(data) or {}).get("role") == "user":
            return texts[message_id]
    return ""


def map_opencode_archive(data: bytes, path: str = "") -> Transcript | None:
    """Map an archived session as :func:`map_opencode` maps it from the database; None for other files."""
    rows, problems = decode_archive(data)
    if rows is None:
        return None
    from ctxd.formats.transcripts.opencode import map_opencode

    transcript = map_opencode(rows, path)
    transcript.diagnostics.extend(problems)
    return transcript
