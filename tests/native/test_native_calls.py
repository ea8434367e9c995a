"""A compaction plan takes the file operations of the messages it summarises from what the native scanner noted
of their tool calls (``ctxd.store.calls``), reading none of their lines, with the Python path's file lists; the
kept index keeps the notes, so a plan after a reopen reads none either; an append the scanner did not read is
read from its line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.factories import assistant, chain, tool_result, user, write
from native_paths import Paths, native_scan

from ctxd.compaction.cut import rows as plan_rows
from ctxd.compaction.cut.plan import plan_compaction
from ctxd.store.calls import NOTED, UNKNOWN
from ctxd.tree import session as session_module
from ctxd.tree.session import Session


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Paths:
    return Paths(monkeypatch, native_scan())


@pytest.fixture
def lines_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The entries whose lines plans read for their tool calls."""
    read: list[int] = []
    real = plan_rows.raw_lines

    def counted(reader: Any, indices: Any) -> list[bytes]:
        read.extend(indices)
        return real(reader, indices)

    monkeypatch.setattr(plan_rows, "raw_lines", counted)
    return read


def _session(tmp_path: Path, gen: Any) -> Path:
    path = tmp_path / "s.jsonl"
    gen.generate(path, 3000, seed=4, shape=gen.Shape(compact_at=900_000))
    return path


def _lists(s: Session) -> tuple[list[str], list[str]]:
    plan = plan_compaction(s, keep_recent_tokens=2000)
    return plan.readFiles, plan.modifiedFiles


def test_a_cold_plan_reads_no_line_for_the_calls_the_scanner_noted(
    tmp_path: Path, gen: Any, paths: Paths, lines_read: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXD_INDEX_CACHE", "0")
    path = _session(tmp_path, gen)
    native = paths.run(True, lambda: Session.open(str(path)))
    flags = native.file.noted_calls.flags
    assert flags.count(NOTED) > 500 and flags.count(UNKNOWN) < len(flags) // 10
    found = _lists(native)
    assert lines_read == []
    read, modified = found
    assert len(read) + len(modified) > 10
    assert paths.run(False, lambda: _lists(Session.open(str(path)))) == found


def test_the_kept_index_keeps_the_notes(
    tmp_path: Path, gen: Any, paths: Paths, lines_read: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(session_module, "INDEX_MIN_ENTRIES", 10)
    path = _session(tmp_path, gen)
    first = paths.run(True, lambda: Session.open(str(path)))
    noted = (bytes(first.file.noted_calls.flags), first.file.noted_calls.calls.tolist())
    assert noted[0].count(NOTED) > 500
    first.close()
    again = paths.run(True, lambda: Session.open(str(path)))
    assert again.file.restored is not None  # from the kept index
    assert (bytes(again.file.noted_calls.flags), again.file.noted_calls.calls.tolist()) == noted
    found = _lists(again)
    assert lines_read == []
    monkeypatch.setenv("CTXD_INDEX_CACHE", "0")
    assert paths.run(False, lambda: _lists(Session.open(str(path)))) == found


def test_a_line_whose_calls_the_scanner_did_not_note_is_read(
    tmp_path: Path, paths: Paths, lines_read: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line with more tool calls than the scanner lists (64) is estimated but not noted: a plan reads it."""
    monkeypatch.setenv("CTXD_INDEX_CACHE", "0")
    many = [(f"c{k}", "write", {"path": f"f{k}.txt", "content": "x"}) for k in range(65)]
    entries = chain(
        lambda p: user(p, "write the files"),
        lambda p: assistant(p, "", calls=many),
        lambda p: tool_result(p, "c0", "done", name="write"),
        lambda p: assistant(p, "done"),
        lambda p: user(p, "now something else " * 50),
        lambda p: assistant(p, "ok " * 200),
    )
    path = write(tmp_path / "s.jsonl", entries)
    s = paths.run(True, lambda: Session.open(path))
    flags = s.file.noted_calls.flags
    assert list(flags) == [1, 0, 1, 1, 1, 1]
    assert 1 in s.estimates  # estimated by the scanner: its row is made lazy, without calls
    plan = plan_compaction(s, keep_recent_tokens=10)
    assert lines_read == [1]
    assert plan.modifiedFiles == sorted(f"f{k}.txt" for k in range(65))
