"""Scenarios for the entries pi added since 0.87, and for other differences found in pi 1.5.2's source."""

from __future__ import annotations

import itertools

from helpers.factories import (
    assistant,
    bash,
    branch_summary,
    chain,
    compaction,
    context_edit,
    custom_message,
    entry,
    message,
    meta,
    system,
    text,
    tool_result,
    user,
)
from scenario_kit import SYSTEM_AT_COMPACTION, TOOL, Entries, big_assistant, big_user, scenario, x

# --- pi >= 0.87 entries --------------------------------------------------------------------------


@scenario("0.87")
def new_compaction_with_system_message() -> Entries:
    e = chain(
        lambda p: system(p, "You are terse.", toolsAdded=[TOOL]),
        big_user(400),
        big_assistant(400),
        lambda p: system(p, "Also polite.", sections={"tone": "polite"}),
        big_user(400),
        big_assistant(400, total=4000),
    )
    c = compaction(e[-1]["id"], e[2]["id"], "summary", tokens=4000, systemMessage=SYSTEM_AT_COMPACTION)
    return [*e, c, user(c["id"], "after")]


@scenario("0.87", keep=100)
def new_compaction_system_message_then_plan() -> Entries:
    e = chain(big_user(400), big_assistant(400), lambda p: system(p, "kept patch"), big_user(400))
    c = compaction(e[-1]["id"], e[1]["id"], "S1", tokens=500, systemMessage=SYSTEM_AT_COMPACTION)
    tail = chain(lambda p: user(c["id"], x(400)), big_assistant(400), big_user(400), big_assistant(400))
    return [*e, c, *tail]


@scenario("0.87")
def new_context_edit_null_hides() -> Entries:
    e = chain(user, lambda p: assistant(p, "secret"), user, lambda p: assistant(p, "long answer"))
    return [*e, context_edit(e[-1]["id"], e[1]["id"], None)]


@scenario("0.87", keep=50)
def new_context_edit_hides_the_compaction() -> Entries:
    e = chain(big_user(400), big_assistant(400), big_user(400))
    c = compaction(e[-1]["id"], e[2]["id"], x(400, "s"), tokens=500)
    tail = chain(lambda p: assistant(c["id"], x(400)), big_user(400), big_assistant(400))
    return [*e, c, *tail, context_edit(tail[-1]["id"], c["id"], None)]


@scenario("0.87")
def new_context_edit_string_and_uneditable_roles() -> Entries:
    e = chain(
        lambda p: system(p, "prompt"),
        lambda p: user(p, [text("long question " * 10)]),
        lambda p: assistant(p, "", calls=[("c1", "read", {"path": "a"})]),
        lambda p: tool_result(p, "c1", x(400)),
        lambda p: bash(p, "ls", x(400)),
        lambda p: assistant(p, "done " * 40),
        lambda p: custom_message(p, "note " * 20),
    )
    ed = [
        context_edit(e[-1]["id"], e[1]["id"], "q?"),
        context_edit(None, e[3]["id"], "elided"),
        context_edit(None, e[5]["id"], "done"),
        context_edit(None, e[0]["id"], "new prompt that is not applied"),
        context_edit(None, e[4]["id"], "not applied either"),
        context_edit(None, e[6]["id"], [text("n")]),
    ]
    for prev, cur in itertools.pairwise(ed):
        cur["parentId"] = prev["id"]
    return [*e, *ed]


@scenario("0.87", keep=100)
def new_recovery_attempt_omitted() -> Entries:
    e = chain(
        big_user(400),
        big_assistant(400),
        big_user(400),
        lambda p: assistant(p, "overflow", stop="error", error="context overflow"),
    )
    return [*e, context_edit(e[-1]["id"], e[-1]["id"], None)]


# --- other differences found in pi's source ----------------------------------------------------------


@scenario("other")
def js_numbers_in_tool_arguments() -> Entries:
    args = {"ratio": 1.0, "tiny": 1e-7, "small": 0.000015, "huge": 1e21, "n": 10**22, "neg": -0.0, "f": 2.5e-3}
    return chain(user, lambda p: assistant(p, "", calls=[("c1", "calc", args)]), lambda p: tool_result(p, "c1"))


@scenario("other")
def unicode_lengths() -> Entries:
    return chain(
        lambda p: user(p, "naïve 😀 — ✓ \U0001f9ea"),
        lambda p: assistant(p, "ok 🚀", calls=[("c1", "write", {"path": "é.txt", "content": '😀\n\t"q"\\'})]),
        lambda p: tool_result(p, "c1", "wrote ✓"),
    )


@scenario("other", keep=150)
def cut_after_compaction_over_kept_metadata() -> Entries:
    e = chain(big_user(400), big_assistant(400), lambda p: meta("model_change", p), lambda p: meta("label", p))
    c = compaction(e[-1]["id"], e[2]["id"], "S", tokens=300)
    tail = chain(lambda p: user(c["id"], x(400)), big_assistant(400), big_user(400), big_assistant(200))
    return [*e, c, *tail]


