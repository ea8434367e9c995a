"""The same must-keep facts from a transcript whatever ctxd's state dir holds (issue 28, item 5).

Real transcripts (Claude Code with one compaction, Codex with three) are replayed as the agent wrote
them: the hooks run PreCompact before each compaction line. At the next compaction the facts must be the same
(the instructions printed, the fact sheet and the ledger saved in the notes, the block re-injected after it, and
``session/facts``) whether the notes were kept all along (present), are ``{}`` (empty), the state dir is gone
(lost), or the hooks missed a compaction (a hook that did not run: the ledger is behind the transcript).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import reference

from ctxd.service import claude_hooks, codex_hooks
from ctxd.service.claude_hooks import HookResult, HookSettings
from ctxd.service.facts import session_facts

SESSION = "s-0001"
CASES = [
    ("claude", "claude-2.1.330-compact.jsonl"),  # one compaction (manual /compact), Claude Code 2.1.330
    ("claude", "session-624a4a58.jsonl"),  # one, in a real user's 2.6 MB session
    ("codex", "rollout-0.169-compactions.jsonl"),  # three (automatic)
]
"""Claude Code with several compactions: tests/claude_code/test_ledger.py (six, in the real Claude Code)."""
Handle = Callable[[str, Mapping[str, Any], HookSettings], HookResult]


def _cuts(lines: list[bytes], agent: str) -> list[int]:
    """The index of each compaction's line (PreCompact ran with the lines before it)."""
    if agent == "claude":
        return [i for i, line in enumerate(lines) if b'"compact_boundary"' in line]
    return [i for i, line in enumerate(lines) if json.loads(line).get("type") == "compacted"]


class Replay:
    """A transcript written line by line as the agent wrote it, with ctxd's hooks run against a state dir."""

    def __init__(self, tmp: Path, agent: str, name: str) -> None:
        source = reference("claude", name) if agent == "claude" else Path(__file__).parents[1] / "data" / agent / name
        self.lines = source.read_bytes().splitlines(keepends=True)
        self.cuts = _cuts(self.lines, agent)
        self.agent = agent
        self.handle: Handle = claude_hooks.handle if agent == "claude" else codex_hooks.handle
        self.path = tmp / "transcript.jsonl"
        self.tmp = tmp

    def settings(self, name: str) -> HookSettings:
        return HookSettings(str(self.tmp / name), str(self.tmp / "archive"), 5_000, archive=False)

    def notes(self, settings: HookSettings) -> Path:
        inner = ("codex", "claude") if self.agent == "codex" else ("claude",)
        return Path(settings.state_dir, *inner, f"{SESSION}.json")

    def write(self, end: int | None) -> None:
        self.path.write_bytes(b"".join(self.lines[:end]))

    def run(self, event: str, settings: HookSettings, **extra: Any) -> HookResult:
        payload = {"session_id": SESSION, "transcript_path": str(self.path), "hook_event_name": event, **extra}
        return self.handle(event, payload, settings)

    def compact(self, settings: HookSettings, number: int) -> None:
        """The hooks of compaction ``number`` (1-based), then the agent writes it."""
        self.write(self.cuts[number - 1])
        self.run("PreCompact", settings, trigger="auto")

    def outcome(self, settings: HookSettings) -> dict[str, Any]:
        """What ctxd gives: ``session/facts`` now, then at the next compaction its PreCompact, the notes and the
        block re-injected after it."""
        facts = session_facts(str(self.path), state_dir=settings.state_dir)
        pre = self.run("PreCompact", settings, trigger="auto")
        notes = json.loads(self.notes(settings).read_text())
        # Claude Code: the facts wait for the summary PostCompact brings, and go with the next prompt. Codex: this
        # rollout holds no summary of the compaction yet, so every fact goes at SessionStart.
        start = self.run("SessionStart", settings, source="compact")
        own = settings._replace(state_dir=str(Path(settings.state_dir, "codex"))) if self.agent == "codex" else settings
        payload = {"session_id": SESSION, "transcript_path": str(self.path), "compact_summary": "Work went on."}
        claude_hooks.handle("PostCompact", payload, own)
        prompt = self.run("UserPromptSubmit", settings, prompt="Go on.")
        return {
            "session/facts": facts.to_json(),
            "instructions": pre.stdout,
            "facts": notes["precompact"]["facts"],
            "compactions": notes["precompact"]["compactions"],
            "ledger": notes["ledger"],
            "plans": (notes.get("plans"), notes.get("plansThrough")),
            "reinjected": start.stdout + prompt.stdout,
        }


