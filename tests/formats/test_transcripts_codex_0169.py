"""Codex 0.169 rollouts: a real one, recorded by running Codex 0.169.0 here against the fake Responses server
(tests/codex/scenario.py; three compactions, two user turns), and the requests Codex sent after each compaction.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import LOCAL
from helpers.codex_match import assert_context_matches_request, context_at, leaves_after_compactions
from transcript_helpers import (
    all_source_lines,
    assert_pi_shapes,
    assert_results_follow_calls,
    assert_valid_tree,
    jsonl,
    raw_objects,
    role,
)

from ctxd.formats.transcripts import map_codex

ROLLOUT = LOCAL / "codex" / "rollout-0.169-compactions.jsonl"
REQUESTS = LOCAL / "codex" / "rollout-0.169-compactions.requests.json"


def mapped() -> Any:
    return map_codex(ROLLOUT.read_bytes(), str(ROLLOUT))


def base_instructions() -> str:
    meta = raw_objects(ROLLOUT)[0][1]["payload"]
    return str(meta["base_instructions"]["text"])


def test_the_rollout_is_a_valid_tree_accounting_for_every_line() -> None:
    t = mapped()
    assert_valid_tree(t)
    assert_pi_shapes(t)
    assert_results_follow_calls(t)
    assert not t.diagnostics
    assert set(all_source_lines(t)) == {n for n, _ in raw_objects(ROLLOUT)}
    assert t.header["cliVersion"] == "0.169.0" and t.header["agent"] == "codex"


def test_new_line_types_and_items_are_named() -> None:
    t = mapped()
    customs = {e["customType"] for e in t.entries if e["type"] == "custom"}
    assert {"codex.world_state", "codex.event_msg.item_completed.UserMessage"} <= customs
    assert {
        "codex.event_msg.item_completed.AgentMessage",
        "codex.event_msg.item_completed.ContextCompaction",
    } <= customs
    assert "codex.event_msg.item_completed" not in customs  # never the opaque name
    assert {e["kind"] for e in t.entries if e["type"] == "usage"} == {
        "codex.token_usage_record",
        "codex.compaction_usage",
    }


def test_each_compaction_has_its_summary_and_what_it_kept() -> None:
    t = mapped()
    raw = dict(raw_objects(ROLLOUT))
    compactions = [e for e in t.entries if e["type"] == "compaction"]
    assert len(compactions) == 3
    for n, c in enumerate(compactions, 1):
        line = c["ctxdSource"]["lines"][0]
        payload = raw[line]["payload"]
        assert c["summary"] == payload["message"] and f"SUMMARY {n}:" in c["summary"]
        assert c["tokensBefore"] == 5010  # the conversation's last request, not the summary request's 510
        kept = [e for e in t.entries if e["ctxdSource"] == {"lines": [line], "kind": "compacted.replacement_history"}]
        assert c["details"]["retained"] == len(kept) == len(payload["replacement_history"]) - 1
        assert [role(e) for e in kept] == ["system", "user", "user"]
        assert kept[1]["message"]["ctxdInjected"] == "codex.environment"
        assert "ctxdInjected" not in kept[2]["message"]
        assert kept[2]["message"]["content"][0]["text"].startswith("Create notes.txt")


def test_the_compaction_answer_and_injected_turns_are_not_conversation() -> None:
    t = mapped()
    assistant_texts = [
        b["text"] for e in t.entries if role(e) == "assistant" for b in e["message"]["content"] if b["type"] == "text"
    ]
    assert assistant_texts == ["notes.txt now says hello.", "Appended a second line."]
    answers = [e for e in t.entries if e.get("customType") == "codex.response_item.compaction_output"]
    assert len(answers) == 3
    users = [e["message"] for e in t.entries if role(e) == "user" and "ctxdInjected" not in e["message"]]
    assert {m["content"][0]["text"] for m in users} == {
        "Create notes.txt with a greeting. Constraint: never edit README.md.",
        "Now append a second line to notes.txt.",
    }


def test_usage_is_each_responses_own() -> None:
    t = mapped()
    records = {
        o["payload"]["response_id"]: o["payload"]["usage"]
        for _, o in raw_objects(ROLLOUT)
        if o["type"] == "token_usage_record"
    }
    assistants = [e["message"] for e in t.entries if role(e) == "assistant"]
    assert len(assistants) == 5
    expected = [5000, 5000, 5000, 1000, 1000]
    assert [m["usage"]["input"] for m in assistants] == expected
    assert all(m["usage"]["totalTokens"] == m["usage"]["input"] + 10 for m in assistants)
    assert sorted(u["input_tokens"] for u in records.values()).count(500) == 3  # the three summary requests


@pytest.mark.parametrize("n", [0, 1, 2])
def test_the_context_after_each_compaction_is_what_codex_sent(n: int) -> None:
    requests = json.loads(REQUESTS.read_text())
    leaves = leaves_after_compactions(ROLLOUT)
    assert len(leaves) == len(requests) == 3
    assert_context_matches_request(ROLLOUT, leaves[n], requests[n]["input"], base_instructions())


def test_the_context_size_after_a_compaction_counts_from_the_new_usage(tmp_path: Path) -> None:
    ctx = context_at(ROLLOUT, mapped().leaf_id)
    assert ctx.contextTokens == 1010  # the last response's usage (input 1000 + output 10)


def test_a_0169_rollout_growing_line_by_line_maps_like_the_whole(tmp_path: Path) -> None:
    from ctxd.tree.session import Session

    data = ROLLOUT.read_bytes()
    lines = data.splitlines(keepends=True)
    path = tmp_path / "rollout-2026-11-25T21-29-59-01a2149d-8f0f-74c1-8dfa-7129af1db7c5.jsonl"
    path.write_bytes(b"".join(lines[:10]))
    session = Session.open(str(path))
    try:
        for cut in range(11, len(lines) + 1, 7):
            path.write_bytes(b"".join(lines[:cut]))
            session.refresh()
        path.write_bytes(data)
        session.refresh()
        fresh = Session.open(str(path))
        assert [session.file.entry(i) for i in range(len(session.file))] == [
            fresh.file.entry(i) for i in range(len(fresh.file))
        ]
        fresh.file.close()
    finally:
        session.file.close()


def test_token_count_still_gives_usage_without_usage_records() -> None:
    usage = {"input_tokens": 70, "cached_input_tokens": 0, "output_tokens": 5, "total_tokens": 75}
    data = jsonl(
        {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "x", "cwd": "/"}},
        {
            "type": "response_item",
            "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]},
        },
        {"type": "event_msg", "payload": {"type": "token_count", "info": {"last_token_usage": usage}}},
    )
    t = map_codex(data)
    assert [e["type"] for e in t.entries] == ["custom", "message", "usage"]
    assert t.entries[1]["message"]["usage"]["input"] == 70


def test_a_remote_encrypted_compaction_keeps_its_user_messages_once() -> None:
    """The OpenAI provider compacts remotely: ``message`` is empty and the summary is an encrypted item."""
    kept = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the parser."}]}
    secret = {"type": "compaction", "encrypted_content": "gAAAA..."}
    data = jsonl(
        {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "x", "cwd": "/"}},
        {"type": "response_item", "payload": kept},
        {
            "type": "compacted",
            "payload": {"message": "", "replacement_history": [kept, secret], "retained_context": {}},
        },
    )
    t = map_codex(data)
    compaction = next(e for e in t.entries if e["type"] == "compaction")
    assert compaction["summary"] == "[compaction: encrypted]"
    after = t.entries[t.entries.index(compaction) + 1 :]
    assert [e["message"]["content"][0]["text"] for e in after] == ["Fix the parser."]


def test_the_tree_view_says_which_user_turns_codex_injected() -> None:
    from ctxd.context.view import preview

    t = mapped()
    previews = [preview(e) for e in t.entries if role(e) == "user"]
    assert previews[0][0] == "user" and previews[0][1].startswith("[injected codex.environment] <environment_context>")
    assert ("user", "Now append a second line to notes.txt.") in previews


def test_cli_context_in_openai_format_and_check() -> None:
    import subprocess
    import sys

    from conftest import REPO

    def ctxd(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "ctxd", *args]
        return subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=60)

    done = ctxd("context", str(ROLLOUT), "--json", "--format", "openai")
    data = json.loads(done.stdout)
    assert [m["role"] for m in data["openai"]] == [
        "user",
        "system",
        "user",
        "user",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert data["openai"][0]["content"].startswith("The conversation history before this point was compacted")
    assert data["contextTokens"] == 1010
    check = ctxd("check", str(ROLLOUT))
    assert check.returncode == 0 and check.stdout.rstrip().endswith("clean")
