"""Listings follow each file by its identity: a row equals a fresh summary whatever happened to the
file (appended lines, a partial last line, names, titles, truncation, replacement, rewrites,
transcripts), and an unchanged or grown file is not read again whole."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import attrs
from helpers.factories import header
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxd.store import listing, listing_cache
from ctxd.store.listing import list_sessions, summarize_file

OPS = st.lists(
    st.tuples(
        st.sampled_from(["user", "assistant", "name", "noname", "partial", "finish", "truncate", "replace", "rewrite"]),
        st.integers(0, 50),
    ),
    min_size=1,
    max_size=25,
)


def _line(kind: str, n: int, k: int) -> bytes:
    base = {"id": f"e{k:05d}", "parentId": None, "timestamp": "2026-01-01T00:00:00Z"}
    if kind == "user":
        entry = {**base, "type": "message", "message": {"role": "user", "content": f"ask {n} " * (n % 5)}}
    elif kind == "assistant":
        entry = {
            **base,
            "type": "message",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        }
    else:
        entry = {**base, "type": "session_info", "name": f"name {n}" if kind == "name" else ""}
    return json.dumps(entry, separators=(",", ":")).encode() + b"\n"


def _row(summary: listing.SessionSummary) -> dict[str, Any]:
    return attrs.asdict(summary)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_a_kept_row_equals_a_fresh_summary(tmp_path_factory: Any, ops: list[tuple[str, int]]) -> None:
    folder = tmp_path_factory.mktemp("listing")
    path = folder / "s.jsonl"
    path.write_bytes(json.dumps(header()).encode() + b"\n")
    cache = listing_cache.ListingCache()
    pending = b""
    for k, (op, n) in enumerate(ops):
        data = path.read_bytes()
        if op in ("user", "assistant", "name", "noname"):
            with open(path, "ab") as f:
                f.write(_line(op, n, k))
        elif op == "partial":  # a line still being written
            pending = _line("user", n, k)
            with open(path, "ab") as f:
                f.write(pending[: len(pending) // 2])
        elif op == "finish" and pending:
            with open(path, "ab") as f:
                f.write(pending[len(pending) // 2 :])
            pending = b""
        elif op == "truncate":
            cut = data.rfind(b"\n", 0, max(1, len(data) - 1 - n)) + 1
            if cut > data.find(b"\n") + 1:
                with open(path, "r+b") as f:
                    f.truncate(cut)
            pending = b""
        elif op == "replace":  # another file under the name (another inode), another header, grown
            spare = folder / "spare.jsonl"
            first = data.find(b"\n") + 1
            spare.write_bytes(json.dumps(header(cwd=f"/pr{n % 10}j")).encode() + b"\n" + data[first:])  # same length
            with open(spare, "ab") as f:
                f.write(_line("user", n, k))
            os.replace(spare, path)
            pending = b""
        elif op == "rewrite":  # the last name rewritten in place, then a line appended
            cache.summarize(str(path), "root", os.stat(path))
            with open(path, "ab") as f:
                f.write(_line("name", n, k))
            cache.summarize(str(path), "root", os.stat(path))
            data = path.read_bytes()
            i = data.rindex(b"name ") + 5
            with open(path, "r+b") as f:
                f.seek(i)
                f.write(b"Z")
                f.seek(0, 2)
                f.write(pending[len(pending) // 2 :] if pending else b"")
                f.write(_line("user", n, k + 1000))
            pending = b""
        kept = cache.summarize(str(path), "root", os.stat(path))
        assert _row(kept) == _row(summarize_file(str(path), "root")), (op, n)


def test_an_unchanged_or_grown_file_is_not_read_again(tmp_path: Path, monkeypatch: Any) -> None:
    root = tmp_path / "sessions"
    folder = root / "--proj--"
    folder.mkdir(parents=True)
    big = folder / "big.jsonl"
    with open(big, "wb") as f:
        f.write(json.dumps(header()).encode() + b"\n")
        for k in range(3000):
            f.write(_line("user" if k % 2 == 0 else "assistant", k, k))
    listing_cache.LISTINGS.forget()
    reads: list[str] = []
    original = listing.read_for_listing

    def counting(path: str) -> Any:
        reads.append(path)
        return original(path)

    monkeypatch.setattr(listing_cache, "read_for_listing", counting)
    first = list_sessions([str(root)])
    assert reads == [str(big)]
    again = list_sessions([str(root)])
    assert reads == [str(big)] and [_row(s) for s in again] == [_row(s) for s in first]
    end = big.stat().st_size
    with open(big, "ab") as f:
        f.write(_line("name", 7, 99999))
    grown = list_sessions([str(root)])
    assert reads == [str(big)]  # folded in from the end, not read again
    assert grown[0].name == "name 7" and grown[0].entries == first[0].entries + 1 and grown[0].size > end
    assert _row(grown[0]) == _row(summarize_file(str(big), str(root)))


def test_a_transcript_that_changed_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    line = {"type": "user", "sessionId": "abc", "cwd": "/p", "timestamp": "t", "message": {"content": "first ask"}}
    path.write_text(json.dumps(line) + "\n")
    cache = listing_cache.ListingCache()
    assert _row(cache.summarize(str(path), "", os.stat(path))) == _row(summarize_file(str(path)))
    with open(path, "a") as f:
        f.write(json.dumps({"type": "summary", "summary": "a name"}) + "\n")
    row = cache.summarize(str(path), "", os.stat(path))
    assert row.name == "a name" and _row(row) == _row(summarize_file(str(path)))


def test_ctxd_sessions_keeps_its_rows_between_runs(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "sessions" / "--p--"
    root.mkdir(parents=True)
    path = root / "s.jsonl"
    path.write_bytes(json.dumps(header()).encode() + b"\n" + _line("user", 3, 1))

    def run() -> tuple[list[dict[str, Any]], list[str]]:  # a new process: a new cache, loaded from disk
        monkeypatch.setattr(listing_cache, "LISTINGS", listing_cache.ListingCache())
        reads: list[str] = []
        original = listing.read_for_listing
        monkeypatch.setattr(listing_cache, "read_for_listing", lambda p: reads.append(p) or original(p))
        rows = [_row(s) for s in list_sessions([str(tmp_path / "sessions")], keep=True)]
        return rows, reads

    first, reads = run()
    assert reads == [str(path)]
    stored = tmp_path / "cache" / "ctxd" / "listing"
    assert stored.exists() and (stored.stat().st_mode & 0o777) == 0o600
    again, reads = run()
    assert again == first and reads == []  # nothing read: the kept row still describes the file
    with open(path, "ab") as f:
        f.write(_line("name", 4, 2))
    grown, reads = run()
    assert grown[0]["name"] == "name 4" and reads == []  # folded in from the kept end
    stored.write_bytes(b"\x00\x01garbage")
    damaged, reads = run()
    assert damaged == grown and reads == [str(path)]  # a damaged cache: read again


def test_rows_handed_out_are_copies(tmp_path: Path) -> None:
    """A listing changes its rows (archives are paired by appending to them): the kept row stays as read."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(json.dumps(header()).encode() + b"\n" + _line("user", 2, 1))
    cache = listing_cache.ListingCache()
    row = cache.summarize(str(path), "r", os.stat(path))
    row.archives.append("/elsewhere/copy.jsonl")
    row.path = "/changed"
    again = cache.summarize(str(path), "r", os.stat(path))
    assert again.archives == [] and again.path == str(path)


