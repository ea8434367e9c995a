"""opencode sessions, read from a real opencode 1.18.33 database (made by running opencode against the fake
Chat Completions server: a bash call, then an auto-compaction), strictly read-only."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from ctxd.context.build import build_context
from ctxd.errors import ReadOnlySessionError, SessionError
from ctxd.formats.transcripts.opencode import OpencodeRows, map_opencode
from ctxd.store.opencode import OpencodeFile, default_databases, list_databases, read_session, session_path, split_ref
from ctxd.tree.session import Session

from .harness import LARGE, SUMMARY
from .rows import DATA, SESSION, add_turn, wal_copy


def digest(*paths: Path) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else "-" for p in paths]


def test_the_real_session_maps_messages_the_tool_call_and_the_compaction() -> None:
    t = map_opencode(read_session(str(DATA), SESSION))
    assert t.diagnostics == []
    assert t.header["id"] == SESSION and t.header["agent"] == "opencode" and t.header["title"] == "Hello with bash"
    assert t.header["opencodeVersion"] == "1.18.33" and t.header["cwd"].endswith("/work")
    shape = [(e["type"], e.get("message", {}).get("role") or e.get("customType")) for e in t.entries]
    assert shape == [
        ("message", "user"),
        ("message", "assistant"),
        ("message", "toolResult"),
        ("message", "assistant"),
        ("custom", "opencode.compaction-request"),
        ("compaction", None),
        ("message", "user"),
        ("message", "assistant"),
    ]
    user, call, result, answer, request, compaction, resumed, last = t.entries
    assert user["message"]["content"] == [{"type": "text", "text": '"Say hello using bash"'}]
    assert call["message"]["content"] == [
        {
            "type": "toolCall",
            "id": "call_bash_1",
            "name": "bash",
            "arguments": {"command": "echo hello-from-bash", "description": "Say hello"},
        }
    ]
    assert call["message"]["stopReason"] == "toolUse" and call["message"]["provider"] == "fake"
    assert result["message"]["toolCallId"] == "call_bash_1" and result["message"]["toolName"] == "bash"
    assert result["message"]["content"] == [{"type": "text", "text": "hello-from-bash\n"}]
    assert result["message"]["isError"] is False and result["parentId"] == call["id"]
    assert answer["message"]["usage"]["input"] == LARGE and answer["message"]["stopReason"] == "stop"
    assert request["data"] == {"auto": True, "overflow": False}
    assert compaction["summary"] == SUMMARY and compaction["firstKeptEntryId"] == compaction["id"]
    assert compaction["tokensBefore"] == LARGE + 20
    assert compaction["details"] == {"source": "opencode", "auto": True, "overflow": False}
    assert resumed["message"].get("opencodeSynthetic") is True
    assert resumed["message"].get("ctxdInjected") == "opencode.synthetic"  # opencode's words, not the user's
    assert last["message"]["content"] == [{"type": "text", "text": "Done (turn 3)."}]
    assert t.leaf_id == last["id"]
    assert [e["parentId"] for e in t.entries[1:]] == [e["id"] for e in t.entries[:-1]]


def test_the_context_after_the_compaction_is_the_summary_then_what_followed() -> None:
    before = digest(DATA)
    s = Session.open(session_path(str(DATA), SESSION))
    assert isinstance(s.file, OpencodeFile) and s.file.read_only and s.file.session_id == SESSION
    ctx = build_context(s.file, s.tree)
    ids = [m.entryId for m in ctx.messages]
    roles = [m.role for m in ctx.messages]
    # Nothing before the compaction is kept verbatim: the summary, then the turn after it.
    assert roles == ["compactionSummary", "user", "assistant"], roles
    assert ctx.messages[0].message["summary"] == SUMMARY
    assert ids[1:] == [s.file.heads[i].id for i in (6, 7)]
    assert "Done (turn 3)." in str(ctx.messages[-1].message["content"])
    with pytest.raises(ReadOnlySessionError):
        s.file.append([{"type": "message", "message": {"role": "user", "content": "x"}}])
    assert digest(DATA) == before


def test_listing_names_each_session_by_database_and_id() -> None:
    (row,) = list_databases([str(DATA)])
    assert row.path == session_path(str(DATA.resolve()), SESSION) and row.id == SESSION
    assert row.agent == "opencode" and row.readOnly and row.name == "Hello with bash"
    assert row.title == '"Say hello using bash"' and row.cwd.endswith("/work") and row.created.startswith("2026-")
    assert list_databases([str(DATA)], cwd="/elsewhere") == []
    assert split_ref(row.path) == (str(DATA.resolve()), SESSION)


def test_reading_sees_the_write_ahead_log_and_never_writes(tmp_path: Path) -> None:
    db, writer = wal_copy(tmp_path)
    try:
        s = Session.open(session_path(str(db), SESSION))
        count = len(s.file)
        add_turn(writer, SESSION, "and now in the WAL", "noted", 1795642400000)
        wal = Path(f"{db}-wal")
        assert wal.stat().st_size > 0  # the new rows are in the log, not yet in the database file
        before = digest(db, wal)
        result, new = s.refresh()
        assert not result.reloaded and len(new) == 2 and len(s.file) == count + 2
        texts = [s.file.entry(i)["message"]["content"][0]["text"] for i in new]
        assert texts == ["and now in the WAL", "noted"]
        assert s.leaf_id() == s.file.heads[len(s.file) - 1].id
        assert s.refresh()[0].added == range(count + 2, count + 2)  # nothing new: not even re-read
        assert digest(db, wal) == before
    finally:
        writer.close()


def test_a_missing_session_or_database_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match="no opencode session"):
        Session.open(session_path(str(DATA), "ses_nope"))
    not_db = tmp_path / "opencode.db"
    not_db.write_text("not sqlite")
    assert split_ref(f"{not_db}#ses_x") is None
    broken = tmp_path / "broken.db"
    shutil.copyfile(DATA, broken)
    with sqlite3.connect(broken) as conn:
        conn.execute("UPDATE part SET data = 'not json' WHERE data LIKE '%hello-from-bash%' AND data LIKE '%tool%'")
    t = map_opencode(read_session(str(broken), SESSION))
    assert any("not a JSON object" in reason for _, reason in t.diagnostics)
    assert [e["type"] for e in t.entries].count("compaction") == 1  # the rest is served


def test_errors_pending_calls_reasoning_and_two_steps_in_one_message() -> None:
    def part(message: str, n: int, data: dict[str, object]) -> tuple[str, str, str]:
        return (message, f"prt_{message}_{n}", json.dumps(data))

    tokens = {"total": 50, "input": 40, "output": 10, "cache": {"read": 0, "write": 0}}
    messages = [
        ("m1", 1, json.dumps({"role": "user", "time": {"created": 1795642339000}})),
        ("m2", 2, json.dumps({"role": "assistant", "providerID": "x", "modelID": "y", "tokens": tokens})),
        ("m3", 3, json.dumps({"role": "assistant", "error": {"name": "APIError", "data": {"message": "boom"}}})),
    ]
    failed = {"status": "error", "input": {"command": "false"}, "error": "exit 1"}
    parts = [
        part("m1", 1, {"type": "text", "text": "look"}),
        part("m1", 2, {"type": "file", "mime": "image/png", "url": "data:image/png;base64,AAAA", "filename": "a.png"}),
        part("m2", 1, {"type": "step-start"}),
        part("m2", 2, {"type": "reasoning", "text": "thinking it over"}),
        part("m2", 3, {"type": "tool", "tool": "bash", "callID": "c1", "state": failed}),
        part("m2", 4, {"type": "step-finish", "tokens": tokens}),
        part("m2", 5, {"type": "step-start"}),
        part("m2", 6, {"type": "tool", "tool": "read", "callID": "c2", "state": {"status": "running", "input": {}}}),
        part("m2", 7, {"type": "patch", "hash": "abc", "files": []}),
        part("m3", 1, {"type": "text", "text": "partial"}),
    ]
    t = map_opencode(OpencodeRows({"id": "ses_x", "directory": "/w", "time_created": 1}, messages, parts))
    assert t.diagnostics == []
    kinds = [(e["type"], e.get("message", {}).get("role") or e.get("customType")) for e in t.entries]
    assert kinds == [
        ("message", "user"),
        ("message", "assistant"),
        ("message", "toolResult"),
        ("message", "assistant"),
        ("custom", "opencode.patch"),
        ("message", "assistant"),
    ]
    user, step1, result, step2, _, broken = t.entries
    assert user["message"]["content"][1] == {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    assert step1["message"]["content"][0] == {"type": "thinking", "thinking": "thinking it over"}
    assert step1["message"]["usage"]["totalTokens"] == 50 and step1["message"]["stopReason"] == "toolUse"
    assert result["message"]["isError"] is True and result["message"]["content"][0]["text"] == "exit 1"
    assert step2["id"] == "m2~1" and step2["message"]["content"][0]["id"] == "c2"  # running: no result yet
    assert broken["message"]["stopReason"] == "error" and broken["message"]["errorMessage"] == "boom"


def test_the_databases_come_from_the_config_the_environment_or_opencodes_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxd.service.config import config_from_json, load_cli_config

    problems: list[str] = []
    assert config_from_json({"opencodeDatabases": [str(DATA)]}, problems).opencode_databases == [str(DATA)]
    config_from_json({"opencodeDatabases": "x.db"}, problems)
    assert len(problems) == 1
    assert problems[0].startswith('initializationOptions: opencodeDatabases: expected a list of paths, got "x.db"')
    env = {"CTXD_CONFIG": str(tmp_path / "none.json"), "CTXD_OPENCODE_DATABASES": f"{DATA}{os.pathsep}/b.db"}
    assert load_cli_config(environ=env)[0].opencode_databases == [str(DATA), "/b.db"]
    (tmp_path / "opencode").mkdir()
    shutil.copyfile(DATA, tmp_path / "opencode" / "opencode.db")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_databases() == [str(tmp_path / "opencode" / "opencode.db")]


def test_the_cli_reads_an_opencode_session_by_database_hash_id(tmp_path: Path) -> None:
    """`ctxd context` and `ctxd tree` take the `<db>#<id>` path the daemon and `ctxd search` give (main answered
    "no such session file"); an unknown id is a one-line error; the database is never written."""
    import subprocess
    import sys

    db = tmp_path / "opencode.db"
    shutil.copyfile(DATA, db)
    before = digest(db, Path(f"{db}-wal"))
    ref = session_path(str(db), SESSION)

    def ctxd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ctxd", *args], capture_output=True, text=True, timeout=60)

    done = ctxd("context", ref, "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    expected = build_context(Session.open(ref).file, Session.open(ref).tree).to_json()
    assert answer["messages"] == json.loads(json.dumps(expected["messages"]))
    assert answer["messages"] and answer["messages"][0]["role"] == "compactionSummary"
    tree = ctxd("tree", ref, "--json")
    assert tree.returncode == 0, tree.stderr
    assert json.loads(tree.stdout)["name"] == "Hello with bash"  # opencode's title, as session/open names it
    missing = ctxd("context", session_path(str(db), "ses_nope"), "--json")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1, missing.stderr
    assert digest(db, Path(f"{db}-wal")) == before
