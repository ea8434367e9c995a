"""Bad session lines never make a session unusable: each is reported (file, line, reason, entry
id) and the rest of the session is served, by the store, the context and the CLI alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, reference
from helpers.broken import line, nested, non_utf8, write_raw
from helpers.factories import assistant, chain, tool_result, user

import ctxd.store.scan as scan
from ctxd.context.build import build_context
from ctxd.context.openai import to_openai
from ctxd.context.view import project
from ctxd.formats.depth import MAX_DEPTH, PLACEHOLDER, depth, prune
from ctxd.store.session_file import SessionFile
from ctxd.tree.session import Session


def deepest(value: Any) -> int:
    """Nesting depth of a decoded value, without recursion."""
    best = 0
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict | list):
            best = max(best, d)
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return best


def three(tmp_path: Path, middle: bytes, name: str = "s.jsonl") -> tuple[str, list[dict[str, Any]]]:
    """A file of three chained messages whose middle line is ``middle`` (made from entry 2)."""
    a, b, c = chain(user, assistant, user)
    return write_raw(tmp_path / name, line(a), middle, line(c)), [a, b, c]


def bad_middle(kind: str, b: dict[str, Any]) -> bytes:
    if kind == "deep-2000":
        return nested(b, 2000)
    if kind == "deep-400":
        return nested(b, 400)
    if kind == "non-utf8-head":  # inside a field the index itself reads
        b["message"]["model"] = "zmodel"
        return non_utf8(b, "zmodel")
    return non_utf8(b, "ok")


@pytest.mark.parametrize("kind", ["deep-2000", "deep-400", "non-utf8", "non-utf8-head"])
def test_a_bad_line_is_reported_and_the_session_served(tmp_path: Path, kind: str) -> None:
    a, b, c = chain(user, assistant, user)
    b["message"]["content"][0]["text"] = "ok"
    path = write_raw(tmp_path / "s.jsonl", line(a), bad_middle(kind, b), line(c))
    session = Session.open(path)
    assert [h.id for h in session.file.heads] == [a["id"], b["id"], c["id"]]  # the tree stays whole
    assert list(session.tree.parent) == [-1, 0, 1]
    ctx = build_context(session.file, session.tree, estimates=session.estimates)
    assert [m.entryId for m in ctx.messages] == [a["id"], b["id"], c["id"]]
    body = ctx.messages[1].message
    assert deepest(body) <= MAX_DEPTH
    json.dumps(ctx.to_json())  # everything handed out can be serialised, the wire's way too
    to_openai(ctx.agent_messages())
    rows, _ = project(session)
    assert len(rows) == 3
    found = [d for d in ctx.diagnostics if d["line"] == 3]
    assert found and found[0]["path"] == session.path and found[0]["entryId"] == b["id"]
    reason = found[0]["message"]
    assert ("nested deeper than 100 levels" in reason) if kind.startswith("deep") else ("UTF-8" in reason)
    if kind.startswith("deep"):
        assert PLACEHOLDER in json.dumps(session.file.entry(1))
    else:
        assert "\ufffd" in json.dumps(session.file.entry(1), ensure_ascii=False)
    assert [d.line for d in session.diagnostics()] == [3]  # reported once, however often read


def test_pruning_keeps_everything_down_to_the_limit() -> None:
    data = b'{"a":' + b"[" * 150 + b'"]]\\"x"' + b"]" * 150 + b',"b":{"c":[1,{"d":"}"}]}}'
    assert depth(data) == 151
    pruned = json.loads(prune(data))
    assert deepest(pruned) == MAX_DEPTH and pruned["b"] == {"c": [1, {"d": "}"}]}
    assert json.loads(prune(b'{"a":[[1]],"b":[2]}', 2)) == {"a": [PLACEHOLDER], "b": [2]}


def test_deep_values_in_tool_call_arguments_stay_countable(tmp_path: Path) -> None:
    a, b = chain(user, lambda p: assistant(p, calls=[("call_1", "read", {"x": 1})]))
    deep_call = line(b).replace(b'"x": 1', b'"x": ' + b"[" * 600 + b"]" * 600)
    path = write_raw(tmp_path / "s.jsonl", line(a), deep_call, line(tool_result(b["id"], "call_1")))
    session = Session.open(path)
    ctx = build_context(session.file, session.tree, estimates=session.estimates)
    assert len(ctx.messages) == 3 and ctx.messages[1].tokens > 0
    openai = to_openai(ctx.agent_messages())
    assert openai[1]["tool_calls"][0]["id"] == "call_1" and openai[2]["tool_call_id"] == "call_1"


def test_a_line_longer_than_the_cap_is_skipped_never_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan, "READ_CHUNK", 1 << 12)
    monkeypatch.setattr(scan, "MAX_LINE", 1 << 14)
    a, b, c = chain(user, assistant, user)
    b["message"]["content"][0]["text"] = "x" * 50_000
    path = write_raw(tmp_path / "s.jsonl", line(a), line(b), line(c))
    with open(path, "ab") as f:
        f.write(b'{"type":"message","id":"partial","text":"' + b"y" * 40_000)  # a long partial tail
    sf = SessionFile.open(path)
    assert [h.id for h in sf.heads] == [a["id"], c["id"]]
    assert [(d.line, d.severity) for d in sf.diagnostics] == [(3, "error")]
    assert "longer than" in sf.diagnostics[0].message
    assert sf.pending_bytes() > 40_000  # the partial long line is not consumed
    with open(path, "ab") as f:
        f.write(b'"}\n')
    sf.refresh()
    assert [d.line for d in sf.diagnostics] == [3, 5]


def test_missing_parents_self_parents_and_cycles_are_reported(tmp_path: Path) -> None:
    a, b = chain(user, assistant)
    orphan = user("nowhere1", "lost")
    selfish = user(None, "me")
    selfish["parentId"] = selfish["id"]
    x, y = user(None, "x"), user(None, "y")
    x["parentId"], y["parentId"] = y["id"], x["id"]
    path = write_raw(tmp_path / "s.jsonl", *(line(e) for e in (a, b, orphan, selfish, x, y)))
    session = Session.open(path)
    by_id = {d.entryId: d for d in session.diagnostics()}
    assert "does not exist" in by_id[orphan["id"]].message and by_id[orphan["id"]].line == 4
    assert "itself" in by_id[selfish["id"]].message and by_id[selfish["id"]].line == 5
    assert "cycle" in by_id[x["id"]].message and by_id[x["id"]].line == 6
    ctx = build_context(session.file, session.tree, b["id"], estimates=session.estimates)
    assert {d.get("entryId") for d in ctx.diagnostics} >= {orphan["id"], selfish["id"], x["id"]}
    assert [m.entryId for m in ctx.messages] == [a["id"], b["id"]]


def ctxd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxd", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )


@pytest.mark.parametrize("kind", ["deep-2000", "deep-400", "non-utf8"])
def test_the_cli_serves_a_session_with_a_bad_line(tmp_path: Path, kind: str) -> None:
    entries = chain(*[user, assistant] * 6)
    middle = bad_middle(kind, entries[3])
    path = write_raw(tmp_path / "s.jsonl", *(middle if i == 3 else line(e) for i, e in enumerate(entries)))
    # (A collapsed tree view does not read the bodies it hides: --all shows, so reads, every line.)
    for args in (
        ["tree", "--all", "--json"],
        ["context", "--json"],
        ["compact", "--dry-run", "--json", "--keep-recent-tokens", "1"],
    ):
        out = ctxd(args[0], path, *args[1:])
        assert out.returncode == 0 and "Traceback" not in out.stderr, (args, out.stderr[-2000:])
        data = json.loads(out.stdout)
        if args[0] != "compact":
            assert any(d["line"] == 5 for d in data["diagnostics"]), (args, data["diagnostics"])
    tree = ctxd("tree", path, "--all")
    assert tree.returncode == 0 and "! line 5:" in tree.stderr


def test_a_deep_line_in_another_agents_transcript_is_pruned_and_reported(tmp_path: Path) -> None:
    lines = reference("claude", "incremental-turn-1.jsonl").read_bytes().split(b"\n")
    user_line = next(k for k, raw in enumerate(lines) if b'"type":"user"' in raw)
    deep = b"[" * 400 + b"]" * 400
    lines[user_line] = lines[user_line].replace(b'"message":{', b'"message":{"deep":' + deep + b",", 1)
    path = tmp_path / "claude.jsonl"
    path.write_bytes(b"\n".join(lines))
    session = Session.open(str(path))
    assert session.file.read_only
    ctx = build_context(session.file, session.tree, estimates=session.estimates)
    assert ctx.messages and all(deepest(m.message) <= MAX_DEPTH for m in ctx.messages)
    json.dumps(ctx.to_json())
    assert any(d["line"] == user_line + 1 and "nested deeper" in d["message"] for d in ctx.diagnostics)


@pytest.mark.parametrize(
    "middle",
    [b"[" * 100_000, b'{"type":"custom","x":' + b"[" * 100_000, b"{" * 50_000 + b"[" * 50_000],
    ids=["brackets", "in-an-object", "mixed"],
)
def test_a_line_of_unclosed_brackets_is_reported_and_the_rest_served(tmp_path: Path, middle: bytes) -> None:
    """Issue 19, item 7: a line of 100,000 unclosed brackets is one malformed line, not a session
    that cannot be read (the store, then the CLI's context and check)."""
    a, c = chain(user, user)
    path = write_raw(tmp_path / "s.jsonl", line(a), middle + b"\n", line(c))
    session = Session.open(path)
    assert [h.id for h in session.file.heads] == [a["id"], c["id"]]
    found = [d for d in session.diagnostics() if d.line == 3]
    assert [d.kind for d in found] == ["malformed"] and "nested more than 100 levels" in found[0].message
    ctx = build_context(session.file, session.tree, estimates=session.estimates)
    assert [m.entryId for m in ctx.messages] == [a["id"], c["id"]]
    out = ctxd("context", path, "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout)
    assert [m["entryId"] for m in data["messages"]] == [a["id"], c["id"]]
    assert [d["line"] for d in data["diagnostics"]] == [3]
    check = ctxd("check", path)
    assert check.returncode == 1 and "line 3" in check.stdout and "Traceback" not in check.stderr
