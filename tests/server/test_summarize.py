"""compact/summarize, branch/summarize and context/truncate: an agent's own messages summarised or
cut by a real daemon (through litellm to a fake OpenAI server), with no session file involved."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.openai_server import FakeOpenAIServer, server_error, slow
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from ctxd.service import protocol as p

from .harness import TIMEOUT, assistant, call, call_error, conversation, start_ctxd, tool_result, user

pytestmark = pytest.mark.asyncio(loop_scope="module")

KEY = "sk-test-not-a-real-key"


def ctxd_options(root: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
    return {"roots": [str(root)], "watch": False, "autoCompact": False}


@pytest.fixture
def model(llm: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    llm.requests.clear()
    yield llm
    llm.responder = None
    llm.script()


def through(llm: FakeOpenAIServer, **extra: Any) -> dict[str, Any]:
    """Settings naming the fake server's model, as pi's extension sends them."""
    return {"model": "openai/fake-model", "apiBase": llm.url, "apiKey": KEY, "maxAttempts": 1, **extra}


def preparation() -> dict[str, Any]:
    messages = [
        user("Fix the crash in src/parser.py; run `pytest -k parser` after."),
        assistant("Reading it.", calls=[("c1", "read", {"path": "src/parser.py"})]),
        tool_result("c1", "def parse(): ..."),
        assistant("Editing.", calls=[("c2", "edit", {"path": "src/parser.py", "edits": []})]),
        tool_result("c2", "ok", name="edit"),
        *conversation(2),
    ]
    return {
        "messages": messages,
        "previousSummary": "## Goal\nEarlier work on docs/guide.md.",
        "previousDetails": {"readFiles": ["docs/guide.md"], "modifiedFiles": ["CHANGELOG.md"]},
        "fileOps": {"read": ["README.md"], "written": [], "edited": []},
        "firstKeptEntryId": "e-kept",
        "tokensBefore": 9_000,
        "reason": "threshold",
    }


async def test_compact_summarize_through_the_model(ctxd: LanguageClient, model: FakeOpenAIServer) -> None:
    sessions_before = sorted(os.listdir(ctxd.root))  # type: ignore[attr-defined]
    params = {**preparation(), "instructions": "keep the parser details", "settings": through(model)}
    result = await call(ctxd, p.COMPACT_SUMMARIZE, params)
    assert result["path"] == "model" and result["model"] == "openai/fake-model"
    assert result["firstKeptEntryId"] == "e-kept" and result["tokensBefore"] == 9_000
    (request,) = model.requests
    assert request.body["model"] == "fake-model" and request.headers["authorization"] == f"Bearer {KEY}"
    assert "Fix the crash in src/parser.py" in request.prompt and "Earlier work on docs/guide.md" in request.prompt
    assert "keep the parser details" in request.prompt
    details = result["details"]
    # The agent's own tracking, ctxd's extraction and the previous compaction's lists, merged.
    assert details["readFiles"] == ["README.md", "docs/guide.md"]
    assert details["modifiedFiles"] == ["CHANGELOG.md", "src/parser.py"]
    ledger = details["ctxd"]
    assert ledger["trigger"] == "threshold" and ledger["path"] == "model" and ledger["messagesSummarized"] == 9
    assert ledger["instructions"] == "keep the parser details" and ledger["failures"] == []
    assert 0 < ledger["tokensAfter"] < 9_000 and result["tokensAfter"] == ledger["tokensAfter"]
    assert result["summary"].endswith("<modified-files>\nCHANGELOG.md\nsrc/parser.py\n</modified-files>")
    assert result["usage"]["totalTokens"] > 0
    # No session was created or written.
    assert sorted(os.listdir(ctxd.root)) == sessions_before  # type: ignore[attr-defined]


async def test_compact_summarize_offline_by_default(ctxd: LanguageClient, model: FakeOpenAIServer) -> None:
    result = await call(ctxd, p.COMPACT_SUMMARIZE, preparation())
    assert result["path"] == "offline" and result["model"] is None and not model.requests
    assert "src/parser.py" in result["summary"] and result["details"]["ctxd"]["summarizer"] == "offline"


async def test_compact_summarize_falls_back_offline(ctxd: LanguageClient, model: FakeOpenAIServer) -> None:
    model.responder = lambda body, index: server_error()
    result = await call(ctxd, p.COMPACT_SUMMARIZE, {**preparation(), "settings": through(model)})
    # The model twice (whole, then a pruned input), then the offline digest of the same messages.
    assert result["path"] == "fallback-offline" and len(model.requests) == 2
    assert len(result["failures"]) == 2 and result["firstKeptEntryId"] == "e-kept"
    assert "Fix the crash in src/parser.py" in result["summary"]


async def test_compact_summarize_is_cancelled(ctxd: LanguageClient, model: FakeOpenAIServer) -> None:
    model.script(slow(5.0))
    pending = asyncio.ensure_future(
        ctxd.protocol.send_request_async(
            p.COMPACT_SUMMARIZE, {**preparation(), "settings": through(model)}, msg_id="pi-compact"
        )
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT
    while not model.requests and loop.time() < deadline:
        await asyncio.sleep(0.02)
    assert model.requests, "the model call never started"
    started = loop.time()
    ctxd.protocol.notify(lsp.CANCEL_REQUEST, lsp.CancelParams(id="pi-compact"))
    with pytest.raises(JsonRpcException) as info:
        await asyncio.wait_for(pending, TIMEOUT)
    assert info.value.code == -32800 and loop.time() - started < 3
    # The daemon carries on.
    assert (await call(ctxd, p.COMPACT_SUMMARIZE, preparation()))["path"] == "offline"


async def test_compact_summarize_refuses_bad_params(ctxd: LanguageClient) -> None:
    assert (await call_error(ctxd, p.COMPACT_SUMMARIZE, {"messages": []})).code == -32602
    error = await call_error(ctxd, p.COMPACT_SUMMARIZE, {**preparation(), "settings": {"maxAttempts": 0}})
    assert error.code == -32602 and "settings.maxAttempts" in str(error)
    assert (await call_error(ctxd, p.COMPACT_SUMMARIZE, {**preparation(), "reason": "bored"})).code == -32602
    error = await call_error(ctxd, p.COMPACT_SUMMARIZE, {"messages": [user("x"), [1, "a"]]})
    assert error.code == -32602 and "messages" in str(error)
    error = await call_error(ctxd, p.COMPACT_SUMMARIZE, {"messages": [user("x"), {"content": "no role"}]})
    assert error.code == -32602 and "messages[1]" in str(error)
    error = await call_error(ctxd, p.COMPACT_SUMMARIZE, {"messages": [user("x")], "turnPrefix": [{"role": 5}]})
    assert error.code == -32602 and "turnPrefix[0]" in str(error)
    assert (await call_error(ctxd, p.BRANCH_SUMMARIZE, {"entries": [{"type": "message"}, "x"]})).code == -32602


def branch_entries() -> list[dict[str, Any]]:
    def entry(i: int, message: dict[str, Any]) -> dict[str, Any]:
        return {"type": "message", "id": f"b{i}", "parentId": f"b{i - 1}", "message": message}

    return [
        entry(1, user("Try the regex approach in src/lexer.py")),
        entry(2, assistant("Trying.", calls=[("c9", "write", {"path": "src/lexer.py", "content": "x"})])),
        entry(3, tool_result("c9", "written " * 400, name="write")),
        {"type": "label", "id": "b4", "parentId": "b3", "targetId": "b1", "label": "regex"},
        {
            "type": "branch_summary",
            "id": "b5",
            "parentId": "b4",
            "fromId": "b0",
            "summary": "An older detour.",
            "details": {"readFiles": ["NOTES.md"], "modifiedFiles": []},
        },
        entry(6, assistant("The regex approach failed on nested quotes.")),
    ]


async def test_branch_summarize_through_the_model(ctxd: LanguageClient, model: FakeOpenAIServer) -> None:
    params = {"entries": branch_entries(), "instructions": "say why it failed", "settings": through(model)}
    result = await call(ctxd, p.BRANCH_SUMMARIZE, params)
    assert result["path"] == "model" and result["summarizedMessages"] == 4
    (request,) = model.requests
    assert "Try the regex approach" in request.prompt and "say why it failed" in request.prompt
    assert "written written" not in request.prompt  # tool results are not summarised
    assert result["details"]["readFiles"] == ["NOTES.md"]
    assert result["details"]["modifiedFiles"] == ["src/lexer.py"]
    assert result["details"]["ctxd"]["instructions"] == "say why it failed"
    assert result["summary"].endswith("<modified-files>\nsrc/lexer.py\n</modified-files>")


async def test_branch_summarize_keeps_the_newest_within_the_budget(ctxd: LanguageClient) -> None:
    entries = [{"type": "message", "id": f"m{i}", "message": user(f"turn {i} " + "words " * 1_900)} for i in range(6)]
    result = await call(
        ctxd, p.BRANCH_SUMMARIZE, {"entries": entries, "settings": {"contextWindow": 8_000}, "reserveTokens": 2_000}
    )
    # Each message is about 3,000 tokens: two fit in 6,000, the newest ones.
    assert result["summarizedMessages"] == 2 and "turn 5" in result["summary"] and "turn 0" not in result["summary"]


async def test_context_truncate(ctxd: LanguageClient) -> None:
    big = tool_result("c1", "line of output\n" * 2_000)
    small = tool_result("c2", "short")
    result = await call(
        ctxd, p.CONTEXT_TRUNCATE, {"messages": [small, big, user("x" * 50_000)], "contextWindow": 4_000}
    )
    assert result["truncated"] == [1] and result["limitChars"] == 4_800
    cut = result["messages"][1]
    text = cut["content"][0]["text"]
    assert len(text) <= 4_800 and "ctxd truncated this tool result" in text
    assert cut["details"]["ctxdTruncated"] == {"originalChars": 30_000, "limitChars": 4_800}
    assert result["messages"][0] == small and len(result["messages"][2]["content"]) == 50_000
    assert (await call_error(ctxd, p.CONTEXT_TRUNCATE, {"messages": [], "contextWindow": 0})).code == -32602


async def test_context_truncate_acts_on_what_agents_pass_and_never_cuts_edits(ctxd: LanguageClient) -> None:
    log = "".join(f"step {i} ok\n" if i != 2_500 else "error: disk full\n" for i in range(4_000))  # ~43,000
    bash, read, edit = tool_result("c1", log, "bash"), tool_result("c2", log, "read"), tool_result("c3", log, "edit")
    result = await call(ctxd, p.CONTEXT_TRUNCATE, {"messages": [bash, read, edit], "contextWindow": 200_000})
    # A 200,000-token window alone would allow 240,000 characters: more than pi ever passes (50 KB).
    assert result["limitChars"] == 30_000 and result["truncated"] == [0, 1]
    cut_bash = result["messages"][0]["content"][0]["text"]
    assert cut_bash.startswith("step 0 ok\n") and cut_bash.endswith("step 3999 ok\n") and "error: disk full" in cut_bash
    cut_read = result["messages"][1]["content"][0]["text"]
    assert "step 3999 ok" not in cut_read and "error: disk full" not in cut_read
    assert result["messages"][2] == edit


async def test_context_truncate_cuts_at_a_share_of_the_models_window(tmp_path: Path) -> None:
    """pi passes its model's window: a 20,000-character output to a 16,000-token model is cut (30% of the window:
    19,200 characters), to a 200,000-token model it is not; without a window the fixed 30,000 applies; the share
    is a setting (``toolOutputShare``), and a limit the user set (``limitChars``) wins."""
    output = [tool_result("c1", "0123456789abcde\n" * 1_250, "read")]  # 20,000 characters
    async with start_ctxd({"roots": [str(tmp_path)], "watch": False}) as ctxd:
        small = await call(ctxd, p.CONTEXT_TRUNCATE, {"messages": output, "contextWindow": 16_000})
        assert small["truncated"] == [0] and small["limitChars"] == 19_200
        assert len(small["messages"][0]["content"][0]["text"]) <= 19_200
        large = await call(ctxd, p.CONTEXT_TRUNCATE, {"messages": output, "contextWindow": 200_000})
        assert large["truncated"] == [] and large["limitChars"] == 30_000 and large["messages"] == output
        unknown = await call(ctxd, p.CONTEXT_TRUNCATE, {"messages": output})
        assert unknown["truncated"] == [] and unknown["limitChars"] == 30_000
        chosen = await call(
            ctxd, p.CONTEXT_TRUNCATE, {"messages": output, "contextWindow": 200_000, "limitChars": 5_000}
        )
        assert chosen["truncated"] == [0] and chosen["limitChars"] == 5_000
        refused = await call_error(ctxd, p.CONTEXT_TRUNCATE, {"messages": output, "limitChars": 0})
        assert refused.code == -32602
    async with start_ctxd({"roots": [str(tmp_path)], "watch": False, "toolOutputShare": 0.1}) as ctxd:
        tenth = await call(ctxd, p.CONTEXT_TRUNCATE, {"messages": output, "contextWindow": 16_000})
        assert tenth["truncated"] == [0] and tenth["limitChars"] == 6_400


async def test_compact_summarize_keeps_the_goal_of_the_previous_ledger(ctxd: LanguageClient) -> None:
    goal = "Make the parser accept empty input without crashing"
    params = {**preparation(), "previousDetails": {"readFiles": [], "modifiedFiles": [], "ctxd": {"goal": goal}}}
    result = await call(ctxd, p.COMPACT_SUMMARIZE, params)
    assert result["details"]["ctxd"]["goal"] == goal
    assert goal in result["summary"]
