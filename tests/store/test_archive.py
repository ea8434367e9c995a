"""ctxd's archive of Claude Code transcripts: private copies extended as the live file grows, earlier copies kept
when it stops extending them, and the listing that pairs copies with their live transcripts."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from conftest import reference

from ctxd.store.archive import EARLIER, archive_transcript, claude_archive_path, mirror
from ctxd.store.dirs import archive_root, data_dir, makedirs_private, state_dir
from ctxd.store.listing import list_sessions

SESSION = "2696e685-97f7-47e2-9b90-766d279ab840"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _live(tmp_path: Path) -> Path:
    """The recorded 2.1.330 transcript as a live file in a Claude projects folder."""
    live = tmp_path / "claude" / "projects" / "-home-dev-service" / f"{SESSION}.jsonl"
    live.parent.mkdir(parents=True)
    shutil.copy(reference("claude", "claude-2.1.330-compact.jsonl"), live)
    return live


def test_folders_follow_xdg_and_ignore_relative_values(tmp_path: Path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "d"), "XDG_STATE_HOME": str(tmp_path / "s")}
    assert data_dir(env) == str(tmp_path / "d" / "ctxd")
    assert state_dir(env) == str(tmp_path / "s" / "ctxd")
    assert archive_root(env) == str(tmp_path / "d" / "ctxd" / "archive")
    relative = {"XDG_DATA_HOME": "relative/path"}
    assert data_dir(relative) == os.path.join(os.path.expanduser("~"), ".local", "share", "ctxd")
    makedirs_private(str(tmp_path / "a" / "b" / "c"))
    assert [_mode(tmp_path / p) for p in ("a", "a/b", "a/b/c")] == [0o700] * 3


def test_archive_paths_mirror_claudes_layout_and_refuse_odd_names(tmp_path: Path) -> None:
    root = str(tmp_path / "archive")
    assert claude_archive_path("/h/.claude/projects/-p/s.jsonl", root) == f"{root}/claude/-p/s.jsonl"
    sub = "/h/.claude/projects/-p/s/subagents/agent-1.jsonl"
    assert claude_archive_path(sub, root) == f"{root}/claude/-p/s/subagents/agent-1.jsonl"
    assert claude_archive_path("/h/.claude/projects/-p/s.txt", root) is None
    assert claude_archive_path("s.jsonl", root) is not None  # relative: resolved against the cwd
    assert claude_archive_path("/s.jsonl", root) is None


def test_a_first_archive_copies_complete_lines_privately(tmp_path: Path) -> None:
    live = _live(tmp_path)
    whole = live.read_bytes()
    with live.open("ab") as f:
        f.write(b'{"type":"user","partial')  # Claude is still writing this line
    root = tmp_path / "data" / "archive"
    (result,) = archive_transcript(str(live), str(root))
    copy = Path(result.path)
    assert copy == root / "claude" / "-home-dev-service" / f"{SESSION}.jsonl"
    assert copy.read_bytes() == whole and result.copied == len(whole) and result.rotated is None
    assert _mode(copy) == 0o600
    for folder in (copy.parent, copy.parent.parent, root, root.parent):
        assert _mode(folder) == 0o700


def test_later_archives_append_only_what_is_new(tmp_path: Path) -> None:
    live = _live(tmp_path)
    root = str(tmp_path / "archive")
    first = archive_transcript(str(live), root)[0]
    inode = os.stat(first.path).st_ino
    assert archive_transcript(str(live), root)[0].copied == 0
    extra = b'{"type":"mode","mode":"default","sessionId":"%s"}\n' % SESSION.encode()
    with live.open("ab") as f:
        f.write(extra)
    again = archive_transcript(str(live), root)[0]
    assert again.copied == len(extra) and again.rotated is None
    assert os.stat(again.path).st_ino == inode  # appended, not rewritten
    assert Path(again.path).read_bytes() == live.read_bytes()


def test_a_rewritten_transcript_keeps_the_earlier_copy(tmp_path: Path) -> None:
    live = _live(tmp_path)
    root = str(tmp_path / "archive")
    original = live.read_bytes()
    archive_transcript(str(live), root)
    # Claude (or the user) rewrites the file: shorter, different content.
    live.write_bytes(original.split(b"\n", 3)[3])
    (result,) = archive_transcript(str(live), root)
    assert result.rotated is not None
    earlier = Path(result.rotated)
    assert earlier.parent == Path(root) / "claude" / "-home-dev-service" / SESSION / EARLIER
    assert earlier.read_bytes() == original and _mode(earlier) == 0o600
    assert Path(result.path).read_bytes() == live.read_bytes()
    # A same-sized rewrite is noticed too (the copy's first bytes differ).
    live.write_bytes(b"X" + live.read_bytes()[1:])
    assert archive_transcript(str(live), root)[0].rotated is not None
    assert len(list(earlier.parent.iterdir())) == 2


def test_subagent_transcripts_are_archived_with_their_session(tmp_path: Path) -> None:
    live = _live(tmp_path)
    sub = live.with_suffix("") / "subagents" / "agent-abc.jsonl"
    sub.parent.mkdir(parents=True)
    sub.write_bytes(b'{"type":"user","isSidechain":true,"agentId":"abc","sessionId":"%s"}\n' % SESSION.encode())
    results = archive_transcript(str(live), str(tmp_path / "archive"))
    assert [Path(r.path).name for r in results] == [f"{SESSION}.jsonl", "agent-abc.jsonl"]
    assert Path(results[1].path).read_bytes() == sub.read_bytes()


def test_nothing_to_archive_and_unusable_sources(tmp_path: Path) -> None:
    root = str(tmp_path / "archive")
    assert archive_transcript(str(tmp_path / "missing.jsonl"), root) == []
    fifo = tmp_path / "projects" / "-p" / "fifo.jsonl"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    assert archive_transcript(str(fifo), root) == []  # not a regular file: never opened (would block)
    with pytest.raises(OSError):
        mirror(str(fifo), str(tmp_path / "out.jsonl"))


def test_the_listing_pairs_copies_with_their_live_transcript(tmp_path: Path) -> None:
    live = _live(tmp_path)
    archives = tmp_path / "archive"
    archive_transcript(str(live), str(archives))
    live.write_bytes(live.read_bytes().split(b"\n", 3)[3])  # rewritten: an earlier copy is kept
    archive_transcript(str(live), str(archives))
    projects = str(tmp_path / "claude" / "projects")
    listed = {s.path: s for s in list_sessions([projects, str(archives)], archive_roots=[str(archives)])}
    assert len(listed) == 3
    current = str(archives / "claude" / "-home-dev-service" / f"{SESSION}.jsonl")
    (earlier,) = (p for p in listed if EARLIER in p)
    assert listed[str(live)].archived is False and listed[str(live)].archives == [current, earlier]
    # 2.1.330 opens with queue-operation lines (no cwd): the cwd comes from the first line that has one.
    assert {s.cwd for s in listed.values()} == {"/home/dev/service"}
    for copy in (current, earlier):
        assert listed[copy].archived is True and listed[copy].archiveOf == str(live)
        assert listed[copy].id == SESSION and listed[copy].readOnly is True
    assert listed[str(live)].to_json()["archives"] == [current, earlier]

    # Claude's 30-day cleanup deletes the live file: the copies stay listed, on their own.
    live.unlink()
    alone = list_sessions([projects, str(archives)], archive_roots=[str(archives)])
    assert {s.path for s in alone} == {current, earlier}
    assert all(s.archived and s.archiveOf is None for s in alone)
    # Without archive roots nothing is marked.
    assert not any(s.archived for s in list_sessions([str(archives)]))
