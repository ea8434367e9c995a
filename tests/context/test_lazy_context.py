"""Lazy messages (``ctxd.context.build.ContextMessage`` rows decoded on first read): they read as
``build_context``'s messages, and a file rewritten in place (or read again) after the answer was made
is a clear error, never the new bytes served as the old entry; a file only appended to still serves
them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.factories import assistant, bash, chain, tool_result, user, write

from ctxd.compaction.cut.plan import CompactionPlan, plan_compaction
from ctxd.context import live_rows as live_rows_module
from ctxd.context.build import Context, build_context
from ctxd.context.live import live_context
from ctxd.errors import SessionError
from ctxd.tree import session as session_module
from ctxd.tree.session import Session


def _session(tmp_path: Path) -> Path:
    entries = chain(
        lambda p: user(p, "aaaa first question"),
        lambda p: assistant(p, "thinking it over", calls=[("c1", "read", {"path": "src/a.py"})], total=900),
        lambda p: tool_result(p, "c1", "contents of a"),
        lambda p: assistant(p, "done with the first", total=1200),
        lambda p: user(p, "aaaa second question"),
        lambda p: assistant(p, "edited", calls=[("c2", "edit", {"path": "src/b.py"})], total=1500),
        lambda p: tool_result(p, "c2", "ok"),
        lambda p: user(p, "aaaa third question " + "x" * 400),
    )
    return Path(write(tmp_path / "s.jsonl", entries))


def _built(tmp_path: Path) -> tuple[Path, Session, Context, CompactionPlan]:
    """A session file, its session, its context and a compaction plan (none of their messages read)."""
    path = _session(tmp_path)
    session = Session.open(str(path))
    return path, session, live_context(session).context(), plan_compaction(session, keep_recent_tokens=10)


def _lazy(ctx_messages: list) -> list:  # type: ignore[type-arg]
    return [m for m in ctx_messages if not m.loaded]


def test_lazy_messages_read_as_build_contexts(tmp_path: Path) -> None:
    path = _session(tmp_path)
    session = Session.open(str(path))
    ctx = live_context(session).context()
    assert len(_lazy(ctx.messages)) == len(ctx.messages) == 8  # nothing decoded to build it
    fresh = build_context(session.file, session.tree)
    assert [m.message for m in ctx.messages] == [m.message for m in fresh.messages]
    assert ctx.to_json() == fresh.to_json()
    # Once read, the same dict each time (consumers compare by identity).
    assert ctx.messages[3].message is ctx.messages[3].message


def test_lines_the_scanner_left_to_python_build_lazily_too(tmp_path: Path) -> None:
    """A user's shell command (a line the native scanner does not estimate) among messages it did: the
    first build still decodes no message, and reads as a build from scratch."""
    entries = chain(
        lambda p: user(p, "run the tests"),
        lambda p: bash(p, command="pytest -q", output="3 passed\n" * 40),
        lambda p: assistant(p, "they pass", calls=[("c1", "read", {"path": "src/a.py"})], total=700),
        lambda p: tool_result(p, "c1", "contents of a"),
        lambda p: bash(p, command="git status", output="clean"),
        lambda p: user(p, "thanks"),
    )
    session = Session.open(write(tmp_path / "s.jsonl", entries))
    ctx = live_context(session).context()
    assert len(_lazy(ctx.messages)) == len(ctx.messages) == 6
    fresh = build_context(session.file, session.tree)
    assert ctx.to_json() == fresh.to_json()
    assert [m.message for m in ctx.messages] == [m.message for m in fresh.messages]


def test_a_file_rewritten_in_place_is_an_error_not_the_new_bytes(tmp_path: Path) -> None:
    path, session, ctx, plan = _built(tmp_path)
    data = path.read_bytes()
    assert data.count(b"aaaa") == 3
    path.write_bytes(data.replace(b"aaaa", b"bbbb"))  # same size, other content, in place
    with pytest.raises(SessionError, match="rewritten"):
        _ = ctx.messages[0].message
    with pytest.raises(SessionError, match="rewritten"):
        _ = plan.messagesToSummarize
    # Read again: the old answer stays an error; the new one has the new content.
    session.refresh()
    with pytest.raises(SessionError, match="read again"):
        _ = ctx.messages[4].message
    again = live_context(session).context()
    assert again.messages[0].message["content"] == "bbbb first question"


def test_a_rewrite_that_keeps_the_size_and_mtime_is_seen(tmp_path: Path) -> None:
    path = _session(tmp_path)
    session = Session.open(str(path))
    ctx = live_context(session).context()
    st = os.stat(path)
    path.write_bytes(path.read_bytes().replace(b"aaaa", b"cccc"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # ctime still moves
    with pytest.raises(SessionError):
        _ = ctx.agent_messages()


def test_a_file_only_appended_to_still_serves_the_answer(tmp_path: Path) -> None:
    path, session, ctx, plan = _built(tmp_path)
    leaf = session.leaf_id()
    with open(path, "a", encoding="utf-8") as f:  # another writer
        later = {"role": "user", "content": "later", "timestamp": 2}
        f.write(json.dumps({"type": "message", "id": "zz1", "parentId": leaf, "message": later}) + "\n")
    assert ctx.messages[0].message["content"] == "aaaa first question"
    assert [m["role"] for m in plan.messagesToSummarize][:2] == ["user", "assistant"]
    session.refresh()
    after = live_context(session).context()
    assert after.messages[-1].message["content"] == "later"
    assert [m.message for m in after.messages[:-1]] == [m.message for m in ctx.messages]


def test_plans_file_lists_equal_the_decoded_messages(tmp_path: Path) -> None:
    path = _session(tmp_path)
    session = Session.open(str(path))
    plan = plan_compaction(session, keep_recent_tokens=10)
    assert plan.readFiles == ["src/a.py"] and plan.modifiedFiles == ["src/b.py"]
    assert all(m.loaded is False for m in live_context(session).state.messages[:3])  # type: ignore[union-attr]
    assert plan.to_json()["messagesToSummarize"] == len(plan.messagesToSummarize)


def test_reopened_with_the_kept_index_no_line_is_read_to_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session built and closed once keeps its estimates and clean lines with its index: the next
    open builds its context without reading a message's line, and the messages still read right."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("CTXD_INDEX_CACHE", "1")
    monkeypatch.setattr(session_module, "INDEX_MIN_ENTRIES", 4)
    monkeypatch.setattr(session_module, "ESTIMATES_WORTH_SAVING", 4)
    path = _session(tmp_path)
    first = Session.open(str(path))
    expected = build_context(first.file, first.tree).to_json()
    live_context(first).context()
    first.close()

    def no_reading(*_: object, **__: object) -> list[int]:
        raise AssertionError("a line was read to estimate it")

    monkeypatch.setattr(live_rows_module, "fill_estimates", no_reading)
    again = Session.open(str(path))
    assert again.file.restored is not None
    ctx = live_context(again).context()
    assert len(_lazy(ctx.messages)) == 8
    assert ctx.to_json() == expected
