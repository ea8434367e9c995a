"""The tail rule (ctxd.store.tail): a partial final line may belong to a live writer that takes no
lock, so ctxd waits for it, never writes after it, and never moves or truncates it.

The other writer here is a thread appending the way pi does (its own O_APPEND descriptor, no lock),
timed to land in the moments that matter; tests/store/test_store_faults.py runs real processes at speed.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.factories import assistant, chain, user, write

import ctxd.store.session_file as session_file
from ctxd.store.session_file import Durability, SessionFile


def pi_line(parent: str | None, text: str, eid: str) -> bytes:
    entry = user(parent, text)
    entry["id"] = eid
    return json.dumps(entry, separators=(",", ":")).encode() + b"\n"


def append_raw(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def later(delay: float, fn: Any, *args: Any) -> threading.Thread:
    t = threading.Thread(target=lambda: (time.sleep(delay), fn(*args)))
    t.start()
    return t


def parsed_lines(path: str) -> list[dict[str, Any]]:
    data = Path(path).read_bytes()
    assert data.endswith(b"\n")
    lines = data.split(b"\n")[:-1]
    assert all(lines), "a blank line"
    return [json.loads(x) for x in lines]


def test_append_waits_for_a_live_writer_to_finish_its_line(tmp_path: Path) -> None:
    entries = chain(user, assistant)
    path = write(tmp_path / "s.jsonl", entries)
    line = pi_line(entries[-1]["id"], "x" * 5000, "pi000001")
    append_raw(path, line[:3000])  # half a line, as a reader can see a large write mid-copy
    sf = SessionFile.open(path, tail_grace=5.0)
    t = later(0.2, append_raw, path, line[3000:])
    started = time.monotonic()
    (new,) = sf.append([{"type": "custom"}])
    waited = time.monotonic() - started
    t.join()
    assert 0.15 < waited < 2.0  # it waited for the writer, not for the grace period
    objects = parsed_lines(path)
    assert [o["id"] for o in objects[1:]] == [entries[0]["id"], entries[1]["id"], "pi000001", new]
    assert objects[-1]["parentId"] == "pi000001"  # the line it waited for was read: it is the leaf
    assert not os.path.exists(path + ".torn")
    assert [d for d in sf.diagnostics if d.severity != "info"] == []


def test_a_tail_that_keeps_growing_is_never_set_aside(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", chain(user))
    line = pi_line(None, "y" * 900, "pi000002")
    append_raw(path, line[:100])
    sf = SessionFile.open(path, tail_grace=0.25)

    def trickle() -> None:  # a slow writer: a piece every 0.1 s for a second, each gap < the grace
        for k in range(100, len(line), 80):
            time.sleep(0.1)
            append_raw(path, line[k : k + 80])

    t = later(0.0, trickle)
    (new,) = sf.append([{"type": "custom"}])
    t.join()
    assert [o["id"] for o in parsed_lines(path)[2:]] == ["pi000002", new]
    assert not os.path.exists(path + ".torn")


def test_a_whole_object_waiting_for_its_newline_is_not_completed_by_ctxd(tmp_path: Path) -> None:
    # A writer that writes its object and its newline separately: completing the object for it
    # (what ctxd used to do at once) turned its own newline into a blank line.
    path = write(tmp_path / "s.jsonl", chain(user))
    line = pi_line(None, "z", "pi000003")
    append_raw(path, line[:-1])
    sf = SessionFile.open(path, tail_grace=5.0)
    t = later(0.1, append_raw, path, b"\n")
    (new,) = sf.append([{"type": "custom"}])
    t.join()
    assert [o["id"] for o in parsed_lines(path)[2:]] == ["pi000003", new]


@pytest.mark.parametrize("mode", [Durability.FLUSH, Durability.FSYNC])
def test_a_batch_glued_onto_a_line_started_in_the_last_microseconds_is_healed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: Durability
) -> None:
    """Rule 4: a writer that writes one line in two pieces starts it between ctxd's last check and
    its write (forced here).  ctxd appends that writer's line again whole and its own hidden entry;
    every entry is then served exactly once, and the glued pieces are reported malformed lines."""
    entries = chain(user, assistant)
    path = write(tmp_path / "s.jsonl", entries)
    line = pi_line(entries[-1]["id"], "w" * 2000, "pi000004")
    real_write_all = session_file.write_all
    raced: list[threading.Thread] = []

    def racing_write_all(fd: int, data: bytes) -> None:
        if not raced:
            append_raw(path, line[:700])  # the other writer's first piece lands first
            raced.append(later(0.05, append_raw, path, line[700:]))  # ... and its second after ours
        real_write_all(fd, data)

    monkeypatch.setattr(session_file, "write_all", racing_write_all)
    sf = SessionFile.open(path, tail_grace=2.0, durability=mode)
    ids = sf.append([{"type": "custom", "data": k} for k in range(3)])
    raced[0].join()
    served = SessionFile.open(path)
    wanted = [entries[0]["id"], entries[1]["id"], *ids, "pi000004"]
    assert sorted(h.id for h in served.heads) == sorted(wanted)  # every entry exactly once
    assert served.entry_by_id("pi000004") == json.loads(line)  # the other writer's line, whole
    assert len([d for d in served.diagnostics if "malformed" in d.message]) == 2  # the two pieces
    assert any("landed inside another writer's line" in d.message for d in sf.diagnostics)
    assert b"\n\n" not in Path(path).read_bytes()


def test_a_line_that_never_ends_fails_the_append_instead_of_writing_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctxd.store.tail as tail
    from ctxd.errors import SessionError

    monkeypatch.setattr(tail, "MAX_WAIT", 0.3)
    path = write(tmp_path / "s.jsonl", chain(user))
    append_raw(path, b'{"type":"message","id":"endless","pad":"')
    stop = threading.Event()

    def forever() -> None:  # a writer that keeps adding to one line and never ends it
        while not stop.is_set():
            append_raw(path, b"x" * 10)
            time.sleep(0.02)

    t = later(0.0, forever)
    try:
        sf = SessionFile.open(path, tail_grace=0.1)
        with pytest.raises(SessionError, match="kept growing"):
            sf.append([{"type": "custom"}])
    finally:
        stop.set()
        t.join()
    assert b'"custom"' not in Path(path).read_bytes()


def test_a_line_written_while_ctxd_notes_its_own_append_is_read_not_set_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30's blank line, forced: an unlocked writer's whole line lands after ctxd's append was
    checked to be the last thing in the file and before ctxd notes the file as read (the moment a
    loaded machine stretches). The line is read by the next refresh, and the next append writes after
    it: ctxd used to note the file's stat after that line, take the line for a tail that never
    changed, and after the grace period end it with a newline of its own: a blank line."""
    entries = chain(user, assistant)
    path = write(tmp_path / "s.jsonl", entries)
    line = pi_line(entries[-1]["id"], "v" * 300, "pi000005")
    real_index_own = SessionFile._index_own
    raced: list[bool] = []

    def racing_index_own(self: SessionFile, *args: Any) -> None:
        if not raced:
            raced.append(True)
            append_raw(path, line)  # the other writer's whole line, one write(), just after ours
        real_index_own(self, *args)

    monkeypatch.setattr(SessionFile, "_index_own", racing_index_own)
    sf = SessionFile.open(path, tail_grace=0.05)
    (first,) = sf.append([{"type": "custom", "data": 1}])
    assert raced
    assert "pi000005" in sf.index or list(sf.refresh().added), "the other writer's line is never read"
    assert "pi000005" in sf.index
    (second,) = sf.append([{"type": "custom", "data": 2}])
    objects = parsed_lines(path)  # no blank line
    assert [o["id"] for o in objects[3:]] == [first, "pi000005", second]
    assert not [d for d in sf.diagnostics if d.kind in ("completed", "torn")]


