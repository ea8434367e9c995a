"""The store only ever opens regular files, bounds every read, and keeps what it creates private."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from helpers.factories import assistant, chain, header, user, write

import ctxd.store.listing as listing
from ctxd.errors import BadHeaderError, SessionError
from ctxd.store.create import create_session
from ctxd.store.listing import list_sessions
from ctxd.store.opening import open_session_file
from ctxd.store.session_file import SessionFile
from ctxd.tree.session import Session


def mode(path: str | Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def traps(tmp_path: Path) -> Path:
    """A root holding one good session, a FIFO, a symlink to /dev/zero and a directory, all named *.jsonl."""
    root = tmp_path / "root"
    d = root / "--proj--"
    d.mkdir(parents=True)
    write(d / "good.jsonl", chain(user, assistant))
    os.mkfifo(d / "fifo.jsonl")
    os.symlink("/dev/zero", d / "zero.jsonl")
    (d / "dir.jsonl").mkdir()
    os.symlink(d / "nowhere", d / "dangling.jsonl")
    return root


def test_listing_skips_what_is_not_a_regular_file(traps: Path) -> None:
    found = list_sessions([str(traps)])
    assert [Path(s.path).name for s in found] == ["good.jsonl"]
    assert found[0].entries == 2


def test_the_cli_lists_a_root_holding_a_fifo_and_dev_zero(traps: Path) -> None:
    # It used to block on the FIFO forever (and would read /dev/zero without end after it).
    out = subprocess.run(
        [sys.executable, "-m", "ctxd", "sessions", "--root", str(traps), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    assert [Path(s["path"]).name for s in json.loads(out.stdout)["sessions"]] == ["good.jsonl"]


@pytest.mark.parametrize(
    ("name", "kind"), [("fifo.jsonl", "FIFO"), ("zero.jsonl", "device"), ("dir.jsonl", "directory")]
)
def test_opening_anything_but_a_regular_file_is_refused_at_once(traps: Path, name: str, kind: str) -> None:
    path = str(traps / "--proj--" / name)
    for opener in (SessionFile.open, open_session_file, Session.open):
        with pytest.raises(SessionError, match=kind) as info:
            opener(path)
        assert info.value.path == path


def test_a_file_replaced_by_a_fifo_is_refused_on_refresh_and_append(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", chain(user))
    sf = SessionFile.open(path)
    os.unlink(path)
    os.mkfifo(path)
    with pytest.raises(SessionError, match="FIFO"):
        sf.refresh()
    with pytest.raises(SessionError):
        sf.append([{"type": "custom"}])


def test_a_header_line_without_end_is_refused_after_a_bounded_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    path.write_bytes(b'{"type":"session","id":"x","pad":"' + b"p" * (3 << 20))
    with pytest.raises(BadHeaderError, match="longer than"):
        SessionFile.open(str(path))


def test_a_large_file_is_listed_from_its_head_and_tail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "LIST_READ_CAP", 4096)
    monkeypatch.setattr(listing, "LIST_WINDOW", 1024)
    entries = chain(*[user, assistant] * 40)
    entries.append({"type": "session_info", "id": "info0001", "parentId": entries[-1]["id"], "name": "named late"})
    entries[0]["message"]["content"] = "the first request"
    path = tmp_path / "big.jsonl"  # compact JSON, as pi writes it (the listing's needles assume it)
    path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in [header(id="big-1"), *entries]))
    assert os.path.getsize(path) > 3 * 4096
    (summary,) = list_sessions([str(tmp_path)])
    assert (summary.id, summary.name, summary.title) == ("big-1", "named late", "the first request")
    assert summary.entries == 81


def test_directories_ctxd_creates_are_private_at_every_level(tmp_path: Path) -> None:
    root = tmp_path / "a" / "b" / "sessions"
    old = os.umask(0o022)
    try:
        path = create_session(str(root), "/home/me/proj")
        forked = Session.open(path)
        forked.append([{"type": "message", "message": {"role": "user", "content": "x"}}])
        copy = create_session(str(tmp_path / "c" / "d"), "/p", entries=[user(None)])
    finally:
        os.umask(old)
    for d in (tmp_path / "a", tmp_path / "a" / "b", root, Path(path).parent, tmp_path / "c", Path(copy).parent):
        assert mode(d) == 0o700, d
    assert mode(path) == 0o600 and mode(copy) == 0o600
