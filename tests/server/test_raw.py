"""The daemon spoken to byte by byte: lifecycle exit codes and a stdout that carries only LSP frames."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.openai_server import FakeOpenAIServer

from ctxd.service import protocol as p

from .harness import RawDaemon, assistant, conversation, parse_frames, user

pytestmark = pytest.mark.asyncio


async def test_initialize_shutdown_exit_gives_0(tmp_path: Path) -> None:
    daemon = await RawDaemon().start()
    try:
        answer = await daemon.initialize({"roots": [str(tmp_path)], "watch": False})
        result = answer["result"]
        assert result["serverInfo"]["name"] == "ctxd" and result["serverInfo"]["version"]
        ours = result["capabilities"]["experimental"]["ctxd"]
        assert ours["methods"] == list(p.METHODS) and ours["notifications"] == list(p.NOTIFICATIONS)
        assert ours["clientRequests"] == [p.COMPACT_WILL_RUN]
        listed = await daemon.call(p.SESSION_LIST, {})
        assert listed["result"] == {"roots": [str(tmp_path)], "sessions": []}
        shutdown = await daemon.call("shutdown")
        assert shutdown == {"jsonrpc": "2.0", "id": shutdown["id"], "result": None}
        daemon.send({"jsonrpc": "2.0", "method": "exit"})
        assert await daemon.wait() == 0
        messages, rest = parse_frames(bytes(daemon.stdout))
        assert rest == b"" and len(messages) == len(daemon.messages)
    finally:
        await daemon.close()


async def test_exit_without_shutdown_gives_1(tmp_path: Path) -> None:
    daemon = await RawDaemon().start()
    try:
        await daemon.initialize({"roots": [str(tmp_path)], "watch": True})
        daemon.send({"jsonrpc": "2.0", "method": "exit"})
        assert await daemon.wait() == 1
    finally:
        await daemon.close()


async def test_closed_stdin_ends_the_daemon(tmp_path: Path) -> None:
    daemon = await RawDaemon().start()
    try:
        await daemon.initialize({"roots": [str(tmp_path)], "watch": True})
        assert daemon.process is not None and daemon.process.stdin is not None
        daemon.process.stdin.close()  # the client died
        assert await daemon.wait() == 1
    finally:
        await daemon.close()


async def test_stdout_carries_only_frames_with_debug_logging_and_litellm(tmp_path: Path) -> None:
    with FakeOpenAIServer() as llm:
        daemon = await RawDaemon(CTXD_LOG_LEVEL="DEBUG", LITELLM_LOG="DEBUG").start()
        try:
            await daemon.initialize(
                {
                    "roots": [str(tmp_path)],
                    "watch": True,
                    "compaction": {
                        "model": "openai/x",
                        "apiBase": llm.url,
                        "apiKey": "sk-test",
                        "contextWindow": 4000,
                        "reserveTokens": 1000,
                        "keepRecentTokens": 300,
                    },
                }
            )
            created = (await daemon.call(p.SESSION_CREATE, {"cwd": "/proj", "name": "noisy"}))["result"]
            path = created["path"]
            ids = (await daemon.call(p.SESSION_APPEND, {"session": path, "messages": conversation(6)}))["result"]["ids"]
            compacted = await daemon.call(p.COMPACT, {"session": path, "workDoneToken": 1})
            assert compacted["result"]["path"] == "model"
            branched = await daemon.call(p.BRANCH, {"session": path, "entryId": ids[3], "summarize": True})
            assert branched["result"]["path"] == "model"
            # An auto-compaction in the background, through the model too.
            await daemon.call(p.SESSION_APPEND, {"session": path, "messages": [user("q"), assistant("a", total=3900)]})
            auto = await daemon.notification(
                p.COMPACTION_STATUS, lambda s: s["trigger"] == "threshold" and s["state"] != "running"
            )
            assert auto["state"] == "succeeded" and auto["path"] == "model"
            missing = await daemon.call(p.SESSION_OPEN, {"session": "/etc/passwd"})
            assert missing["error"]["code"] == -31001
            assert len(llm.requests) >= 3
            assert (await daemon.call("shutdown"))["result"] is None
            daemon.send({"jsonrpc": "2.0", "method": "exit"})
            assert await daemon.wait() == 0
        finally:
            await daemon.close()
    messages, rest = parse_frames(bytes(daemon.stdout))  # raises on any stray byte
    assert rest == b""
    methods = {m.get("method") for m in messages}
    assert {"$/progress", p.COMPACTION_STATUS, p.DID_CHANGE, p.CONTEXT_USAGE, p.DID_CREATE} <= methods
    assert any(
        m.get("params", {}).get("trigger") == "threshold" for m in messages if m.get("method") == p.COMPACTION_STATUS
    )
    assert b"DEBUG" in daemon.stderr  # the logs went to stderr


async def test_invalid_configuration_is_reported_and_replaced_by_defaults(tmp_path: Path) -> None:
    daemon = await RawDaemon().start()
    try:
        options = {
            "roots": [str(tmp_path)],
            "watch": "yes",
            "bogus": 1,
            "compaction": {"model": 3, "contextWindow": -1},
        }
        assert "result" in await daemon.initialize(options)
        created = await daemon.call(p.SESSION_CREATE, {"cwd": "/proj"})
        assert created["result"]["usage"]["window"] == 200_000  # the default, not -1
        warnings = [m["params"] for m in daemon.messages if m.get("method") == "window/logMessage"]
        texts = " | ".join(w["message"] for w in warnings)
        assert all(w["type"] == 2 for w in warnings)
        assert "watch" in texts and "bogus" in texts and "compaction.model" in texts and "contextWindow" in texts
        assert (await daemon.call("shutdown"))["result"] is None
        daemon.send({"jsonrpc": "2.0", "method": "exit"})
        assert await daemon.wait() == 0
    finally:
        await daemon.close()
