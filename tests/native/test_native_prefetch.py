"""The native read-ahead (``ctxd._native.Prefetch``): a big file read and scanned on a native thread gives
exactly what the inline scan gives, and what the pure-Python path gives: the same entries, offsets,
line numbers, diagnostics (lines too long, malformed, two objects, duplicate ids, a torn last line) and
estimates, with chunks and line limits made small so that every edge is crossed many times.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

import ctxd.store.scan as scan_module
from ctxd.store import native
from ctxd.store.reader import SessionReader

pytestmark = pytest.mark.skipif(
    os.environ.get("CTXD_NATIVE", "1").strip() == "0", reason="CTXD_NATIVE=0: the native scanner is turned off"
)


@pytest.fixture(autouse=True)
def _require_native() -> None:
    assert native.available(), "ctxd._native is not built: install ctxd with a C compiler (pip install -e .)"


def _damaged(path: Path, seed: int) -> None:
    rng = random.Random(seed)
    lines = [json.dumps({"type": "session", "version": 3, "id": "S", "timestamp": "t", "cwd": "/"})]
    prev = None
    for i in range(2500):
        r = rng.random()
        if r < 0.01:
            lines.append('{"type":"message", broken')
        elif r < 0.015:
            size = rng.choice([5_000, 70_000, 200_000])
            lines.append(
                json.dumps({"type": "message", "id": f"x{i}", "message": {"role": "user", "content": "y" * size}})
            )
        elif r < 0.02:
            lines.append("")
        elif r < 0.025:
            lines.append(f'{{"type":"label","id":"l{i}","parentId":"a{i - 1}"}}{{"type":"label","id":"m{i}"}}')
        elif r < 0.03:
            lines.append(json.dumps({"type": "message", "id": "dup", "parentId": prev, "message": {"role": "user"}}))
        else:
            eid = f"a{i}"
            role = rng.choice(["user", "assistant", "toolResult"])
            text = "t\n\u00e9\U0001f600" * rng.randint(1, 800)
            lines.append(
                json.dumps(
                    {
                        "type": "message",
                        "id": eid,
                        "parentId": prev,
                        "message": {"role": role, "content": [{"type": "text", "text": text}]},
                    },
                    ensure_ascii=rng.random() < 0.5,
                )
            )
            prev = eid
    data = "\n".join(lines).encode() + b'\n{"type":"message","id":"torn"'
    path.write_bytes(data)


def _read(path: Path, monkeypatch: pytest.MonkeyPatch, *, ahead: bool, chunk: int, max_line: int) -> SessionReader:
    monkeypatch.setattr(scan_module, "READ_CHUNK", chunk)
    monkeypatch.setattr(scan_module, "MAX_LINE", max_line)
    monkeypatch.setattr(scan_module, "PREFETCH_MIN", 0 if ahead else 1 << 62)
    return SessionReader.open(str(path))


def _answers(r: SessionReader) -> dict[str, Any]:
    return {
        "heads": [r.heads[i] for i in range(len(r.heads))],
        "offsets": list(r.offsets),
        "lengths": list(r.lengths),
        "lines": list(r.lines),
        "index": dict(r.index),
        "diagnostics": [d.to_json() for d in r.diagnostics],
        "end": r.last_scan,
        "bodies": [r.entry(i) for i in range(0, len(r.heads), 97)],
    }


@pytest.mark.parametrize(
    ("chunk", "max_line"), [(1 << 20, 64 << 20), (16_384, 65_536), (4_096, 150_000), (8_192, 8_192)]
)
def test_read_ahead_gives_what_the_inline_and_python_scans_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int, max_line: int
) -> None:
    monkeypatch.setenv("CTXD_INDEX_CACHE", "0")
    path = tmp_path / "s.jsonl"
    _damaged(path, seed=chunk)
    used: list[int] = []
    real = native.prefetch

    def counted(*args: Any) -> Any:
        used.append(1)
        return real(*args)

    monkeypatch.setattr(native, "prefetch", counted)
    ahead = _read(path, monkeypatch, ahead=True, chunk=chunk, max_line=max_line)
    assert used, "the read-ahead was not used"
    inline = _read(path, monkeypatch, ahead=False, chunk=chunk, max_line=max_line)
    assert len(used) == 1
    monkeypatch.setattr(native, "_scan", None)
    monkeypatch.setattr(native, "_prefetch", None)
    python = _read(path, monkeypatch, ahead=True, chunk=chunk, max_line=max_line)
    want = _answers(python)
    assert _answers(ahead) == want
    assert _answers(inline) == want
    kinds = {d["kind"] for d in want["diagnostics"]}
    assert {"malformed", "two-objects", "duplicate-id"} <= kinds
    if max_line < 200_000:
        assert "too-long" in kinds
    # Estimates are made for the chunks the native scanner takes; where both have one, they agree.
    assert ahead.scan_estimates or inline.scan_estimates or chunk == 1 << 20
    for i, tokens in ahead.scan_estimates.items():
        assert inline.scan_estimates.get(i, tokens) == tokens


def test_a_clean_big_file_is_scanned_ahead_with_every_estimate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXD_INDEX_CACHE", "0")
    path = tmp_path / "clean.jsonl"
    rows = [json.dumps({"type": "session", "version": 3, "id": "S", "timestamp": "t", "cwd": "/"})]
    for i in range(3000):
        message = {"role": "user", "content": [{"type": "text", "text": "word " * (i % 50)}]}
        rows.append(
            json.dumps({"type": "message", "id": f"e{i}", "parentId": f"e{i - 1}" if i else None, "message": message})
        )
    path.write_text("\n".join(rows) + "\n")
    ahead = _read(path, monkeypatch, ahead=True, chunk=16_384, max_line=1 << 20)
    assert len(ahead.scan_estimates) == 3000
    assert ahead.scan_estimates[10] == (len("word " * 10) + 3) // 4
    monkeypatch.setattr(native, "_scan", None)
    python = _read(path, monkeypatch, ahead=True, chunk=16_384, max_line=1 << 20)
    assert _answers(ahead) == _answers(python)


def test_a_failure_while_indexing_stops_the_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error in the Python half ends the read-ahead (joined, not left running on a closed fd)."""
    monkeypatch.setenv("CTXD_INDEX_CACHE", "0")
    path = tmp_path / "s.jsonl"
    _damaged(path, seed=3)
    made: list[Any] = []
    real = native.prefetch

    def keep(*args: Any) -> Any:
        made.append(real(*args))
        return made[-1]

    monkeypatch.setattr(native, "prefetch", keep)
    calls = 0

    def boom(chunk: Any) -> bool:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise RuntimeError("indexing failed")
        return False

    fd = os.open(path, os.O_RDONLY)
    try:
        monkeypatch.setattr(scan_module, "READ_CHUNK", 8_192)
        monkeypatch.setattr(scan_module, "PREFETCH_MIN", 0)
        with pytest.raises(RuntimeError, match="indexing failed"):
            scan_module.scan(fd, 0, 1, str(path), lambda line: None, [], bulk=boom)
    finally:
        os.close(fd)
    assert len(made) == 1
    with pytest.raises(ValueError, match="closed"):
        made[0].next()


