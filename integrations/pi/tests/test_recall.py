"""The recall tools inside real pi: the extension registers search_history, expand and session_facts,
and each answers from the daemon (history/search, history/expand, session/facts) when the model calls it."""

from __future__ import annotations

import json
from pathlib import Path

from fakes.openai_server import FakeOpenAIServer, reply, tool_call
from pi_harness import Pi, chat_requests, text_of

FIGURE = "cold start: 418.7 ms over 25 runs"


def _tool_answer(llm: FakeOpenAIServer, before: int) -> str:
    last = chat_requests(llm, before)[-1]
    results = [m for m in last.body["messages"] if m["role"] == "tool"]
    return text_of(results[-1])


def test_the_model_calls_the_recall_tools(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    with Pi(tmp_path, llm, window=32_000, env={"XDG_DATA_HOME": str(tmp_path / "data")}) as pi:
        (pi.work / "bench.sh").write_text(f"echo '{FIGURE}'\n")
        llm.script(tool_call("bash", {"command": "sh bench.sh"}), reply("Measured; it is fast."))
        pi.prompt("Measure the loader's cold start with bench.sh. Never edit vendor/.")
        entries = pi.entries()
        (result,) = [e for e in entries if e["type"] == "message" and e["message"]["role"] == "toolResult"]
        offered = {t["function"]["name"] for t in chat_requests(llm)[0].body.get("tools", [])}
        assert {"search_history", "expand", "session_facts"} <= offered

        llm.script(tool_call("search_history", {"query": "418.7"}), reply("Found it."))
        before = len(llm.requests)
        pi.prompt("What was the exact figure?")
        found = json.loads(_tool_answer(llm, before))
        (hit,) = [h for h in found["hits"] if h["role"] == "toolResult"]
        assert hit["session"]["path"] == str(pi.session_file()) and hit["entryId"] == result["id"]
        assert "«418.7»" in hit["snippet"] and hit["summarized"] is False

        llm.script(tool_call("expand", {"entry_id": result["id"]}), reply("Read it."))
        before = len(llm.requests)
        pi.prompt("Show me that output in full.")
        expanded = json.loads(_tool_answer(llm, before))
        assert expanded["kind"] == "entry" and FIGURE in expanded["messages"][0]["text"]

        llm.script(tool_call("session_facts", {}), reply("Nothing was lost."))
        before = len(llm.requests)
        pi.prompt("Did we lose anything?")
        facts = _tool_answer(llm, before)
        assert facts.startswith("## Must keep") and "vendor/" in facts
