"""The fact ledger through pi's compactions: three manual compactions in real pi with the extension; the ledger
ctxd hands back lives in each compaction entry's ``details.ctxd.ledger`` (pi keeps ``details``), goes back to
ctxd as ``previousDetails`` with the next compaction, and the last one holds every fact of the first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fakes.openai_server import FakeOpenAIServer, reply
from helpers.planted import ERROR, FACTS, GOAL, PLANTED
from pi_harness import Pi, chat_requests, text_of

from ctxd.compaction.ledger import Ledger

SUMMARY = "## Goal\nWork on the loader goes on.\n\n## Progress\n- The manifest is deploy/zeta/manifest.toml."
"""The fake model's summary (ctxd's summariser uses pi's model): it keeps only the path."""


def test_three_compactions_carry_every_fact_of_the_first(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    def answer(body: dict[str, Any], index: int) -> Any:
        return reply("Working on it. " + "Details. " * 80) if body.get("stream") else reply(SUMMARY)

    llm.responder = answer
    with Pi(tmp_path, llm, window=32_000) as pi:
        pi.prompt(f"{GOAL} {PLANTED}")
        pi.prompt(ERROR)
        for step in ("Add the parser for the manifest.", "Add the cache.", "Update the docs."):
            response = pi.command({"type": "compact"})
            assert response["success"], response
            pi.prompt(step)
        before = len(llm.requests)
        pi.prompt("What is next?")
        all_entries = pi.entries()
        entries = [e for e in all_entries if e["type"] == "compaction"]

    assert len(entries) == 3 and all(e["fromHook"] is True for e in entries)
    ledgers = [Ledger.from_json(e["details"]["ctxd"]["ledger"]) for e in entries]
    first, last = ledgers[0], ledgers[-1]
    assert first is not None and last is not None
    assert [ledger.compactions for ledger in ledgers if ledger] == [1, 2, 3]
    assert last.goal == first.goal and last.goal is not None and last.goal.startswith(GOAL)
    # Every open fact of the first ledger is in the last: still open, or closed with the reason.
    kept = {(f.kind, f.text): f for f in last.facts}
    for fact in first.facts:
        if fact.is_open:
            carried = kept[(fact.kind, fact.text)]
            assert carried.is_open or carried.why, carried
            assert carried.firstSeen.compaction == 1 and carried.firstSeen.time
    # Where: the entry pi wrote for the message (the extension sends the entry ids), its time.
    (first_user,) = [e for e in all_entries if e["type"] == "message" and GOAL in str(e["message"]["content"])]
    constraint = next(f for f in last.facts if f.kind == "constraint")
    assert constraint.firstSeen.entryId == first_user["id"] and constraint.firstSeen.time
    planted = [f for f in last.facts if any(p in f.text for p in FACTS) and f.kind != "goal"]
    assert {f.kind for f in planted} >= {"constraint", "stated", "error"}
    assert all(f.is_open for f in planted if f.kind != "request"), planted
    # The other fields ctxd writes there stay.
    details = entries[-1]["details"]["ctxd"]
    assert details["goal"] == last.goal and details["mustKeep"]["missing"] > 0 and details["trigger"] == "manual"
    # The request after the third compaction carries every planted fact (the summary only the path).
    (request,) = chat_requests(llm, before)
    summary = text_of(request.body["messages"][1])
    for fact in FACTS:
        assert fact in summary, fact
