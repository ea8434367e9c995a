"""How to build, test and run, in little room: a long command (a linter run on each file it changed, ``git add``
of many paths) is shown by its head, and runs alike in their head are told once with their count."""

from __future__ import annotations

from typing import Any

from test_summarizers_offline import asst, call, result, section, user

from ctxd.compaction.ledger.mustkeep import must_keep_facts
from ctxd.compaction.summary import OfflineSummarizer, SummaryRequest

ROOT = "/work/projects/orchard-service"
FILES = [f"{ROOT}/src/orchard/handlers/harvest_{n}.css" for n in range(4)]


def _runs() -> list[dict[str, Any]]:
    lint = ["stylelint --strict " + " ".join(FILES[:3]), "stylelint --strict " + FILES[0]]
    add = "git add " + " ".join(FILES) + f" {ROOT}/docs/harvest.md"
    messages: list[dict[str, Any]] = [user("Tidy the harvest handlers until the linter is clean, then commit them.")]
    for n, (command, output, failed) in enumerate(
        [
            (lint[0], "| [D] Nested path should be imported at the top.\nfound 1 design suggestion", True),
            (lint[1], "| [R] Prefer an implicit guard.\nfound 1 readability issue", True),
            (lint[0], "42 mods/funs, found no issues.", False),
            (add, "", False),
        ]
    ):
        messages += [asst(call(f"b{n}", "bash", command=command)), result(f"b{n}", "bash", output, error=failed)]
    return messages


def test_long_commands_alike_in_their_head_are_told_once_by_their_head() -> None:
    messages = _runs()
    summary = OfflineSummarizer(scale=False).build(SummaryRequest(messages=messages))
    commands = section(summary, "How to build, test and run")
    lint = [line for line in commands.splitlines() if "stylelint" in line]
    assert len(lint) == 1, commands  # one line for the three runs on one, then three files
    assert "x3 (2 failed, last ok): 42 mods/funs, found no issues." in lint[0]
    assert max(len(line) for line in commands.splitlines()) < 160, commands
    # nothing the must-keep sheet wants is lost by the cut: it finds every command it checks for
    sheet = must_keep_facts(messages)
    assert not [f.text for f in sheet.missing(summary).facts if f.kind == "command"]
