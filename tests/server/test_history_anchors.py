"""Anchors through a real ``ctxd serve``: every search hit carries one ``history/expand`` takes (the entry id, or
``L<line>`` in a pi v1 file, whose entries have no ids), and expand takes an entry id, a unique prefix of one of
at least 8 characters, ``L<line>`` and ranges of these; an ambiguous prefix is invalid params naming the
candidates."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from conftest import reference
from helpers.factories import header, user, write

from ctxd.service import protocol as p

from .harness import call, call_error, start_ctxd

U = (
    "11111111-aaaa-4aaa-8aaa-000000000001",
    "22222222-aaaa-4aaa-8aaa-000000000002",
    "33333333-aaaa-4aaa-8aaa-000000000003",
)


def claude_transcript(path: Path) -> None:
    """A Claude Code transcript whose third line holds two tool results: ctxd makes ``<uuid>`` and
    ``<uuid>.1`` of it."""

    def line(**fields: Any) -> str:
        return json.dumps(
            {"sessionId": "claude-anchors", "cwd": "/w", "timestamp": "2026-01-01T00:00:00.000Z", **fields}
        )

    calls = [
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "echo alpha"}},
        {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "echo beta"}},
    ]
    results = [
        {"type": "tool_result", "tool_use_id": "t1", "content": "alpha-out"},
        {"type": "tool_result", "tool_use_id": "t2", "content": "beta-out"},
    ]
    lines = [
        line(type="user", uuid=U[0], parentUuid=None, message={"role": "user", "content": "Run alpha and beta."}),
        line(
            type="assistant",
            uuid=U[1],
            parentUuid=U[0],
            message={"id": "m1", "role": "assistant", "model": "claude-x", "content": calls, "stop_reason": "tool_use"},
        ),
        line(type="user", uuid=U[2], parentUuid=U[1], message={"role": "user", "content": results}),
    ]
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(lines) + "\n")


async def _expand(client: Any, session: str, **params: Any) -> dict[str, Any]:
    result: dict[str, Any] = await call(client, p.HISTORY_EXPAND, {"session": session, **params})
    return result


async def test_a_pi_v1_hit_carries_a_line_anchor_that_expand_reads(tmp_path: Path) -> None:
    root = tmp_path / "root"
    v1 = root / "v1" / "before-compaction.jsonl"
    v1.parent.mkdir(parents=True)
    shutil.copyfile(reference("pi", "before-compaction.jsonl"), v1)
    async with start_ctxd({"roots": [str(root)], "watch": False}, XDG_DATA_HOME=str(tmp_path / "data")) as client:
        found = await call(client, p.HISTORY_SEARCH, {"query": '"AgentSession looks like a good idea"', "waitMs": 5000})
        (hit,) = [h for h in found["hits"] if h["role"] == "user"]
        assert hit["entryId"] == "" and hit["line"] == 13  # the file gives its entries no ids
        assert hit["anchor"] == "L13" and hit["summarized"] is True
        read = await _expand(client, str(v1), entryId=hit["anchor"])
        (message,) = read["messages"]
        assert read["kind"] == "entry" and message["line"] == 13
        assert message["text"].startswith("AgentSession looks like a good idea")
        # The id ctxd derives for it (stable across reads) is an anchor too, and so is a range of lines.
        assert (await _expand(client, str(v1), entryId=message["entryId"]))["messages"] == [message]
        ranged = await _expand(client, str(v1), fromEntryId="L13", toEntryId="L15")
        assert ranged["kind"] == "range" and [m["line"] for m in ranged["messages"]] == [13, 14, 15]
        missing = await call_error(client, p.HISTORY_EXPAND, {"session": str(v1), "entryId": "L1"})  # the header
        assert missing.code == -31002


async def test_expand_takes_prefixes_lines_and_ranges_of_them(tmp_path: Path) -> None:
    projects = tmp_path / "claude" / "projects"
    transcript = projects / "-w" / "claude-anchors.jsonl"
    claude_transcript(transcript)
    root = tmp_path / "root"
    pi = root / "p" / "ambiguous.jsonl"
    pi.parent.mkdir(parents=True)
    entries = [user(None, "first", id="feedface01"), user("feedface01", "second", id="feedface02")]
    write(pi, [*entries, user("feedface02", "third", id="0badcafe01")], header(id="sess-ambiguous"))
    options = {"roots": [str(root)], "transcriptRoots": [str(projects)], "watch": False}
    async with start_ctxd(options, XDG_DATA_HOME=str(tmp_path / "data")) as client:
        claude = str(transcript)
        whole = await _expand(client, claude, entryId=U[0])
        assert [m["entryId"] for m in whole["messages"]] == [U[0]]
        assert (await _expand(client, claude, entryId=U[0][:8]))["messages"] == whole["messages"]
        # One line, two entries (<uuid>, <uuid>.1): its prefix names the first; the full ids name each.
        assert [m["entryId"] for m in (await _expand(client, claude, entryId="33333333"))["messages"]] == [U[2]]
        beta = await _expand(client, claude, entryId=f"{U[2]}.1")
        assert [m["text"] for m in beta["messages"]] == ["beta-out"]
        assert [m["entryId"] for m in (await _expand(client, claude, entryId="L2"))["messages"]] == [U[1]]
        ranged = await _expand(client, claude, fromEntryId="11111111", toEntryId="L3")
        assert [m["entryId"] for m in ranged["messages"]] == [U[0], U[1], U[2]]
        assert [m["entryId"] for m in (await _expand(client, claude, fromEntryId="22222222"))["messages"]] == [
            U[1],
            U[2],
            f"{U[2]}.1",
        ]
        short = await call_error(client, p.HISTORY_EXPAND, {"session": claude, "entryId": "1111111"})
        assert short.code == -31002  # fewer than 8 characters name nothing but an exact id

        ambiguous = await call_error(client, p.HISTORY_EXPAND, {"session": str(pi), "entryId": "feedface"})
        assert ambiguous.code == -32602
        assert "feedface01 (line 2)" in ambiguous.message and "feedface02 (line 3)" in ambiguous.message
        wrong_end = await call_error(client, p.HISTORY_EXPAND, {"session": str(pi), "toEntryId": "feedface"})
        assert wrong_end.code == -32602 and wrong_end.message.startswith("toEntryId 'feedface'")
        assert [m["text"] for m in (await _expand(client, str(pi), entryId="0badcafe"))["messages"]] == ["third"]
