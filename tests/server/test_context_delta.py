"""``context/build`` with ``sinceLeafId``/``sinceRevision``: only what follows a context the client
holds, end to end through a real daemon; the pieces always add up to the whole context."""

from __future__ import annotations

from typing import Any

import pytest
from pytest_lsp import LanguageClient

from ctxd.service import protocol as p

from .harness import append, assistant, call, new_session, tool_result, user

pytestmark = pytest.mark.asyncio(loop_scope="module")

CTXD_OPTIONS = {"autoCompact": False}


async def build(ctxd: LanguageClient, path: str, **params: Any) -> dict[str, Any]:
    result: dict[str, Any] = await call(ctxd, p.CONTEXT_BUILD, {"session": path, **params})
    return result


async def test_since_sends_only_what_follows(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    await append(ctxd, path, user("read the app"), assistant("", calls=[("c1", "read", {"path": "a"})], total=900))
    held = await build(ctxd, path)
    assert held["base"] == 0 and held["revision"]
    await append(ctxd, path, tool_result("c1", "print('hi')"), assistant("it prints hi", total=1000))
    full = await build(ctxd, path)
    delta = await build(ctxd, path, sinceLeafId=held["leafId"], sinceRevision=held["revision"])
    assert delta["base"] == len(held["messages"]) == 2
    assert held["messages"] + delta["messages"] == full["messages"]
    assert [m["role"] for m in delta["messages"]] == ["toolResult", "assistant"]
    assert delta["contextTokens"] == full["contextTokens"] == 1000
    assert delta["estimatedTokens"] == full["estimatedTokens"]
    # Nothing new: nothing sent.
    again = await build(ctxd, path, sinceLeafId=full["leafId"], sinceRevision=full["revision"], includeMessages=False)
    assert again["base"] == len(full["messages"]) and again["messages"] == []


async def test_since_falls_back_to_the_whole_context(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    ids = (await append(ctxd, path, user("one"), assistant("two", total=500), user("three")))["ids"]
    held = await build(ctxd, path)
    whole = len(held["messages"])
    # Another revision (a daemon restart, a reloaded file): everything again.
    stale = await build(ctxd, path, sinceLeafId=held["leafId"], sinceRevision="elsewhere")
    assert stale["base"] == 0 and len(stale["messages"]) == whole
    # A branch: the held context is not a prefix of the new one.
    await call(ctxd, p.BRANCH, {"session": path, "entryId": ids[0]})
    await append(ctxd, path, user("another way"))
    moved = await build(ctxd, path, sinceLeafId=held["leafId"], sinceRevision=held["revision"])
    assert moved["base"] == 0 and moved["messages"][0]["entryId"] == ids[0]
    # ... but the context at the branch point is.
    at_fork = await build(ctxd, path, leafId=ids[0])
    since_fork = await build(ctxd, path, sinceLeafId=ids[0], sinceRevision=held["revision"])
    assert since_fork["base"] == len(at_fork["messages"]) == 1
    assert at_fork["messages"] + since_fork["messages"] == moved["messages"]
    # openai output is always whole (tool results pair with calls across the cut).
    openai = await build(ctxd, path, format="openai", sinceLeafId=ids[0], sinceRevision=held["revision"])
    assert openai["base"] == 0


async def test_an_edit_of_a_held_message_sends_everything(ctxd: LanguageClient) -> None:
    path = await new_session(ctxd)
    ids = (await append(ctxd, path, user("secret: hunter2"), assistant("noted", total=300)))["ids"]
    held = await build(ctxd, path)
    edit = {"type": "context_edit", "targetId": ids[0], "replacement": {"content": "secret: [removed]"}}
    await call(ctxd, p.SESSION_APPEND, {"session": path, "entries": [edit]})
    after = await build(ctxd, path, sinceLeafId=held["leafId"], sinceRevision=held["revision"])
    assert after["base"] == 0
    assert after["messages"][0]["message"]["content"] == "secret: [removed]"
