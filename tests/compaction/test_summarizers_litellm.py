"""ctxd.llm and the litellm summariser, end to end over HTTP against a scripted fake OpenAI server."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.openai_server import (  # tests/ is on sys.path (it holds conftest.py)
    Action,
    FakeOpenAIServer,
    empty,
    error,
    overflow,
    rate_limited,
    reply,
    server_error,
    slow,
)
from helpers.summary_shape import assert_summary_shape

from ctxd import llm
from ctxd.compaction.summary import LiteLLMSummarizer, SummarizerError, SummaryRequest, create_summarizer
from ctxd.compaction.summary.litellm_summarizer import TURN_CONTEXT_HEADING

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-test-0123456789abcdef"
MODEL = "openai/fake-summarizer"


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(default_text="## Goal\nDefault summary.") as fake:
        yield fake


def summarizer(server: FakeOpenAIServer, **kw: Any) -> LiteLLMSummarizer:
    options: dict[str, Any] = {"api_key": KEY, "timeout": 5.0, "retries": 1, "backoff": 0.01, "max_output_tokens": 512}
    options.update(kw)
    return LiteLLMSummarizer(MODEL, api_base=server.url, **options)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 1}


def assistant(text: str, *calls: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    content += [{"type": "toolCall", "id": i, "name": n, "arguments": a} for i, n, a in calls]
    return {"role": "assistant", "content": content, "provider": "p", "model": "m", "stopReason": "stop"}


def tool_result(call_id: str, text: str) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": "read",
        "content": [{"type": "text", "text": text}],
    }


def conversation(turns: int = 2, filler: int = 0) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        messages.append(user(f"Turn {i}: please fix bug #{i} in src/mod{i}.py " + "pad " * filler))
        messages.append(assistant(f"Reading mod{i}.", (f"c{i}", "read", {"path": f"src/mod{i}.py"})))
        messages.append(tool_result(f"c{i}", f"def f{i}(): ..." + " body" * filler))
        messages.append(assistant(f"Fixed bug #{i} by guarding None."))
    return messages


# --- end to end -------------------------------------------------------------------------------------------------


async def test_summary_round_trip_sends_history_previous_summary_and_instructions(server: FakeOpenAIServer) -> None:
    server.script(
        reply("## Goal\nFix the bugs.", usage={"prompt_tokens": 321, "completion_tokens": 12, "total_tokens": 333})
    )
    stages: list[tuple[str, float | None]] = []
    request = SummaryRequest(
        messages=conversation(),
        previous_summary="## Goal\nEarlier goal: ship v2\n\n<read-files>\nold/secret_listing.py\n</read-files>",
        custom_instructions="Mention the ticket numbers.",
    )
    res = await summarizer(server).summarize(request, lambda stage, frac: stages.append((stage, frac)))

    assert res.text == "## Goal\nFix the bugs."
    assert (res.summarizer, res.model, res.path, res.calls) == ("litellm", MODEL, "model", 1)
    assert res.usage is not None and res.usage["prompt_tokens"] == 321 and res.usage["total_tokens"] == 333
    assert len(server.requests) == 1
    body = server.requests[0].body
    assert body["model"] == "fake-summarizer" and body["max_tokens"] == 512
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    system, prompt = body["messages"][0]["content"], body["messages"][1]["content"]
    assert "do not answer questions" in system
    assert "<previous-summary>\n## Goal\nEarlier goal: ship v2\n</previous-summary>" in prompt
    assert "old/secret_listing.py" not in prompt  # file blocks are the engine's business
    assert "<conversation>\n[User]: Turn 0: please fix bug #0 in src/mod0.py" in prompt
    assert '[Assistant tool calls]: read(path="src/mod1.py")' in prompt
    assert "[Tool result]: def f1(): ..." in prompt
    assert "Write one updated note in the same format" in prompt
    assert prompt.rstrip().endswith("Mention the ticket numbers.")
    assert stages[0] == ("summarizing", 0.0) and stages[-1] == ("done", 1.0)


async def test_first_summary_and_branch_summary_use_their_own_prompts(server: FakeOpenAIServer) -> None:
    await summarizer(server).summarize(SummaryRequest(messages=conversation(1)))
    await summarizer(server).summarize(SummaryRequest(messages=conversation(1), kind="branch"))
    first, branch = server.prompts
    assert "<previous-summary>" not in first and "Write the handoff note for it" in first
    assert "branch of the session that the user has now left" in branch
    for prompt in (first, branch):
        assert_summary_shape(prompt)


async def test_model_output_is_unwrapped_and_stripped_of_file_blocks(server: FakeOpenAIServer) -> None:
    server.script(reply("Sure!\n<summary>\n## Goal\nX\n\n<modified-files>\na.py\n</modified-files>\n</summary>"))
    res = await summarizer(server).summarize(SummaryRequest(messages=conversation(1)))
    assert res.text == "## Goal\nX"


# --- failures and retries -------------------------------------------------------------------------------------


async def test_rate_limit_is_retried_then_succeeds(server: FakeOpenAIServer) -> None:
    server.script(rate_limited(), reply("## Goal\nAfter retry."))
    res = await summarizer(server, retries=2).summarize(SummaryRequest(messages=conversation(1)))
    assert res.text == "## Goal\nAfter retry."
    assert len(server.requests) == 2 and res.calls == 2
    assert server.requests[0].prompt == server.requests[1].prompt


async def test_server_errors_exhaust_retries_and_raise_without_the_key(server: FakeOpenAIServer) -> None:
    server.script(*[error(500, f"upstream exploded (key {KEY})")] * 3)
    with pytest.raises(SummarizerError) as info:
        await summarizer(server, retries=2).summarize(SummaryRequest(messages=conversation(1)))
    assert len(server.requests) == 3
    assert "server" in info.value.reason and "500" in info.value.reason
    assert KEY not in info.value.reason and KEY not in str(info.value) and KEY not in repr(info.value)
    assert KEY not in repr(summarizer(server))


async def test_timeout_raises_summarizer_error(server: FakeOpenAIServer) -> None:
    server.script(slow(3.0), slow(3.0))
    start = time.monotonic()
    with pytest.raises(SummarizerError, match="timeout"):
        await summarizer(server, timeout=0.3, retries=1).summarize(SummaryRequest(messages=conversation(1)))
    assert time.monotonic() - start < 2.5
    assert len(server.requests) == 2


async def test_empty_output_is_a_failure(server: FakeOpenAIServer) -> None:
    server.script(empty(), empty())
    with pytest.raises(SummarizerError, match="empty"):
        await summarizer(server, retries=1).summarize(SummaryRequest(messages=conversation(1)))
    assert len(server.requests) == 2


async def test_empty_output_then_a_good_one_succeeds(server: FakeOpenAIServer) -> None:
    server.script(empty(), reply("## Goal\nSecond time lucky."))
    res = await summarizer(server, retries=1).summarize(SummaryRequest(messages=conversation(1)))
    assert res.text == "## Goal\nSecond time lucky." and res.calls == 2


async def test_oversized_output_is_a_failure(server: FakeOpenAIServer) -> None:
    huge = "## Goal\n" + "word " * 1000  # ~1250 tokens by estimate, over 2 x 100
    server.script(reply(huge), reply(huge))
    with pytest.raises(SummarizerError, match="oversized"):
        await summarizer(server, max_output_tokens=100, retries=1).summarize(SummaryRequest(messages=conversation(1)))


async def test_auth_errors_are_not_retried(server: FakeOpenAIServer) -> None:
    server.script(error(401, "Incorrect API key provided", kind="invalid_request_error", code="invalid_api_key"))
    with pytest.raises(SummarizerError, match="auth"):
        await summarizer(server, retries=3).summarize(SummaryRequest(messages=conversation(1)))
    assert len(server.requests) == 1


# --- staying inside the summariser's own window ----------------------------------------------------------------


async def test_small_window_summarises_in_rolling_chunks(server: FakeOpenAIServer) -> None:
    server.responder = lambda body, index: reply(f"## Goal\nRolling summary {index}.")
    window, max_out = 2500, 300
    stages: list[str] = []
    messages = conversation(turns=20, filler=40)
    res = await summarizer(server, context_window=window, max_output_tokens=max_out).summarize(
        SummaryRequest(messages=messages), lambda stage, frac: stages.append(stage)
    )
    count = len(server.requests)
    assert count >= 3 and res.calls == count and res.path == "model-chunked"
    assert res.text == f"## Goal\nRolling summary {count - 1}."
    for i, recorded in enumerate(server.requests):
        assert len(recorded.prompt) / 4 + max_out <= window
        if i:
            assert f"<previous-summary>\n## Goal\nRolling summary {i - 1}.\n</previous-summary>" in recorded.prompt
    joined = "\n".join(server.prompts)
    for i in range(20):  # every turn reached the model in some chunk, in order
        assert f"Turn {i}: please fix bug #{i}" in joined
    positions = [joined.index(f"Turn {i}: please fix") for i in range(20)]
    assert positions == sorted(positions)
    assert f"chunk 1/{count}" in stages and f"chunk {count}/{count}" in stages
    assert res.usage is not None and res.usage["prompt_tokens"] == sum(100 + i for i in range(count))


async def test_context_overflow_rechunks_instead_of_retrying(server: FakeOpenAIServer) -> None:
    server.script(overflow())
    server.responder = lambda body, index: reply(f"## Goal\nPart {index}.")
    res = await summarizer(server, retries=0).summarize(SummaryRequest(messages=conversation(turns=6, filler=30)))
    assert res.path == "model-chunked"
    assert len(server.requests) >= 2
    assert len(server.requests[1].prompt) < len(server.requests[0].prompt)
    assert res.text == f"## Goal\nPart {len(server.requests) - 1}."


async def test_window_too_small_for_any_chunk_is_an_error(server: FakeOpenAIServer) -> None:
    with pytest.raises(SummarizerError, match="leaves no room"):
        await summarizer(server, context_window=600, max_output_tokens=256).summarize(
            SummaryRequest(messages=conversation(turns=8, filler=50))
        )
    assert server.requests == []


# --- split turns -------------------------------------------------------------------------------------------------


def _by_prompt(body: dict[str, Any], index: int) -> Action:
    prompt = body["messages"][1]["content"]
    if "beginning of a single turn" in prompt:
        return reply("## Original Request\nPREFIX SUMMARY", delay=0.6)
    return reply("## Goal\nHISTORY SUMMARY", delay=0.6)


async def test_split_turn_prefix_is_summarised_concurrently(server: FakeOpenAIServer) -> None:
    server.responder = _by_prompt
    prefix = [user("Now migrate the schema"), assistant("Looking at migrations.", ("m1", "ls", {"path": "db"}))]
    res = await summarizer(server).summarize(SummaryRequest(messages=conversation(), turn_prefix=prefix))
    assert len(server.requests) == 2 and res.calls == 2
    first, second = sorted(server.requests, key=lambda r: r.started)
    assert first.finished is not None and second.started < first.finished  # both were in flight together
    assert (
        res.text == f"## Goal\nHISTORY SUMMARY\n\n---\n\n{TURN_CONTEXT_HEADING}\n\n## Original Request\nPREFIX SUMMARY"
    )
    prefix_prompt = next(p for p in server.prompts if "beginning of a single turn" in p)
    assert "[User]: Now migrate the schema" in prefix_prompt and "Turn 0" not in prefix_prompt
    assert max(r.body["max_tokens"] for r in server.requests) == 512
    assert min(r.body["max_tokens"] for r in server.requests) == 256


async def test_split_turn_failure_cancels_the_other_call(server: FakeOpenAIServer) -> None:
    def responder(body: dict[str, Any], index: int) -> Action:
        if "beginning of a single turn" in body["messages"][1]["content"]:
            return error(401, "bad key")
        return reply("## Goal\nslow", delay=3.0)

    server.responder = responder
    start = time.monotonic()
    with pytest.raises(SummarizerError):
        await summarizer(server).summarize(SummaryRequest(messages=conversation(), turn_prefix=[user("x")]))
    assert time.monotonic() - start < 2.0


async def test_split_turn_with_nothing_before_it(server: FakeOpenAIServer) -> None:
    server.script(reply("## Original Request\nonly the prefix"))
    res = await summarizer(server).summarize(SummaryRequest(messages=[], turn_prefix=[user("start here")]))
    assert res.text.startswith("No prior history.\n\n---\n\n" + TURN_CONTEXT_HEADING)
    assert len(server.requests) == 1


async def test_nothing_to_summarise_makes_no_call(server: FakeOpenAIServer) -> None:
    res = await summarizer(server).summarize(SummaryRequest(messages=[], previous_summary="## Goal\nKeep me"))
    assert (res.text, res.path, res.calls) == ("## Goal\nKeep me", "empty", 0)
    assert server.requests == []


def test_create_summarizer_with_a_model_gives_the_litellm_one() -> None:
    made = create_summarizer("openai/x", api_base="http://127.0.0.1:9/v1", retries=0)
    assert isinstance(made, LiteLLMSummarizer) and made.name == "litellm" and made.retries == 0


# --- ctxd.llm ---------------------------------------------------------------------------------------------------


async def test_complete_returns_text_usage_and_raises_classified_errors(server: FakeOpenAIServer) -> None:
    server.script(
        reply("hello", usage={"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}),
        overflow(),
        server_error(),
    )
    messages = [{"role": "user", "content": "hi"}]
    done = await llm.complete(MODEL, messages, api_base=server.url, api_key=KEY, max_tokens=20, timeout=5)
    assert (done.text, done.model) == ("hello", "fake-summarizer")
    assert done.usage == {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
    assert done.cost is None  # not a priced model
    with pytest.raises(llm.LLMError) as info:
        await llm.complete(MODEL, messages, api_base=server.url, api_key=KEY, timeout=5)
    assert info.value.kind == "overflow" and llm.is_context_overflow_error(info.value) and not info.value.retryable
    with pytest.raises(llm.LLMError) as info:
        await llm.complete(MODEL, messages, api_base=server.url, api_key=KEY, timeout=5)
    assert info.value.kind == "server" and info.value.status == 500 and info.value.retryable


@pytest.mark.parametrize(
    "text",
    [
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9001 tokens.",
        "prompt is too long: 213462 tokens > 200000 maximum",
        "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000",
        "Error code: 400 - {'error': {'code': 'context_length_exceeded'}}",
        "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
        "Your input exceeds the context window of this model",
        "Request had too many tokens",
        "the request exceeds the available context size, try increasing it",
    ],
)
def test_overflow_texts_are_recognised(text: str) -> None:
    assert llm.is_overflow_text(text)
    assert llm.is_context_overflow_error(RuntimeError(text))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29000",
        "Internal server error",
        "Invalid API key",
        "Too many requests",
    ],
)
def test_other_errors_are_not_overflow(text: str) -> None:
    assert not llm.is_overflow_text(text)


def test_litellm_is_imported_lazily_and_never_writes_to_stdout() -> None:
    code = (
        "import asyncio, sys\n"
        "import ctxd.compaction.summary, ctxd.compaction.reading.fileops\n"
        "from ctxd import llm\n"
        "assert llm.is_overflow_text('prompt is too long')\n"
        "assert 'litellm' not in sys.modules, 'litellm was imported too early'\n"
        "async def main():\n"
        "    try:\n"
        "        await llm.complete('openai/x', [{'role': 'user', 'content': 'hi'}],\n"
        "                           api_base='http://127.0.0.1:9/v1', api_key='sk-nope-123456', timeout=5)\n"
        "    except llm.LLMError as exc:\n"
        "        assert exc.kind == 'connection', exc\n"
        "asyncio.run(main())\n"
        "assert 'litellm' in sys.modules and llm.model_context_window('gpt-4o')\n"
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""


def test_redaction_removes_keys_and_credentials() -> None:
    text = f"failed with {KEY} and Authorization: Bearer abcdefghijk and api_key='zzz-secret-value'"
    cleaned = llm.redact(text, KEY)
    assert KEY not in cleaned and "abcdefghijk" not in cleaned and "zzz-secret-value" not in cleaned
    err = llm.to_llm_error(RuntimeError(f"boom {KEY}"), KEY)
    assert KEY not in str(err) and err.kind == "other"


def test_model_metadata_and_token_counts_come_from_the_bundled_map() -> None:
    assert llm.model_context_window("gpt-4o") == 128_000
    assert llm.model_context_window("openai/no-such-model-anywhere") is None
    messages = [{"role": "user", "content": "hello world, count me"}]
    count = llm.count_tokens("gpt-4o", messages)
    assert 5 <= count <= 20 and count == llm.count_tokens("gpt-4o", messages)
    assert llm.count_tokens("gpt-4o", [{"role": "user", "content": "word " * 400}]) > count


def test_stdout_guard_nests_and_overlaps_safely(capsys: pytest.CaptureFixture[str]) -> None:
    original = sys.stdout
    outer = llm.stdout_to_stderr()
    inner = llm.stdout_to_stderr()
    outer.__enter__()
    inner.__enter__()
    print("to stderr")
    outer.__exit__(None, None, None)  # the first to enter leaves first: overlapping, not nested
    assert sys.stdout is sys.stderr
    inner.__exit__(None, None, None)
    assert sys.stdout is original
    captured = capsys.readouterr()
    assert "to stderr" in captured.err and "to stderr" not in captured.out


async def test_litellm_calls_never_write_to_stdout(server: FakeOpenAIServer, capfd: pytest.CaptureFixture[str]) -> None:
    server.script(reply("quiet"), rate_limited())
    await llm.complete(MODEL, [{"role": "user", "content": "x"}], api_base=server.url, api_key=KEY, timeout=5)
    with pytest.raises(llm.LLMError):
        await llm.complete(MODEL, [{"role": "user", "content": "x"}], api_base=server.url, api_key=KEY, timeout=5)
    await asyncio.sleep(0.05)
    assert capfd.readouterr().out == ""


async def test_persistent_overflow_gives_up_instead_of_looping(server: FakeOpenAIServer) -> None:
    server.responder = lambda body, index: overflow()
    with pytest.raises(SummarizerError, match="leaves no room"):
        await summarizer(server, retries=3).summarize(SummaryRequest(messages=conversation(turns=10, filler=60)))
    sizes = [len(r.prompt) for r in server.requests]
    assert 2 <= len(sizes) <= 12
    assert sizes == sorted(sizes, reverse=True)
