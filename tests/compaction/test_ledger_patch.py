"""What a later summary's must-keep patch adds for the facts the ledger carries from earlier ranges: files the
file blocks list are kept, commands stay with their range, the carried facts get their own budget after the
range's, and an earlier patch handed to the summariser keeps only the stated facts."""

from __future__ import annotations

from typing import Any

from helpers.planted import ERROR, GOAL, NEVER, PATH, VALIDATE

from ctxd.compaction.ledger.mustkeep import Fact, FactSheet, patch_summary, path_probes, strip_patch, text_probes
from ctxd.compaction.ledger.update import advance
from ctxd.compaction.reading.fileops import format_file_blocks


def u(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def bash_turn(call_id: str, command: str) -> list[dict[str, Any]]:
    call = {"type": "toolCall", "id": call_id, "name": "bash", "arguments": {"command": command}}
    return [
        {"role": "assistant", "content": [call], "stopReason": "toolUse"},
        {"role": "toolResult", "toolCallId": call_id, "toolName": "bash", "content": [{"type": "text", "text": "ok"}]},
    ]


def test_a_file_of_an_earlier_range_is_kept_by_the_file_blocks_one_of_the_range_only_by_the_body() -> None:
    earlier = Fact("file-modified", "src/old/a.py", path_probes("src/old/a.py"), carried=True)
    own = Fact("file-modified", "src/new/b.py", path_probes("src/new/b.py"))
    sheet = FactSheet((earlier, own))
    summary = "## Goal\n- Port it." + format_file_blocks([], ["src/new/b.py", "src/old/a.py"])
    assert [f.text for f in sheet.missing(summary).facts] == ["src/new/b.py"]
    assert [f.text for f in sheet.missing("## Goal\n- Port it.").facts] == ["src/old/a.py", "src/new/b.py"]


def test_carried_commands_are_not_asked_of_a_later_summary_but_stay_in_the_ledger() -> None:
    one = advance(None, [u(f"{GOAL} {PATH} {VALIDATE} {NEVER}"), *bash_turn("c1", "make release-zeta")])
    two = advance(one.ledger, [u("Add the parser."), {"role": "assistant", "content": "ok"}])
    assert any("make release-zeta" in f.text for f in one.sheet.facts if f.kind == "command")
    assert not [f for f in two.sheet.facts if f.kind == "command"]
    assert [f for f in two.ledger.facts if f.kind == "command" and f.is_open]
    carried = {f.text: f.carried for f in two.sheet.facts}
    assert carried[NEVER] is True and carried[PATH] is True  # the user's facts are still asked for


def test_carried_facts_render_after_the_ranges_own_within_their_budget() -> None:
    own = Fact("constraint", "Keep the cache in memory only.", text_probes("Keep the cache in memory only."))
    carried = tuple(
        Fact("error", f"`make m{k}` failed: boom {k}", text_probes(f"boom {k}"), carried=True) for k in range(30)
    )
    text, missing = patch_summary("## Goal\n- Work.", FactSheet((own, *carried)), max_chars=4_000, carried_chars=200)
    keep = text[text.index("## Must keep") :]
    assert "Keep the cache in memory only." in keep and "boom 0" in keep
    assert len(keep) < 400 and "more facts not shown" in keep
    assert len(missing) == 31  # counted, all of them
    alone, _ = patch_summary("## Goal\n- Work.", FactSheet(carried), max_chars=4_000, carried_chars=200)
    assert len(alone[alone.index("## Must keep") :]) <= 200 + len("## Must keep") + 1


def test_an_earlier_patch_keeps_only_its_stated_facts_for_the_summariser() -> None:
    summary = (
        "## Goal\n- Port it.\n\n## Must keep\n- User stated: "
        + PATH
        + "\n- Error: "
        + ERROR
        + "\n- Files read: a/b/c.py\n\n## Turn Context (split turn)\n- t\n\n## Must keep\n- Commands: `make`"
        + format_file_blocks(["a/b/c.py"], [])
    )
    out = strip_patch(summary)
    assert out is not None
    assert PATH in out and ERROR not in out and "Files read" not in out and "`make`" not in out
    assert out.count("## Must keep") == 1 and "## Turn Context (split turn)\n- t" in out and "<read-files>" in out
    assert strip_patch("## Goal\n- x\n") == "## Goal\n- x\n" and strip_patch(None) is None
