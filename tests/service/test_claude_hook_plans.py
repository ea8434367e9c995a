"""The plan a Claude Code session follows survives the hooks' compactions (issue 18 item 1: the same ledger
whichever path made the compaction): the real ``python -m ctxd hook`` entry runs over a transcript in Claude
Code 2.1.330's layout that crosses a compaction, and the second range only ticks a box of the plan written in
the first. The hooks keep the plan documents in the session's notes, so the next open item moves on.

Claude keeps the newest messages verbatim after its summary (``compactMetadata.preservedSegment``); here they
include the first range's tick, so the second range starts with a call that was already applied once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import REPO

from ctxd.service.facts import session_facts

SESSION = "5b0d3c1e-6a2f-4c8e-9f71-2d4e6a8b0c13"
CWD = "/home/dev/proj"
PLAN_PATH = f"{CWD}/PLAN.md"
PLAN = "# Plan\n\n- [ ] Step 1: write the parser\n- [ ] Step 2: add the cache\n- [ ] Step 3: write the docs\n"
NEXT = "Next open plan item: "
SUMMARY = "1. Primary Request and Intent: follow PLAN.md.\n2. Files: /home/dev/proj/PLAN.md."


class Transcript:
    """Lines of a Claude Code transcript, written as Claude Code 2.1.330 writes them (the fields ctxd reads)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.count = 0

    def _add(self, line: dict[str, Any], *, root: bool = False) -> str:
        self.count += 1
        uuid = f"00000000-0000-4000-8000-{self.count:012d}"
        base = {
            "parentUuid": None if root else self.parent,
            "isSidechain": False,
            "uuid": uuid,
            "timestamp": f"2026-11-25T23:{self.count // 60:02d}:{self.count % 60:02d}.000Z",
            "sessionId": SESSION,
            "cwd": CWD,
            "version": "2.1.330",
            "userType": "external",
        }
        self.lines.append({**base, **line})
        self.parent = uuid
        return uuid

    def user(self, text: str) -> str:
        return self._add({"type": "user", "message": {"role": "user", "content": text}})

    def tool(self, name: str, arguments: dict[str, Any], result: str) -> str:
        """A tool call and its result; the id of the call's line."""
        call_id = f"toolu_{self.count + 1:04d}"
        block = {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
        message = {"id": f"msg_{self.count + 1:04d}", "type": "message", "role": "assistant", "model": "m"}
        message.update({"content": [block], "stop_reason": "tool_use", "usage": {"input_tokens": 10}})
        call = self._add({"type": "assistant", "message": message})
        content = [{"tool_use_id": call_id, "type": "tool_result", "content": result}]
        self._add({"type": "user", "message": {"role": "user", "content": content}, "sourceToolAssistantUUID": call})
        return call

    def say(self, text: str) -> str:
        message = {"id": f"msg_{self.count + 1:04d}", "type": "message", "role": "assistant", "model": "m"}
        message.update({"content": [{"type": "text", "text": text}], "stop_reason": "end_turn"})
        return self._add({"type": "assistant", "message": message})

    def tick(self, step: str) -> str:
        edit = {"file_path": PLAN_PATH, "old_string": f"- [ ] {step}", "new_string": f"- [x] {step}"}
        return self.tool("Edit", edit, f"The file {PLAN_PATH} has been updated successfully.")

    def compact(self, kept_from: str, summary: str) -> None:
        """Claude's compact boundary and summary, keeping the messages from ``kept_from`` to the last verbatim."""
        tail = self.parent
        segment = {"headUuid": kept_from, "anchorUuid": None, "tailUuid": tail}
        meta = {"trigger": "manual", "preTokens": 12_000, "preservedSegment": segment}
        boundary = {"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted"}
        self._add({**boundary, "logicalParentUuid": tail, "compactMetadata": meta, "level": "info"}, root=True)
        text = f"This session is being continued from a previous conversation.\n\nSummary:\n{summary}"
        message = {"role": "user", "content": text}
        summary_line = self._add({"type": "user", "message": message, "isCompactSummary": True})
        segment["anchorUuid"] = summary_line
        self.parent = summary_line

    def save(self) -> None:
        self.path.write_text("".join(json.dumps(line) + "\n" for line in self.lines))


def hook(event: str, transcript: Path, tmp_path: Path, **extra: Any) -> str:
    """``python -m ctxd hook EVENT`` with Claude Code's payload on stdin; what it prints."""
    payload = {"session_id": SESSION, "transcript_path": str(transcript), "cwd": CWD, "hook_event_name": event}
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_DATA_HOME": str(tmp_path / "data")}
    env.update({"CTXD_CONFIG": str(tmp_path / "none.json"), "PYTHONPATH": str(REPO)})
    done = subprocess.run(
        [sys.executable, "-m", "ctxd", "hook", event],
        input=json.dumps({**payload, **extra}),
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    log = (tmp_path / "state" / "ctxd" / "hooks.log").read_text()
    assert "Error" not in log, log
    return done.stdout


def next_items(text: str) -> list[str]:
    return [line for line in text.splitlines() if NEXT in line]


def notes(tmp_path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((tmp_path / "state" / "ctxd" / "claude" / f"{SESSION}.json").read_text())
    return data


def first_range(tmp_path: Path) -> tuple[Transcript, str]:
    path = tmp_path / "claude" / "projects" / "-home-dev-proj" / f"{SESSION}.jsonl"
    path.parent.mkdir(parents=True)
    t = Transcript(path)
    t.user("Follow the plan in PLAN.md, one step at a time.")
    t.tool("Write", {"file_path": PLAN_PATH, "content": PLAN}, f"File created successfully at: {PLAN_PATH}")
    ticked = t.tick("Step 1: write the parser")
    t.say("Step 1 is done: the parser is written.")
    t.save()
    return t, ticked


def second_range(tmp_path: Path) -> Transcript:
    """The first compaction (manual, through every hook), then a range that only ticks Step 2."""
    t, ticked = first_range(tmp_path)
    first = hook("PreCompact", t.path, tmp_path, trigger="manual")
    assert [f"{NEXT}Step 2" in line for line in next_items(first)] == [True]
    hook("SessionStart", t.path, tmp_path, source="compact")
    hook("PostCompact", t.path, tmp_path, trigger="manual", compact_summary=SUMMARY)
    t.compact(kept_from=ticked, summary=SUMMARY)  # the tick of Step 1 is kept verbatim
    t.user("Go on with the plan.")
    t.tick("Step 2: add the cache")
    t.say("Step 2 is done: the cache is in.")
    t.save()
    return t


def test_the_second_compaction_names_the_plans_next_open_item(tmp_path: Path) -> None:
    t = second_range(tmp_path)
    second = hook("PreCompact", t.path, tmp_path, trigger="auto")
    assert [line.split(" (plan: ")[0].split(NEXT)[1] for line in next_items(second)] == ["Step 3: write the docs"]
    [line] = next_items(second)
    assert f"{NEXT}Step 3: write the docs" in line and PLAN_PATH in line
    saved = notes(tmp_path)
    assert saved["plans"][PLAN_PATH] == PLAN.replace("- [ ] Step 1", "- [x] Step 1").replace(
        "- [ ] Step 2", "- [x] Step 2"
    )
    assert saved["plansThrough"] == t.parent
    ledger_next = [f for f in saved["ledger"]["facts"] if f["kind"] == "next"]
    assert [f["status"] for f in ledger_next if "Step 2" in f["text"]] == ["superseded"]
    assert [f["status"] for f in ledger_next if "Step 3" in f["text"]] == ["open"]
    # An automatic compaction: the facts its summary lacks go with the next tool result, the plan's next item the
    # current one.
    assert hook("SessionStart", t.path, tmp_path, source="compact") == ""
    hook("PostCompact", t.path, tmp_path, trigger="auto", compact_summary=SUMMARY)
    after = json.loads(hook("PostToolUse", t.path, tmp_path, tool_name="Bash", tool_response="ok"))
    [line] = next_items(after["hookSpecificOutput"]["additionalContext"])
    assert f"{NEXT}Step 3: write the docs" in line
    # PreCompact again for the same compaction (say it was cancelled): the ticks are not applied twice.
    assert hook("PreCompact", t.path, tmp_path, trigger="auto") == second
    assert notes(tmp_path)["plans"] == saved["plans"]


def test_notes_written_before_plans_were_kept_still_work(tmp_path: Path) -> None:
    """Notes of an older ctxd (a ledger, no ``plans``): the hook runs as before, and keeps the plans from then on."""
    t = second_range(tmp_path)
    path = tmp_path / "state" / "ctxd" / "claude" / f"{SESSION}.json"
    old = notes(tmp_path)
    del old["plans"], old["plansThrough"]
    path.write_text(json.dumps(old))
    second = hook("PreCompact", t.path, tmp_path, trigger="auto")
    assert second and "Step 3" not in second  # the plan's text before this range is unknown: nothing guessed
    assert notes(tmp_path)["plans"] == {} and notes(tmp_path)["plansThrough"] == t.parent


def test_session_facts_between_compactions_name_the_current_next_item(tmp_path: Path) -> None:
    """``session/facts`` (and the MCP tool ``session_facts``) take the messages since the compaction in with the
    notes' plan documents: the open next item is the current one, not the one the first range left."""
    t = second_range(tmp_path)
    ledger = session_facts(str(t.path), state_dir=str(tmp_path / "state" / "ctxd"))
    open_next = [f.text for f in ledger.open_facts() if f.kind == "next"]
    assert [text.split(" (plan: ")[0] for text in open_next] == [f"{NEXT}Step 3: write the docs"]