@scenario("other", keep=200)
def older_compaction_in_the_kept_range() -> Entries:
    e = chain(big_user(400), big_assistant(400), big_user(400))
    c1 = compaction(e[-1]["id"], e[1]["id"], "first", tokens=300)
    mid = chain(lambda p: assistant(c1["id"], x(400)), big_user(400))
    c2 = compaction(mid[-1]["id"], e[2]["id"], "second", tokens=400)
    tail = chain(lambda p: assistant(c2["id"], x(400)), big_user(400), big_assistant(400))
    return [*e, c1, *mid, c2, *tail]


@scenario("other", keep=100)
def first_kept_not_on_the_path() -> Entries:
    e = chain(big_user(400), big_assistant(400))
    c = compaction(e[-1]["id"], "nowhere0", "S", tokens=300)
    tail = chain(lambda p: user(c["id"], x(400)), big_assistant(400), big_user(400))
    return [*e, c, *tail]


@scenario("other", keep=100)
def compaction_keeping_from_itself() -> Entries:
    e = chain(big_user(400), big_assistant(400))
    c = compaction(e[-1]["id"], "", "S", tokens=300)
    c["firstKeptEntryId"] = c["id"]
    tail = chain(lambda p: user(c["id"], x(400)), big_assistant(400), big_user(400))
    return [*e, c, *tail]


@scenario("other", keep=200)
def previous_details_and_split_turn() -> Entries:
    e = chain(big_user(400), big_assistant(400), big_user(400))
    c = compaction(e[-1]["id"], e[2]["id"], "S", tokens=300, details={"readFiles": ["a.py"], "modifiedFiles": ["b.py"]})
    tail = chain(
        lambda p: assistant(c["id"], "", calls=[("c1", "edit", {"path": "c.py"})]),
        lambda p: tool_result(p, "c1", x(400), name="edit"),
        lambda p: assistant(p, "", calls=[("c2", "read", {"path": "d.py"})]),
        lambda p: tool_result(p, "c2", x(400)),
        big_assistant(800),
    )
    return [*e, c, *tail]


@scenario("other", keep=100)
def file_lists_nested_calls_and_utf16_order() -> Entries:
    nested = {
        "calls": [
            {"name": "write", "arguments": {"path": "gen/out.ts"}},
            {"name": "read", "arguments": {"path": "ｚ.md"}},
        ]
    }
    return chain(
        big_user(400),
        lambda p: assistant(p, "", calls=[("c1", "read", {"path": "😀.md"}), ("c2", "read", {"path": "\uff5a.md"})]),
        lambda p: tool_result(p, "c1"),
        lambda p: {**tool_result(p, "c2"), "message": {**tool_result(p, "c2")["message"], "nestedCalls": nested}},
        lambda p: assistant(p, "", calls=[("c3", "edit", {"path": "a.py"}), ("c4", "write", {"path": ""})]),
        lambda p: tool_result(p, "c3", name="edit"),
        big_user(400),
        big_assistant(400),
    )


@scenario("other", keep=150)
def metadata_everywhere() -> Entries:
    return chain(
        lambda p: meta("model_change", p),
        lambda p: meta("thinking_level_change", p),
        big_user(400),
        lambda p: meta("custom", p),
        big_assistant(400),
        lambda p: meta("session_info", p),
        lambda p: {**entry("usage", p, provider="prov", model="m1", usage={"input": 5}), "kind": "cache_warm"},
        big_user(400),
        lambda p: meta("label", p),
        big_assistant(400),
    )


@scenario("other")
def empty_branch_summary_and_null_contents() -> Entries:
    e = chain(
        lambda p: user(p, None),
        lambda p: branch_summary(p, ""),
        lambda p: custom_message(p, None),
        lambda p: message(p, "assistant", content=None, stopReason="stop"),
        lambda p: message(p, "toolResult", toolCallId="c", toolName="read", content=None, isError=False),
        lambda p: user(p, "last"),
    )
    return e


@scenario("other", keep=120)
def branched_tree_leaf_on_a_side_branch() -> Entries:
    e = chain(big_user(400), big_assistant(400), big_user(400), big_assistant(400))
    side = chain(lambda p: branch_summary(e[1]["id"], "the abandoned path"), big_user(400), big_assistant(400))
    return [*e, *side]


@scenario("other", keep=100)
def cut_budget_spent_by_tool_results() -> Entries:
    return chain(
        big_user(400),
        lambda p: assistant(p, "", calls=[("c1", "read", {"path": "a"})]),
        lambda p: tool_result(p, "c1", x(2000)),
    )


@scenario("other", keep=0)
def keep_nothing() -> Entries:
    empty = lambda p: message(p, "assistant", content=[], stopReason="stop")  # noqa: E731
    return chain(user, assistant, lambda p: user(p, ""), empty)


@scenario("other", keep=150)
def thinking_blocks_and_bash_turns() -> Entries:
    think = {"type": "thinking", "thinking": x(400, "t"), "thinkingSignature": "sig"}
    return chain(
        big_user(200),
        lambda p: message(p, "assistant", content=[think, text("answer")], stopReason="stop"),
        lambda p: bash(p, "git status", x(300)),
        lambda p: bash(p, "git diff", x(300), excludeFromContext=True),
        lambda p: message(p, "assistant", content=[think], stopReason="stop"),
    )
