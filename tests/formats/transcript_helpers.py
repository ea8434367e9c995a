"""Checks shared by the transcript adapter tests: tree validity, pi shapes, raw-line reading, ctxd round trip."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from conftest import reference

from ctxd.context.build import Context, build_context
from ctxd.formats import records
from ctxd.formats.transcripts import Transcript
from ctxd.tree.session import Session

TS = "2026-01-01T00:00:00.000Z"


def ref_or_skip(kind: str, name: str) -> Path:
    """A reference transcript (shared copy, else tests/data); skip when neither exists (the large ones)."""
    path = reference(kind, name)
    if not path.exists():
        pytest.skip(f"{kind}/{name} is not available")
    return path


def raw_objects(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line, object)`` for every non-blank line, decoded with the standard library (independently)."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").split("\n")[:-1], 1):
        if line.strip():
            out.append((n, json.loads(line)))
    return out


def jsonl(*objs: Any) -> bytes:
    """A JSONL file body; str items are written verbatim (for broken lines)."""
    parts = [o if isinstance(o, str) else json.dumps(o) for o in objs]
    return ("\n".join(parts) + "\n").encode()


def assert_valid_tree(t: Transcript) -> None:
    """Ids unique, every parent an earlier entry, one source line per entry, file order kept."""
    assert len(t.entries) == len(t.lines)
    seen: set[str] = set()
    for entry, line in zip(t.entries, t.lines, strict=True):
        for key in ("type", "id", "parentId", "timestamp"):
            assert key in entry, (key, entry)
        assert isinstance(entry["id"], str) and entry["id"]
        assert entry["id"] not in seen, f"duplicate id {entry['id']}"
        assert entry["parentId"] is None or entry["parentId"] in seen, (line, entry["parentId"])
        assert isinstance(entry["timestamp"], str) and entry["timestamp"]
        source = entry["ctxdSource"]
        if source["kind"] == "claude.queued":  # derived from a queue operation's line, placed later
            assert source["lines"] == [] and source["from"][0] <= line
        else:
            assert source["lines"][0] == line
        assert isinstance(source["kind"], str)
        seen.add(entry["id"])
    assert t.lines == sorted(t.lines)
    assert t.leaf_id is None or t.leaf_id in seen


def assert_pi_shapes(t: Transcript) -> None:
    """Every entry is a known pi v3 entry; messages, blocks and usage have pi's shapes."""
    assert t.header["type"] == "session" and t.header["version"] == 3
    for key in ("id", "timestamp", "cwd", "agent"):
        assert isinstance(t.header[key], str)
    for entry in t.entries:
        typed = records.structure_entry(entry)
        assert not isinstance(typed, records.UnknownEntry), entry["type"]
        if entry["type"] == "message":
            assert isinstance(typed, records.MessageEntry)
            message = entry["message"]
            assert not isinstance(typed.message, records.UnknownMessage), message.get("role")
            assert isinstance(message["timestamp"], int)
            role = message["role"]
            content = message["content"]
            if role == "user":
                assert isinstance(content, str | list)
            else:
                assert isinstance(content, list)
            for block in content if isinstance(content, list) else []:
                allowed = (
                    {"text", "image"} if role in ("user", "toolResult", "system") else {"text", "thinking", "toolCall"}
                )
                assert block["type"] in allowed, (role, block)
                if block["type"] == "text":
                    assert isinstance(block["text"], str)
                elif block["type"] == "image":
                    assert isinstance(block["data"], str) and isinstance(block["mimeType"], str)
                elif block["type"] == "thinking":
                    assert isinstance(block["thinking"], str)
                elif block["type"] == "toolCall":
                    assert isinstance(block["id"], str) and isinstance(block["name"], str)
                    assert isinstance(block["arguments"], dict)
            if role == "assistant":
                assert message["stopReason"] in records.STOP_REASONS
                assert isinstance(message["provider"], str) and isinstance(message["model"], str)
                if "usage" in message:
                    assert_usage(message["usage"])
            if role == "toolResult":
                assert isinstance(message["toolCallId"], str) and isinstance(message["toolName"], str)
                assert isinstance(message["isError"], bool)
        elif entry["type"] == "custom":
            assert isinstance(entry["customType"], str) and isinstance(entry["data"], dict)
        elif entry["type"] == "compaction":
            assert isinstance(entry["summary"], str) and isinstance(entry["tokensBefore"], int)
            assert entry["firstKeptEntryId"] == entry["id"]
        elif entry["type"] == "usage":
            assert_usage(entry["usage"])


def assert_usage(usage: dict[str, Any]) -> None:
    for key in ("input", "output", "cacheRead", "cacheWrite", "totalTokens"):
        assert isinstance(usage[key], int) and usage[key] >= 0, (key, usage)


def by_id(t: Transcript) -> dict[str, dict[str, Any]]:
    return {e["id"]: e for e in t.entries}


def role(entry: dict[str, Any]) -> str | None:
    return entry["message"]["role"] if entry["type"] == "message" else None


def nearest_call_holder(t: Transcript, entry: dict[str, Any]) -> dict[str, Any] | None:
    """The nearest ancestor message that is not a toolResult (custom entries etc. are skipped)."""
    index = by_id(t)
    parent = entry["parentId"]
    while parent is not None:
        node = index[parent]
        if node["type"] == "message" and role(node) != "toolResult":
            return node
        parent = node["parentId"]
    return None


def assert_results_follow_calls(t: Transcript) -> None:
    """Each toolResult hangs (through other results and non-message entries) under the assistant holding its call."""
    results = [e for e in t.entries if role(e) == "toolResult"]
    for entry in results:
        holder = nearest_call_holder(t, entry)
        assert holder is not None and role(holder) == "assistant", entry["id"]
        calls = {b["id"]: b["name"] for b in holder["message"]["content"] if b["type"] == "toolCall"}
        call_id = entry["message"]["toolCallId"]
        assert call_id in calls, (entry["id"], call_id)
        assert entry["message"]["toolName"] == calls[call_id]


def path_to_root(t: Transcript, leaf: str | None) -> list[dict[str, Any]]:
    index = by_id(t)
    out = []
    while leaf is not None:
        out.append(index[leaf])
        leaf = index[leaf]["parentId"]
    return out[::-1]


def all_source_lines(t: Transcript) -> list[int]:
    return sorted(n for e in t.entries for n in e["ctxdSource"]["lines"])


def as_pi_file(t: Transcript, path: Path) -> Path:
    with path.open("wb") as f:
        for obj in (t.header, *t.entries):
            f.write(msgspec.json.encode(obj) + b"\n")
    return path


def ctxd_context(t: Transcript, tmp_path: Path) -> Context:
    """The context ctxd builds at the transcript's leaf once the entries are written as a pi file."""
    session = Session.open(str(as_pi_file(t, tmp_path / "mapped.jsonl")))
    try:
        return build_context(session.file, session.tree, t.leaf_id, estimates=session.estimates)
    finally:
        session.file.close()
