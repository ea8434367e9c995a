"""When ctxd is missing, crashes or dies, pi still compacts (its own way) and says why; no ctxd is
left running after pi exits, even when pi is killed."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from fakes.openai_server import FakeOpenAIServer, reply
from pi_harness import HERE, Pi, alive, chat_requests, ctxd_requests, wait_gone

PI_PROMPT = "The messages above are a conversation to summarize"
"""The start of pi's own compaction prompt (pi 0.87.1)."""


def converse(pi: Pi, llm: FakeOpenAIServer, turns: int = 3) -> None:
    llm.script(*[reply(f"Answer {i}. " + "Details. " * 120) for i in range(turns)])
    for i in range(turns):
        pi.prompt(f"Question {i}.")


def compact(pi: Pi) -> dict:  # type: ignore[type-arg]
    response = pi.command({"type": "compact"})
    assert response["success"], response
    (entry,) = [e for e in pi.entries() if e["type"] == "compaction"]
    return entry


def assert_pi_compacted_itself(pi: Pi, llm: FakeOpenAIServer, before: int) -> None:
    entry = compact(pi)
    assert not entry.get("fromHook") and "ctxd" not in (entry.get("details") or {})
    assert not ctxd_requests(llm, before)
    assert any(PI_PROMPT in r.prompt for r in chat_requests(llm, before))


def test_ctxd_missing(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    with Pi(tmp_path, llm, window=32_000, ctxd={"command": "/nonexistent/bin/ctxd serve"}) as pi:
        converse(pi, llm)
        notes = " ".join(pi.notes())
        assert 'ctxd could not start: could not start "/nonexistent/bin/ctxd serve"' in notes
        assert "ENOENT" in notes and "pi compacts on its own" in notes
        since = pi.mark()
        assert_pi_compacted_itself(pi, llm, 0)
        assert any("pi compacts on its own" in n for n in pi.notes(since))
        assert not pi.ctxd_pids()


def test_ctxd_crashing_mid_compaction(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    command = [sys.executable, str(HERE / "crashing_ctxd.py")]
    with Pi(tmp_path, llm, window=32_000, ctxd={"command": command}) as pi:
        converse(pi, llm)
        since = pi.mark()
        assert_pi_compacted_itself(pi, llm, 0)
        notes = " ".join(pi.notes(since))
        assert "could not summarise this compaction" in notes and "pi's own compaction runs instead" in notes


def test_ctxd_killed_is_restarted(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    with Pi(tmp_path, llm, window=32_000) as pi:
        converse(pi, llm)
        first = pi.daemon_pid()
        since = pi.mark()
        os.kill(first, signal.SIGKILL)
        assert wait_gone(first)
        pi.wait(lambda r: "ctxd exited unexpectedly" in str(r.get("message")), since=since)
        entry = compact(pi)  # the extension starts a new daemon for it
        assert entry["fromHook"] is True and entry["details"]["ctxd"]["trigger"] == "manual"
        assert pi.daemon_pid() != first


def test_no_ctxd_left_after_pi_exits(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    pi = Pi(tmp_path, llm).start()
    try:
        pid = pi.daemon_pid()
        assert pi.close() == 0
        assert wait_gone(pid), f"ctxd {pid} outlived pi"
        assert "[client] ctxd exited (code 0)" in pi.log.read_text()  # shutdown + exit, not a signal
    finally:
        pi.close()


def test_no_ctxd_left_after_pi_is_killed(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    pi = Pi(tmp_path, llm).start()
    try:
        pid = pi.daemon_pid()
        pi.kill()  # SIGKILL: no session_shutdown; ctxd sees its stdin close
        assert wait_gone(pid), f"ctxd {pid} outlived a killed pi"
    finally:
        if alive(pi.process.pid):  # type: ignore[union-attr]
            pi.kill()
