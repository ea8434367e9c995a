"""The persistent index: a reopened session equals a full read, reads only what was appended, and a
cache that no longer describes the file (truncated, replaced, rewritten, touched, corrupt, another
file's) is never used. Heads let go after the tree is built come back equal from their lines."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from helpers import broken
from helpers.factories import header

from ctxd.compaction.cut.plan import NothingToCompact, plan_compaction
from ctxd.context.build import build_context
from ctxd.context.live import live_context
from ctxd.store import index_cache, native, private
from ctxd.tree import session as session_module
from ctxd.tree.session import Session


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private cache directory; every file is cached and big files' heads let go."""
    home = tmp_path / "cache-home"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.setattr(session_module, "INDEX_MIN_ENTRIES", 10)
    monkeypatch.setattr(session_module, "RELEASE_AT", 10)
    return home


def full_read(path: str, monkeypatch: pytest.MonkeyPatch) -> Session:
    with monkeypatch.context() as m:
        m.setenv("CTXD_INDEX_CACHE", "0")
        return Session.open(path)


def snapshot(s: Session) -> dict[str, Any]:
    """Everything a session answers from its index, tree and contexts."""
    f, t = s.file, s.tree
    leaf = s.leaf_id()
    out: dict[str, Any] = {
        "heads": [h for h in f.heads],
        "offsets": list(f.offsets),
        "lengths": list(f.lengths),
        "lines": list(f.lines),
        "index": dict(f.index),
        "diagnostics": [d.to_json() for d in s.diagnostics()],
        "header": f.header,
        "end": f.end,
        "tree": {k: v for k, v in t.snapshot().items() if k != "arrays"},
        "arrays": [list(getattr(t, name)) for name in t._ARRAYS],
        "children": {k: list(v) for k, v in t.children.items()},
        "leaf": leaf,
        "context": build_context(f, t).to_json(),
    }
    ids = s.path_ids()
    if ids:
        out["earlier"] = build_context(f, t, ids[len(ids) // 2]).to_json()
    try:
        out["plan"] = plan_compaction(s, keep_recent_tokens=2000).to_json()
    except NothingToCompact as exc:
        out["plan"] = str(exc)
    return out


def test_reopen_equals_a_full_read_and_reads_only_what_was_appended(
    gen: Any, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    gen.generate(path, 1500, seed=5)
    first = Session.open(str(path))
    assert first.file.restored is None  # read whole, then kept
    cached = index_cache.cache_path(str(path))
    assert cached is not None and os.path.exists(cached)
    assert first.file.heads.released() > 1000  # heads let go once the tree was built
    expected = snapshot(full_read(str(path), monkeypatch))
    assert snapshot(first) == expected

    again = Session.open(str(path))
    assert again.file.restored is not None and again.file.restored[0] == 1500
    assert again.file.last_scan == (os.path.getsize(path), os.path.getsize(path))  # nothing read but the cache
    assert again.file.heads.released() == 1500
    assert snapshot(again) == expected

    # Another writer appends: the reopen reads the new bytes only.
    end = os.path.getsize(path)
    with open(path, "a", encoding="utf-8") as f:
        for k in range(5):
            parent = again.leaf_id() if k == 0 else f"ext{k - 1:05d}"
            entry = {"type": "message", "id": f"ext{k:05d}", "parentId": parent, "timestamp": "2026-01-01T00:00:00Z"}
            f.write(json.dumps({**entry, "message": {"role": "user", "content": f"more {k}"}}) + "\n")
    appended = Session.open(str(path))
    assert appended.file.restored is not None
    assert appended.file.last_scan == (end, os.path.getsize(path))
    assert appended.leaf_id() == "ext00004"
    assert snapshot(appended) == snapshot(full_read(str(path), monkeypatch))


def test_a_cache_that_no_longer_describes_the_file_is_not_used(
    gen: Any, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    gen.generate(path, 400, seed=6)
    original = path.read_bytes()

    def reopened() -> Session:
        s = Session.open(str(path))
        assert snapshot(s) == snapshot(full_read(str(path), monkeypatch))
        return s

    def primed() -> None:
        path.write_bytes(original)
        index_cache.forget(str(path))
        assert Session.open(str(path)).file.restored is None
        assert Session.open(str(path)).file.restored is not None

    # Truncated: fewer bytes than indexed.
    primed()
    lines = original.split(b"\n")
    with open(path, "r+b") as f:
        f.truncate(len(b"\n".join(lines[:-30])) + 1)
    assert reopened().file.restored is None
    # Replaced: another file (another inode) under the same name.
    primed()
    other = tmp_path / "other.jsonl"
    gen.generate(other, 420, seed=7)
    os.replace(other, path)
    assert reopened().file.restored is None
    # Rewritten in place, same size, one byte changed near the end.
    primed()
    data = bytearray(original)
    k = data.rindex(b'"content"')
    data[k + 1] = ord("C")
    with open(path, "r+b") as f:
        f.write(bytes(data))
    assert reopened().file.restored is None
    # The same bytes, written again (mtime moved): read again.
    primed()
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 10**9))
    assert reopened().file.restored is None
    # The header rewritten (another session id), same size.
    primed()
    data = bytearray(original)
    k = data.index(b'"id":"') + 6
    data[k] = ord("f") if data[k] != ord("f") else ord("e")
    with open(path, "r+b") as f:
        f.write(bytes(data))
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 10**9))
    assert reopened().file.restored is None


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "empty", "other-file", "format"])
def test_a_corrupt_cache_costs_a_full_read_never_a_wrong_answer(
    gen: Any, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    path = tmp_path / "s.jsonl"
    gen.generate(path, 300, seed=8)
    Session.open(str(path))
    cached = index_cache.cache_path(str(path))
    assert cached is not None
    data = bytearray(Path(cached).read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x40
    elif damage == "truncate":
        del data[len(data) // 3 :]
    elif damage == "garbage":
        data = bytearray(os.urandom(len(data)))
    elif damage == "empty":
        data = bytearray()
    elif damage == "other-file":  # another session's cache, copied under this name
        other = tmp_path / "other.jsonl"
        gen.generate(other, 300, seed=9)
        Session.open(str(other))
        other_cache = index_cache.cache_path(str(other))
        assert other_cache is not None
        data = bytearray(Path(other_cache).read_bytes())
    elif damage == "format":  # a well-formed cache of another format version
        saved = index_cache._read(str(path))
        assert saved is not None
        saved.format = 99
        payload = index_cache._encoder.encode(saved)
        data = bytearray(private.frame(payload, index_cache.MAGIC))
    Path(cached).write_bytes(bytes(data))
    s = Session.open(str(path))
    assert s.file.restored is None
    assert snapshot(s) == snapshot(full_read(str(path), monkeypatch))


def test_the_cache_is_private_and_kept_apart(
    gen: Any, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    path = folder / "s.jsonl"
    gen.generate(path, 200, seed=10)
    (cache / "ctxd").mkdir(parents=True)
    os.chmod(cache / "ctxd", 0o755)  # too open: made private
    Session.open(str(path))
    cached = index_cache.cache_path(str(path))
    assert cached is not None and cached.startswith(str(cache / "ctxd" / "index") + os.sep)
    assert stat.S_IMODE(os.stat(cache / "ctxd").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(cache / "ctxd" / "index").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(cached).st_mode) == 0o600
    assert sorted(os.listdir(folder)) == ["s.jsonl"]  # nothing next to the session
    # Off by configuration: nothing written, nothing read.
    monkeypatch.setenv("CTXD_INDEX_CACHE", "0")
    index_cache.forget(str(path))
    assert Session.open(str(path)).file.restored is None
    assert not os.path.exists(cached)
    # A relative XDG_CACHE_HOME is invalid (the XDG spec): no cache.
    monkeypatch.delenv("CTXD_INDEX_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert index_cache.cache_path(str(path), create=True) is None


def test_heads_let_go_come_back_from_odd_lines(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines a head cannot be decoded again from alone (two objects, pruned, invalid UTF-8) keep
    their heads; the others are decoded again from their lines, equal to a full read."""
    parent = None
    lines = []
    for k in range(30):
        entry = {
            "type": "message",
            "id": f"e{k:04d}",
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:00Z",
            "message": {"role": "user", "content": "caf" if k % 7 == 3 else f"hello {k}", "usage": {"input": "x"}},
        }
        if k % 7 == 1:
            lines.append(broken.line(entry)[:-1] + broken.line({**entry, "id": f"x{k:04d}"}))
        elif k % 7 == 3:
            lines.append(broken.non_utf8(entry))
        elif k % 7 == 5:
            lines.append(broken.nested(entry, 150))
        else:
            lines.append(broken.line(entry))
        parent = entry["id"]
    path = tmp_path / "odd.jsonl"
    path.write_bytes(json.dumps(header()).encode() + b"\n" + b"".join(lines))
    first = Session.open(str(path))
    assert first.file.heads.released() > 0
    expected = snapshot(full_read(str(path), monkeypatch))
    assert snapshot(first) == expected
    again = Session.open(str(path))
    assert again.file.restored is not None
    assert snapshot(again) == expected


def test_a_closed_session_keeps_what_it_learned(gen: Any, tmp_path: Path, cache: Path) -> None:
    path = tmp_path / "s.jsonl"
    gen.generate(path, 500, seed=11)
    s = Session.open(str(path))
    built = build_context(s.file, s.tree, estimates=s.estimates)
    s.append([{"type": "message", "message": {"role": "user", "content": "one more"}}])
    s.close()
    again = Session.open(str(path))
    assert again.file.restored is not None and again.file.restored[0] == len(s.file)
    assert again.file.last_scan[0] == again.file.last_scan[1]  # the append was kept too
    assert len(again.estimates) >= len(built.messages) - 1  # estimates come back with the index


def test_two_objects_on_a_line_the_first_of_an_unexpected_shape(tmp_path: Path) -> None:
    """Found by the test above: such a line made the whole file unreadable (a decode error escaped)."""
    first = {"type": "message", "id": "a1", "parentId": None, "message": {"role": "user", "content": "x", "usage": 5}}
    second = {"type": "message", "id": "a2", "parentId": "a1", "message": {"role": "user", "content": "y"}}
    path = tmp_path / "two.jsonl"
    path.write_bytes(broken.line(header()) + broken.line(first)[:-1] + broken.line(second))
    s = Session.open(str(path))
    assert s.path_ids() == ["a1", "a2"]
    assert [d.kind for d in s.file.diagnostics] == ["two-objects"]


def test_a_rewrite_in_place_that_grows_is_not_taken_for_an_append(
    gen: Any, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The header line and the last 8 KB before the indexed end unchanged, two lines of different
    lengths in the middle swapped (so every offset between them moves), and a line appended: the
    cache is not used (issue 19, item 2)."""
    path = tmp_path / "s.jsonl"
    gen.generate(path, 400, seed=8)
    original = path.read_bytes()
    assert Session.open(str(path)).file.restored is None
    assert Session.open(str(path)).file.restored is not None
    lines = original.split(b"\n")
    first = 40
    last = next(k for k in range(len(lines) - 60, 50, -1) if len(lines[k]) != len(lines[first]))
    assert len(b"\n".join(lines[last + 1 :])) > 8192
    lines[first], lines[last] = lines[last], lines[first]
    data = b"\n".join(lines)
    assert len(data) == len(original) and data[-8192:] == original[-8192:] and data != original
    entry = {
        "type": "custom",
        "customType": "x",
        "id": "appended",
        "parentId": None,
        "timestamp": "2026-01-01T00:00:00Z",
    }
    with open(path, "r+b") as f:
        f.write(data + json.dumps(entry).encode() + b"\n")
    s = Session.open(str(path))
    assert s.file.restored is None
    assert snapshot(s) == snapshot(full_read(str(path), monkeypatch))


def test_the_kept_index_holds_the_estimates_a_context_at_the_leaf_reads(
    gen: Any, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan estimates every message of a file; the index kept holds those from the leaf's last
    compaction's first kept entry on (what a context there reads), and a reopen builds the same context."""
    path = tmp_path / "s.jsonl"
    gen.generate(path, 1500, seed=5)
    first = Session.open(str(path))
    start = first._context_start()
    assert start > 0  # the generated shape compacts
    live_context(first).context()  # estimates the context's messages (the native scan did all of them)
    made = dict(first.estimates)
    if native.available():
        assert any(k < start for k in made)
    first.close()
    again = Session.open(str(path))
    assert again.file.restored is not None
    assert again.estimates and min(again.estimates) >= start
    assert all(made.get(k, v) == v for k, v in again.estimates.items())
    ctx = build_context(again.file, again.tree, estimates=again.estimates)
    want = full_read(str(path), monkeypatch)
    assert ctx == build_context(want.file, want.tree, estimates=want.estimates)