def test_complete_lines_the_reader_missed_are_read_again_never_ended_twice(tmp_path: Path) -> None:
    """Whatever the reader believes (here a note of the file that vouches for a line it never read),
    ctxd never ends a tail that holds a newline: it reads the file again, and writes after it."""
    from ctxd.store.private import FileMark

    path = write(tmp_path / "s.jsonl", chain(user))
    sf = SessionFile.open(path, tail_grace=0.05)
    append_raw(path, pi_line(None, "u", "pi000006"))
    fd = os.open(path, os.O_RDONLY)
    try:
        sf.mark = FileMark.take(fd, os.fstat(fd), sf.end)  # wrong: it counts the line as read
    finally:
        os.close(fd)
    (new,) = sf.append([{"type": "custom"}])
    assert [o["id"] for o in parsed_lines(path)[2:]] == ["pi000006", new]
    assert "pi000006" in sf.index


def test_a_pause_after_reading_the_tail_is_not_taken_for_a_tail_standing_still(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grace period counts from the end of the read that first saw the tail to the start of the
    read that sees it again. Here this thread pauses for 10 s right after its second look (a loaded
    machine), and the other writer finishes its line meanwhile: the tail did not stand still for the
    grace period, and no copy of a live writer's line goes to the ``.torn`` sidecar (ctxd used to
    read the clock after the look, take the tail for torn, and copy it before noticing the change)."""
    import ctxd.store.tail as tail

    path = write(tmp_path / "s.jsonl", chain(user))
    line = pi_line(None, "t" * 4000, "pi000007")
    append_raw(path, line[:1000])  # a large write seen half copied
    offset = [0.0]
    reads = [0]
    real_fingerprint = tail._fingerprint

    def fingerprint_then_pause(rfd: int, start: int, size: int) -> bytes:
        found = real_fingerprint(rfd, start, size)
        reads[0] += 1
        if reads[0] == 2:
            offset[0] += 10.0  # this thread does not run for 10 s right after its second look,
            append_raw(path, line[1000:])  # and the writer finishes its line meanwhile
        return found

    class Clock:
        @staticmethod
        def monotonic() -> float:
            return time.monotonic() + offset[0]

        sleep = staticmethod(time.sleep)

    monkeypatch.setattr(tail, "_fingerprint", fingerprint_then_pause)
    monkeypatch.setattr(tail, "time", Clock)
    sf = SessionFile.open(path, tail_grace=1.0)
    (new,) = sf.append([{"type": "custom"}])
    assert reads[0] >= 2
    assert [o["id"] for o in parsed_lines(path)[2:]] == ["pi000007", new]
    assert not os.path.exists(path + ".torn"), "a live writer's line was copied as torn"
    assert not [d for d in sf.diagnostics if d.kind in ("completed", "torn", "resumed")]