@pytest.mark.parametrize("number", ["1e309", "-1E+400", "1e999", "2.5e308"])
def test_a_number_msgspec_refuses_is_left_to_the_python_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, number: str
) -> None:
    """msgspec refuses a number out of a double's range when it decodes a body: the native scanner never
    takes such a line (it would mark it read clean), so it is read as it always was."""
    monkeypatch.setenv("CTXD_INDEX_CACHE", "0")
    header = json.dumps({"type": "session", "version": 3, "id": "S", "timestamp": "t", "cwd": "/"})
    good = json.dumps({"type": "message", "id": "a", "parentId": None, "message": {"role": "user", "content": "hi"}})
    odd = '{"type":"message","id":"b","parentId":"a","message":{"role":"user","content":"x","n":' + number + "}}"
    path = tmp_path / "n.jsonl"
    path.write_text(f"{header}\n{good}\n{odd}\n")
    line = odd.encode()
    assert native.scan_chunk(line + b"\n", len(line) + 1, 0) is None
    native_read = _read(path, monkeypatch, ahead=False, chunk=1 << 20, max_line=64 << 20)
    monkeypatch.setattr(native, "_scan", None)
    python_read = _read(path, monkeypatch, ahead=False, chunk=1 << 20, max_line=64 << 20)
    # Its body cannot be read: both say so the same way (and neither crashes).
    got = [native_read.entry(i) for i in range(len(native_read.heads))]
    want = [python_read.entry(i) for i in range(len(python_read.heads))]
    assert got == want
    assert _answers(native_read) == _answers(python_read)
    assert any(d["kind"] == "unreadable" for d in _answers(python_read)["diagnostics"])


