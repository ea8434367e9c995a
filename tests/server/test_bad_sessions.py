"""Bad session files and bad appends through a real daemon: every bad line and broken parent link is
reported (file, line, entry id) while the rest is served, requests always answer, and an append
readers could not take is refused with -31003 naming its field."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from helpers.broken import line, nested, non_utf8, write_raw
from helpers.factories import assistant, chain, header, user
from pytest_lsp import LanguageClient

from ctxd.service import protocol as p

from .harness import call, call_error, new_session, read_entries, start_ctxd

pytestmark = pytest.mark.asyncio(loop_scope="module")

CTXD_OPTIONS = {"autoCompact": False, "watch": False}
ANSWER = 15.0
"""A request that has not answered by then never will."""


def broken_session(root: Path, name: str) -> tuple[str, dict[str, Any]]:
    """A session whose lines hold every kind of damage, and the ids that matter."""
    a, b, c, d, e = chain(user, assistant, user, assistant, user)
    b["message"]["content"][0]["text"] = "ok"
    orphan = user("nowhere1", "lost")
    selfish = user(None, "me")
    selfish["parentId"] = selfish["id"]
    path = write_raw(
        root / name,
        line(a),  # 2
        nested(b, 2000),  # 3: too deep to decode at all
        nested(c, 400),  # 4: decodes, but deeper than any serializer goes
        non_utf8(d, "ok"),  # 5: invalid UTF-8 inside a string
        line(e),  # 6
        line(orphan),  # 7
        line(selfish),  # 8
        hdr=header(id=f"sess-{name}"),
    )
    return path, {"ids": [a["id"], b["id"], c["id"], d["id"], e["id"]], "orphan": orphan["id"], "self": selfish["id"]}


def lines_reported(diagnostics: list[dict[str, Any]]) -> set[int]:
    return {d["line"] for d in diagnostics}


async def test_every_method_reports_bad_lines_and_serves_the_rest(ctxd: LanguageClient) -> None:
    root = Path(ctxd.root)  # type: ignore[attr-defined]
    path, ids = broken_session(root, "broken.jsonl")
    ctx = await call(ctxd, p.CONTEXT_BUILD, {"session": path, "leafId": ids["ids"][-1]}, timeout=ANSWER)
    assert [m["entryId"] for m in ctx["messages"]] == ids["ids"]
    assert lines_reported(ctx["diagnostics"]) >= {3, 4, 5, 7, 8}
    by_id = {d.get("entryId"): d for d in ctx["diagnostics"]}
    assert "does not exist" in by_id[ids["orphan"]]["message"] and by_id[ids["orphan"]]["line"] == 7
    assert "itself" in by_id[ids["self"]]["message"] and by_id[ids["self"]]["line"] == 8
    assert by_id[ids["ids"][3]]["line"] == 5 and "UTF-8" in by_id[ids["ids"][3]]["message"]
    assert all(d["path"] == path for d in ctx["diagnostics"])

    opened = await call(ctxd, p.SESSION_OPEN, {"session": path}, timeout=ANSWER)
    assert opened["entries"] == 7 and lines_reported(opened["diagnostics"]) >= {3, 4, 5, 7, 8}
    tree = await call(ctxd, p.SESSION_TREE, {"session": path, "collapse": 0}, timeout=ANSWER)
    assert len(tree["rows"]) == 7 and lines_reported(tree["diagnostics"]) >= {3, 4, 5, 7, 8}
    openai = await call(ctxd, p.CONTEXT_BUILD, {"session": path, "format": "openai"}, timeout=ANSWER)
    assert openai["openai"]
    entry = await call(ctxd, p.SESSION_ENTRY, {"session": path, "entryId": ids["ids"][2]}, timeout=ANSWER)
    assert "nested deeper than 100 levels" in json.dumps(entry["entry"])


async def test_a_message_nested_hundreds_of_levels_deep_still_gets_an_answer(ctxd: LanguageClient) -> None:
    root = Path(ctxd.root)  # type: ignore[attr-defined]
    a, b = chain(user, user)
    path = write_raw(root / "deep.jsonl", line(a), nested(b, 400, where="content"), hdr=header(id="sess-deep"))
    ctx = await call(ctxd, p.CONTEXT_BUILD, {"session": path}, timeout=ANSWER)
    assert [m["entryId"] for m in ctx["messages"]] == [a["id"], b["id"]]
    assert [d["line"] for d in ctx["diagnostics"]] == [3]
    assert ctx["messages"][1]["message"]["role"] == "user"
    # ... and the daemon is still serving.
    assert (await call(ctxd, p.SESSION_OPEN, {"session": path}, timeout=ANSWER))["entries"] == 2


async def test_a_parent_cycle_is_reported_and_the_rest_served(ctxd: LanguageClient) -> None:
    root = Path(ctxd.root)  # type: ignore[attr-defined]
    a, b = chain(user, assistant)
    x, y = user(None, "x"), user(None, "y")
    x["parentId"], y["parentId"] = y["id"], x["id"]
    path = write_raw(root / "cycle.jsonl", line(a), line(b), line(x), line(y), hdr=header(id="sess-cycle"))
    for method, params in (
        (p.SESSION_OPEN, {"session": path}),
        (p.SESSION_TREE, {"session": path, "collapse": 0}),
        (p.CONTEXT_BUILD, {"session": path, "leafId": b["id"]}),
    ):
        answer = await call(ctxd, method, params, timeout=ANSWER)
        cycle = [d for d in answer["diagnostics"] if "cycle" in d["message"]]
        assert cycle and {d["line"] for d in cycle} <= {4, 5} and all(d["path"] == path for d in cycle), method
    ctx = await call(ctxd, p.CONTEXT_BUILD, {"session": path, "leafId": b["id"]}, timeout=ANSWER)
    assert [m["entryId"] for m in ctx["messages"]] == [a["id"], b["id"]]
    # A leaf inside the cycle still answers (the walk up cannot loop).
    assert "messages" in await call(ctxd, p.CONTEXT_BUILD, {"session": path, "leafId": x["id"]}, timeout=ANSWER)


BAD_APPENDS = [
    ({"entries": [{"type": "compaction", "summary": "s", "firstKeptEntryId": "x", "tokensBefore": "x"}]},
     "entries[0].tokensBefore"),
    ({"entries": [{"type": "custom", "id": "abcd0001", "parentId": "abcd0001"}]}, "entries[0].parentId"),
    ({"entries": [{"type": "custom", "id": "a\nb"}]}, "entries[0].id"),
    ({"entries": [{"type": "custom", "id": 42}]}, "entries[0].id"),
    ({"entries": [{"type": "message", "message": ["not", "an", "object"]}]}, "entries[0].message"),
    ({"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": [{"type": "text"}]}]},
     "messages[1].content[0].text"),
    ({"entries": [{"type": "custom"}], "messages": [{"content": "no role"}]}, "messages[0].role"),
]  # fmt: skip


@pytest.mark.parametrize(("params", "field"), BAD_APPENDS, ids=[f for _, f in BAD_APPENDS])
async def test_append_refuses_what_readers_cannot_take(
    ctxd: LanguageClient, params: dict[str, Any], field: str
) -> None:
    path = await new_session(ctxd, name="validated")
    size = os.path.getsize(path)
    error = await call_error(ctxd, p.SESSION_APPEND, {"session": path, **params})
    assert error.code == -31003 and error.data["field"] == field, (error.code, error.data)
    assert os.path.getsize(path) == size  # nothing of the batch was written
    tree = await call(ctxd, p.SESSION_TREE, {"session": path})
    assert tree["entries"] == 1 and tree["diagnostics"] == []
    assert [e["type"] for e in read_entries(path)] == ["session", "session_info"]


async def test_a_fifo_or_dev_zero_in_a_root_never_stalls_the_daemon(tmp_path: Path) -> None:
    root = tmp_path / "root"
    d = root / "--proj--"
    d.mkdir(parents=True)
    good = write_raw(d / "good.jsonl", *(line(e) for e in chain(user, assistant)))
    async with start_ctxd({"roots": [str(root)], "watch": True, "autoCompact": False}) as client:
        os.mkfifo(d / "fifo.jsonl")
        os.symlink("/dev/zero", d / "zero.jsonl")
        await asyncio.sleep(0.5)  # the watcher has seen both
        listed = await call(client, p.SESSION_LIST, {}, timeout=ANSWER)
        assert [Path(s["path"]).name for s in listed["sessions"]] == ["good.jsonl"]
        for name in ("fifo.jsonl", "zero.jsonl"):
            error = await call_error(client, p.SESSION_OPEN, {"session": str(d / name)})
            assert error.code in (-31010, -31001), (name, error.code, error.message)
        opened = await call(client, p.SESSION_OPEN, {"session": good}, timeout=ANSWER)
        assert opened["entries"] == 2  # still serving


async def test_directories_the_daemon_creates_are_private(tmp_path: Path) -> None:
    root = tmp_path / "not" / "yet" / "sessions"
    async with start_ctxd({"roots": [str(root)], "watch": False}) as client:
        created = await call(client, p.SESSION_CREATE, {"cwd": "/home/me/proj", "name": "private"})
    path = Path(created["path"])
    for d in (tmp_path / "not", tmp_path / "not" / "yet", root, path.parent):
        assert os.stat(d).st_mode & 0o777 == 0o700, d
    assert os.stat(path).st_mode & 0o777 == 0o600


async def test_session_check_reports_and_repairs_without_rewriting(ctxd: LanguageClient) -> None:
    root = Path(ctxd.root)  # type: ignore[attr-defined]
    a, b, c, d = chain(user, assistant, user, assistant)
    path = write_raw(root / "check.jsonl", line(a), line(b), line(c)[:30] + b"\n", line(d), b"\n")
    before = Path(path).read_bytes()
    report = await call(ctxd, p.SESSION_CHECK, {"session": path}, timeout=ANSWER)
    assert report["clean"] is False and report["repair"] is None
    assert report["counts"] == {"malformed": 1, "orphan": 1, "blank-line": 1}
    assert {(f["kind"], f["line"], f["entryId"]) for f in report["findings"]} == {
        ("malformed", 4, None),
        ("orphan", 5, d["id"]),
        ("blank-line", 6, None),
    }
    assert Path(path).read_bytes() == before

    mark = ctxd.notes.mark()  # type: ignore[attr-defined]
    fixed = await call(ctxd, p.SESSION_CHECK, {"session": path, "repair": True}, timeout=ANSWER)
    after = Path(path).read_bytes()
    assert after.startswith(before)  # only appended
    assert fixed["repair"]["leafTo"] == b["id"] and fixed["leafId"] == b["id"]
    (marker,) = fixed["repair"]["appended"]
    changed = await ctxd.notes.wait(p.DID_CHANGE, session=path, since=mark)  # type: ignore[attr-defined]
    assert changed["ids"] == [marker] and changed["leafId"] == b["id"] and changed["origin"] == "ctxd"
    assert os.stat(fixed["repair"]["copy"]).st_mode & 0o777 == 0o600
    opened = await call(ctxd, p.SESSION_OPEN, {"session": path})
    assert opened["leafId"] == b["id"]
    error = await call_error(ctxd, p.SESSION_CHECK, {"session": path, "repair": "yes"})
    assert error.code == -32602


async def test_a_line_of_unclosed_brackets_leaves_the_session_usable(ctxd: LanguageClient) -> None:
    """Issue 19, item 7: 100,000 ``[`` on one line is reported with its line; the rest is served."""
    root = Path(ctxd.root)  # type: ignore[attr-defined]
    a, b = chain(user, user)
    path = write_raw(root / "brackets.jsonl", line(a), b"[" * 100_000 + b"\n", line(b), hdr=header(id="sess-br"))
    opened = await call(ctxd, p.SESSION_OPEN, {"session": path}, timeout=ANSWER)
    assert opened["entries"] == 2 and lines_reported(opened["diagnostics"]) == {3}
    ctx = await call(ctxd, p.CONTEXT_BUILD, {"session": path}, timeout=ANSWER)
    assert [m["entryId"] for m in ctx["messages"]] == [a["id"], b["id"]]
