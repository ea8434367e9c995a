"""ctxd's archive of an opencode session (ctxd/store/opencode_archive.py): the export of the real database's
session maps to the same tree and context as the live session; re-archiving is idempotent; a grown session
replaces the copy; rows opencode dropped are kept aside; files 0600, folders 0700; never a write to the db."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest

from ctxd.context.build import build_context
from ctxd.errors import SessionError
from ctxd.store.listing import summarize_file
from ctxd.store.opencode import session_path
from ctxd.store.opencode_archive import archive_opencode_session
from ctxd.store.opening import open_session_file
from ctxd.tree.session import Session
from opencode.rows import DATA, SESSION, add_turn


def copy_db(tmp_path: Path) -> Path:
    db = tmp_path / "opencode" / "opencode.db"
    db.parent.mkdir()
    shutil.copyfile(DATA, db)
    return db


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def entries(path: str) -> list[dict[str, object]]:
    f = open_session_file(path)
    return f.entries(range(len(f.heads)))


def test_the_archive_maps_to_the_same_tree_and_context_as_the_live_session(tmp_path: Path) -> None:
    db = copy_db(tmp_path)
    before = sha(db)
    done = archive_opencode_session(str(db), SESSION, str(tmp_path / "archive"))
    assert done.path == str(tmp_path / "archive" / "opencode" / "global" / f"{SESSION}.jsonl")
    assert done.copied == os.path.getsize(done.path) and done.rotated is None
    lines = [json.loads(line) for line in Path(done.path).read_text().splitlines()]
    assert lines[0]["type"] == "opencode.session" and lines[0]["row"]["id"] == SESSION
    assert {line["type"] for line in lines[1:]} == {"opencode.message", "opencode.part"}
    live = session_path(str(db), SESSION)
    assert entries(done.path) == entries(live) and len(entries(live)) == 8
    a, b = Session.open(live), Session.open(done.path)
    live_ctx = build_context(a.file, a.tree).to_json()
    archived_ctx = build_context(b.file, b.tree).to_json()
    assert archived_ctx == live_ctx
    assert [m["role"] for m in archived_ctx["messages"]] == ["compactionSummary", "user", "assistant"]
    listed = summarize_file(done.path)
    assert (listed.id, listed.agent, listed.readOnly, listed.name) == (SESSION, "opencode", True, "Hello with bash")
    assert listed.title == '"Say hello using bash"' and listed.entries == 22
    assert sha(db) == before


def test_archiving_again_changes_nothing_and_a_grown_session_replaces_the_copy(tmp_path: Path) -> None:
    db = copy_db(tmp_path)
    root = str(tmp_path / "archive")
    first = archive_opencode_session(str(db), SESSION, root)
    st = os.stat(first.path)
    again = archive_opencode_session(str(db), SESSION, root)
    assert again.copied == 0 and os.stat(first.path).st_ino == st.st_ino
    assert os.stat(first.path).st_mtime_ns == st.st_mtime_ns
    with sqlite3.connect(db) as writer:
        user_id, answer_id = add_turn(writer, SESSION, "one more thing", "done, archived", 1795642500000)
    grown = archive_opencode_session(str(db), SESSION, root)
    assert grown.copied == os.path.getsize(grown.path) > st.st_size and grown.rotated is None
    ids = [e["id"] for e in entries(grown.path)]
    assert ids[-2:] == [user_id, answer_id]
    assert not (Path(grown.path).parent / SESSION).exists()  # nothing kept aside: the copy only grew


def test_rows_opencode_dropped_stay_in_an_earlier_copy(tmp_path: Path) -> None:
    db = copy_db(tmp_path)
    root = str(tmp_path / "archive")
    first = archive_opencode_session(str(db), SESSION, root)
    old = Path(first.path).read_bytes()
    with sqlite3.connect(db) as writer:  # opencode's revert drops the messages after a point
        last = writer.execute(
            "SELECT id FROM message WHERE session_id = ? ORDER BY time_created DESC, id DESC LIMIT 1", (SESSION,)
        ).fetchone()[0]
        writer.execute("DELETE FROM part WHERE message_id = ?", (last,))
        writer.execute("DELETE FROM message WHERE id = ?", (last,))
    after = archive_opencode_session(str(db), SESSION, root)
    assert after.rotated is not None and Path(after.rotated).read_bytes() == old
    assert Path(after.rotated).parent == Path(root) / "opencode" / "global" / SESSION / "earlier"
    assert last not in Path(after.path).read_text()


def test_files_are_private_and_folders_too(tmp_path: Path) -> None:
    db = copy_db(tmp_path)
    root = tmp_path / "data" / "ctxd" / "archive"
    old = os.umask(0o022)
    try:
        done = archive_opencode_session(str(db), SESSION, str(root))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(done.path).st_mode) == 0o600
    folder = Path(done.path).parent
    for d in (folder, folder.parent, root):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    assert sorted(p.name for p in folder.iterdir()) == [".lock", f"{SESSION}.jsonl"]  # no temporary file left


def test_a_missing_session_archives_nothing_and_keeps_the_copy(tmp_path: Path) -> None:
    db = copy_db(tmp_path)
    root = str(tmp_path / "archive")
    done = archive_opencode_session(str(db), SESSION, root)
    kept = Path(done.path).read_bytes()
    with sqlite3.connect(db) as writer:
        writer.execute("PRAGMA foreign_keys=ON")
        writer.execute("DELETE FROM part WHERE session_id = ?", (SESSION,))
        writer.execute("DELETE FROM message WHERE session_id = ?", (SESSION,))
        writer.execute("DELETE FROM session WHERE id = ?", (SESSION,))
    with pytest.raises(SessionError, match="no opencode session"):
        archive_opencode_session(str(db), SESSION, root)
    assert Path(done.path).read_bytes() == kept
    assert len(entries(done.path)) == 8


def test_a_damaged_archive_line_is_reported_and_the_rest_served(tmp_path: Path) -> None:
    db = copy_db(tmp_path)
    done = archive_opencode_session(str(db), SESSION, str(tmp_path / "archive"))
    lines = Path(done.path).read_text().splitlines(keepends=True)
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text("".join([*lines[:3], "{not json\n", *lines[3:]]))
    f = open_session_file(str(damaged))
    assert [d.line for d in f.diagnostics] == [4]
    assert len(f.heads) == 8