@pytest.mark.parametrize("scanner", ["native", "python"])
def test_a_line_damaged_on_disk_after_it_was_read_is_served_repaired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scanner: str
) -> None:
    """A line noted clean (validated when indexed, or read once) and then damaged in place, unnoticed,
    is read again with care: served repaired with its diagnostic, never an exception."""
    monkeypatch.setenv("CTXD_INDEX_CACHE", "0")
    if scanner == "python":
        monkeypatch.setattr(native, "_scan", None)
    header = json.dumps({"type": "session", "version": 3, "id": "S", "timestamp": "t", "cwd": "/"})
    entry = json.dumps(
        {"type": "message", "id": "a", "parentId": None, "message": {"role": "user", "content": "hello"}}
    )
    path = tmp_path / "d.jsonl"
    path.write_text(f"{header}\n{entry}\n")
    reader = SessionReader.open(str(path))
    if scanner == "python":
        assert reader.entry(0)["message"]["content"] == "hello"  # read once: noted clean
    assert reader.body_checked(0)
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"hello"', b'"he\xff\xfeo"'))  # same size, in place
    body = reader.entry(0)
    assert body["message"]["content"] == "he\ufffd\ufffdo"
    assert [d.kind for d in reader.diagnostics] == ["bad-utf8"]


def test_a_big_read_keeps_no_scan_estimates_and_builds_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read of more than SCAN_ESTIMATES_BYTES (a big file's first read) keeps none of the scanner's
    estimates (a million would cost 120 MB); its context estimates its own path, to the same figures.
    Appended lines keep theirs."""
    from ctxd.context.live import live_context
    from ctxd.store import reader as reader_module
    from ctxd.tree.session import Session

    monkeypatch.setenv("CTXD_INDEX_CACHE", "0")
    header = json.dumps({"type": "session", "version": 3, "id": "S", "timestamp": "t", "cwd": "/"})
    rows = [header]
    for i in range(50):
        message = {"role": "user", "content": f"message {i} " * 20}
        rows.append(
            json.dumps({"type": "message", "id": f"e{i}", "parentId": f"e{i - 1}" if i else None, "message": message})
        )
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(rows) + "\n")
    want = live_context(Session.open(str(path))).context()
    monkeypatch.setattr(reader_module, "SCAN_ESTIMATES_BYTES", 1000)  # the file is 15 KB, the append 0.1
    big = Session.open(str(path))
    assert big.estimates == {} and big.file.clean_flags().count(1) == 50  # read clean, not estimated
    assert live_context(big).context() == want
    with open(path, "a") as f:
        message = {"role": "user", "content": "one more"}
        f.write(json.dumps({"type": "message", "id": "e50", "parentId": "e49", "message": message}) + "\n")
    big.refresh()
    assert 50 in big.estimates  # a small read (the appended line) keeps its estimate
