"""Whole sessions read through the native scanner answer exactly as through the Python path.

Each file is opened with ``Session.open`` on both paths (``ctxd.store.native._scan`` switched off for
the Python one) and everything is compared: every head (read back through the reader where a big
file let them go), offsets, lengths, lines, the id index, diagnostics, the context (each message's
role, entry, line, tokens and body; its token counts) and compaction plans; every token estimate the
session holds after a build equals the dict path's. Files: tests/data, the shared reference sessions,
the conformance scenarios, bench/gen.py sessions, and damaged files whose bad lines share 1 MB chunks
with good ones; also appends read by refresh (a torn line, then completed), the persistent index kept
and reopened, and old format versions.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import LOCAL, SHARED
from helpers import broken
from helpers.factories import header
from native_paths import Paths, check_estimates, native_scan, observe, outcome, same

from ctxd.formats.codec import decode_head
from ctxd.formats.depth import MAX_DEPTH, depth
from ctxd.tree import session as session_module
from ctxd.tree.session import Session

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "conformance"))
from pi_scenarios import SCENARIOS  # type: ignore[import-not-found]  # noqa: E402


class Counting:
    """The extension's scan_chunk, counting the chunks it takes and declines."""

    def __init__(self, scan: Callable[..., Any]) -> None:
        self.scan = scan
        self.taken = 0
        self.declined = 0

    def __call__(self, *args: Any) -> Any:
        found = self.scan(*args)
        if found is None:
            self.declined += 1
        else:
            self.taken += 1
        return found


@pytest.fixture
def counting() -> Counting:
    return Counting(native_scan())


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch, counting: Counting) -> Paths:
    """Both paths, with the persistent index off (a second open must read the file again)."""
    monkeypatch.setenv("CTXD_INDEX_CACHE", "0")
    monkeypatch.setattr(session_module, "RELEASE_AT", 10)  # heads let go: read back from lines
    return Paths(monkeypatch, counting)


def read_alike(paths: Paths, path: str | Path, keep: tuple[int, ...] = (2000, 20000)) -> tuple[Session, Session]:
    """Open ``path`` on both paths, compare every answer; returns (native session, Python session)."""

    def answer() -> tuple[Session, dict[str, Any], dict[int, int]]:
        s = Session.open(str(path))
        seen = observe(s, keep)
        return s, seen, check_estimates(s)

    (n_s, n_seen, n_est), (p_s, p_seen, p_est) = paths.both(answer)
    same(n_seen, p_seen)
    # The native path knows more estimates (made while indexing); where both know one it agrees.
    assert p_est.keys() <= n_est.keys()
    assert all(n_est[i] == v for i, v in p_est.items())
    return n_s, p_s


# ---- real files, scenarios, generated sessions ----


SHARED_HERE = next(
    (p for p in (SHARED, REPO.parent.parent / "shared" / "reference" / "sessions") if p.is_dir()), SHARED
)
"""The shared reference sessions: beside this checkout, or beside the worktrees' folder."""


def _files() -> Iterator[Any]:
    for root in (LOCAL, SHARED_HERE):
        if root.is_dir():
            for path in sorted(root.rglob("*.jsonl")):
                yield pytest.param(path, id=f"{root.parent.name}/{path.relative_to(root)}")


def test_the_shared_reference_sessions_are_here() -> None:
    if not SHARED_HERE.is_dir():
        pytest.skip(f"{SHARED} is absent: the shared reference sessions are not compared")
    assert list(SHARED_HERE.rglob("*.jsonl"))


@pytest.mark.parametrize("path", list(_files()))
def test_session_files_read_alike(paths: Paths, counting: Counting, path: Path) -> None:
    read_alike(paths, path)
    if path.parent.name == "pi":
        assert counting.taken > 0, "the native scanner took no chunk of a pi file"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_conformance_scenarios_read_alike(paths: Paths, tmp_path: Path, name: str) -> None:
    scenario = SCENARIOS[name]
    path = scenario.make(tmp_path)
    read_alike(paths, path, (scenario.keep, 2000))


ESTIMATED_ROLES = ("user", "assistant", "toolResult", "custom")
"""The roles whose estimates the scanner makes (ctxd.context.line_estimate reads every role)."""


