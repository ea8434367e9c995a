"""``context/composition`` and ``context/compositionChanged`` through a real daemon: the parts add up
to ``context/build``'s per-message estimates, the timeline shows a compaction with its tokens before
and after, and a followed session's composition arrives again after each change (an append through
the daemon, another process's write, the daemon's own compaction)."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
from pytest_lsp import LanguageClient

from ctxd.service import protocol as p

from .harness import append, assistant, call, call_error, conversation, new_session, user

pytestmark = pytest.mark.asyncio(loop_scope="module")

WINDOW = 4_000
RESERVE = 1_000
CTXD_OPTIONS = {
    "autoCompact": True,
    "compaction": {"contextWindow": WINDOW, "reserveTokens": RESERVE, "keepRecentTokens": 300},
}


def tool_result(call_id: str, name: str, text: str) -> dict[str, object]:
    return {"role": "toolResult", "toolCallId": call_id, "toolName": name, "content": [{"type": "text", "text": text}]}


async def test_the_parts_add_up_to_the_per_message_estimates(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    await append(
        ctxd,
        path,
        user("read the config"),
        assistant("", calls=[("c1", "read", {"path": "config.toml"})], total=900),
        tool_result("c1", "read", "port = 8080\n" * 200),
        assistant("It sets port 8080.", total=1_500),
    )
    got = await call(ctxd, p.CONTEXT_COMPOSITION, {"session": path, "top": 3})
    built = await call(ctxd, p.CONTEXT_BUILD, {"session": path, "includeMessages": False})
    assert sum(got["parts"].values()) == sum(m["tokens"] for m in built["messages"]) == got["estimatedTokens"]
    assert got["contextTokens"] == built["contextTokens"] and got["revision"] == built["revision"]
    assert (got["window"], got["threshold"], got["reserve"]) == (WINDOW, WINDOW - RESERVE, RESERVE)
    assert got["toolResultsByTool"] == {"read": got["parts"]["toolResults"]} and got["parts"]["toolCalls"] > 0
    assert len(got["top"]) == 3 and got["top"][0]["role"] == "toolResult" and got["top"][0]["tool"] == "read"
    assert [t["turn"] for t in got["timeline"]] == [1] and got["timeline"][-1]["tokens"] == got["contextTokens"]
    assert got["timeline"][-1]["source"] == "usage"

    error = await call_error(ctxd, p.CONTEXT_COMPOSITION, {"session": path, "top": 101})
    assert error.code == -32602 and "top" in str(error)


async def test_a_followed_session_is_sent_again_after_each_change(ctxd: LanguageClient) -> None:
    notes = ctxd.notes  # type: ignore[attr-defined]
    path = await new_session(ctxd)
    await append(ctxd, path, user("hello"), assistant("hi", total=200))
    first = await call(ctxd, p.CONTEXT_COMPOSITION, {"session": path})
    assert first["leafId"] is not None

    # An append through the daemon.
    mark = notes.mark()
    done = await append(ctxd, path, user("more"), assistant("sure", total=400))
    sent = await notes.wait(p.COMPOSITION_CHANGED, lambda c: c["leafId"] == done["leafId"], session=path, since=mark)
    assert sent["contextTokens"] == 400 and [t["tokens"] for t in sent["timeline"]] == [200, 400]

    # Another process's write (the watcher).
    mark = notes.mark()
    line = {"type": "message", "id": "ext00001", "parentId": done["leafId"], "timestamp": "2026-01-01T00:00:00Z"}
    line["message"] = user("from another process")
    code = "import sys; open(sys.argv[1], 'a').write(sys.argv[2] + '\\n')"
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code, path, json.dumps(line))
    assert await proc.wait() == 0
    sent = await notes.wait(p.COMPOSITION_CHANGED, lambda c: c["leafId"] == "ext00001", session=path, since=mark)
    assert len(sent["timeline"]) == 3

    # The daemon's own compaction: a point of its own, with its tokens before and after.
    mark = notes.mark()
    await append(ctxd, path, *conversation(6), user("go on"), assistant("fine", total=WINDOW))
    status = await notes.wait(p.COMPACTION_STATUS, lambda s: s["state"] == "succeeded", session=path, since=mark)
    sent = await notes.wait(p.COMPOSITION_CHANGED, lambda c: c["leafId"] == status["entryId"], session=path, since=mark)
    point = sent["timeline"][-1]
    assert point["kind"] == "compaction" and point["entryId"] == status["entryId"]
    marker = sent["markers"][-1]
    assert marker["kind"] == "compaction" and marker["at"] == len(sent["timeline"]) - 1
    assert (marker["tokensBefore"], marker["tokensAfter"]) == (status["tokensBefore"], status["tokensAfter"])
    assert marker["trigger"] == "threshold" and marker["summarizer"]
    assert sent["parts"]["summary"] > 0 and sent["contextTokens"] < WINDOW - RESERVE


async def test_a_session_nobody_follows_sends_nothing(ctxd: LanguageClient) -> None:
    notes = ctxd.notes  # type: ignore[attr-defined]
    path = await new_session(ctxd)
    done = await append(ctxd, path, user("hello"), assistant("hi", total=200))
    # Asked at an entry rather than at the leaf: an answer, not a subscription.
    got = await call(ctxd, p.CONTEXT_COMPOSITION, {"session": path, "leafId": done["ids"][0], "top": 0})
    assert got["leafId"] == done["ids"][0] and got["top"] == [] and got["parts"]["assistant"] == 0
    mark = notes.mark()
    await append(ctxd, path, user("unfollowed"))
    await notes.quiet(p.COMPOSITION_CHANGED, session=path, since=mark, seconds=0.5)
