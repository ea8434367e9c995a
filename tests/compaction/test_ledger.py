"""The fact ledger: facts of every summarised range carried forward, statuses (resolved, superseded), the goal,
one-sentence facts, ctxd's re-injected blocks; stored in ``details.ctxd.ledger`` by ctxd's own compactions and
by ``compact/summarize`` (an agent's), seeded from a summary without one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.factories import assistant, entry, tool_result, user, write
from helpers.planted import ERROR, GOAL, NEVER, PATH, VALIDATE

from ctxd.compaction.engine import compact
from ctxd.compaction.external import Preparation, summarize_preparation
from ctxd.compaction.ledger import Ledger
from ctxd.compaction.ledger.mustkeep import patch_summary
from ctxd.compaction.ledger.update import advance, seed
from ctxd.compaction.reading.facts import scan, user_words
from ctxd.compaction.settings import CompactionSettings
from ctxd.compaction.summary import OfflineSummarizer
from ctxd.service.facts import session_facts
from ctxd.tree.session import Session


def u(text: str, **kw: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **kw}


def a(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "stopReason": "stop"}


def bash(call_id: str, command: str, output: str) -> list[dict[str, Any]]:
    call = {"type": "toolCall", "id": call_id, "name": "bash", "arguments": {"command": command}}
    return [
        {"role": "assistant", "content": [call], "stopReason": "toolUse"},
        {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": "bash",
            "content": [{"type": "text", "text": output}],
        },
    ]


def roundtrip(ledger: Ledger) -> Ledger:
    """What the next compaction reads back from ``details.ctxd.ledger``."""
    back = Ledger.from_json(ledger.to_json())
    assert back is not None
    return back


def by_text(ledger: Ledger, piece: str, kind: str | None = None) -> Any:
    found = [f for f in ledger.facts if piece in f.text and (kind is None or f.kind == kind)]
    assert len(found) == 1, [(f.kind, f.text) for f in ledger.facts]
    return found[0]


def first_range() -> list[dict[str, Any]]:
    return [u(f"{GOAL} {PATH} {VALIDATE} {NEVER}"), a("Starting."), u(ERROR), a("Noted.")]


def test_facts_accumulate_and_stay_open_across_several_compactions() -> None:
    one = advance(None, first_range()).ledger
    two = advance(roundtrip(one), [u("Add the parser."), a("Parser added.")]).ledger
    three = advance(roundtrip(two), [u("Add the cache."), a("Cache added.")])
    ledger = three.ledger
    assert ledger.compactions == 3 and ledger.goal is not None and ledger.goal.startswith(GOAL)
    for piece, kind in ((NEVER, "constraint"), (PATH, "stated"), (VALIDATE, "stated"), (ERROR, "error")):
        fact = by_text(ledger, piece, kind)
        assert fact.status == "open"
        assert (fact.firstSeen.compaction, fact.lastSeen.compaction) == (1, 1)
        # ... and what the third summary must keep, though its range never mentions them.
        assert any(piece in f.text for f in three.sheet.facts), piece


def test_the_goal_stays_the_first_request() -> None:
    one = advance(None, first_range()).ledger
    two = advance(roundtrip(one), [u("Now rewrite the parser in Rust, please."), a("ok")])
    assert two.ledger.goal == one.goal
    goals = [f for f in two.sheet.facts if f.kind == "goal"]
    assert len(goals) == 1 and goals[0].text.startswith(GOAL)
    assert [f.text for f in two.sheet.facts if f.kind == "request"] == ["Now rewrite the parser in Rust, please."]


def test_a_later_request_supersedes_the_previous_one() -> None:
    one = advance(None, [*first_range(), u("Add the parser."), a("ok")]).ledger
    two = advance(roundtrip(one), [u("Add the cache instead."), a("ok")]).ledger
    old = by_text(two, "Add the parser.", "request")
    assert old.status == "superseded" and old.why == "replaced by: Add the cache instead."
    assert by_text(two, "Add the cache instead.", "request").status == "open"


def test_an_error_is_resolved_by_a_later_success_of_its_command() -> None:
    failing = bash("t1", "cargo test -p zeta", "error[E0425]: cannot find value `rate`\n\nCommand exited with code 101")
    one = advance(None, [u(GOAL), *failing, a("The test fails; I'll look tomorrow.")]).ledger
    error = by_text(one, "E0425", "error")
    assert error.status == "open" and error.key == "cmd:cargo test -p zeta"
    passing = bash("t2", "cargo test -p zeta", "test result: ok. 3 passed")
    two = advance(roundtrip(one), [u("Try again."), *passing, a("Green.")]).ledger
    error = by_text(two, "E0425", "error")
    assert error.status == "resolved" and error.why == "`cargo test -p zeta` succeeded later"


def test_an_error_the_user_reported_is_resolved_when_a_text_says_it_is_fixed_and_names_it() -> None:
    one = advance(None, first_range()).ledger
    two = advance(roundtrip(one), [u("Go on."), a("The parser is done.")]).ledger
    assert by_text(two, ERROR, "error").status == "open"  # a text that does not name it resolves nothing
    three = advance(roundtrip(two), [u("Status?"), a("I fixed ERR_ZETA_4711: the loader reads the right key.")])
    error = by_text(three.ledger, ERROR, "error")
    assert error.status == "resolved" and "ERR_ZETA_4711" in error.why
    assert not any("ERR_ZETA_4711" in f.text for f in three.sheet.facts if f.kind == "error")


def test_a_constraint_the_user_withdraws_is_superseded() -> None:
    one = advance(None, first_range()).ledger
    two = advance(roundtrip(one), [u("You may push to the release branch now."), a("ok")]).ledger
    constraint = by_text(two, NEVER, "constraint")
    assert constraint.status == "superseded"
    assert constraint.why == "withdrawn: You may push to the release branch now."
    # Within one range too, but only when the withdrawal comes after the constraint.
    same = advance(None, [*first_range(), u("Actually you may push to the release branch now."), a("ok")]).ledger
    assert by_text(same, NEVER, "constraint").status == "superseded"
    before = advance(None, [u("You may push to the release branch now."), a("ok"), *first_range()]).ledger
    assert by_text(before, NEVER, "constraint").status == "open"


def test_facts_stated_in_one_sentence_count_whatever_the_messages_length() -> None:
    facts = scan([u(ERROR), u(PATH), u(VALIDATE), u(NEVER), u("Always run ruff before a commit.")])
    assert [e.line for e in facts.errors] == [ERROR] and facts.errors[0].label == "User reported"
    assert [s for _, s in facts.stated] == [PATH, VALIDATE]
    assert [s for _, s in facts.constraints] == [NEVER, "Always run ruff before a commit."]
    # Prose that mentions errors without naming one is not an error fact.
    assert scan([u("Please handle errors gracefully in the loader.")]).errors == []


def test_ctxds_reinjected_block_is_never_the_users_words_and_its_facts_are_carried() -> None:
    block = (
        "## Must keep (ctxd): facts from before the compaction that its summary left out\n"
        f"- User constraint: {NEVER}\n- Error: User reported: {ERROR}\n- Latest request: Add the parser."
    )
    message = u(f"What is next?\n\n{block}")
    assert user_words(message) == "What is next?"
    assert user_words(u(block)) == ""
    made = advance(None, [u(GOAL), a("ok"), message, a("Next: tests.")])
    assert made.ledger.goal == GOAL
    assert by_text(made.ledger, NEVER, "constraint").status == "open"
    assert by_text(made.ledger, ERROR, "error").status == "open"
    requests = [f.text for f in made.ledger.facts if f.kind == "request" and f.is_open]
    assert requests == ["What is next?"]  # ctxd's "Latest request" line is not a request of the user's


def test_a_summary_without_a_ledger_seeds_one_from_its_must_keep_section() -> None:
    summary = f"## Goal\n- {GOAL}\n\n## Progress\n- Done some.\n\n## Must keep\n- User constraint: {NEVER}\n"
    seeded = seed(summary)
    assert seeded.goal == GOAL and by_text(seeded, NEVER, "constraint").status == "open"
    made = advance(None, [u("Go on."), a("ok")], previous_summary=summary)
    assert made.ledger.goal == GOAL and made.ledger.compactions == 2
    assert any(f.text == NEVER for f in made.sheet.facts)


def test_a_damaged_ledger_reads_as_none_or_without_the_damaged_facts() -> None:
    assert Ledger.from_json(None) is None and Ledger.from_json({"facts": "x"}) is None
    good = advance(None, first_range()).ledger.to_json()
    good["facts"].append({"kind": 3, "text": None})
    good["facts"].append({"kind": "error", "text": "x", "probes": ["x"], "status": "weird"})
    good["facts"].append({"kind": "error", "text": "x", "probes": []})
    back = Ledger.from_json(good)
    assert back is not None and len(back.facts) == len(good["facts"]) - 3


def test_open_facts_render_first_within_the_patch_budget() -> None:
    ledger = advance(None, first_range()).ledger
    for k in range(30):  # many later ranges, each with commands and files
        messages = [u(f"Step {k}: port module m{k}."), *bash(f"c{k}", f"make m{k}", "ok"), a("done")]
        ledger = roundtrip(advance(ledger, messages).ledger)
    made = advance(ledger, [u("Last step."), a("ok")])
    text, missing = patch_summary("<summary>Work goes on.</summary>", made.sheet, max_chars=600)
    keep = text[text.index("## Must keep") :]
    assert len(keep) <= 600 and missing
    for piece in (GOAL, NEVER, PATH, "ERR_ZETA_4711"):
        assert piece in keep, piece


# --- stored in details.ctxd.ledger -----------------------------------------------------------------------------

SETTINGS = CompactionSettings(keep_recent_tokens=400)


def turn(parent: str, k: int, text: str) -> list[dict[str, Any]]:
    q = user(parent, text)
    c = assistant(q["id"], "", calls=[(f"b{k}", "bash", {"command": f"echo step{k}"})])
    r = tool_result(c["id"], f"b{k}", "y" * 3_000)
    d = assistant(r["id"], f"Step {k} done.")
    return [q, c, r, d]


async def test_ctxds_own_compactions_carry_the_ledger_in_details(tmp_path: Path) -> None:
    first = user(None, f"{GOAL} {PATH} {NEVER}")
    entries = [first, assistant(first["id"], "Starting.")]
    entries += turn(entries[-1]["id"], 0, ERROR)
    entries += turn(entries[-1]["id"], 1, "Add the parser.")
    path = write(tmp_path / "s.jsonl", entries)
    ledgers = []
    for k in range(2, 5):
        session = Session.open(path)
        out = await compact(session, SETTINGS, summarizer=OfflineSummarizer())
        ledgers.append(session.file.entry_by_id(out.entryId)["details"]["ctxd"]["ledger"])
        more = turn(out.entryId, k, f"Now do step {k} of the port.")
        session.append(more, parent_id=out.entryId)
    last = Ledger.from_json(ledgers[-1])
    assert last is not None and last.compactions == 3 and last.goal == f"{GOAL} {PATH} {NEVER}"
    constraint = by_text(last, NEVER, "constraint")
    assert constraint.status == "open" and constraint.firstSeen.compaction == 1
    assert constraint.firstSeen.entryId == first["id"] and constraint.firstSeen.line == 2
    assert by_text(last, ERROR, "error").status == "open"
    requests = [f for f in last.facts if f.kind == "request"]
    assert [f.status for f in requests].count("open") == 1


async def test_an_agents_compactions_carry_the_ledger_through_previous_details() -> None:
    details: dict[str, Any] | None = None
    summary: str | None = None
    ranges = [first_range(), [u("Add the parser."), a("ok")], [u("Add the cache."), a("ok")]]
    for messages in ranges:
        prep = Preparation(messages=messages, previous_summary=summary, previous_details=details)
        made = await summarize_preparation(prep, SETTINGS, trigger="threshold", summarizer=OfflineSummarizer())
        details, summary = made.details, made.summary
    assert details is not None
    last = Ledger.from_json(details["ctxd"]["ledger"])
    assert last is not None and last.compactions == 3 and details["ctxd"]["goal"] == last.goal
    for piece, kind in ((NEVER, "constraint"), (PATH, "stated"), (VALIDATE, "stated"), (ERROR, "error")):
        assert by_text(last, piece, kind).status == "open"
    assert summary is not None and NEVER in summary  # the third summary keeps what the first range said


async def test_a_session_compacted_before_ledgers_is_read_and_carried(tmp_path: Path) -> None:
    """An old compaction entry (details.ctxd with a goal, no ledger; the summary's own Must keep section): the
    next compaction seeds the ledger from it, and session_facts reads it the same way."""
    first = user(None, GOAL)
    ok = assistant(first["id"], "Starting.")
    summary = f"## Goal\n- {GOAL}\n\n## Progress\n- Some done.\n\n## Must keep\n- User constraint: {NEVER}"
    old = entry("compaction", ok["id"], summary=summary, firstKeptEntryId=ok["id"], tokensBefore=900)
    old["details"] = {"readFiles": [], "modifiedFiles": [], "ctxd": {"goal": GOAL, "trigger": "manual"}}
    entries = [first, ok, old]
    entries += turn(old["id"], 0, "Add the parser.")
    entries += turn(entries[-1]["id"], 1, "Add the cache.")
    path = write(tmp_path / "old.jsonl", entries)
    before = session_facts(path)
    assert before.goal == GOAL and by_text(before, NEVER, "constraint").status == "open"
    assert before.compactions == 1
    session = Session.open(path)
    out = await compact(session, SETTINGS, summarizer=OfflineSummarizer())
    ledger = Ledger.from_json(session.file.entry_by_id(out.entryId)["details"]["ctxd"]["ledger"])
    assert ledger is not None and ledger.goal == GOAL and ledger.compactions == 2
    assert by_text(ledger, NEVER, "constraint").status == "open"
    assert NEVER in out.summary
    after = session_facts(path)
    assert after.compactions == 2 and by_text(after, NEVER, "constraint").status == "open"


async def test_a_compaction_another_tool_made_in_between_loses_no_fact(tmp_path: Path) -> None:
    """ctxd compacts, then the agent compacts on its own (no ledger in its entry: ctxd was not running), then
    ctxd again: the first ledger's open facts are carried, and the agent's summary's must-keep facts join."""
    first = user(None, f"{GOAL} {NEVER}")
    entries = [first, assistant(first["id"], "Starting.")]
    entries += turn(entries[-1]["id"], 0, ERROR)
    entries += turn(entries[-1]["id"], 1, "Add the parser.")
    path = write(tmp_path / "s.jsonl", entries)
    session = Session.open(path)
    ours = await compact(session, SETTINGS, summarizer=OfflineSummarizer())
    more = turn(ours.entryId, 2, "Add the cache.")
    session.append(more, parent_id=ours.entryId)
    theirs = {
        "type": "compaction",
        "summary": "## Goal\nWork goes on.\n\n## Must keep\n- User constraint: Keep the cache in memory only.",
        "firstKeptEntryId": more[-1]["id"],
        "tokensBefore": 5_000,
        "details": {"readFiles": [], "modifiedFiles": []},
    }
    (their_id,) = session.append([theirs], parent_id=more[-1]["id"])
    session.append(turn(their_id, 3, "Now the docs."), parent_id=their_id)
    session = Session.open(path)
    again = await compact(session, SETTINGS, summarizer=OfflineSummarizer())
    ledger = Ledger.from_json(session.file.entry_by_id(again.entryId)["details"]["ctxd"]["ledger"])
    assert ledger is not None and ledger.compactions == 3 and ledger.goal == f"{GOAL} {NEVER}"
    assert by_text(ledger, NEVER, "constraint").status == "open"
    assert by_text(ledger, ERROR, "error").status == "open"
    assert by_text(ledger, "Keep the cache in memory only.", "constraint").firstSeen.compaction == 2
    assert NEVER in again.summary and "ERR_ZETA_4711" in again.summary


async def test_an_agents_own_compaction_in_between_loses_no_fact_when_it_sends_the_earlier_ledger() -> None:
    prep = Preparation(messages=first_range())
    made = await summarize_preparation(prep, SETTINGS, trigger="threshold", summarizer=OfflineSummarizer())
    earlier = made.details["ctxd"]["ledger"]
    # The agent compacted on its own meanwhile: its entry has no ledger; its summary says little.
    theirs = "## Goal\nWork goes on.\n\n## Must keep\n- User constraint: Keep the cache in memory only."
    prep = Preparation(
        messages=[u("Add the docs."), a("ok")],
        previous_summary=theirs,
        previous_details={"readFiles": [], "modifiedFiles": []},
        previous_ledger=earlier,
    )
    made = await summarize_preparation(prep, SETTINGS, trigger="threshold", summarizer=OfflineSummarizer())
    last = Ledger.from_json(made.details["ctxd"]["ledger"])
    assert last is not None and last.compactions == 3 and last.goal is not None and last.goal.startswith(GOAL)
    for piece, kind in ((NEVER, "constraint"), (ERROR, "error"), ("Keep the cache in memory only.", "constraint")):
        assert by_text(last, piece, kind).status == "open"
    assert NEVER in made.summary