def _shapes(gen: ModuleType) -> dict[str, tuple[int, int, Any]]:
    return {
        "default": (1500, 1, gen.Shape()),  # about 3 MB: several chunks
        "compacting": (700, 2, gen.Shape(compact_at=20_000)),
        "long-texts": (300, 3, gen.Shape(scale=4.0, steps=2.0)),
    }


@pytest.mark.parametrize("shape", ["default", "compacting", "long-texts"])
def test_generated_sessions_read_alike(
    paths: Paths, counting: Counting, gen: ModuleType, tmp_path: Path, shape: str
) -> None:
    entries, seed, how = _shapes(gen)[shape]
    path = tmp_path / "s.jsonl"
    gen.generate(path, entries, seed=seed, shape=how)
    n_s, _ = read_alike(paths, path, (2000, 20000, 100000))
    assert counting.taken > 0 and counting.declined == 0
    heads = [n_s.file.heads[i] for i in range(len(n_s.file))]
    known = {i for i, h in enumerate(heads) if h.message is not None and h.message.role in ESTIMATED_ROLES}
    assert known and known <= n_s.estimates.keys(), "the native path did not estimate every message while indexing"


# ---- damaged files: bad lines inside chunks of good ones ----

_GOOD = {"type": "message", "parentId": None, "timestamp": "2026-11-26T02:00:00.000Z"}


def _user(eid: str, text: str = "caf") -> dict[str, Any]:
    return {**_GOOD, "id": eid, "message": {"role": "user", "content": text}}


DAMAGE: dict[str, bytes] = {
    "invalid UTF-8": broken.non_utf8(_user("bad00001")),
    "too deep": broken.nested(_user("bad00002"), 150),
    "deep at the limit": broken.nested(_user("bad00003"), 98),  # level 100: served as it is
    "unclosed brackets": b'{"type":"message","id":"bad00004","details":' + b"[" * 150 + b"\n",
    "two objects": (json.dumps(_user("bad00005")) + json.dumps(_user("bad00006"))).encode() + b"\n",
    "cut short": json.dumps(_user("bad00007")).encode()[:40] + b"\n",
    "blank": b"\n",
    "spaces": b"  \t \n",
    "not an object": b"[1, 2, 3]\n",
    "duplicate id": b"",  # filled in below: a copy of a good line
    "no id": json.dumps({k: v for k, v in _user("x").items() if k != "id"}).encode() + b"\n",
    "second header": json.dumps(header()).encode() + b"\n",
    "escaped key": b'{"type":"message","\\u0069d":"bad00008","message":{"role":"user","content":"hi"}}\n',
    "lone surrogate": b'{"type":"message","id":"bad00009","message":{"role":"user","content":"a\\ud800b"}}\n',
    "raw control": b'{"type":"message","id":"bad00010","message":{"role":"user","content":"a\x01b"}}\n',
    "long number": b'{"type":"message","id":"bad00011","n":' + b"1" * 45 + b',"message":{"role":"user"}}\n',
    "id as a number": b'{"type":"message","id":12,"message":{"role":"user","content":"hi"}}\n',
    "version as a string": b'{"type":"custom","id":"bad00012","version":"3","customType":"x"}\n',
    "role not a string": b'{"type":"message","id":"bad00013","message":{"role":5,"content":"hi"}}\n',
    "duplicate keys": b'{"type":"message","id":"bad00014","id":"bad00015","message":{"role":"user",'
    b'"content":"a","content":[{"type":"text","text":"bb","text":"ccc"}]}}\n',
    "escaped role": b'{"type":"message","id":"bad00016","message":{"role":"\\u0075ser","content":"hi"}}\n',
    "float arguments": b'{"type":"message","id":"bad00017","message":{"role":"assistant","content":'
    b'[{"type":"toolCall","id":"c","name":"read","arguments":{"path":"a","n":1.5e3,"big":12345678901234567}}]}}\n',
    "a line over 1 MB": json.dumps(_user("big00001", "long é😀 " * 200_000), ensure_ascii=False).encode() + b"\n",
    "CR and spaces": b' {"type":"message" ,"id":"bad00018","message":{"role":"user","content":"hi"}} \r\n',
}


def test_the_odd_lines_are_what_they_say() -> None:
    assert depth(DAMAGE["deep at the limit"][:-1]) == MAX_DEPTH
    assert depth(DAMAGE["too deep"][:-1]) > MAX_DEPTH
    assert len(DAMAGE["a line over 1 MB"]) > 2 << 20


