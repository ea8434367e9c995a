"""Compaction through litellm (a fake OpenAI server), its cancellation, and the compact/willRun hook."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.openai_server import FakeOpenAIServer, server_error, slow
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from ctxd.service import protocol as p

from .harness import (
    TIMEOUT,
    append,
    assistant,
    call,
    call_error,
    conversation,
    new_session,
    read_entries,
    start_ctxd,
    user,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

FAKE_SUMMARY = "## Goal\nFake summary."


def ctxd_options(root: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
    llm: FakeOpenAIServer = request.getfixturevalue("llm")
    return {
        "roots": [str(root)],
        "watch": False,
        "autoCompact": False,
        "hooks": {"compactWillRun": True},
        "compaction": {
            "model": "openai/x",
            "apiBase": llm.url,
            "apiKey": "sk-test-not-a-real-key",
            "maxAttempts": 1,
            "timeoutSeconds": 30,
            "keepRecentTokens": 300,
        },
    }


@pytest.fixture
def hook(ctxd: LanguageClient) -> Iterator[LanguageClient]:
    """The client, with its compact/willRun answer reset after the test."""
    ctxd.will_run_calls.clear()  # type: ignore[attr-defined]
    yield ctxd
    ctxd.will_run = None  # type: ignore[attr-defined]


@pytest.fixture
def model(llm: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    """The fake OpenAI server, its requests and script reset around the test."""
    llm.requests.clear()
    yield llm
    llm.responder = None
    llm.script()


async def compactable(client: LanguageClient) -> tuple[str, list[str]]:
    path = await new_session(client)
    ids = (await append(client, path, *conversation(6)))["ids"]
    return path, ids


async def test_compaction_through_the_model(hook: LanguageClient, model: FakeOpenAIServer) -> None:
    path, ids = await compactable(hook)
    mark = hook.notes.mark()  # type: ignore[attr-defined]
    result = await call(hook, p.COMPACT, {"session": path})
    assert result["path"] == "model" and result["model"]
    assert result["summary"].startswith(FAKE_SUMMARY)
    assert len(model.requests) == 1 and "question 0" in model.requests[0].prompt
    assert model.requests[0].body["model"] == "x"
    entry = read_entries(path)[-1]
    assert entry["type"] == "compaction" and entry["summary"] == result["summary"]
    assert entry["usage"]["totalTokens"] > 0
    done = await hook.notes.wait(p.COMPACTION_STATUS, lambda s: s["state"] == "succeeded", session=path, since=mark)  # type: ignore[attr-defined]
    assert done["path"] == "model"
    # With the hook declared, the client was asked first (it answered null: go ahead).
    (asked,) = hook.will_run_calls  # type: ignore[attr-defined]
    assert asked["session"] == path and asked["trigger"] == "manual"
    assert asked["plan"]["leafId"] == ids[-1] and asked["plan"]["firstKeptEntryId"] == result["firstKeptEntryId"]


async def test_a_failing_model_falls_back(hook: LanguageClient, model: FakeOpenAIServer) -> None:
    model.responder = lambda body, index: server_error()
    path, _ = await compactable(hook)
    result = await call(hook, p.COMPACT, {"session": path})
    assert result["path"] == "fallback-keep-last-turns"
    assert result["failures"] and all("500" in f or "server" in f.lower() for f in result["failures"])
    assert read_entries(path)[-1]["id"] == result["entryId"]


async def test_branch_summary_through_the_model(hook: LanguageClient, model: FakeOpenAIServer) -> None:
    path, ids = await compactable(hook)
    result = await call(hook, p.BRANCH, {"session": path, "entryId": ids[1], "summarize": True})
    assert result["path"] == "model" and result["summary"].startswith(FAKE_SUMMARY)
    entry = read_entries(path)[-1]
    assert entry["type"] == "branch_summary" and entry["fromId"] == ids[-1]


async def test_cancelling_a_slow_compaction(hook: LanguageClient, model: FakeOpenAIServer) -> None:
    notes = hook.notes  # type: ignore[attr-defined]
    path, _ = await compactable(hook)
    size = len(read_entries(path))
    model.script(slow(4.0))
    mark = notes.mark()
    pending = asyncio.ensure_future(
        hook.protocol.send_request_async(p.COMPACT, {"session": path, "workDoneToken": "slow"}, msg_id="slow-compact")
    )
    await notes.wait(p.COMPACTION_STATUS, lambda s: s["state"] == "running", session=path, since=mark)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT
    while not model.requests and loop.time() < deadline:  # the model call is in flight
        await asyncio.sleep(0.02)
    assert model.requests
    hook.protocol.notify(lsp.CANCEL_REQUEST, lsp.CancelParams(id="slow-compact"))
    with pytest.raises(JsonRpcException) as info:
        await asyncio.wait_for(pending, TIMEOUT)
    assert info.value.code == -32800
    cancelled = await notes.wait(p.COMPACTION_STATUS, lambda s: s["state"] != "running", session=path, since=mark)
    assert cancelled["state"] == "cancelled" and cancelled["trigger"] == "manual"
    await notes.wait("$/progress", lambda x: x["token"] == "slow" and x["value"]["kind"] == "end", since=mark)
    # Even when the model's late answer arrives, nothing is written.
    while model.requests[0].finished is None and loop.time() < deadline + 5:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    assert len(read_entries(path)) == size
    # The daemon carries on, and the session compacts normally afterwards.
    result = await call(hook, p.COMPACT, {"session": path})
    assert read_entries(path)[-1]["id"] == result["entryId"]


async def test_hook_cancels_the_compaction(hook: LanguageClient, model: FakeOpenAIServer) -> None:
    hook.will_run = lambda params: {"cancel": True}  # type: ignore[attr-defined]
    path, _ = await compactable(hook)
    size = len(read_entries(path))
    mark = hook.notes.mark()  # type: ignore[attr-defined]
    error = await call_error(hook, p.COMPACT, {"session": path})
    assert error.code == -32800 and "willRun" in error.message
    status = await hook.notes.wait(p.COMPACTION_STATUS, lambda s: s["state"] != "running", session=path, since=mark)  # type: ignore[attr-defined]
    assert status["state"] == "cancelled"
    assert len(read_entries(path)) == size
    assert not model.requests  # the model was never asked


async def test_hook_supplies_the_summary(hook: LanguageClient, model: FakeOpenAIServer) -> None:
    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0.05)  # an async handler works too
        return {"summary": "MY SUMMARY"}

    hook.will_run = answer  # type: ignore[attr-defined]
    path, _ = await compactable(hook)
    result = await call(hook, p.COMPACT, {"session": path})
    assert result["path"] == "hook"
    entry = read_entries(path)[-1]
    assert entry["type"] == "compaction" and entry["summary"].startswith("MY SUMMARY")
    assert not model.requests


async def test_a_nonsense_hook_answer_does_not_stop_compaction(hook: LanguageClient, model: FakeOpenAIServer) -> None:
    hook.will_run = lambda params: ["not", "an", "object"]  # type: ignore[attr-defined]
    path, _ = await compactable(hook)
    result = await call(hook, p.COMPACT, {"session": path})
    assert result["path"] == "model" and len(hook.will_run_calls) == 1  # type: ignore[attr-defined]
    # (A hook answering with a JSON-RPC error is covered in test_client.py.)


async def test_hook_runs_for_auto_compaction_too(tmp_path: Path) -> None:
    options = {
        "roots": [str(tmp_path)],
        "watch": False,
        "hooks": {"compactWillRun": True},
        "compaction": {"contextWindow": 4000, "reserveTokens": 1000, "keepRecentTokens": 300},
    }
    async with start_ctxd(options) as client:
        client.will_run = lambda params: {"summary": "AUTO " + params["trigger"]}  # type: ignore[attr-defined]
        path = await new_session(client)
        await append(client, path, *conversation(4), user("q"), assistant("a", total=3500))
        done = await client.notes.wait(p.COMPACTION_STATUS, lambda s: s["state"] != "running", session=path)  # type: ignore[attr-defined]
        assert done["state"] == "succeeded" and done["path"] == "hook"
        assert read_entries(path)[-1]["summary"].startswith("AUTO threshold")
