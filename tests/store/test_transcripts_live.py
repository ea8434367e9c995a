"""Claude Code and Codex transcripts as read-only sessions: opening, refreshing as they grow,
never writing, and compacting into a pi fork."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, reference

from ctxd.context.build import build_context
from ctxd.errors import ReadOnlySessionError
from ctxd.store.listing import list_sessions
from ctxd.store.transcript import TranscriptFile, sniff
from ctxd.tree.session import Session

PAIRS = [
    ("claude", "incremental-turn-1.jsonl", "incremental-turn-2.jsonl"),
    ("codex", "incremental-turn-1.jsonl", "incremental-turn-2.jsonl"),
]


@pytest.mark.parametrize(("kind", "one", "two"), PAIRS)
def test_a_growing_transcript_refreshes_incrementally(tmp_path: Path, kind: str, one: str, two: str) -> None:
    first = reference(kind, one).read_bytes()
    second = reference(kind, two).read_bytes()
    assert second.startswith(first)
    path = tmp_path / f"{kind}.jsonl"
    path.write_bytes(first)
    s = Session.open(str(path))
    assert isinstance(s.file, TranscriptFile) and s.file.kind == kind and sniff(str(path)) == kind
    before = len(s.file)
    with open(path, "ab") as f:  # the agent keeps writing, in two pieces (a partial line in between)
        f.write(second[len(first) : len(first) + 7])
    result, _ = s.refresh()
    assert not result.reloaded and len(s.file) <= before + 1
    with open(path, "ab") as f:
        f.write(second[len(first) + 7 :])
    result, new = s.refresh()
    fresh = Session.open(str(path))
    assert [h.id for h in s.file.heads] == [h.id for h in fresh.file.heads]
    assert s.tree.parent == fresh.tree.parent and len(s.file) > before
    assert result.reloaded or list(new) == list(range(before, len(s.file)))
    assert build_context(s.file, s.tree).contextTokens == build_context(fresh.file, fresh.tree).contextTokens


def test_a_line_inserted_mid_file_reloads(tmp_path: Path) -> None:
    data = reference("claude", "session-9eda1058.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    path = tmp_path / "agent-x.jsonl"
    path.write_bytes(b"".join(lines[:-3]))
    s = Session.open(str(path))
    extra = json.dumps({"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-01-11T09:53:24.000Z"})
    path.write_bytes(b"".join([*lines[:5], extra.encode() + b"\n", *lines[5:]]))
    result, _ = s.refresh()
    assert result.reloaded
    assert [h.id for h in s.file.heads] == [h.id for h in Session.open(str(path)).file.heads]


@pytest.mark.parametrize(
    ("kind", "name"), [("claude", "session-9eda1058.jsonl"), ("codex", "incremental-turn-2.jsonl")]
)
def test_transcripts_are_never_written(tmp_path: Path, kind: str, name: str) -> None:
    path = tmp_path / name
    shutil.copyfile(reference(kind, name), path)
    before = path.read_bytes()
    s = Session.open(str(path))
    with pytest.raises(ReadOnlySessionError):
        s.append([{"type": "custom"}])
    with pytest.raises(ReadOnlySessionError):
        s.move_leaf(s.leaf_id())
    assert path.read_bytes() == before


def test_compaction_of_a_transcript_goes_to_a_pi_fork(tmp_path: Path) -> None:
    src = tmp_path / "claude" / "proj" / "session-624a4a58.jsonl"
    src.parent.mkdir(parents=True)
    shutil.copyfile(reference("claude", "session-624a4a58.jsonl"), src)
    before = src.read_bytes()
    pi_root = tmp_path / "pi"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ctxd",
            "compact",
            str(src),
            "--json",
            "--keep-recent-tokens",
            "5000",
            "--fork-root",
            str(pi_root),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["forkedFrom"] == str(src) and Path(result["session"]).is_relative_to(pi_root)
    assert src.read_bytes() == before  # the transcript is untouched
    fork = Session.open(result["session"])
    assert fork.file.header["parentSession"] == str(src) and not fork.file.read_only
    ctx = build_context(fork.file, fork.tree)
    assert ctx.messages[0].role == "compactionSummary" and ctx.messages[0].entryId == result["entryId"]


def test_cli_tree_and_context_on_transcripts() -> None:
    for kind, name in [("claude", "session-624a4a58.jsonl"), ("codex", "rollout-tui-0.125.jsonl")]:
        path = str(reference(kind, name))
        tree = subprocess.run([sys.executable, "-m", "ctxd", "tree", path], capture_output=True, text=True, cwd=REPO)
        assert tree.returncode == 0 and "◀ leaf" in tree.stdout
        ctx = subprocess.run(
            [sys.executable, "-m", "ctxd", "context", path, "--json", "--format", "openai"],
            capture_output=True,
            text=True,
            cwd=REPO,
        )
        data = json.loads(ctx.stdout)
        assert data["contextTokens"] > 0 and {"user", "assistant", "tool"} <= {m["role"] for m in data["openai"]}
        if kind == "claude":
            assert data["messages"][0]["role"] == "compactionSummary"  # the compact boundary


def test_listing_shows_transcripts_with_their_names(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    shutil.copyfile(reference("claude", "session-9eda1058.jsonl"), tmp_path / "proj" / "a.jsonl")
    shutil.copyfile(reference("codex", "incremental-turn-2.jsonl"), tmp_path / "proj" / "b.jsonl")
    found = {s.agent: s for s in list_sessions([str(tmp_path)])}
    assert found["claude"].readOnly and found["claude"].id.startswith("9eda1058") and found["claude"].name
    assert found["codex"].readOnly and found["codex"].title


def test_a_same_length_edit_in_place_reloads(tmp_path: Path) -> None:
    """Issue 19, item 2, for transcripts: an edit that keeps the size is seen by its stat."""
    data = reference("claude", "session-9eda1058.jsonl").read_bytes()
    path = tmp_path / "agent-x.jsonl"
    path.write_bytes(data)
    s = Session.open(str(path))
    before = build_context(s.file, s.tree).to_json()
    at = data.index(b'"content":"') + len(b'"content":"')
    assert data[at : at + 1].isalpha()
    edited = data[:at] + (b"Q" if data[at : at + 1] != b"Q" else b"R") + data[at + 1 :]
    with open(path, "r+b") as f:
        f.write(edited)
    result, _ = s.refresh()
    assert result.reloaded
    fresh = Session.open(str(path))
    assert build_context(s.file, s.tree).to_json() == build_context(fresh.file, fresh.tree).to_json() != before
