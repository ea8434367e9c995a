"""session/facts through a real daemon: the fact ledger of a session compacted twice, with the facts said since."""

from __future__ import annotations

import pytest
from pytest_lsp import LanguageClient

from ctxd.service import protocol as p

from .harness import append, assistant, call, call_error, conversation, new_session, user

pytestmark = pytest.mark.asyncio(loop_scope="module")

NEVER = "Never push to the release branch."
ERROR = "The last CI run failed with ERR_ZETA_4711 from the config loader."


async def test_session_facts_carries_facts_through_compactions(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    await append(ctxd, path, user(f"Build the zeta loader. {NEVER}"), assistant("Starting."), user(ERROR))
    await append(ctxd, path, assistant("Noted."), *conversation(4))
    first = await call(ctxd, p.COMPACT, {"session": path, "keepRecentTokens": 300})
    await append(ctxd, path, *conversation(4))
    await call(ctxd, p.COMPACT, {"session": path, "keepRecentTokens": 300})
    await append(ctxd, path, user("You may push to the release branch now."), assistant("ok"))

    facts = await call(ctxd, p.SESSION_FACTS, {"session": path})
    assert facts["session"] == path and facts["version"] == 1 and facts["compactions"] == 2
    assert facts["goal"] == f"Build the zeta loader. {NEVER}"
    by_text = {(f["kind"], f["text"]): f for f in facts["facts"]}
    error = by_text[("error", f"User reported: {ERROR}")]
    assert error["status"] == "open" and error["firstSeen"]["compaction"] == 1
    assert error["firstSeen"]["line"] > 1 and error["firstSeen"]["entryId"] and error["lastSeen"]["time"]
    # Taken back since the last compaction: superseded, with the reason; nothing was written.
    constraint = by_text[("constraint", NEVER)]
    assert constraint["status"] == "superseded" and constraint["why"].startswith("withdrawn: You may push")
    assert facts["counts"]["superseded"] >= 1 and facts["counts"]["open"] >= 2
    assert facts["text"].startswith("## Must keep (session facts)\n- Goal: Build the zeta loader.")
    assert "ERR_ZETA_4711" in facts["text"] and NEVER not in facts["text"].split("\n", 2)[2]
    assert first["entryId"]  # the first compaction's ledger is where the error was first recorded


async def test_session_facts_of_a_session_never_compacted_and_of_a_missing_one(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    await append(ctxd, path, user(f"Port the parser. {NEVER}"), assistant("ok"))
    facts = await call(ctxd, p.SESSION_FACTS, {"session": path})
    assert facts["compactions"] == 0 and facts["goal"] == f"Port the parser. {NEVER}"
    assert [f["firstSeen"]["compaction"] for f in facts["facts"]] == [0] * len(facts["facts"])
    error = await call_error(ctxd, p.SESSION_FACTS, {"session": "/nowhere/none.jsonl"})
    assert error.code in (-31001, -31002)
