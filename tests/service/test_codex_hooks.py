"""``ctxd hook --agent codex EVENT`` without Codex: where rollouts are archived, what each event prints, and that
the listing pairs an archived rollout with the live one (the real Codex run is tests/codex/test_hooks.py)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

from conftest import LOCAL

from ctxd.cli.hook import run
from ctxd.compaction.recall import RECALL_HINT
from ctxd.store.archive import archive_codex_rollout, codex_archive_path
from ctxd.store.listing import list_sessions

ROLLOUT = LOCAL / "codex" / "rollout-0.169-compactions.jsonl"
NAME = "rollout-2026-11-25T21-29-59-01a2149d-8f0f-74c1-8dfa-7129af1db7c5.jsonl"


def live(tmp_path: Path) -> Path:
    path = tmp_path / "codex-home" / "sessions" / "2026" / "11" / "25" / NAME
    path.parent.mkdir(parents=True)
    shutil.copyfile(ROLLOUT, path)
    return path


def test_rollouts_archive_under_codexs_dated_layout(tmp_path: Path) -> None:
    root = str(tmp_path / "archive")
    assert codex_archive_path("/h/.codex/sessions/2026/11/25/" + NAME, root) == f"{root}/codex/2026/11/25/{NAME}"
    assert codex_archive_path("/elsewhere/" + NAME, root) == f"{root}/codex/{NAME}"
    assert codex_archive_path("/h/.codex/sessions/2026/11/25/notes.jsonl", root) is None
    path = live(tmp_path)
    [result] = archive_codex_rollout(str(path), root)
    assert Path(result.path).read_bytes() == path.read_bytes() and result.copied == path.stat().st_size
    assert archive_codex_rollout(str(path), root)[0].copied == 0


def hook(event: str, payload: dict[str, object]) -> str:
    out = io.StringIO()
    stdin = io.BytesIO(json.dumps(payload).encode())
    assert run(event, stdin=stdin, stdout=out, agent="codex") == 0
    return out.getvalue()


def test_events_print_what_codex_takes(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("CTXD_CONFIG", str(tmp_path / "none.json"))
    path = live(tmp_path)
    lines = ROLLOUT.read_bytes().splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if json.loads(line).get("type") == "compacted")
    path.write_bytes(b"".join(lines[:last]))  # as the rollout was when Codex ran PreCompact
    payload = {"session_id": "01a2149d-8f0f-74c1-8dfa-7129af1db7c5", "transcript_path": str(path), "trigger": "auto"}
    assert hook("PreCompact", payload) == ""  # Codex ignores PreCompact output
    archived = tmp_path / "data" / "ctxd" / "archive" / "codex" / "2026" / "11" / "25" / NAME
    assert archived.read_bytes() == path.read_bytes()
    path.write_bytes(b"".join(lines))  # Codex wrote the compaction before SessionStart(compact)
    printed = json.loads(hook("SessionStart", {**payload, "source": "compact"}))
    context = printed["hookSpecificOutput"]["additionalContext"]
    assert printed["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert "never edit README.md" in context and "Must keep (ctxd)" in context
    # Claude Code's notes, plan documents included (Codex edits with apply_patch, which plans do not read yet).
    notes = json.loads((tmp_path / "state" / "ctxd" / "codex" / "claude" / f"{payload['session_id']}.json").read_text())
    assert notes["plans"] == {} and isinstance(notes["plansThrough"], str) and notes["ledger"]["facts"]
    assert hook("PostToolUse", {**payload, "tool_name": "Bash", "tool_response": "x" * 10**6}) == ""
    log = (tmp_path / "state" / "ctxd" / "hooks.log").read_text()
    assert "PostToolUse: not handled for Codex" in log and " error " not in log
    archive = str(tmp_path / "data" / "ctxd" / "archive")
    found = list_sessions([str(tmp_path / "codex-home"), archive], archive_roots=[archive])
    listed = {Path(s.path): s for s in found}
    assert listed[archived].archiveOf == str(path) and listed[path].archives == [str(archived)]


def test_a_summary_it_cannot_read_sends_every_fact(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A compaction whose summary is not in the rollout when SessionStart runs (the built-in provider compacts
    remotely, encrypted: no later hook can read it either): every fact goes at once, none wait."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("CTXD_CONFIG", str(tmp_path / "none.json"))
    path = live(tmp_path)
    payload = {"session_id": "01a2149d-8f0f-74c1-8dfa-7129af1db7c5", "transcript_path": str(path), "trigger": "manual"}
    assert hook("PreCompact", payload) == ""
    # The rollout does not change: no new compacted line when SessionStart runs.
    printed = json.loads(hook("SessionStart", {**payload, "source": "compact"}))
    context = printed["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("## Must keep (ctxd): facts from before the compaction\n")
    assert "never edit README.md" in context and context.endswith(RECALL_HINT)
    assert hook("UserPromptSubmit", {**payload, "prompt": "go on"}) == ""