def test_a_rewrite_in_place_that_grows_is_read_again(tmp_path: Path) -> None:
    """Two lines near the start rewritten in place as one of the same length (the header line and
    the bytes before the old end unchanged), then a line appended: the row is read again, not
    folded in as an append (issue 19, item 2)."""
    path = tmp_path / "s.jsonl"
    with open(path, "wb") as f:
        f.write(json.dumps(header()).encode() + b"\n")
        for k in range(300):
            f.write(_line("user" if k % 2 == 0 else "assistant", k, k))
    cache = listing_cache.ListingCache()
    before = cache.summarize(str(path), "root", os.stat(path))
    assert before.entries == 300
    data = path.read_bytes()
    start = data.index(b"\n") + 1
    for _ in range(10):
        start = data.index(b"\n", start) + 1
    end = data.index(b"\n", data.index(b"\n", start) + 1)  # two lines, without the last newline
    merged = json.loads(_line("user", 3, 77777))
    merged["message"]["content"] = ""
    short = len(json.dumps(merged, separators=(",", ":")))
    merged["message"]["content"] = "z" * (end - start - short)
    one = json.dumps(merged, separators=(",", ":")).encode()
    assert len(one) == end - start
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(one)
        f.seek(0, 2)
        f.write(_line("name", 9, 88888))
    kept = cache.summarize(str(path), "root", os.stat(path))
    assert kept.entries == 300 and kept.name == "name 9"
    assert _row(kept) == _row(summarize_file(str(path), "root"))
