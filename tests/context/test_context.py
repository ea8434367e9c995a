"""Context building: pi 1.5.2's rules, the known answers on pi's fixtures, OpenAI conversion."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import reference
from helpers.factories import assistant, chain, compaction, entry, tool_result, user, write

from ctxd.context.build import build_context
from ctxd.context.openai import to_openai
from ctxd.context.truncate import is_oversized, limit_chars, truncate_text, truncate_tool_result
from ctxd.tree.session import Session


def ctx_of(path: str, leaf: str | None = None):  # type: ignore[no-untyped-def]
    s = Session.open(path)
    return build_context(s.file, s.tree, leaf, estimates=s.estimates)


@pytest.mark.parametrize(
    ("name", "entries", "messages", "estimated", "usage_based", "model"),
    [
        ("before-compaction.jsonl", 1002, 446, 139_429, 180_820, "anthropic/claude-opus-4-5"),
        ("large-session.jsonl", 1018, 914, 124_661, 177_657, "anthropic/claude-sonnet-4-5"),
    ],
)
def test_known_answers_from_pi(name, entries, messages, estimated, usage_based, model) -> None:  # type: ignore[no-untyped-def]
    path = str(reference("pi", name))
    s = Session.open(path)
    assert len(s.file) == entries
    ctx = ctx_of(path)
    assert len(ctx.messages) == messages
    assert ctx.estimatedTokens == estimated
    assert ctx.contextTokens == usage_based
    assert ctx.model == model and ctx.thinkingLevel == "off"
    if name == "before-compaction.jsonl":
        assert ctx.messages[0].role == "compactionSummary"
    lines = [m.line for m in ctx.messages]
    assert lines[1:] == sorted(lines[1:])  # path order is file order in these linear sessions


def test_latest_compaction_and_kept_range(tmp_path: Path) -> None:
    e = chain(user, assistant, user, assistant, user, assistant)
    c1 = compaction(e[-1]["id"], e[2]["id"], "first")
    more = [user(c1["id"], "after1")]
    c2 = compaction(more[0]["id"], e[4]["id"], "second")
    tail = [assistant(c2["id"], "after2")]
    path = write(tmp_path / "s.jsonl", [*e, c1, *more, c2, *tail])
    ctx = ctx_of(path)
    assert ctx.messages[0].role == "compactionSummary"
    assert ctx.messages[0].message["summary"] == "second"
    # kept: from e[4] to the second compaction (skipping the first compaction itself), then after it
    assert [m.entryId for m in ctx.messages[1:]] == [e[4]["id"], e[5]["id"], more[0]["id"], tail[0]["id"]]
    assert ctx.compactionId == c2["id"]
    assert ctx.messages[0].line == 10  # header is line 1


def test_branch_summary_custom_message_system_and_settings(tmp_path: Path) -> None:
    r = entry("model_change", None, provider="p", modelId="m")
    sysm = entry("message", r["id"], message={"role": "system", "content": "be brief"})
    u = user(sysm["id"])
    cm = entry("custom_message", u["id"], customType="note", content="remember X", display=True)
    bs = entry("branch_summary", cm["id"], fromId="zzz", summary="we tried Y")
    empty_bs = entry("branch_summary", bs["id"], fromId="zzz", summary="")
    cust = entry("custom", empty_bs["id"], customType="state", data={"a": 1})
    thinking = entry("thinking_level_change", cust["id"], thinkingLevel="high")
    a = assistant(thinking["id"], model="m2")
    path = write(tmp_path / "s.jsonl", [r, sysm, u, cm, bs, empty_bs, cust, thinking, a])
    ctx = ctx_of(path)
    assert [m.role for m in ctx.messages] == ["system", "user", "custom", "branchSummary", "assistant"]
    assert ctx.thinkingLevel == "high" and ctx.model == "prov/m2"
    oa = to_openai(ctx.agent_messages())
    assert oa[0] == {"role": "system", "content": "be brief"}
    assert oa[2] == {"role": "user", "content": "remember X"}
    assert "<summary>\nwe tried Y</summary>" in oa[3]["content"]


def test_context_edits_replace_or_hide_latest_wins(tmp_path: Path) -> None:
    e = chain(user, lambda p: assistant(p, "secret"), user, lambda p: assistant(p, "long answer"))
    edit1 = entry(
        "context_edit", e[-1]["id"], targetId=e[1]["id"], replacement={"content": [{"type": "text", "text": "x"}]}
    )
    edit2 = entry("context_edit", edit1["id"], targetId=e[1]["id"], replacement=None)
    edit3 = entry(
        "context_edit", edit2["id"], targetId=e[3]["id"], replacement={"content": [{"type": "text", "text": "short"}]}
    )
    path = write(tmp_path / "s.jsonl", [*e, edit1, edit2, edit3])
    ctx = ctx_of(path)
    assert [m.entryId for m in ctx.messages] == [e[0]["id"], e[2]["id"], e[3]["id"]]
    assert ctx.messages[-1].message["content"] == [{"type": "text", "text": "short"}]
    assert ctx.messages[-1].tokens == 2


def test_leaf_choice_and_diagnostics(tmp_path: Path) -> None:
    e = chain(user, assistant, user)
    side = assistant(e[1]["id"], "side")
    path = write(tmp_path / "s.jsonl", [*e, side])
    assert [m.entryId for m in ctx_of(path).messages] == [e[0]["id"], e[1]["id"], side["id"]]
    assert [m.entryId for m in ctx_of(path, e[2]["id"]).messages] == [e[0]["id"], e[1]["id"], e[2]["id"]]
    bad = compaction(e[-1]["id"], "nowhere0")
    path2 = write(tmp_path / "s2.jsonl", [*e, bad])
    ctx = ctx_of(path2)
    assert [m.role for m in ctx.messages] == ["compactionSummary"]
    assert any("not on its path" in d["message"] for d in ctx.diagnostics)


def test_openai_conversion_is_always_a_valid_request() -> None:
    msgs = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "look"}, {"type": "image", "data": "AAA", "mimeType": "image/png"}],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hidden"},
                {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a"}},
                {"type": "toolCall", "id": "c2", "name": "bash", "arguments": {"command": "ls"}},
            ],
        },
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "read",
            "content": [{"type": "text", "text": "A"}],
            "isError": False,
        },
        {"role": "toolResult", "toolCallId": "zz", "toolName": "read", "content": [], "isError": False},
        {"role": "bashExecution", "command": "ls", "output": "", "exitCode": 2, "cancelled": False, "truncated": False},
        {"role": "bashExecution", "command": "secret", "output": "x", "excludeFromContext": True},
        {"role": "compactionSummary", "summary": "S", "tokensBefore": 1},
    ]
    problems: list[str] = []
    out = to_openai(msgs, problems)
    assert out[0]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,AAA")
    assert out[1]["tool_calls"][0]["function"] == {"name": "read", "arguments": '{"path": "a"}'}
    assert out[1]["content"] is None
    assert out[2] == {"role": "tool", "tool_call_id": "c1", "content": "A"}
    assert out[3]["tool_call_id"] == "c2" and "no result" in out[3]["content"]  # interrupted call closed
    assert "Command exited with code 2" in out[4]["content"] and "(no output)" in out[4]["content"]
    assert out[5]["content"].startswith("The conversation history before this point was compacted")
    assert len(out) == 6 and any("'zz'" in p for p in problems)


def test_tool_result_truncation_rule() -> None:
    assert limit_chars(200_000) == 240_000
    assert limit_chars(10_000_000) == 400_000
    assert limit_chars(1_000) == 2_000
    text = "\n".join(f"line {i:05d}" for i in range(10_000))
    cut = truncate_text(text, 5_000)
    kept = cut.split("\n\n[ctxd truncated")[0]
    assert len(kept) <= 5_000 and kept.endswith(("0", "1", "2", "3", "4", "5", "6", "7", "8", "9"))
    assert text.startswith(kept) and "characters removed" in cut
    no_newline = truncate_text("x" * 10_000, 3_000)
    assert len(no_newline) <= 3_000 and no_newline.startswith("x" * 2_000)  # the notice fits in the limit
    msg = {"role": "toolResult", "toolCallId": "c", "content": [{"type": "text", "text": text}]}
    assert is_oversized(msg, 5_000)
    small = truncate_tool_result(msg, 5_000)
    assert len(small["content"][0]["text"]) < 5_200 and small["details"]["ctxdTruncated"]["originalChars"] == len(text)
    assert msg["content"][0]["text"] == text  # the original is untouched


def test_tool_results_follow_their_calls_in_context(tmp_path: Path) -> None:
    a = assistant(None, calls=[("c1", "read", {"path": "x"})])
    r = tool_result(a["id"], "c1")
    path = write(tmp_path / "s.jsonl", [a, r])
    ctx = ctx_of(path)
    assert [m.role for m in ctx.messages] == ["assistant", "toolResult"]


@pytest.mark.parametrize("name", ["before-compaction.jsonl", "large-session.jsonl", "all-entry-types-v3.jsonl"])
def test_context_size_without_building_equals_the_built_context(name: str) -> None:
    from ctxd.context.build import context_size

    s = Session.open(str(reference("pi", name)))
    estimates: dict[int, int] = {}
    size = context_size(s.file, s.tree, estimates=estimates)
    ctx = build_context(s.file, s.tree)
    assert size.tokens == ctx.contextTokens and size.leafId == ctx.leafId
    assert size.last is not None and size.last["role"] == ctx.messages[-1].role
    for leaf in [s.tree.id_of(i) for i in range(0, len(s.file), 97)]:
        assert (
            context_size(s.file, s.tree, leaf, estimates=estimates).tokens
            == build_context(s.file, s.tree, leaf).contextTokens
        )


def test_context_size_follows_a_growing_session_exactly(tmp_path: Path) -> None:
    from ctxd.context.build import context_size

    def fresh(e: dict[str, object]) -> dict[str, object]:
        return {k: v for k, v in e.items() if k not in ("id", "parentId")}

    s = Session.open(write(tmp_path / "s.jsonl", chain(user)))
    estimates: dict[int, int] = {}
    for k in range(60):
        if k % 7 == 3:
            s.append([fresh(assistant(None, "with usage", total=1000 + k))])
        elif k % 11 == 5:
            s.move_leaf(s.tree.id_of(s.tree.parent[s.leaf() or 0]))
        elif k % 13 == 6:
            first = s.path_ids()[1] if len(s.path_ids()) > 1 else s.path_ids()[0]
            s.append([fresh(compaction(None, first, "S" * k))])
        else:
            s.append([fresh(user(None, "x" * (k * 13)))])
        assert len(s.path_ids()) > 1
        assert context_size(s.file, s.tree, estimates=estimates).tokens == build_context(s.file, s.tree).contextTokens
