"""The history index on real files: incremental by file identity, invalidated by truncation and
replacement, rebuilt when its database is damaged, private on disk."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from conftest import LOCAL
from helpers.factories import assistant, chain, compaction, header, tool_result, user, write

from ctxd.history.index import HistoryIndex


def _session(root: Path, name: str = "s.jsonl", sid: str = "sess-1") -> tuple[Path, list[dict]]:
    entries = chain(
        lambda p: user(p, "Please measure the cold start of the loader"),
        lambda p: assistant(p, "Running the benchmark", calls=[("c1", "bash", {"command": "make bench"})]),
        lambda p: tool_result(p, "c1", "cold start: 418.7 ms over 25 runs", name="bash"),
        lambda p: assistant(p, "The loader starts in 418.7 ms."),
    )
    path = root / "proj" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    write(path, entries, header(id=sid))
    return path, entries


@pytest.fixture
def db(tmp_path: Path) -> HistoryIndex:
    index = HistoryIndex(str(tmp_path / "data" / "ctxd" / "history.sqlite3"))
    yield index
    index.close()


def test_indexes_messages_tool_results_and_summaries_with_role_line_and_tool(tmp_path: Path, db: HistoryIndex) -> None:
    root = tmp_path / "root"
    path, entries = _session(root)
    first = db.update([str(root)])
    assert (first.files, first.indexed, first.entries) == (1, 1, 4)
    hits = db.search("418.7")
    assert sorted(h.role for h in hits) == ["assistant", "toolResult"]
    by_role = {h.role: h for h in hits}
    assert by_role["toolResult"].entryId == entries[2]["id"]
    assert by_role["toolResult"].line == 4 and by_role["toolResult"].toolName == "bash"
    assert by_role["toolResult"].session == "sess-1" and by_role["toolResult"].path == str(path)
    assert "«418.7»" in by_role["toolResult"].snippet or "«418»" in by_role["toolResult"].snippet
    assert db.search("make bench")[0].role == "assistant"  # a tool call's arguments are text too
    # Unchanged: nothing is read again.
    again = db.update([str(root)])
    assert (again.indexed, again.entries) == (0, 0)


def test_an_appended_file_costs_its_new_lines(tmp_path: Path, db: HistoryIndex) -> None:
    root = tmp_path / "root"
    path, entries = _session(root)
    db.update([str(root)])
    more = compaction(entries[-1]["id"], entries[2]["id"], summary="Measured the loader; ZETA figure kept")
    with open(path, "a") as f:
        f.write(json.dumps(more) + "\n")
    grown = db.update([str(root)])
    assert (grown.indexed, grown.entries) == (1, 1)  # only the new line
    assert [h.role for h in db.search("ZETA")] == ["compactionSummary"]
    assert len(db.search("418.7")) == 2  # the earlier rows are still there, once


def test_truncation_and_replacement_reindex_the_file(tmp_path: Path, db: HistoryIndex) -> None:
    root = tmp_path / "root"
    path, _ = _session(root)
    db.update([str(root)])
    assert db.search("418.7")
    # Truncated to its first two lines (header and the request): the tool result is gone.
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join(lines[:2]) + b"\n")
    db.update([str(root)])
    assert db.search("418.7") == []
    assert [h.line for h in db.search("cold start")] == [2]
    # Replaced by another file (a new inode, same size or not): indexed from scratch.
    other = tmp_path / "other.jsonl"
    write(other, chain(lambda p: user(p, "Something else entirely: QUOKKA")), header(id="sess-2"))
    os.replace(other, path)
    db.update([str(root)])
    assert db.search("cold start") == []
    assert [h.session for h in db.search("QUOKKA")] == ["sess-2"]


def test_rewritten_in_place_with_the_same_size_is_reindexed(tmp_path: Path, db: HistoryIndex) -> None:
    root = tmp_path / "root"
    path, _ = _session(root)
    db.update([str(root)])
    data = path.read_bytes()
    path.write_bytes(data.replace(b"418.7", b"977.1"))  # same length, same inode, new mtime
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000))
    db.update([str(root)])
    assert db.search("418.7") == [] and len(db.search("977.1")) == 2


def test_a_deleted_file_leaves_the_index(tmp_path: Path, db: HistoryIndex) -> None:
    root = tmp_path / "root"
    path, _ = _session(root)
    db.update([str(root)])
    path.unlink()
    assert db.update([str(root)]).removed == 1
    assert db.search("418.7") == []


def test_a_corrupt_database_is_rebuilt(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _session(root)
    db_path = tmp_path / "data" / "ctxd" / "history.sqlite3"
    first = HistoryIndex(str(db_path))
    first.update([str(root)])
    first.close()
    for suffix in ("-wal", "-shm"):
        Path(str(db_path) + suffix).unlink(missing_ok=True)
    db_path.write_bytes(b"this is not a database, just garbage " * 200)
    index = HistoryIndex(str(db_path))
    assert index.search("418.7") == []  # opened, found damaged, made again: empty until indexed
    index.update([str(root)])
    assert len(index.search("418.7")) == 2
    index.close()


def test_damage_found_in_use_rebuilds_and_answers(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _session(root)
    db_path = tmp_path / "h.sqlite3"
    index = HistoryIndex(str(db_path))
    index.update([str(root)])
    index.close()
    # Garbage over the pages after the first (the header stays valid, the tables do not).
    with open(db_path, "r+b") as f:
        f.seek(4096)
        f.write(os.urandom(8192))
    for suffix in ("-wal", "-shm"):
        Path(str(db_path) + suffix).unlink(missing_ok=True)
    index = HistoryIndex(str(db_path))
    index.update([str(root)])
    assert len(index.search("418.7")) == 2
    index.close()


def test_database_and_folder_are_private(tmp_path: Path, db: HistoryIndex) -> None:
    root = tmp_path / "root"
    _session(root)
    db.update([str(root)])
    assert stat.S_IMODE(os.stat(db.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(db.path)).st_mode) == 0o700
    for suffix in ("-wal", "-shm"):
        if os.path.exists(db.path + suffix):
            assert stat.S_IMODE(os.stat(db.path + suffix).st_mode) == 0o600


def test_queries_that_are_not_fts5_are_searched_as_words(tmp_path: Path, db: HistoryIndex) -> None:
    root = tmp_path / "root"
    _session(root)
    db.update([str(root)])
    assert db.search('"cold start" OR nothing')  # FTS5 syntax works
    assert db.search("418.7 ms")  # "." is not FTS5 syntax: quoted words
    assert db.search("loader)") and db.search("role:user") == []
    assert db.search("   ") == []


def test_claude_and_codex_transcripts_and_session_filter(tmp_path: Path, db: HistoryIndex) -> None:
    root = tmp_path / "root"
    (root / "c").mkdir(parents=True)
    shutil.copy(LOCAL / "claude" / "session-624a4a58.jsonl", root / "c" / "a.jsonl")
    shutil.copy(LOCAL / "codex" / "rollout-tui-0.125.jsonl", root / "c" / "b.jsonl")
    _session(root)
    done = db.update([str(root)])
    assert done.indexed == 3 and done.entries > 10
    assert {h.agent for h in db.search("the OR loader", limit=200)} == {"claude", "codex", "pi"}
    only = db.search("opencode", session=str(root / "c" / "b.jsonl"))
    assert only and {h.agent for h in only} == {"codex"}
    assert all(h.session == "sess-1" for h in db.search("loader", session="sess-1"))


def test_appended_transcript_rewrites_its_last_entry_only(tmp_path: Path, db: HistoryIndex) -> None:
    root = tmp_path / "root"
    (root / "c").mkdir(parents=True)
    target = root / "c" / "t.jsonl"
    shutil.copy(LOCAL / "claude" / "incremental-turn-1.jsonl", target)
    db.update([str(root)])
    before = {(h.entryId, h.line) for h in db.search("the")}
    full = (LOCAL / "claude" / "incremental-turn-2.jsonl").read_bytes()
    start = target.read_bytes()
    assert full.startswith(start)
    with open(target, "ab") as f:
        f.write(full[len(start) :])
    grown = db.update([str(root)])
    assert grown.indexed == 1
    fresh = HistoryIndex(str(tmp_path / "fresh.sqlite3"))
    fresh.update([str(root)])
    # The incremental index holds exactly what indexing the grown file from scratch holds.
    for word in ("the", "file", "test"):
        assert sorted((h.entryId, h.line, h.role) for h in db.search(word, limit=500)) == sorted(
            (h.entryId, h.line, h.role) for h in fresh.search(word, limit=500)
        )
    fresh.close()
    assert before


def test_identifiers_paths_and_figures_are_found_as_written(tmp_path: Path, db: HistoryIndex) -> None:
    root = tmp_path / "root"
    path = root / "p" / "s.jsonl"
    path.parent.mkdir(parents=True)
    write(
        path,
        chain(
            lambda p: user(p, "The last CI run failed with ERR_ZETA_4711 from the config loader."),
            lambda p: user(p, "Zeta errors are rare; err on the side of 4711 retries."),
            lambda p: user(p, "Edit src/config/loader.py and keep vendor/ untouched."),
        ),
    )
    db.update([str(root)])
    assert [h.line for h in db.search("ERR_ZETA_4711")] == [2]  # a phrase, not three loose words
    assert [h.line for h in db.search("src/config/loader.py")] == [4]
    assert [h.line for h in db.search("vendor/")] == [4]
    assert {h.line for h in db.search("zeta OR loader")} == {2, 3, 4}


def test_without_fts5_the_error_says_what_to_do(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import sqlite3

    from ctxd.errors import HistoryUnavailableError
    from ctxd.history import db as history_db

    real = sqlite3.connect

    class NoFts5:
        def __init__(self, conn: sqlite3.Connection) -> None:
            self.conn = conn

        def execute(self, sql: str, *args: object) -> object:
            if "fts5" in sql:
                raise sqlite3.OperationalError("no such module: fts5")
            return self.conn.execute(sql, *args)

        def close(self) -> None:
            self.conn.close()

    monkeypatch.setattr(history_db.sqlite3, "connect", lambda *a, **k: NoFts5(real(*a, **k)))
    with pytest.raises(HistoryUnavailableError) as info:
        HistoryIndex(str(tmp_path / "h.sqlite3")).search("anything")
    assert "FTS5" in str(info.value) and "no such module: fts5" in str(info.value)
    assert info.value.code == -31030


def test_a_data_folder_that_cannot_be_made_is_a_clear_error(tmp_path: Path) -> None:
    from ctxd.errors import HistoryUnavailableError

    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(HistoryUnavailableError) as info:
        HistoryIndex(str(tmp_path / "file" / "ctxd" / "history.sqlite3")).search("anything")
    assert "cannot keep the history database at" in str(info.value) and info.value.code == -31030


def test_every_query_is_searched_fts5_as_written_or_as_plain_words(tmp_path: Path, db: HistoryIndex) -> None:
    """Issue 30: `fix the "parser`, `*` and `"` ended in an OperationalError (the fallback to plain words
    caught only some of SQLite's messages). Whatever FTS5 rejects is searched as the words it holds."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    root = tmp_path / "root"
    _session(root)
    db.update([str(root)])
    assert db.search('measure the "cold') and db.search('"cold start" "loader')  # an unmatched quote
    assert db.search("*") == [] and db.search('"') == [] and db.search("(") == []  # no word: nothing
    assert db.search("loader\x00") and db.search("benchmark (")  # a NUL; a word with no letters is no word
    syntax = st.sampled_from([*'"*()^:-+{},.\\', "AND", "OR", "NOT", "NEAR", " ", "loader", "\x00", "\ud800"])

    @settings(
        max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(query=st.text(max_size=40) | st.lists(syntax, max_size=12).map("".join))
    def searched(query: str) -> None:
        assert isinstance(db.search(query), list)

    searched()


def test_a_search_while_another_process_holds_the_database_is_a_clear_error(
    tmp_path: Path, db: HistoryIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never an internal error: a database another writer keeps locked past the busy timeout is -31030."""
    import sqlite3

    import ctxd.history.db as history_db
    from ctxd.errors import HistoryUnavailableError

    root = tmp_path / "root"
    _session(root)
    db.update([str(root)])
    monkeypatch.setattr(history_db, "BUSY_TIMEOUT_MS", 100)
    other = sqlite3.connect(db.path, isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")
        with pytest.raises(HistoryUnavailableError, match="cannot search the history index now"):
            HistoryIndex(db.path).search("loader")
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert HistoryIndex(db.path).search("loader")
