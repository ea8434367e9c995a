"""Branch summaries in pi's tree navigation, and oversized tool results, through ctxd."""

from __future__ import annotations

from pathlib import Path

from fakes.openai_server import FakeOpenAIServer, reply, tool_call
from pi_harness import HERE, Pi, chat_requests, ctxd_requests, text_of

LOG = "".join(f"[{i:05d}] build step {i} ok, 0 warnings, artefact out/part-{i}.o\n" for i in range(1_500))
"""About 96,000 characters: pi's read keeps 2,000 lines (50 KB), ctxd cuts it to the window's share."""


def test_tree_navigation_with_a_branch_summary(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    with Pi(tmp_path, llm, window=32_000, extensions=[HERE / "nav.ts"]) as pi:
        llm.script(
            reply("Use a hand-written lexer."), reply("Tried the regex lexer in src/lexer.py: it fails on nesting.")
        )
        pi.prompt("How should I lex this?")
        pi.prompt("Try a regex lexer instead.")
        entries = pi.entries()
        users = [e for e in entries if e["type"] == "message" and e["message"]["role"] == "user"]
        first_answer = next(e for e in entries if e.get("parentId") == users[0]["id"])
        before = len(llm.requests)
        since = pi.mark()
        response = pi.command({"type": "prompt", "message": f"/nav {first_answer['id']} Say why the regex failed."})
        assert response["success"], response
        pi.wait(lambda r: r.get("method") == "notify" and str(r.get("message")).startswith("nav "), since=since)

        (summary,) = [e for e in pi.entries() if e["type"] == "branch_summary"]
        assert summary["fromHook"] is True and summary["parentId"] == first_answer["id"]
        assert summary["summary"].startswith("## Goal\nFake summary from the model.")
        details = summary["details"]
        assert details["ctxd"]["path"] == "model" and details["ctxd"]["instructions"] == "Say why the regex failed."
        # ctxd summarised the branch left behind (through pi's provider), not pi.
        (asked,) = ctxd_requests(llm, before)
        assert "Try a regex lexer instead." in asked.prompt and "Say why the regex failed." in asked.prompt
        assert not chat_requests(llm, before)
        # The next request carries the branch summary after the kept first exchange.
        llm.script(reply("Back on the hand-written lexer."))
        before = len(llm.requests)
        pi.prompt("Continue with the hand-written lexer.")
        (request,) = chat_requests(llm, before)
        texts = [text_of(m) for m in request.body["messages"]]
        assert any(summary["summary"] in t for t in texts)
        assert not any(t == "Try a regex lexer instead." for t in texts)


def test_an_oversized_tool_result_is_cut_by_ctxd(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    with Pi(tmp_path, llm, window=8_000) as pi:
        (pi.work / "build.log").write_text(LOG)
        llm.script(tool_call("read", {"path": "build.log"}), reply("The build is fine."))
        before = len(llm.requests)
        pi.prompt("Read build.log.")
        _, second = chat_requests(llm, before)
        (result,) = [m for m in second.body["messages"] if m["role"] == "tool"]
        text = text_of(result)
        # 8,000 tokens x 0.3 x 4 characters: seed 004's limit for this window.
        assert len(text) <= 9_600 and "[ctxd truncated this tool result:" in text
        assert text.startswith("[00000] build step 0 ok")
        # pi stored the cut result, with ctxd's record of the original size.
        (stored,) = [
            e["message"] for e in pi.entries() if e["type"] == "message" and e["message"]["role"] == "toolResult"
        ]
        assert stored["details"]["ctxdTruncated"]["limitChars"] == 9_600
        assert text_of(stored) == text


def test_small_tool_results_are_left_alone(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    with Pi(tmp_path, llm, window=8_000) as pi:
        (pi.work / "notes.txt").write_text("short notes\n")
        llm.script(tool_call("read", {"path": "notes.txt"}), reply("Read."))
        pi.prompt("Read notes.txt.")
        (stored,) = [
            e["message"] for e in pi.entries() if e["type"] == "message" and e["message"]["role"] == "toolResult"
        ]
        assert "ctxdTruncated" not in (stored.get("details") or {}) and "short notes" in text_of(stored)


def test_context_truncation_setting_cuts_in_memory_only(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    """With `truncateContext` (and tool results kept whole as they arrive), the file keeps the
    whole result and each request to the model carries the cut one."""
    ctxd = {"truncateToolResults": False, "truncateContext": True}
    # A window the whole result fits in (no compaction), whose share it still exceeds.
    with Pi(tmp_path, llm, window=40_000, ctxd=ctxd) as pi:
        (pi.work / "build.log").write_text(LOG)
        llm.script(tool_call("read", {"path": "build.log"}), reply("The build is fine."))
        before = len(llm.requests)
        pi.prompt("Read build.log.")
        (stored,) = [
            e["message"] for e in pi.entries() if e["type"] == "message" and e["message"]["role"] == "toolResult"
        ]
        assert len(text_of(stored)) > 48_000 and "ctxd truncated" not in text_of(stored)
        _, second = chat_requests(llm, before)
        (result,) = [m for m in second.body["messages"] if m["role"] == "tool"]
        assert len(text_of(result)) <= 48_000 and "[ctxd truncated this tool result:" in text_of(result)
        assert not ctxd_requests(llm, before)  # no compaction
