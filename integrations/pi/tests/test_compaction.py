"""pi's compactions through ctxd: threshold, manual with instructions, overflow with retry; and what
a separate daemon (the editors') sees of pi's live session meanwhile."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from fakes.openai_server import FakeOpenAIServer, overflow, reply, slow, tool_call
from pi_harness import KEY, REPO, TIMEOUT, Pi, chat_requests, ctxd_requests, text_of

from ctxd.client import CtxdClient

BIG = {"prompt_tokens": 3_500, "completion_tokens": 20, "total_tokens": 3_520}
"""Usage past the threshold of a 4,000-token window with 1,000 reserved."""
CONFIG = "".join(f"stage {i}: replicas=3 region=eu-west-1 canary=10%\n" for i in range(120))


def deploy_conversation(pi: Pi, llm: FakeOpenAIServer) -> None:
    """Two turns with tool calls: a command and a file path planted in the first, a large read in
    the second whose usage crosses the threshold (pi then compacts on its own: reason threshold)."""
    first_turn(pi, llm)
    second_turn(pi)


def first_turn(pi: Pi, llm: FakeOpenAIServer) -> None:
    (pi.work / "config").mkdir(exist_ok=True)
    (pi.work / "config" / "deploy.yaml").write_text(CONFIG)
    (pi.work / "src" / "deploy").mkdir(parents=True, exist_ok=True)
    (pi.work / "src" / "deploy" / "rollout.py").write_text("def rollout(stage):\n    return stage\n")
    llm.script(
        tool_call("bash", {"command": "make deploy-staging"}),
        tool_call("read", {"path": "src/deploy/rollout.py"}),
        reply("Deployed to staging; the rollout logic is in the file I read."),
        tool_call("read", {"path": "config/deploy.yaml"}),
        reply("The config has 120 stages.", usage=BIG),
    )
    pi.prompt("Deploy to staging, then show me the rollout logic.")


def second_turn(pi: Pi) -> None:
    pi.prompt("Now read config/deploy.yaml.")


def compactions(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if e["type"] == "compaction"]


def test_threshold_compaction_is_ctxds(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    with Pi(tmp_path, llm) as pi:
        deploy_conversation(pi, llm)
        (entry,) = compactions(pi.entries())
        # pi wrote the entry ctxd made: its ledger, the summariser's model (pi's own, via litellm).
        assert entry["fromHook"] is True
        ledger = entry["details"]["ctxd"]
        assert ledger["trigger"] == "threshold" and ledger["path"] == "model" and ledger["failures"] == []
        assert ledger["model"] == "openai/fake-model" and ledger["summarizer"] == "litellm"
        assert entry["summary"].startswith("## Goal\nFake summary from the model.")
        assert entry["usage"]["totalTokens"] > 0
        # ctxd's summarisation reached the provider pi uses, with pi's key, and saw the planted facts.
        asked = ctxd_requests(llm)
        assert asked, "ctxd did not call the model"
        assert all(r.body["model"] == "fake-model" and r.headers["authorization"] == f"Bearer {KEY}" for r in asked)
        sent = "\n".join(r.prompt for r in asked)
        assert "make deploy-staging" in sent and "src/deploy/rollout.py" in sent

        # The next request to the model starts with the summary, then the kept messages.
        before = len(llm.requests)
        llm.script(reply("Next: the canary."))
        pi.prompt("What next?")
        (request,) = chat_requests(llm, before)
        messages = request.body["messages"]
        assert messages[0]["role"] == "system"
        assert entry["summary"] in text_of(messages[1])
        kept = [text_of(m) for m in messages[2:]]
        assert any("The config has 120 stages." in t for t in kept)
        assert kept[-1] == "What next?"


def test_summary_keeps_the_facts_of_the_summarised_range(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    """The fake model's summary says nothing concrete: ctxd's must-keep check puts the command run
    and the file read in the summarised turn back into the text (not only the <read-files> list)."""
    with Pi(tmp_path, llm) as pi:
        deploy_conversation(pi, llm)
        (entry,) = compactions(pi.entries())
        ledger = entry["details"]["ctxd"]
        assert ledger["messagesSummarized"] >= 6 and ledger["mustKeep"]["missing"] > 0
        text = entry["summary"].split("<read-files>")[0]
        assert "## Must keep" in text
        assert "make deploy-staging" in text
        assert "src/deploy/rollout.py" in text


def test_manual_compaction_with_instructions(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    with Pi(tmp_path, llm, window=32_000) as pi:
        llm.script(
            tool_call("bash", {"command": "echo 3 failed: test_empty test_blank test_unicode"}),
            reply("Three tests fail in tests/test_parser.py. " + "Details follow. " * 80),
            reply("Fixed the empty-input case. " + "More details. " * 80),
            reply("Fixed the blank-input case. " + "More details. " * 80),
        )
        pi.prompt("Run the parser tests.")
        pi.prompt("Fix the empty-input case.")
        pi.prompt("Fix the blank-input case.")
        before = len(llm.requests)
        response = pi.command({"type": "compact", "customInstructions": "Keep every failing test's name."})
        assert response["success"], response
        data = response["data"]
        ledger = data["details"]["ctxd"]
        assert ledger["trigger"] == "manual" and ledger["instructions"] == "Keep every failing test's name."
        # The history's request (a split turn's prefix has its own, without instructions).
        asked = [r.prompt for r in ctxd_requests(llm, before)]
        assert any("Keep every failing test's name." in p and "3 failed: test_empty" in p for p in asked), asked
        (entry,) = compactions(pi.entries())
        assert entry["fromHook"] is True and entry["summary"] == data["summary"]
        assert entry["firstKeptEntryId"] == data["firstKeptEntryId"]


def test_aborting_cancels_ctxds_summary(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    """pi's abort signal reaches ctxd ($/cancelRequest): the compaction stops at once, not when the
    slow model would have answered, and nothing is written."""
    with Pi(tmp_path, llm, window=32_000) as pi:
        llm.script(*[reply(f"Answer {i}. " + "Details. " * 120) for i in range(3)])
        for i in range(3):
            pi.prompt(f"Question {i}.")
        llm.responder = lambda body, index: None if body.get("stream") else slow(20)
        before = len(llm.requests)
        since = pi.mark()
        compact_id = pi.send({"type": "compact"})
        deadline = time.monotonic() + TIMEOUT
        while not ctxd_requests(llm, before) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ctxd_requests(llm, before), "ctxd never called the model"
        started = time.monotonic()
        assert pi.command({"type": "abort"})["success"]
        response = pi.wait(lambda r: r.get("type") == "response" and r.get("id") == compact_id, since=since)
        assert not response["success"] and time.monotonic() - started < 5, response
        assert not compactions(pi.entries())
        # The daemon lives on: the next compaction goes through it.
        llm.responder = None
        assert pi.command({"type": "compact"})["success"]
        assert compactions(pi.entries())[0]["fromHook"] is True


def test_overflow_compacts_through_ctxd_then_pi_retries(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    with Pi(tmp_path, llm, window=32_000, keep_recent=200) as pi:
        llm.script(
            reply("Read the design. " + "Notes. " * 150),
            reply("Drafted the plan. " + "Steps. " * 150),
        )
        pi.prompt("Read the design doc.")
        pi.prompt("Draft the plan.")
        before = len(llm.requests)

        def answer(body: dict[str, Any], index: int) -> Any:
            # pi's first try overflows; after ctxd's compaction its retry succeeds.
            if body.get("stream") and not any(r.streamed for r in llm.requests[before:index]):
                return overflow()
            return None

        llm.responder = answer
        llm.default_text = "## Goal\nFake summary from the model."
        llm.script()
        since = pi.mark()
        response = pi.command({"type": "prompt", "message": "Now the appendix, in full."})
        assert response["success"]
        pi.wait(lambda r: r.get("type") == "compaction_end" and r.get("reason") == "overflow", since=since)
        pi.wait(lambda r: r.get("type") == "agent_settled", since=since, timeout=60)
        entries = pi.entries()
        (entry,) = compactions(entries)
        assert entry["fromHook"] is True and entry["details"]["ctxd"]["trigger"] == "overflow"
        streamed = chat_requests(llm, before)
        assert streamed[0].status == 400  # the overflow
        assert streamed[-1].status == 200 and entry["summary"] in text_of(streamed[-1].body["messages"][1])
        last = [e for e in entries if e["type"] == "message"][-1]["message"]
        assert last["role"] == "assistant" and last.get("stopReason") == "stop"


async def watching(editor: CtxdClient, root: Path, timeout: float = 30) -> None:
    """Wait until the daemon's watcher is live (it starts after initialize, and files written before
    are listed by session/list, not announced): files dropped into the root until one is announced."""
    header = {"type": "session", "version": 3, "id": "probe", "cwd": "/", "timestamp": "2026-01-01T00:00:00.000Z"}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    for n in range(1_000):
        probe = root / f"probe-{n}.jsonl"
        probe.write_text(json.dumps(header) + "\n")
        try:
            await editor.wait_for("session/didCreate", since=0, timeout=0.5)
            return
        except TimeoutError:
            if loop.time() > deadline:
                raise
    raise AssertionError("the watcher never started")


async def test_editors_see_pis_live_session_and_ctxds_compaction(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    """A separate `ctxd serve` watching pi's sessions folder (what the VS Code sidebar and the
    Neovim tree run) sees pi's session grow and lists the extension's compaction as ctxd's."""
    sessions = tmp_path / "agent" / "sessions"
    sessions.mkdir(parents=True)
    env = {
        "PYTHONPATH": str(REPO),
        "CTXD_CONFIG": str(tmp_path / "none.json"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PATH": os.environ.get("PATH", ""),
    }
    # The editors' defaults (autoCompact on), with pi's window: pi's turns cross the threshold here too,
    # and the editor's daemon must leave the compaction to pi (no second compactor in a live file).
    window = {"contextWindow": 4_000, "reserveTokens": 1_000}
    options = {
        "roots": [str(sessions)],
        "transcriptRoots": [],
        "watch": True,
        "autoCompact": True,
        "compaction": window,
    }
    async with CtxdClient(initialization_options=options, env=env, stderr=asyncio.subprocess.DEVNULL) as editor:
        await watching(editor, sessions)
        pi = Pi(tmp_path, llm).start()
        try:
            await asyncio.to_thread(first_turn, pi, llm)
            path = os.path.realpath(await asyncio.to_thread(pi.session_file))
            # The editor learns of pi's new session, and opens it (as a user clicking it would).
            await editor.wait_for("session/didCreate", lambda n: n["session"] == path, since=0, timeout=15)
            opened = await editor.request("session/open", {"session": path})
            assert opened["agent"] == "pi" and not opened["readOnly"]
            mark = editor.mark()
            await asyncio.to_thread(second_turn, pi)
            entries = await asyncio.to_thread(pi.entries)
            (entry,) = compactions(entries)
            # Live: pi's appends arrive as external changes with their ids, up to the compaction.
            change = await editor.wait_for(
                "session/didChange",
                lambda n: n["session"] == path and n["origin"] == "external" and n["leafId"] == entry["id"],
                since=mark,
                timeout=15,
            )
            assert entry["id"] in change["ids"]
            ledger = await editor.request("session/ledger", {"session": path})
            (row,) = ledger["compactions"]
            assert row["entryId"] == entry["id"] and row["madeBy"] == "ctxd"
            assert row["trigger"] == "threshold" and row["path"] == "model" and row["model"] == "openai/fake-model"
            assert row["tokensBefore"] == entry["tokensBefore"] and row["onActivePath"]
            listed = await editor.request("session/list", {})
            assert path in [s["path"] for s in listed["sessions"]]
            await asyncio.sleep(1.0)
            assert len(compactions(await asyncio.to_thread(pi.entries))) == 1
            assert not [n for n in editor.notifications if n.method == "compaction/status"]
        finally:
            await asyncio.to_thread(pi.close)