def _generated(gen: ModuleType, tmp_path: Path, entries: int = 1200) -> tuple[bytes, list[bytes]]:
    path = tmp_path / "base.jsonl"
    gen.generate(path, entries, seed=5)
    raw = path.read_bytes()
    first, *rest = raw.split(b"\n")
    assert rest[-1] == b""
    return first + b"\n", [line + b"\n" for line in rest[:-1]]


def _damaged(gen: ModuleType, tmp_path: Path, bad: list[bytes]) -> tuple[Path, list[bytes]]:
    """A generated file (over 1 MB) with ``bad`` lines spread through its middle chunk."""
    head, good = _generated(gen, tmp_path)
    assert sum(map(len, good)) > 2 << 20
    out = [head]
    middle = len(good) // 3
    for k, line in enumerate(good):
        if k >= middle and (k - middle) % 7 == 0 and (k - middle) // 7 < len(bad):
            out.append(bad[(k - middle) // 7] or good[k - 1])  # empty: repeat a good line (a duplicate id)
        out.append(line)
    path = tmp_path / "damaged.jsonl"
    path.write_bytes(b"".join(out))
    return path, good


def _all_good_served(s: Session, good: list[bytes]) -> None:
    f = s.file
    for line in good:
        head = decode_head(line[:-1])
        assert head.id is not None
        i = f.index[head.id]
        assert f.heads[i] == head


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_a_bad_line_among_good_ones_reads_alike(
    paths: Paths, counting: Counting, gen: ModuleType, tmp_path: Path, kind: str
) -> None:
    path, good = _damaged(gen, tmp_path, [DAMAGE[kind]])
    n_s, p_s = read_alike(paths, path)
    assert counting.taken > 0, "the native scanner took none of the good chunks"
    for s in (n_s, p_s):
        _all_good_served(s, good)


def test_every_bad_line_in_one_chunk_reads_alike(
    paths: Paths, counting: Counting, gen: ModuleType, tmp_path: Path
) -> None:
    path, good = _damaged(gen, tmp_path, [DAMAGE[k] for k in sorted(DAMAGE)])
    n_s, p_s = read_alike(paths, path)
    assert counting.taken > 0 and counting.declined > 0
    kinds = {d.kind for d in n_s.file.diagnostics}
    assert {"malformed", "too-deep", "bad-utf8", "two-objects", "duplicate-id", "no-id", "second-header"} <= kinds
    for s in (n_s, p_s):
        _all_good_served(s, good)


# ---- appends, the persistent index, old versions ----


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:  # another writer: plain appends
        f.write(data)


def _late(seen: dict[str, Any]) -> dict[str, Any]:
    """An observation without the diagnostics reported before every body was read."""
    out = {k: v for k, v in seen.items() if k not in ("diagnostics", "diagnostics after")}
    if isinstance(seen["context"], dict):
        out["context"] = {**seen["context"], "json": {**seen["context"]["json"], "diagnostics": None}}
    return out


def test_appends_read_by_refresh_alike(paths: Paths, counting: Counting, gen: ModuleType, tmp_path: Path) -> None:
    head, good = _generated(gen, tmp_path, 900)
    path = tmp_path / "s.jsonl"
    path.write_bytes(head + b"".join(good[:300]))
    n_s, p_s = read_alike(paths, path)
    rest = good[300:]
    torn = rest[400]
    steps = [
        b"".join(rest[:5]),  # a few lines: one small chunk
        b"".join(rest[5:400]),  # over a megabyte at once
        torn[: len(torn) // 2],  # a torn line: not consumed yet
        torn[len(torn) // 2 :] + DAMAGE["invalid UTF-8"] + rest[401],  # completed, with a bad line after it
        b"".join(rest[402:]),
    ]
    for step, data in enumerate(steps):
        _append(path, data)
        n_seen = paths.run(True, lambda: (n_s.refresh()[1], observe(n_s), check_estimates(n_s)))
        p_seen = paths.run(False, lambda: (p_s.refresh()[1], observe(p_s), check_estimates(p_s)))
        assert n_seen[0] == p_seen[0], f"step {step}: refresh added other entries"
        same(n_seen[1], p_seen[1])
        assert p_seen[2].keys() <= n_seen[2].keys()
        # The same as a fresh full read of the file as it is now (whose diagnostics come as its
        # bodies are read: the refreshed session read some before).
        fresh = paths.run(False, lambda: observe(Session.open(str(path))))
        same(_late(n_seen[1]), _late(fresh), "a fresh full read")
    assert len(n_s.file) == len(good) + 1
    assert counting.taken > 2


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private persistent index (as tests/store/test_index_cache.py): every file kept, heads let go."""
    home = tmp_path / "cache-home"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.delenv("CTXD_INDEX_CACHE", raising=False)
    monkeypatch.setattr(session_module, "INDEX_MIN_ENTRIES", 10)
    monkeypatch.setattr(session_module, "RELEASE_AT", 10)
    return home


@pytest.mark.parametrize(("first", "then"), [(True, True), (False, True), (True, False)])
def test_the_index_kept_and_reopened_reads_alike(
    monkeypatch: pytest.MonkeyPatch,
    counting: Counting,
    cache: Path,
    gen: ModuleType,
    tmp_path: Path,
    first: bool,
    then: bool,
) -> None:
    paths = Paths(monkeypatch, counting)
    head, good = _generated(gen, tmp_path, 800)
    path = tmp_path / "s.jsonl"
    path.write_bytes(head + b"".join(good[:500]))

    def open_build_close() -> dict[str, Any]:
        s = Session.open(str(path))
        seen = observe(s)
        check_estimates(s)
        s.close()
        return seen

    paths.run(first, open_build_close)
    assert list(cache.rglob("*")), "the index was not kept"
    _append(path, b"".join(good[500:]) + DAMAGE["two objects"])

    def reopen() -> tuple[Session, dict[str, Any]]:
        s = Session.open(str(path))
        assert s.file.restored is not None, "the kept index was not used"
        return s, observe(s)

    s, seen = paths.run(then, reopen)
    paths.run(then, lambda: check_estimates(s))
    with monkeypatch.context() as m:
        m.setenv("CTXD_INDEX_CACHE", "0")
        full = paths.run(False, lambda: observe(Session.open(str(path))))
    same(seen, full)


def _v2_file(tmp_path: Path) -> Path:
    hdr = {**header(), "version": 2}
    lines = [hdr]
    parent = None
    for k in range(40):
        eid = f"e{k:07d}"
        role = ["user", "hookMessage", "assistant", "custom"][k % 4]
        message: dict[str, Any] = {"role": role, "content": f"text {k} " * (k + 1)}
        if role == "assistant":
            message["content"] = [{"type": "text", "text": "answer " * k}]
        if role in ("hookMessage", "custom"):
            message.update(customType="hook", display=True)
        lines.append({"type": "message", "id": eid, "parentId": parent, "timestamp": "t", "message": message})
        parent = eid
    path = tmp_path / "v2.jsonl"
    path.write_bytes(b"".join(json.dumps(x).encode() + b"\n" for x in lines))
    return path


def test_an_old_version_gets_no_estimates_from_the_scanner(paths: Paths, counting: Counting, tmp_path: Path) -> None:
    path = _v2_file(tmp_path)

    def scan_estimates() -> dict[int, int]:
        s = Session.open(str(path))
        return dict(s.estimates)

    assert paths.run(True, scan_estimates) == {}, "estimates of unmigrated lines were kept"
    n_s, _ = read_alike(paths, path)
    assert counting.taken > 0
    roles = [n_s.file.entry(i)["message"]["role"] for i in range(len(n_s.file))]
    assert "hookMessage" not in roles and roles.count("custom") == 20
    # Appended by an old writer: read by refresh, still not estimated by the scanner.
    _append(path, json.dumps(_user("f0000001", "more text")).encode() + b"\n")
    paths.run(True, n_s.refresh)
    assert len(n_s.file) == 41 and 40 not in n_s.file.scan_estimates


# ---- faults ----


def _rewrite(path: Path, old: bytes, new: bytes) -> None:
    """Replace bytes of the file in place (same inode, same size)."""
    assert len(old) == len(new)
    data = path.read_bytes()
    assert data.count(old) == 1, old
    with open(path, "r+b") as f:
        f.write(data.replace(old, new))


def test_a_file_rewritten_in_place_between_open_and_build(paths: Paths, gen: ModuleType, tmp_path: Path) -> None:
    head, good = _generated(gen, tmp_path, 600)
    path = tmp_path / "s.jsonl"
    path.write_bytes(head + b"".join(good))
    n_s = paths.run(True, lambda: Session.open(str(path)))
    p_s = paths.run(False, lambda: Session.open(str(path)))
    # Same size, same inode, still valid JSON: the texts of two messages changed.
    for k in (len(good) // 2, len(good) - 3):
        k = next(j for j in range(k, len(good)) if b'"type":"text","text":"' in good[j])
        at = (head + b"".join(good)).find(good[k]) + good[k].find(b'"type":"text","text":"') + 22
        with open(path, "r+b") as f:
            f.seek(at)
            assert f.read(4).isascii()
            f.seek(at)
            f.write(b"ZZZZ")
    n_seen = paths.run(True, lambda: observe(n_s))
    p_seen = paths.run(False, lambda: observe(p_s))
    same(n_seen, p_seen)
    n_again = paths.run(True, lambda: (n_s.refresh(), observe(n_s)))
    p_again = paths.run(False, lambda: (p_s.refresh(), observe(p_s)))
    assert n_again[0][0] == p_again[0][0]
    same(n_again[1], p_again[1])


SMALL = [
    b'{"type":"message","id":"a0000001","parentId":null,"timestamp":"t","message":{"role":"user","content":"hello"}}',
    b'{"type":"message","id":"a0000002","parentId":"a0000001","timestamp":"t","message":{"role":"assistant",'
    b'"content":[{"type":"text","text":"hi"}]}}',
]


def _small(tmp_path: Path, lines: list[bytes]) -> Path:
    path = tmp_path / "small.jsonl"
    path.write_bytes(json.dumps(header()).encode() + b"\n" + b"".join(line + b"\n" for line in lines))
    return path


def test_a_line_damaged_in_place_before_its_body_is_read(paths: Paths, tmp_path: Path) -> None:
    path = _small(tmp_path, SMALL)
    n_s = paths.run(True, lambda: Session.open(str(path)))
    p_s = paths.run(False, lambda: Session.open(str(path)))
    _rewrite(path, b'"hello"', b'"he\xff\xfeo"')
    p_body = paths.run(False, lambda: outcome(lambda: p_s.file.entry(0)))
    assert isinstance(p_body, dict) and p_body["message"]["content"] == "he\ufffd\ufffdo"
    assert [d.kind for d in p_s.file.diagnostics] == ["bad-utf8"]
    n_body = paths.run(True, lambda: outcome(lambda: n_s.file.entry(0)))
    assert n_body == p_body
    assert [d.to_json() for d in n_s.file.diagnostics] == [d.to_json() for d in p_s.file.diagnostics]


def test_a_number_out_of_range_in_a_session(paths: Paths, tmp_path: Path) -> None:
    bad = SMALL[0].replace(b'"content":"hello"', b'"content":"hello","x":1e400')
    path = _small(tmp_path, [bad, SMALL[1]])

    def first_body() -> tuple[Any, list[dict[str, Any]]]:
        s = Session.open(str(path))
        return outcome(lambda: s.file.entry(0)), [d.to_json() for d in s.file.diagnostics]

    n_seen, p_seen = paths.both(first_body)
    assert p_seen[0] == {"type": "message", "id": "a0000001"}
    assert [d["kind"] for d in p_seen[1]] == ["unreadable"]
    assert n_seen == p_seen


def test_required_without_the_extension(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ctxd._native the differential tests fail, or skip under CTXD_NATIVE=0."""
    import native_paths

    import ctxd

    monkeypatch.delattr(ctxd, "_native", raising=False)
    monkeypatch.setitem(sys.modules, "ctxd._native", None)  # import fails
    monkeypatch.delenv("CTXD_NATIVE", raising=False)
    with pytest.raises(pytest.fail.Exception, match=r"ctxd\._native is not built"):
        native_paths.native_scan()
    monkeypatch.setenv("CTXD_NATIVE", "0")
    with pytest.raises(pytest.skip.Exception, match=r"CTXD_NATIVE=0"):
        native_paths.native_scan()
    assert os.environ["CTXD_NATIVE"] == "0"