@pytest.mark.parametrize(("agent", "name"), CASES)
def test_the_facts_at_each_compaction_are_the_same_with_the_state_present_empty_or_lost(
    tmp_path: Path, agent: str, name: str
) -> None:
    replay = Replay(tmp_path, agent, name)
    assert replay.cuts
    for done in range(1, len(replay.cuts) + 1):
        # The transcript once compaction ``done`` is written, up to the next compaction (or its end).
        end = replay.cuts[done] if done < len(replay.cuts) else None
        present = replay.settings(f"present-{done}")
        for number in range(1, done + 1):
            replay.compact(present, number)
        replay.write(end)
        want = replay.outcome(present)
        assert want["compactions"] == done and want["ledger"]["compactions"] == done + 1
        assert want["facts"] and want["reinjected"]

        empty = replay.settings(f"empty-{done}")
        replay.notes(empty).parent.mkdir(parents=True)
        replay.notes(empty).write_text("{}")
        lost = replay.settings(f"lost-{done}")
        cases = {"empty": empty, "lost": lost}
        if done > 1:  # the hooks missed compaction 1 (installed after it), then ran
            late = replay.settings(f"late-{done}")
            for number in range(2, done + 1):
                replay.compact(late, number)
            cases["installed after the first compaction"] = late
            gap = replay.settings(f"gap-{done}")  # they ran at compaction 1, missed 2 and later ones
            replay.compact(gap, 1)
            cases["a compaction missed"] = gap
        replay.write(end)
        for case, settings in cases.items():
            got = replay.outcome(settings)
            for key, value in want.items():
                assert got[key] == value, f"{name}, {done} compaction(s), state {case}: {key} differs"
        shutil.rmtree(lost.state_dir)


def test_the_users_constraint_and_the_files_survive_a_lost_state(tmp_path: Path) -> None:
    """Claude Code 2.1.330, one /compact whose summary (Claude's own) has no must-keep section: without ctxd's
    notes the facts of the range before it (a constraint, the file written) used to be lost."""
    replay = Replay(tmp_path, "claude", "claude-2.1.330-compact.jsonl")
    replay.write(None)
    lost = replay.settings("lost")
    out = replay.outcome(lost)
    assert "- User constraint: Use only the standard library." in out["instructions"]
    assert "/home/dev/service/app.py" in out["instructions"]
    ledger = out["session/facts"]
    first = next(f for f in ledger["facts"] if f["text"] == "Use only the standard library.")
    assert first["status"] == "open" and first["firstSeen"]["compaction"] == 1 and first["firstSeen"]["entryId"]


def test_session_facts_reads_the_notes_codexs_hooks_keep(tmp_path: Path) -> None:
    """Codex's hooks keep Claude Code's notes under ``<state>/codex/claude/``: ``session/facts`` reads them there."""
    replay = Replay(tmp_path, "codex", "rollout-0.169-compactions.jsonl")
    state = replay.settings("state")
    for number in range(1, len(replay.cuts) + 1):
        replay.compact(state, number)
    replay.write(None)
    notes = json.loads(replay.notes(state).read_text())
    assert notes["ledger"]["compactions"] == 3
    only = {"kind": "stated", "text": "Only the notes know this.", "probes": ["only the notes know this."]}
    notes["ledger"]["facts"].append(only)
    replay.notes(state).write_text(json.dumps(notes))
    header = json.loads(replay.lines[0])["payload"]
    assert header["id"] != SESSION
    replay.notes(state).rename(replay.notes(state).with_name(f"{header['id']}.json"))
    ledger = session_facts(str(replay.path), state_dir=state.state_dir)
    assert any(f.text == "Only the notes know this." and f.is_open for f in ledger.facts)
