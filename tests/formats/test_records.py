"""Typed records: every entry type and role structures, and unknown fields survive."""

from __future__ import annotations

import json

from conftest import reference

from ctxd.formats import records as r


def test_every_line_of_the_all_types_file_round_trips() -> None:
    lines = reference("pi", "all-entry-types-v3.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    assert r.unstructure(r.structure_header(header)) == header
    kinds = set()
    for line in lines[1:]:
        obj = json.loads(line)
        typed = r.structure_entry(obj)
        kinds.add(type(typed).__name__)
        assert r.unstructure(typed) == obj
    assert {"MessageEntry", "CompactionEntry", "BranchSummaryEntry", "ContextEditEntry", "UsageEntry"} <= kinds
    assert "UnknownEntry" not in kinds


def test_roles_and_blocks_are_typed() -> None:
    obj = {
        "type": "message",
        "id": "a",
        "parentId": None,
        "timestamp": "t",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hm"},
                {"type": "toolCall", "id": "c", "name": "read", "arguments": {"path": "x"}},
            ],
            "usage": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3, "cost": {"total": 1}},
        },
    }
    typed = r.structure_entry(obj)
    assert isinstance(typed, r.MessageEntry)
    assert isinstance(typed.message, r.AssistantMessage)
    assert isinstance(typed.message.content[1], r.ToolCallBlock)
    assert isinstance(typed.message.usage, r.Usage)
    assert typed.message.usage.totalTokens == 3
    assert r.unstructure(typed) == obj
    for role, cls in [
        ("system", r.SystemMessage),
        ("bashExecution", r.BashExecutionMessage),
        ("custom", r.CustomMessage),
    ]:
        assert isinstance(r.structure_message({"role": role}), cls)


def test_unknown_fields_types_and_nulls_survive() -> None:
    obj = {
        "type": "message",
        "id": "a",
        "parentId": None,
        "timestamp": "t",
        "futureField": {"x": [1, 2]},
        "message": {
            "role": "user",
            "content": [{"type": "hologram", "payload": 1}, {"type": "text", "text": "hi", "lang": "en"}],
            "newThing": True,
        },
    }
    typed = r.structure_entry(obj)
    assert typed.extra["futureField"] == {"x": [1, 2]}
    assert r.unstructure(typed) == obj
    new_type = {"type": "hologram_entry", "id": "b", "parentId": "a", "timestamp": "t", "beam": 3}
    typed2 = r.structure_entry(new_type)
    assert isinstance(typed2, r.UnknownEntry)
    assert r.unstructure(typed2) == new_type
    edit = {"type": "context_edit", "id": "c", "parentId": "b", "timestamp": "t", "targetId": "a", "replacement": None}
    assert r.unstructure(r.structure_entry(edit)) == edit


def test_the_cattrs_converter_speaks_the_same_records() -> None:
    lines = reference("pi", "all-entry-types-v3.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    assert r.converter.unstructure(r.converter.structure(header, r.SessionHeader)) == header
    for line in lines[1:]:
        obj = json.loads(line)
        assert r.converter.unstructure(r.structure_entry(obj)) == obj


def test_entries_pi_added_since_0_87_are_typed_and_round_trip() -> None:
    system = {
        "role": "system",
        "content": "terse",
        "sections": {"a": "b"},
        "toolsAdded": [{"name": "t"}],
        "timestamp": 5,
    }
    comp = {
        "type": "compaction",
        "id": "c",
        "parentId": "b",
        "timestamp": "t",
        "summary": "s",
        "firstKeptEntryId": "a",
        "tokensBefore": 1,
        "systemMessage": system,
    }
    typed = r.structure_entry(comp)
    assert isinstance(typed, r.CompactionEntry) and isinstance(typed.systemMessage, r.SystemMessage)
    assert typed.systemMessage.toolsAdded == [{"name": "t"}]
    assert r.unstructure(typed) == comp
    hide = {"type": "context_edit", "id": "e", "parentId": "c", "timestamp": "t", "targetId": "a", "replacement": None}
    edit = r.structure_entry(hide)
    assert isinstance(edit, r.ContextEditEntry) and edit.replacement is None
    assert r.unstructure(edit) == hide
