"""Appends are validated: an entry readers could not take is refused, naming its field, and nothing
of the batch is written."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from helpers.factories import assistant, chain, user, write

from ctxd.errors import InvalidEntryError
from ctxd.store.session_file import SessionFile
from ctxd.tree.session import Session


def msg(**kw: Any) -> dict[str, Any]:
    return {"type": "message", "message": {"role": "user", "content": "hi", **kw}}


DEEP: Any = "bottom"
for _ in range(120):
    DEEP = [DEEP]

REFUSED = [
    ({"type": "compaction", "summary": "s", "firstKeptEntryId": "E0", "tokensBefore": "x"}, "entries[1].tokensBefore"),
    ({"type": "compaction", "summary": "s", "firstKeptEntryId": "E0"}, "entries[1].tokensBefore"),
    ({"type": "custom", "id": "aaaa0001", "parentId": "aaaa0001"}, "entries[1].parentId"),
    ({"type": "custom", "id": "bad\nid"}, "entries[1].id"),
    ({"type": "custom", "id": 12345678}, "entries[1].id"),
    ({"type": "custom", "id": ""}, "entries[1].id"),
    ({"type": "custom", "parentId": 7}, "entries[1].parentId"),
    ({"type": "custom", "timestamp": "yesterday"}, "entries[1].timestamp"),
    ({"type": "custom", "timestamp": 1767261600000}, "entries[1].timestamp"),
    ({"type": "message", "message": "hello"}, "entries[1].message"),
    ({"type": "message"}, "entries[1].message"),
    ({"type": "message", "message": {"content": "no role"}}, "entries[1].message.role"),
    ({"type": "message", "message": {"role": 3}}, "entries[1].message.role"),
    (msg(content=5), "entries[1].message.content"),
    (msg(content=[{"type": "text"}]), "entries[1].message.content[0].text"),
    (msg(content=[{"type": "text", "text": 1}]), "entries[1].message.content[0].text"),
    (msg(content=["plain"]), "entries[1].message.content[0]"),
    (msg(timestamp="now"), "entries[1].message.timestamp"),
    (
        {"type": "message", "message": {"role": "assistant", "content": [{"type": "toolCall", "name": "read"}]}},
        "entries[1].message.content[0].id",
    ),
    (
        {"type": "message", "message": {"role": "assistant", "content": [], "usage": {"input": "many"}}},
        "entries[1].message.usage.input",
    ),
    ({"type": "message", "message": {"role": "toolResult", "content": []}}, "entries[1].message.toolCallId"),
    ({"type": "message", "message": {"role": "bashExecution", "command": 1}}, "entries[1].message.command"),
    ({"type": "model_change", "provider": "p"}, "entries[1].modelId"),
    ({"type": "thinking_level_change", "thinkingLevel": 5}, "entries[1].thinkingLevel"),
    ({"type": "label", "label": "x"}, "entries[1].targetId"),
    ({"type": "label", "targetId": "E0", "label": 5}, "entries[1].label"),
    ({"type": "session_info", "name": ["x"]}, "entries[1].name"),
    ({"type": "context_edit", "targetId": "E0", "replacement": "gone"}, "entries[1].replacement"),
    ({"type": "branch_summary", "fromId": "E0"}, "entries[1].summary"),
    ({"type": "custom_message", "customType": "x", "content": {"text": "x"}}, "entries[1].content"),
    ({"type": "custom", "data": DEEP}, "entries[1]"),
    ({"type": "session", "id": "x"}, "entries[1].type"),
    ({"no": "type"}, "entries[1].type"),
]


@pytest.mark.parametrize(("bad", "field"), REFUSED, ids=[f for _, f in REFUSED])
def test_an_entry_readers_cannot_take_is_refused_and_nothing_written(
    tmp_path: Path, bad: dict[str, Any], field: str
) -> None:
    e = chain(user, assistant)
    path = write(tmp_path / "s.jsonl", e)
    bad = {k: (e[0]["id"] if v == "E0" else v) for k, v in bad.items()}
    before = Path(path).read_bytes()
    sf = SessionFile.open(path)
    with pytest.raises(InvalidEntryError) as info:
        sf.append([{"type": "custom", "data": "fine"}, bad])  # the first one is fine: still nothing
    assert info.value.data["field"] == field
    assert info.value.data["index"] == 1
    assert info.value.code == -31003
    assert Path(path).read_bytes() == before


ACCEPTED = [
    {"type": "some_future_type", "anything": [1, {"x": None}]},
    {"type": "custom", "customType": "ext", "data": {"deep": [[[[1]]]]}, "extraField": True},
    {"type": "message", "message": {"role": "hookMessage", "content": "v2 role"}},
    {"type": "message", "message": {"role": "someNewRole", "payload": 1}},
    {"type": "message", "message": {"role": "user", "content": [{"type": "video", "url": "x"}]}},
    {"type": "message", "message": {"role": "assistant", "content": "a string", "usage": None}},
    {"type": "compaction", "summary": "s", "firstKeptEntryId": "E0", "tokensBefore": 12.5, "details": {"a": 1}},
    {"type": "context_edit", "targetId": "E0", "replacement": None},
    {"type": "label", "targetId": "E0"},
    {"type": "session_info", "name": None},
    {"type": "custom", "id": "0123456789abcdef-uuid", "parentId": None, "timestamp": "2026-01-01T00:00:00Z"},
]


@pytest.mark.parametrize("good", ACCEPTED, ids=[str(i) for i in range(len(ACCEPTED))])
def test_unknown_types_roles_and_fields_stay_allowed(tmp_path: Path, good: dict[str, Any]) -> None:
    e = chain(user, assistant)
    path = write(tmp_path / "s.jsonl", e)
    good = {k: (e[0]["id"] if v == "E0" else v) for k, v in good.items()}
    session = Session.open(path)
    (new,) = session.append([good])
    again = Session.open(path)
    assert again.file.entry_by_id(new)["type"] == good["type"]
    assert again.diagnostics() == []


def test_the_batch_s_own_entries_may_be_parents_but_never_a_cycle(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", chain(user))
    sf = SessionFile.open(path)
    size = os.path.getsize(path)
    with pytest.raises(InvalidEntryError) as info:
        sf.append([{"type": "custom", "id": "c0000001", "parentId": "c0000002"}, {"type": "custom", "id": "c0000002"}])
    assert info.value.data["field"] == "entries[0].parentId" and os.path.getsize(path) == size
    two = [{"type": "custom", "id": "c0000001"}, {"type": "custom", "id": "c0000002", "parentId": "c0000001"}]
    ids = sf.append(two)
    assert ids == ["c0000001", "c0000002"]
