"""opencode's database sessions in the history index, on copies of a real opencode 1.18.33 database: found as
``<database>#<session id>``, incremental by the database's state token and each session's stamp, a deleted
session forgotten, ctxd's archived copy indexed and shown only where the database lacks the entry, and the
database never written."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from opencode.rows import SESSION, add_turn, clone_session, delete_session, wal_copy

from ctxd.history.index import HistoryIndex
from ctxd.service.history import _dedupe
from ctxd.store.opencode import session_path
from ctxd.store.opencode_archive import archive_opencode_session

CLONE = "ses_clone0000000000000000000"


@pytest.fixture
def index(tmp_path: Path) -> Iterator[HistoryIndex]:
    found = HistoryIndex(str(tmp_path / "data" / "history.sqlite3"))
    yield found
    found.close()


@pytest.fixture
def database(tmp_path: Path) -> Iterator[tuple[Path, sqlite3.Connection]]:
    db, writer = wal_copy(tmp_path / "opencode")
    yield db, writer
    writer.close()


@pytest.fixture
def two_sessions(database: tuple[Path, sqlite3.Connection]) -> tuple[Path, sqlite3.Connection]:
    """The real session and a copy of it (``CLONE``, "greetings-from-the-clone" for "hello-from-bash")."""
    clone_session(database[1], SESSION, CLONE, "hello-from-bash", "greetings-from-the-clone")
    return database


def reads(index: HistoryIndex) -> tuple[int, dict[str, int]]:
    """How often the index opened each database and read each session (kept in the index itself)."""
    conn = sqlite3.connect(index.path)
    try:
        (db_reads,) = conn.execute("SELECT sum(reads) FROM opencode_dbs").fetchone()
        sessions = dict(conn.execute("SELECT path, reads FROM opencode_sessions").fetchall())
    finally:
        conn.close()
    return int(db_reads or 0), sessions


def digest(*paths: Path) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else "-" for p in paths]


def test_a_session_is_found_as_database_hash_id_with_the_readers_entry_ids(
    index: HistoryIndex, database: tuple[Path, sqlite3.Connection]
) -> None:
    db, _ = database
    first = index.update_databases([str(db)])
    assert (first.files, first.indexed, first.skipped) == (1, 1, [])
    hits = index.search("hello-from-bash")
    path = session_path(str(db), SESSION)
    assert hits and {(h.path, h.session, h.agent, h.archived) for h in hits} == {(path, SESSION, "opencode", False)}
    result = next(h for h in hits if h.role == "toolResult")
    assert (result.entryId, result.line, result.toolName) == ("prt_2149fc87a001Bjgr76vw7Ya5ks", 2, "bash")
    assert {h.role for h in index.search("Goal")} == {"compactionSummary"}
    assert index.search("hello", session=SESSION) and index.search("hello", session=path)
    assert index.search("hello", session="ses_other") == []


def test_an_unchanged_database_is_not_opened_and_only_changed_sessions_are_read(
    index: HistoryIndex, two_sessions: tuple[Path, sqlite3.Connection]
) -> None:
    db, writer = two_sessions
    index.update_databases([str(db)])
    original, clone = session_path(str(db), SESSION), session_path(str(db), CLONE)
    assert reads(index) == (1, {original: 1, clone: 1})
    assert [h.path for h in index.search("greetings")] and {h.path for h in index.search("greetings")} == {clone}

    again = index.update_databases([str(db)])
    assert (again.files, again.indexed) == (2, 0) and reads(index) == (1, {original: 1, clone: 1})

    add_turn(writer, SESSION, "Now count the zebras in the yard", "Seven zebras.", 1795642500000)
    grown = index.update_databases([str(db)])
    assert (grown.indexed, grown.entries) == (1, 9)
    assert reads(index) == (2, {original: 2, clone: 1})  # the clone's stamp did not move: not read again
    (hit,) = index.search("zebras yard")
    assert (hit.path, hit.entryId, hit.line, hit.role) == (original, "msg_zz1795642500000user", 8, "user")


def test_a_deleted_session_and_a_vanished_database_leave_the_index(
    index: HistoryIndex, two_sessions: tuple[Path, sqlite3.Connection]
) -> None:
    db, writer = two_sessions
    index.update_databases([str(db)])
    delete_session(writer, CLONE)
    gone = index.update_databases([str(db)])
    assert gone.removed == 1 and index.search("greetings") == [] and index.search("hello-from-bash")
    # A pass over session roots never forgets a database's sessions (they are no files).
    index.update([str(db.parent)])
    assert index.search("hello-from-bash")
    writer.close()
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    assert index.update_databases([str(db)]).removed == 1 and index.search("hello-from-bash") == []


def test_reading_never_writes_the_database(index: HistoryIndex, database: tuple[Path, sqlite3.Connection]) -> None:
    db, writer = database
    add_turn(writer, SESSION, "a turn in the write-ahead log", "ok", 1795642500000)
    wal = Path(str(db) + "-wal")
    before = digest(db, wal)
    index.update_databases([str(db)])
    assert index.search("write-ahead")  # read from the WAL, which the writer never checkpointed
    assert digest(db, wal) == before


def test_the_archived_copy_is_indexed_and_shown_only_where_the_database_lacks_the_entry(
    tmp_path: Path, index: HistoryIndex, database: tuple[Path, sqlite3.Connection]
) -> None:
    db, writer = database
    archive = tmp_path / "archive"
    copy = archive_opencode_session(str(db), SESSION, str(archive)).path
    index.update([], [str(archive)])
    index.update_databases([str(db)])
    hits = index.search("hello-from-bash", limit=100)
    assert {h.archived for h in hits} == {False, True}
    assert {h.path for h in hits if h.archived} == {copy}
    shown = _dedupe(hits)
    assert shown and not any(h.archived for h in shown)  # each entry once, from the live database
    # opencode deleted the session: its archived copy is what the search finds now.
    delete_session(writer, SESSION)
    index.update_databases([str(db)])
    shown = _dedupe(index.search("hello-from-bash", limit=100))
    assert shown and all(h.archived and h.path == copy and h.session == SESSION for h in shown)


def test_damage_found_while_indexing_a_database_rebuilds_the_index(
    tmp_path: Path, database: tuple[Path, sqlite3.Connection]
) -> None:
    db, _ = database
    history = tmp_path / "h.sqlite3"
    index = HistoryIndex(str(history))
    index.update_databases([str(db)])
    index.close()
    with open(history, "r+b") as f:  # garbage over the pages after the first: the header stays valid
        f.seek(4096)
        f.write(os.urandom(16384))
    for suffix in ("-wal", "-shm"):
        Path(str(history) + suffix).unlink(missing_ok=True)
    index = HistoryIndex(str(history))
    try:
        assert index.update_databases([str(db)]).indexed == 1  # the token went with the old file: read again
        assert index.search("hello-from-bash")
    finally:
        index.close()


def test_an_index_of_schema_1_is_made_again(tmp_path: Path, database: tuple[Path, sqlite3.Connection]) -> None:
    """Schema 1 remembered ctxd's archived opencode copies without indexing them: such an index starts over."""
    db, _ = database
    history = tmp_path / "h.sqlite3"
    index = HistoryIndex(str(history))
    index.update_databases([str(db)])
    index.close()
    conn = sqlite3.connect(history)
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    index = HistoryIndex(str(history))
    try:
        assert index.search("hello-from-bash") == [] and reads(index) == (0, {})
    finally:
        index.close()
