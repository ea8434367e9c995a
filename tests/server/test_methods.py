"""Every method of ``ctxd serve``, end to end through a real daemon subprocess (offline compaction)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from pytest_lsp import LanguageClient

from ctxd.service import protocol as p

from .harness import (
    append,
    assistant,
    call,
    call_error,
    conversation,
    new_session,
    read_entries,
    tool_result,
    user,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

CTXD_OPTIONS = {"autoCompact": False}


def lines_of(path: str) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


# --- lifecycle ------------------------------------------------------------------------------------


async def test_initialize_advertises_the_protocol(ctxd: LanguageClient) -> None:
    result = ctxd.init_result  # type: ignore[attr-defined]
    assert result.server_info.name == "ctxd"
    ours = result.capabilities.experimental["ctxd"]
    assert ours["methods"] == list(p.METHODS)
    assert ours["notifications"] == list(p.NOTIFICATIONS)
    assert ours["clientRequests"] == [p.COMPACT_WILL_RUN]


async def test_unknown_method_is_method_not_found(ctxd: LanguageClient) -> None:
    error = await call_error(ctxd, "session/nope", {"session": "x"})
    assert error.code == -32601


# --- sessions -------------------------------------------------------------------------------------


async def test_create_returns_the_session_and_announces_it_once(ctxd: LanguageClient) -> None:
    mark = ctxd.notes.mark()  # type: ignore[attr-defined]
    created = await call(ctxd, p.SESSION_CREATE, {"cwd": "/work/proj", "name": "first"})
    path = created["path"]
    assert path.startswith(ctxd.root + os.sep)  # type: ignore[attr-defined]
    assert os.path.basename(os.path.dirname(path)) == "--work-proj--"
    assert path.endswith(f"_{created['sessionId']}.jsonl")
    assert created["cwd"] == "/work/proj"
    assert created["name"] == "first"
    assert created["version"] == 3
    assert created["entries"] == 1  # the session_info entry
    assert created["leafId"] is not None
    assert created["diagnostics"] == []
    assert set(created["usage"]) == {"session", "tokens", "window", "percent", "threshold", "leafId"}
    assert os.stat(path).st_mode & 0o777 == 0o600
    header, info = read_entries(path)
    assert header["type"] == "session" and header["id"] == created["sessionId"] and header["cwd"] == "/work/proj"
    assert info["type"] == "session_info" and info["name"] == "first"

    note = await ctxd.notes.wait(p.DID_CREATE, session=path, since=mark)  # type: ignore[attr-defined]
    assert note == {"session": path, "sessionId": created["sessionId"]}
    await asyncio.sleep(0.8)  # the watcher sees the new file too: it must not announce it again
    assert len(ctxd.notes.of(p.DID_CREATE, path, mark)) == 1  # type: ignore[attr-defined]


async def test_create_outside_the_roots_is_refused(ctxd: LanguageClient, tmp_path: Path) -> None:
    error = await call_error(ctxd, p.SESSION_CREATE, {"cwd": "/proj", "root": str(tmp_path)})
    assert error.code == -31001
    assert not any(tmp_path.iterdir())


async def test_open_by_path_relative_path_and_id(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    await append(ctxd, path, user("hi"), assistant("hello", total=42))
    by_path = await call(ctxd, p.SESSION_OPEN, {"session": path})
    relative = os.path.relpath(path, ctxd.root)  # type: ignore[attr-defined]
    by_relative = await call(ctxd, p.SESSION_OPEN, {"session": relative})
    by_id = await call(ctxd, p.SESSION_OPEN, {"session": by_path["sessionId"]})
    assert by_path == by_relative == by_id
    assert by_path["path"] == path
    assert by_path["entries"] == 2
    assert by_path["usage"]["tokens"] == 42


async def test_list_finds_sessions_and_filters_by_cwd(ctxd: LanguageClient, tmp_path: Path) -> None:
    a = await new_session(ctxd, cwd="/list/a", name="alpha")
    b = await new_session(ctxd, cwd="/list/b")
    await append(ctxd, b, user("what is in b?"))
    listed = await call(ctxd, p.SESSION_LIST, {})
    assert listed["roots"] == [ctxd.root]  # type: ignore[attr-defined]
    by_path = {s["path"]: s for s in listed["sessions"]}
    assert {a, b} <= set(by_path)
    assert by_path[a]["name"] == "alpha" and by_path[a]["cwd"] == "/list/a"
    assert by_path[b]["title"] == "what is in b?"
    only_a = await call(ctxd, p.SESSION_LIST, {"cwd": "/list/a"})
    assert [s["path"] for s in only_a["sessions"]] == [a]
    error = await call_error(ctxd, p.SESSION_LIST, {"roots": [str(tmp_path)]})
    assert error.code == -31001


async def test_append_messages_and_entries(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    mark = ctxd.notes.mark()  # type: ignore[attr-defined]
    result = await call(
        ctxd,
        p.SESSION_APPEND,
        {
            "session": path,
            "entries": [
                {"type": "model_change", "provider": "test", "modelId": "test-model"},
                {"type": "custom", "customType": "my-extension", "data": {"state": 1}},
            ],
            "messages": [user("first"), assistant("second", total=1234)],
        },
    )
    ids = result["ids"]
    assert len(ids) == 4 and len(set(ids)) == 4
    assert all(len(i) == 8 and int(i, 16) >= 0 for i in ids)
    assert result["leafId"] == ids[-1]
    assert result["compactionDue"] is False
    assert "threshold" in result["reason"]
    usage = result["usage"]
    assert usage["tokens"] == 1234 and usage["leafId"] == ids[-1] and usage["session"] == path
    assert usage["window"] == 200_000 and usage["threshold"] == 200_000 - 16_384
    assert usage["percent"] == pytest.approx(0.6)

    entries = read_entries(path)[1:]
    assert [e["id"] for e in entries] == ids
    assert [e["parentId"] for e in entries] == [None, *ids[:-1]]
    assert entries[0] == {**entries[0], "type": "model_change", "provider": "test", "modelId": "test-model"}
    assert entries[1]["data"] == {"state": 1}
    assert entries[2]["message"] == user("first")
    assert all(e["timestamp"].endswith("Z") for e in entries)

    change = await ctxd.notes.wait(p.DID_CHANGE, session=path, since=mark)  # type: ignore[attr-defined]
    assert change["ids"] == ids and change["origin"] == "ctxd" and change["leafId"] == ids[-1]
    assert change["reloaded"] is False
    seen = await ctxd.notes.wait(p.CONTEXT_USAGE, session=path, since=mark)  # type: ignore[attr-defined]
    assert seen == usage

    # The next batch continues from the leaf.
    more = await append(ctxd, path, user("third"))
    assert read_entries(path)[-1]["parentId"] == ids[-1]
    assert more["leafId"] == more["ids"][0]


async def test_append_with_parent_branches_and_null_starts_a_root(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    first = (await append(ctxd, path, user("a"), assistant("b"), user("c")))["ids"]
    side = await append(ctxd, path, user("c'"), parentId=first[1])
    assert read_entries(path)[-1]["parentId"] == first[1]
    assert side["leafId"] == side["ids"][0]
    synced = await append(ctxd, path, user("durable"), durability="fsync")
    assert read_entries(path)[-1]["id"] == synced["ids"][0]
    root = await append(ctxd, path, user("fresh start"), parentId=None)
    assert read_entries(path)[-1]["parentId"] is None
    tree = await call(ctxd, p.SESSION_TREE, {"session": path, "collapse": 0})
    assert [r["id"] for r in tree["rows"] if r["parentId"] is None] == [first[0], root["ids"][0]]


async def test_append_with_durability_null_uses_the_configured_durability(ctxd: LanguageClient) -> None:
    """null is documented as absent (docs/protocol.md; tests/server/test_docs.py checks the table)."""
    path = await new_session(ctxd)
    written = await append(ctxd, path, user("as configured"), durability=None)
    assert read_entries(path)[-1]["id"] == written["ids"][0]


async def test_append_rejects_bad_entries(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    size = os.path.getsize(path)
    nothing = await call_error(ctxd, p.SESSION_APPEND, {"session": path})
    assert nothing.code == -31003
    roleless = await call_error(ctxd, p.SESSION_APPEND, {"session": path, "messages": [user(), {"content": "x"}]})
    assert roleless.code == -31003 and roleless.data == {"index": 1, "field": "messages[1].role"}
    unknown_parent = await call_error(
        ctxd, p.SESSION_APPEND, {"session": path, "messages": [user()], "parentId": "ffffffff"}
    )
    assert unknown_parent.code in (-31002, -31003)
    assert os.path.getsize(path) == size


async def test_tree_rows_collapse_and_paging(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd, name="tree")
    ids = (await append(ctxd, path, *conversation(10, words=8)))["ids"]
    side = (await append(ctxd, path, user("another way"), parentId=ids[3]))["ids"]

    full = await call(ctxd, p.SESSION_TREE, {"session": path, "collapse": 0})
    assert full["session"] == path and full["name"] == "tree" and full["leafId"] == side[0]
    assert full["entries"] == 22 and full["total"] == 22 and full["offset"] == 0
    rows = {r["id"]: r for r in full["rows"]}
    assert set(rows) == {*ids, *side, full["rows"][0]["id"]}
    assert rows[ids[3]]["childCount"] == 2
    assert rows[side[0]]["isLeaf"] and rows[side[0]]["onActivePath"]
    assert not rows[ids[-1]]["onActivePath"]
    assert rows[ids[0]]["role"] == "user" and rows[ids[0]]["preview"].startswith("question 0")
    assert rows[ids[1]]["role"] == "assistant" and rows[ids[1]]["tokens"] > 0
    assert rows[side[0]]["depth"] == 1 and rows[ids[0]]["depth"] == 0

    collapsed = await call(ctxd, p.SESSION_TREE, {"session": path, "collapse": 4})
    runs = [r for r in collapsed["rows"] if r["type"] == "collapsed"]
    assert runs and all(r["count"] > 0 for r in runs)
    assert collapsed["total"] == len(collapsed["rows"]) < full["total"]
    hidden = sum(r["count"] for r in runs)
    assert len(collapsed["rows"]) - len(runs) + hidden == full["total"]

    page = await call(ctxd, p.SESSION_TREE, {"session": path, "collapse": 0, "offset": 5, "limit": 7})
    assert page["total"] == 22 and page["offset"] == 5
    assert [r["id"] for r in page["rows"]] == [r["id"] for r in full["rows"][5:12]]
    tail = await call(ctxd, p.SESSION_TREE, {"session": path, "collapse": 0, "offset": 20, "limit": 7})
    assert len(tail["rows"]) == 2


async def test_entry_returns_the_row_the_body_and_children(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    ids = (await append(ctxd, path, user("question"), assistant("answer")))["ids"]
    got = await call(ctxd, p.SESSION_ENTRY, {"session": path, "entryId": ids[0]})
    assert got["id"] == ids[0] and got["role"] == "user" and got["children"] == [ids[1]]
    assert got["entry"]["message"] == user("question")
    assert got["onActivePath"] and not got["isLeaf"]
    error = await call_error(ctxd, p.SESSION_ENTRY, {"session": path, "entryId": "00000000"})
    assert error.code == -31002
    assert error.data["entryId"] == "00000000"


async def test_label_sets_and_clears(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    ids = (await append(ctxd, path, user("question"), assistant("answer")))["ids"]
    labelled = await call(ctxd, p.SESSION_LABEL, {"session": path, "entryId": ids[0], "label": "start here"})
    assert labelled["entryId"] == ids[0] and labelled["label"] == "start here"
    entry = read_entries(path)[-1]
    assert entry["id"] == labelled["labelEntryId"]
    assert entry["type"] == "label" and entry["targetId"] == ids[0] and entry["label"] == "start here"
    got = await call(ctxd, p.SESSION_ENTRY, {"session": path, "entryId": ids[0]})
    assert got["labels"] == ["start here"]
    cleared = await call(ctxd, p.SESSION_LABEL, {"session": path, "entryId": ids[0]})
    assert cleared["label"] is None and "label" not in read_entries(path)[-1]
    got = await call(ctxd, p.SESSION_ENTRY, {"session": path, "entryId": ids[0]})
    assert got["labels"] == []
    error = await call_error(ctxd, p.SESSION_LABEL, {"session": path, "entryId": "0badbeef", "label": "x"})
    assert error.code == -31002


async def test_pin_carries_a_message_after_the_summary_until_unpinned(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    ids = (await append(ctxd, path, user("Remember: the staging DB is read-only."), *conversation(6)))["ids"]
    pinned = await call(ctxd, p.SESSION_PIN, {"session": path, "entryId": ids[0]})
    assert pinned == {"pinEntryId": read_entries(path)[-1]["id"], "entryId": ids[0], "pinned": True}
    entry = read_entries(path)[-1]
    assert entry["type"] == "custom" and entry["customType"] == "ctxd.pin" and entry["parentId"] == ids[-1]
    assert entry["data"] == {"targetId": ids[0], "pinned": True}
    tree = await call(ctxd, p.SESSION_TREE, {"session": path, "collapse": 0})
    rows = {r["id"]: r for r in tree["rows"] if "id" in r}
    assert rows[ids[0]]["pinned"] is True and rows[ids[-1]]["isLeaf"] is True
    assert entry["id"] not in rows  # bookkeeping, not a row

    result = await call(ctxd, p.COMPACT, {"session": path, "keepRecentTokens": 300})
    built = await call(ctxd, p.CONTEXT_BUILD, {"session": path})
    assert built["messages"][0]["entryId"] == result["entryId"]
    assert built["messages"][1]["entryId"] == ids[0]  # carried verbatim right after the summary
    assert built["messages"][1]["message"]["content"] == "Remember: the staging DB is read-only."

    await call(ctxd, p.SESSION_PIN, {"session": path, "entryId": ids[0], "pinned": False})
    built = await call(ctxd, p.CONTEXT_BUILD, {"session": path})
    assert ids[0] not in [m["entryId"] for m in built["messages"]]
    error = await call_error(ctxd, p.SESSION_PIN, {"session": path, "entryId": result["entryId"]})
    assert error.code == -31003  # only messages can be pinned
    error = await call_error(ctxd, p.SESSION_PIN, {"session": path, "entryId": "0badbeef"})
    assert error.code == -31002


async def test_fork_copies_the_path_into_a_new_session(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    ids = (await append(ctxd, path, user("a"), assistant("b"), user("c"), assistant("d")))["ids"]
    mark = ctxd.notes.mark()  # type: ignore[attr-defined]
    forked = await call(ctxd, p.SESSION_FORK, {"session": path, "entryId": ids[1]})
    assert forked["parentSession"] == path and forked["path"] != path
    header, *entries = read_entries(forked["path"])
    assert header["parentSession"] == path and header["id"] == forked["sessionId"]
    assert [e["id"] for e in entries if e["type"] == "message"] == ids[:2]
    opened = await call(ctxd, p.SESSION_OPEN, {"session": forked["path"]})
    assert opened["leafId"] == ids[1]
    note = await ctxd.notes.wait(p.DID_CREATE, session=forked["path"], since=mark)  # type: ignore[attr-defined]
    assert note["sessionId"] == forked["sessionId"]
    error = await call_error(ctxd, p.SESSION_FORK, {"session": path, "entryId": "12345678"})
    assert error.code == -31002


async def test_stats(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd, name="stats")
    ids = (await append(ctxd, path, user("a"), assistant("b", total=99), user("c")))["ids"]
    await append(ctxd, path, user("c'"), parentId=ids[1])
    await call(ctxd, p.SESSION_LABEL, {"session": path, "entryId": ids[0], "label": "x"})
    stats = await call(ctxd, p.SESSION_STATS, {"session": path})
    assert stats["session"] == path
    assert stats["entries"] == 6
    assert stats["bytes"] == os.path.getsize(path)
    assert stats["types"] == {"session_info": 1, "message": 4, "label": 1}
    assert stats["roles"] == {"user": 3, "assistant": 1}
    assert stats["leaves"] == 2  # c, and the label (appended after c')
    assert stats["labels"] == 1 and stats["orphans"] == 0 and stats["diagnostics"] == []
    assert stats["contextMessages"] == 3
    assert stats["usage"]["tokens"] >= 99


# --- context --------------------------------------------------------------------------------------


async def test_context_build_pi_and_openai(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    call_args = {"path": "src/app.py"}
    ids = (
        await append(
            ctxd,
            path,
            user("read the app"),
            assistant("reading", calls=[("call_1", "read", call_args)], stop="toolUse"),
            tool_result("call_1", "print('hi')"),
            assistant("it prints hi", total=500),
        )
    )["ids"]
    pi = await call(ctxd, p.CONTEXT_BUILD, {"session": path})
    assert pi["leafId"] == ids[-1]
    assert [m["entryId"] for m in pi["messages"]] == ids
    assert [m["message"]["role"] for m in pi["messages"]] == ["user", "assistant", "toolResult", "assistant"]
    assert pi["messages"][2]["message"]["content"][0]["text"] == "print('hi')"
    assert pi["contextTokens"] == 500 and pi["estimatedTokens"] > 0
    assert pi["usage"]["tokens"] == 500
    assert pi["provider"] == "test" and pi["modelId"] == "test-model"

    openai = await call(ctxd, p.CONTEXT_BUILD, {"session": path, "format": "openai"})
    roles = [m["role"] for m in openai["openai"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert openai["openai"][1]["tool_calls"][0]["function"]["name"] == "read"
    assert json.loads(openai["openai"][1]["tool_calls"][0]["function"]["arguments"]) == call_args
    assert openai["openai"][2]["tool_call_id"] == "call_1"
    assert all("message" not in m for m in openai["messages"])

    earlier = await call(ctxd, p.CONTEXT_BUILD, {"session": path, "leafId": ids[1]})
    assert [m["entryId"] for m in earlier["messages"]] == ids[:2]
    bare = await call(ctxd, p.CONTEXT_BUILD, {"session": path, "includeMessages": False})
    assert all("message" not in m for m in bare["messages"])
    bad_leaf = await call_error(ctxd, p.CONTEXT_BUILD, {"session": path, "leafId": "fedcba98"})
    assert bad_leaf.code == -31002
    bad_format = await call_error(ctxd, p.CONTEXT_BUILD, {"session": path, "format": "xml"})
    assert bad_format.code == -32602 and bad_format.data == {"field": "format"}


async def test_context_build_truncates_big_tool_results(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    big = "\n".join(f"line {i}: " + "x" * 60 for i in range(1000))  # ~70,000 characters
    ids = (
        await append(
            ctxd,
            path,
            user("cat the log"),
            assistant("", calls=[("c1", "read", {"path": "log.txt"})], stop="toolUse"),
            tool_result("c1", big),
            tool_result("c2", "small"),
        )
    )["ids"]
    size = os.path.getsize(path)
    for fmt in ("pi", "openai"):
        built = await call(
            ctxd, p.CONTEXT_BUILD, {"session": path, "format": fmt, "truncateToolResults": True, "contextWindow": 4000}
        )
        assert built["truncated"] == [ids[2]]
        text = built["messages"][2]["message"]["content"][0]["text"] if fmt == "pi" else built["openai"][2]["content"]
        assert len(text) < 6000 and "ctxd truncated this tool result" in text
    untouched = await call(ctxd, p.CONTEXT_BUILD, {"session": path})
    assert untouched["messages"][2]["message"]["content"][0]["text"] == big
    assert "truncated" not in untouched
    assert os.path.getsize(path) == size  # building never writes


# --- compaction -----------------------------------------------------------------------------------


async def test_compact_dry_run_plans_without_writing(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    ids = (await append(ctxd, path, *conversation(6)))["ids"]
    size = os.path.getsize(path)
    mark = ctxd.notes.mark()  # type: ignore[attr-defined]
    plan = await call(ctxd, p.COMPACT, {"session": path, "dryRun": True, "keepRecentTokens": 300})
    assert plan["leafId"] == ids[-1]
    assert plan["firstKeptEntryId"] in ids
    kept_from = ids.index(plan["firstKeptEntryId"])
    assert plan["summarizeEntryIds"] == ids[:kept_from]
    assert plan["messagesToSummarize"] == kept_from
    assert plan["keptMessages"] == len(ids) - kept_from
    assert plan["isSplitTurn"] is False and plan["turnPrefixMessages"] == 0
    assert plan["firstKeptLine"] == kept_from + 2
    assert plan["tokensBefore"] > plan["estimatedTokensAfter"] - 1500
    assert plan["previousCompactionId"] is None
    assert plan["readFiles"] == [] and plan["modifiedFiles"] == []
    # What the compaction must keep: the fact sheet every summary is checked against.
    assert {f["kind"] for f in plan["mustKeep"]} >= {"goal"}
    assert plan["mustKeepText"].startswith("## What this compaction must keep\n- Goal: ")
    assert os.path.getsize(path) == size
    await asyncio.sleep(0.2)
    assert not ctxd.notes.of(p.COMPACTION_STATUS, path, mark)  # type: ignore[attr-defined]


async def test_compact_offline_writes_a_compaction_entry(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    ids = (
        await append(
            ctxd,
            path,
            *conversation(4),
            assistant("editing", calls=[("e1", "edit", {"path": "src/main.py"})], stop="toolUse"),
            tool_result("e1", "edited", name="edit"),
            *conversation(3),
        )
    )["ids"]
    mark = ctxd.notes.mark()  # type: ignore[attr-defined]
    result = await call(ctxd, p.COMPACT, {"session": path, "keepRecentTokens": 300, "instructions": "focus on edits"})
    entry = read_entries(path)[-1]
    assert entry["type"] == "compaction" and entry["id"] == result["entryId"]
    assert entry["parentId"] == ids[-1] == result["leafId"]
    assert entry["firstKeptEntryId"] == result["firstKeptEntryId"] in ids
    assert entry["tokensBefore"] == result["tokensBefore"]
    assert entry["summary"] == result["summary"] and entry["summary"].startswith("## State now")
    assert "\n## Goal\n" in entry["summary"]
    assert "<modified-files>\nsrc/main.py\n</modified-files>" in entry["summary"]
    assert entry["details"]["modifiedFiles"] == ["src/main.py"]
    assert entry["details"]["ctxd"]["instructions"] == "focus on edits"
    assert result["trigger"] == "manual" and result["path"] == "offline" and result["retry"] is False
    assert result["plan"]["firstKeptEntryId"] == result["firstKeptEntryId"]

    notes = ctxd.notes  # type: ignore[attr-defined]
    running = await notes.wait(p.COMPACTION_STATUS, lambda s: s["state"] == "running", session=path, since=mark)
    done = await notes.wait(p.COMPACTION_STATUS, lambda s: s["state"] == "succeeded", session=path, since=mark)
    assert running["trigger"] == "manual" and running["tokensBefore"] == result["tokensBefore"]
    assert done["entryId"] == result["entryId"] and done["path"] == "offline"
    assert done["tokensBefore"] == result["tokensBefore"] and done["tokensAfter"] == result["tokensAfter"]
    change = await notes.wait(p.DID_CHANGE, lambda c: result["entryId"] in c["ids"], session=path, since=mark)
    assert change["leafId"] == result["entryId"] and change["origin"] == "ctxd"
    await notes.wait(p.CONTEXT_USAGE, lambda u: u["leafId"] == result["entryId"], session=path, since=mark)

    built = await call(ctxd, p.CONTEXT_BUILD, {"session": path})
    assert built["compactionId"] == result["entryId"]
    assert built["messages"][0]["entryId"] == result["entryId"]
    assert built["messages"][1]["entryId"] == result["firstKeptEntryId"]

    ledger = await call(ctxd, p.SESSION_LEDGER, {"session": path})
    assert ledger["session"] == path
    (row,) = ledger["compactions"]
    assert row["entryId"] == result["entryId"] and row["trigger"] == "manual" and row["path"] == "offline"
    assert row["tokensBefore"] == result["tokensBefore"] and row["tokensAfter"] == result["tokensAfter"]
    assert row["firstKeptEntryId"] == result["firstKeptEntryId"] and row["onActivePath"] and row["madeBy"] == "ctxd"
    assert row["summaryPreview"].startswith("## State now")
    assert row["mustKeep"]["facts"] > 0 and row["mustKeep"]["missing"] == 0  # the offline summary lacks nothing
    assert (await call(ctxd, p.SESSION_LEDGER, {"session": await new_session(ctxd)}))["compactions"] == []


async def test_compact_reports_work_done_progress(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    await append(ctxd, path, *conversation(6))
    mark = ctxd.notes.mark()  # type: ignore[attr-defined]
    await call(ctxd, p.COMPACT, {"session": path, "keepRecentTokens": 300, "workDoneToken": "compact-1"})
    await ctxd.notes.wait(  # type: ignore[attr-defined]
        "$/progress", lambda x: x["token"] == "compact-1" and x["value"]["kind"] == "end", since=mark
    )
    values = [x["value"] for x in ctxd.notes.of("$/progress", since=mark) if x["token"] == "compact-1"]  # type: ignore[attr-defined]
    kinds = [v["kind"] for v in values]
    assert kinds[0] == "begin" and kinds[-1] == "end" and set(kinds[1:-1]) == {"report"} and len(kinds) >= 3
    assert values[0]["title"] == "ctxd: compacting"
    percentages = [v["percentage"] for v in values[1:-1] if v.get("percentage") is not None]
    assert percentages == sorted(percentages) and percentages[-1] == 100
    # An integer token works too; a dry run reports no progress.
    await append(ctxd, path, *conversation(3))
    await call(ctxd, p.COMPACT, {"session": path, "dryRun": True, "keepRecentTokens": 100, "workDoneToken": 7})
    await call(ctxd, p.COMPACT, {"session": path, "keepRecentTokens": 100, "workDoneToken": 8})
    await ctxd.notes.wait("$/progress", lambda x: x["token"] == 8 and x["value"]["kind"] == "end", since=mark)  # type: ignore[attr-defined]
    assert not [x for x in ctxd.notes.of("$/progress", since=mark) if x["token"] == 7]  # type: ignore[attr-defined]


async def test_compact_with_nothing_to_compact_fails_cleanly(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    await append(ctxd, path, user("short"), assistant("story"))
    size = os.path.getsize(path)
    mark = ctxd.notes.mark()  # type: ignore[attr-defined]
    error = await call_error(ctxd, p.COMPACT, {"session": path, "workDoneToken": "nothing"})
    assert error.code == -31020 and "nothing to compact" in error.message
    assert error.data["path"] == path
    failed = await ctxd.notes.wait(p.COMPACTION_STATUS, lambda s: s["state"] == "failed", session=path, since=mark)  # type: ignore[attr-defined]
    assert "nothing to compact" in failed["error"] and failed["trigger"] == "manual"
    end = await ctxd.notes.wait(
        "$/progress", lambda x: x["token"] == "nothing" and x["value"]["kind"] == "end", since=mark
    )  # type: ignore[attr-defined]
    assert end["value"]["kind"] == "end"
    assert os.path.getsize(path) == size
    dry = await call_error(ctxd, p.COMPACT, {"session": path, "dryRun": True})
    assert dry.code == -31020 and "nothing to compact" in dry.message
    empty = await new_session(ctxd)
    assert (await call_error(ctxd, p.COMPACT, {"session": empty})).code == -31020


# --- branching ------------------------------------------------------------------------------------


async def test_branch_moves_the_leaf_and_persists_it(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    ids = (await append(ctxd, path, user("a"), assistant("b"), user("c"), assistant("d")))["ids"]
    mark = ctxd.notes.mark()  # type: ignore[attr-defined]
    result = await call(ctxd, p.BRANCH, {"session": path, "entryId": ids[1]})
    assert result["leafId"] == ids[1] and result["previousLeafId"] == ids[-1]
    assert result["summaryEntryId"] is None and result["summary"] is None
    marker = read_entries(path)[-1]
    assert marker["id"] == result["markerId"] and marker["parentId"] == ids[1]
    assert marker["type"] == "custom" and marker["data"] == {"leafId": ids[1]}
    change = await ctxd.notes.wait(p.DID_CHANGE, session=path, since=mark)  # type: ignore[attr-defined]
    assert change["leafId"] == ids[1]
    opened = await call(ctxd, p.SESSION_OPEN, {"session": path})
    assert opened["leafId"] == ids[1]
    built = await call(ctxd, p.CONTEXT_BUILD, {"session": path})
    assert [m["entryId"] for m in built["messages"]] == ids[:2]
    nxt = await append(ctxd, path, user("c'"))
    assert read_entries(path)[-1]["parentId"] in (ids[1], result["markerId"])
    built = await call(ctxd, p.CONTEXT_BUILD, {"session": path})
    assert [m["entryId"] for m in built["messages"]] == [*ids[:2], nxt["ids"][0]]
    error = await call_error(ctxd, p.BRANCH, {"session": path, "entryId": "aaaaaaaa"})
    assert error.code == -31002


async def test_branch_with_summary_leaves_a_branch_summary(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    ids = (
        await append(
            ctxd,
            path,
            user("start"),
            assistant("ok"),
            user("try approach A"),
            assistant("writing", calls=[("w1", "write", {"path": "a.py"})], stop="toolUse"),
            tool_result("w1", "written", name="write"),
            assistant("approach A is done"),
        )
    )["ids"]
    result = await call(ctxd, p.BRANCH, {"session": path, "entryId": ids[1], "summarize": True})
    entry = read_entries(path)[-1]
    assert entry["type"] == "branch_summary" and entry["id"] == result["summaryEntryId"] == result["leafId"]
    assert entry["fromId"] == ids[-1] == result["previousLeafId"]
    assert entry["parentId"] == ids[1]
    assert "approach A" in entry["summary"]
    assert entry["details"]["modifiedFiles"] == ["a.py"] == result["modifiedFiles"]
    assert result["summarizedEntries"] == 3  # user, assistant, assistant (tool results skipped)
    built = await call(ctxd, p.CONTEXT_BUILD, {"session": path})
    assert [m["entryId"] for m in built["messages"]] == [*ids[:2], entry["id"]]


# --- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        (p.SESSION_OPEN, {}, "session"),
        (p.SESSION_OPEN, {"session": 5}, "session"),
        (p.SESSION_OPEN, {"session": ["a"]}, "session"),
        (p.SESSION_CREATE, {}, "cwd"),
        (p.SESSION_ENTRY, {"session": "x"}, "entryId"),
        (p.SESSION_TREE, {"session": "x", "limit": "ten"}, "limit"),
        (p.SESSION_TREE, {"session": "x", "collapse": True}, "collapse"),
        (p.SESSION_APPEND, {"session": "x", "messages": "hello"}, "messages"),
        (p.SESSION_APPEND, {"session": "x", "messages": [], "durability": "sometimes"}, "durability"),
        (p.CONTEXT_BUILD, {"session": "x", "truncateToolResults": "yes"}, "truncateToolResults"),
        (p.COMPACT, {"session": "x", "dryRun": 1}, "dryRun"),
        (p.COMPACT, {"session": "x", "workDoneToken": 1.5}, "workDoneToken"),
        (p.BRANCH, {"session": "x", "entryId": "y", "summarize": "no"}, "summarize"),
        # Nothing is coerced: a string is not a list of its characters, a number is not negative.
        (p.SESSION_LIST, {"roots": "abc"}, "roots"),
        (p.SESSION_LIST, {"roots": ["a", 1]}, "roots"),
        (p.SESSION_LIST, {"cwd": ["/a"]}, "cwd"),
        (p.SESSION_TREE, {"session": "x", "offset": -1}, "offset"),
        (p.SESSION_TREE, {"session": "x", "limit": -1}, "limit"),
        (p.SESSION_TREE, {"session": "x", "collapse": -3}, "collapse"),
        (p.SESSION_TREE, {"session": "x", "offset": 1.5}, "offset"),
        (p.SESSION_TREE, {"session": "x", "fromId": 5}, "fromId"),
        (p.SESSION_APPEND, {"session": "x", "entries": "abc"}, "entries"),
        (p.SESSION_APPEND, {"session": "x", "entries": {"type": "message"}}, "entries"),
        (p.SESSION_APPEND, {"session": "x", "entries": [["type", "message"]]}, "entries"),
        (p.SESSION_APPEND, {"session": "x", "messages": {"role": "user"}}, "messages"),
        (p.SESSION_APPEND, {"session": "x", "parentId": 3}, "parentId"),
        (p.SESSION_CREATE, {"cwd": ""}, "cwd"),
        (p.SESSION_CREATE, {"cwd": "/a", "root": ["/r"]}, "root"),
        (p.SESSION_CREATE, {"cwd": "/a", "name": "n" * 5_000}, "name"),
        (p.SESSION_LABEL, {"session": "x", "entryId": "y", "label": "l" * 5_000}, "label"),
        (p.SESSION_LABEL, {"session": "x", "entryId": "y", "label": 5}, "label"),
        (p.CONTEXT_BUILD, {"session": "x", "contextWindow": 0}, "contextWindow"),
        (p.CONTEXT_BUILD, {"session": "x", "contextWindow": -100}, "contextWindow"),
        (p.CONTEXT_BUILD, {"session": "x", "format": "xml"}, "format"),
        (p.CONTEXT_BUILD, {"session": "x", "includeMessages": 0}, "includeMessages"),
        (p.CONTEXT_BUILD, {"session": "x", "countModel": ["m"]}, "countModel"),
        (p.COMPACT, {"session": "x", "keepRecentTokens": -1}, "keepRecentTokens"),
        (p.COMPACT, {"session": "x", "instructions": ["a"]}, "instructions"),
        (p.COMPACT, {"session": "x", "leafId": {}}, "leafId"),
        (p.BRANCH, {"session": "x", "entryId": ["y"]}, "entryId"),
        (p.SESSION_ENTRY, {"session": ["x"], "entryId": "y"}, "session"),
    ],
)
async def test_invalid_params_name_the_field(ctxd: LanguageClient, method: str, params: dict, field: str) -> None:
    error = await call_error(ctxd, method, params)
    assert error.code == -32602
    assert field in error.message
    assert error.data == {"field": field}


async def test_params_that_are_not_an_object(ctxd: LanguageClient) -> None:
    error = await call_error(ctxd, p.SESSION_OPEN, ["a", "b"])
    assert error.code == -32602


async def test_unknown_and_outside_sessions(ctxd: LanguageClient, tmp_path: Path) -> None:
    assert (await call_error(ctxd, p.SESSION_OPEN, {"session": "no-such-session"})).code == -31001
    assert (await call_error(ctxd, p.SESSION_OPEN, {"session": "/etc/passwd"})).code == -31001
    assert (await call_error(ctxd, p.SESSION_TREE, {"session": "/etc/passwd"})).code == -31001
    # A real session file outside the roots: it would open if it were read.
    outside = tmp_path / "outside.jsonl"
    outside.write_text(json.dumps({"type": "session", "version": 3, "id": "x", "timestamp": "t", "cwd": "/"}) + "\n")
    root = Path(ctxd.root)  # type: ignore[attr-defined]
    escape = os.path.relpath(outside, root)
    assert escape.startswith("..")
    for ref in (str(outside), escape, f"sub/../{escape}"):
        error = await call_error(ctxd, p.SESSION_OPEN, {"session": ref})
        assert error.code == -31001, ref
    link = root / "link.jsonl"
    link.symlink_to(outside)
    try:
        assert (await call_error(ctxd, p.SESSION_OPEN, {"session": str(link)})).code == -31001
    finally:
        link.unlink()


async def test_corrupt_session_header(ctxd: LanguageClient) -> None:
    root = Path(ctxd.root)  # type: ignore[attr-defined]
    bad = root / "corrupt" / "bad.jsonl"
    bad.parent.mkdir(exist_ok=True)
    content = b'{"type": "message", "id": "aaaaaaaa"}\n{"type": "message"}\n'
    bad.write_bytes(content)
    error = await call_error(ctxd, p.SESSION_OPEN, {"session": str(bad)})
    assert error.code == -31011
    assert error.data["line"] == 1 and error.data["path"] == str(bad)
    assert bad.read_bytes() == content  # refused, never rewritten
    not_json = root / "corrupt" / "garbage.jsonl"
    not_json.write_bytes(b"\x00\x01 not json\n")
    assert (await call_error(ctxd, p.SESSION_STATS, {"session": str(not_json)})).code == -31011
