"""Checks that bench/gen.py writes a structurally valid, realistic pi v3 session file."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any


def _path_to_root(by_id: dict[str, dict[str, Any]], eid: str) -> list[str]:
    out = []
    cur: str | None = eid
    while cur is not None:
        out.append(cur)
        cur = by_id[cur]["parentId"]
    return out


def test_generate_valid_session(gen: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "s.jsonl"
    stats = gen.generate(out, 2000, seed=7)
    raw = out.read_bytes()
    assert raw.endswith(b"\n")
    lines = raw.split(b"\n")[:-1]
    assert len(lines) == 2001
    assert stats.entries == 2000
    assert stats.bytes == len(raw)

    header = json.loads(lines[0])
    assert header["type"] == "session" and header["version"] == 3
    assert "id" in header and "cwd" in header and "timestamp" in header

    entries = [json.loads(line) for line in lines[1:]]
    by_id: dict[str, dict[str, Any]] = {}
    children: Counter[str] = Counter()
    images = 0
    for e in entries:
        eid = e["id"]
        assert len(eid) == 8 and all(c in "0123456789abcdef" for c in eid)
        assert eid not in by_id, "duplicate id"
        assert e["timestamp"].endswith("Z") and len(e["timestamp"]) == 24
        parent = e["parentId"]
        if parent is None:
            assert not by_id, "only the first entry may be a root"
        else:
            assert parent in by_id, "parentId must refer to an earlier entry"
            children[parent] += 1
        msg = e.get("message")
        if e["type"] == "message" and msg["role"] == "toolResult":
            # walk back over sibling tool results of the same turn to the assistant that called it
            p = by_id[parent]
            while p["type"] == "message" and p["message"]["role"] == "toolResult":
                p = by_id[p["parentId"]]
            assert p["type"] == "message" and p["message"]["role"] == "assistant"
            call_ids = {b["id"] for b in p["message"]["content"] if b["type"] == "toolCall"}
            assert msg["toolCallId"] in call_ids
        if msg is not None and isinstance(msg.get("content"), list):
            images += sum(1 for b in msg["content"] if b["type"] == "image")
        by_id[eid] = e

    compactions = [e for e in entries if e["type"] == "compaction"]
    assert compactions
    for c in compactions:
        on_path = _path_to_root(by_id, c["id"])
        kept = by_id[c["firstKeptEntryId"]]
        assert c["firstKeptEntryId"] in on_path
        assert kept["type"] == "message" and kept["message"]["role"] in ("user", "assistant")
        assert 1500 <= len(c["summary"]) <= 8000
        assert c["tokensBefore"] > 100_000
        assert set(c["details"]) == {"readFiles", "modifiedFiles"}
    for e in entries:
        if e["type"] == "branch_summary":
            assert e["fromId"] in by_id
        if e["type"] == "label":
            assert e["targetId"] in by_id

    assert any(n >= 2 for n in children.values()), "expected a branch point"
    assert images >= 1 and images == stats.images
    assert stats.compactions == len(compactions)
    assert stats.branches >= 1
    sizes = [len(line) for line in lines[1:]]
    assert 1200 <= statistics.median(sizes) <= 3000
    assert stats.median_line_bytes == statistics.median(sizes)
    kinds = Counter(e["type"] for e in entries)
    assert kinds["message"] > 1500 and kinds["session_info"] == 1


def test_deterministic(gen: ModuleType, tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    gen.generate(a, 300, seed=3)
    gen.generate(b, 300, seed=3)
    gen.generate(c, 300, seed=4)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
