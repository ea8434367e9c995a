"""Small session files on which ctxd must give pi 1.5.2's answers, one or more per rule.

Each scenario writes one file into a folder and names the ``keepRecentTokens`` its compaction plan
uses. Three kinds: built with the entry factories (tests/factories.py), hand-written lines as pi
writes them (its key order and fields), and mixed files where ctxd's own writer appends to pi-style
lines. ``test_pi_oracle`` runs pi's real code on every one; ``test_pi_rules`` pins pi's numbers.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
from factories import (
    assistant,
    bash,
    branch_summary,
    chain,
    compaction,
    context_edit,
    custom_message,
    entry,
    header,
    image,
    message,
    meta,
    system,
    text,
    tool_result,
    user,
    write,
)

from ctxd.tree.session import Session

Entries = list[dict[str, Any]]


@attrs.define
class Scenario:
    name: str
    rule: str
    keep: int
    make: Callable[[Path], str]


SCENARIOS: dict[str, Scenario] = {}


def scenario(rule: str, keep: int = 20_000) -> Callable[[Callable[[], Entries]], Callable[[], Entries]]:
    """Register a factory-built scenario: the function returns its entries."""

    def register(fn: Callable[[], Entries]) -> Callable[[], Entries]:
        name = fn.__name__
        SCENARIOS[name] = Scenario(name, rule, keep, lambda d: write(d / f"{name}.jsonl", fn()))
        return fn

    return register


def raw(rule: str, keep: int = 20_000) -> Callable[[Callable[[], str]], Callable[[], str]]:
    """Register a hand-written scenario: the function returns the file's text."""

    def register(fn: Callable[[], str]) -> Callable[[], str]:
        name = fn.__name__

        def make(d: Path) -> str:
            path = d / f"{name}.jsonl"
            path.write_text(fn(), encoding="utf-8")
            return str(path)

        SCENARIOS[name] = Scenario(name, rule, keep, make)
        return fn

    return register


def mixed(rule: str, keep: int = 20_000) -> Callable[[Callable[[Path], str]], Callable[[Path], str]]:
    """Register a scenario that writes its file itself (pi-style lines, then ctxd's appends)."""

    def register(fn: Callable[[Path], str]) -> Callable[[Path], str]:
        SCENARIOS[fn.__name__] = Scenario(fn.__name__, rule, keep, fn)
        return fn

    return register


def x(n: int, ch: str = "x") -> str:
    """``n`` characters: ``n / 4`` tokens."""
    return ch * n


def big_user(chars: int) -> Callable[[str | None], dict[str, Any]]:
    return lambda p: user(p, x(chars))


def big_assistant(chars: int, **kw: Any) -> Callable[[str | None], dict[str, Any]]:
    return lambda p: assistant(p, x(chars, "y"), **kw)


# --- a. images -----------------------------------------------------------------------------------


@scenario("a")
def a_user_image() -> Entries:
    return chain(lambda p: user(p, [text("look at this"), image()]), lambda p: assistant(p, "I see it"))


@scenario("a")
def a_images_by_role() -> Entries:
    e = chain(
        lambda p: system(p, [text("sys"), image()]),
        lambda p: user(p, [image(), image()]),
        lambda p: assistant(p, "", calls=[("c1", "read", {"path": "pic.png"})]),
        lambda p: message(p, "toolResult", toolCallId="c1", toolName="read", content=[image()], isError=False),
        lambda p: message(p, "assistant", content=[text("a picture"), image()], stopReason="stop"),
        lambda p: custom_message(p, [text("note"), image()]),
        lambda p: bash(p, "cat pic.png", "binary"),
    )
    return e


# --- b. system messages ----------------------------------------------------------------------------


TOOL = {"name": "grep", "description": "search files", "parameters": {"type": "object", "properties": {}}}


@scenario("b")
def b_system_fields() -> Entries:
    return chain(
        lambda p: system(
            p,
            [text("You are terse."), image()],
            sections={"style": "short answers", "gone": None, "rules": "no secrets"},
            toolsAdded=[TOOL],
            toolsRemoved=[{"name": "bash", "description": "x" * 400}],
        ),
        lambda p: user(p, "hi"),
        lambda p: assistant(p, "hello"),
    )


@scenario("b")
def b_system_empty_lists_and_null_content() -> Entries:
    return chain(
        lambda p: system(p, None, toolsAdded=[], toolsRemoved=[]),
        lambda p: system(p, "", sections={}),
        lambda p: user(p, "hi"),
    )


# --- c. the context size ---------------------------------------------------------------------------


@scenario("c")
def c_usage_then_context_edit() -> Entries:
    e = chain(
        big_user(400),
        lambda p: assistant(p, "", calls=[("c1", "read", {"path": "a.txt"})], total=2400),
        lambda p: tool_result(p, "c1", x(8000)),
        lambda p: assistant(p, "done", total=2560),
    )
    ed = context_edit(e[-1]["id"], e[2]["id"], "[elided]")
    return [*e, ed, user(ed["id"], "next")]


@scenario("c")
def c_no_usage_system_messages() -> Entries:
    return chain(
        lambda p: system(p, "You are terse.", toolsAdded=[TOOL]),
        lambda p: user(p, "hello there"),
        lambda p: system(p, "Also polite.", sections={"tone": "polite"}, toolsRemoved=[{"name": "grep"}]),
        lambda p: system(p, "And careful.", toolsAdded=[{**TOOL, "name": "find"}]),
        lambda p: user(p, "go"),
        lambda p: assistant(p, "going", stop="aborted", total=1240),
    )


@scenario("c")
def c_usage_before_compaction() -> Entries:
    e = chain(big_user(400), big_assistant(400, total=5000), user, big_assistant(400, total=6000), user)
    c = compaction(e[-1]["id"], e[2]["id"], "summary of the start", tokens=6100)
    return [*e, c, user(c["id"], "after the compaction")]


@scenario("c")
def c_usage_after_compaction() -> Entries:
    e = chain(big_user(400), big_assistant(400, total=5000), user)
    c = compaction(e[-1]["id"], e[2]["id"], "summary", tokens=5100)
    tail = chain(lambda p: user(c["id"], "more"), lambda p: assistant(p, "ok", total=900), lambda p: user(p, "x" * 40))
    return [*e, c, *tail]


@scenario("c")
def c_zero_and_partial_usage() -> Entries:
    e = chain(big_user(400), big_assistant(40, total=3000), user)
    zero = assistant(e[-1]["id"], "zero usage", total=0)
    partial = assistant(zero["id"], "partial usage")
    partial["message"]["usage"] = {"input": 7000}
    err = assistant(partial["id"], "failed", total=9000, stop="error", error="overloaded")
    return [*e, zero, partial, err, user(err["id"], "again")]


@scenario("c")
def c_usage_then_system_message() -> Entries:
    return chain(
        lambda p: system(p, "base prompt"),
        big_user(400),
        lambda p: assistant(p, "ok", total=1500),
        lambda p: system(p, "a later patch", sections={"extra": "x" * 40}),
        lambda p: user(p, "and now?"),
    )


@scenario("c")
def c_context_edit_before_usage() -> Entries:
    e = chain(big_user(400), lambda p: assistant(p, "first", total=700))
    ed = context_edit(e[-1]["id"], e[0]["id"], "short")
    tail = chain(lambda p: user(ed["id"], "next"), lambda p: assistant(p, "second", total=800), user)
    return [*e, ed, *tail]


# --- d. system messages are prompt state, never summarised ------------------------------------------


@scenario("d", keep=250)
def d_only_the_system_prompt_before_the_cut() -> Entries:
    return chain(lambda p: system(p, "You are terse." * 20), big_user(400), big_assistant(800))


@scenario("d", keep=150)
def d_system_between_turns() -> Entries:
    return chain(
        big_user(400),
        big_assistant(400),
        lambda p: system(p, "patched prompt"),
        big_user(400),
        big_assistant(400),
        big_user(400),
        big_assistant(400),
    )


# --- e. the cut walk counts every entry that shows messages ----------------------------------------


@scenario("e", keep=300)
def e_branch_summary_and_custom_count() -> Entries:
    return chain(
        big_user(400),
        big_assistant(400),
        big_user(400),
        big_assistant(400),
        lambda p: branch_summary(p, x(800, "b")),
        lambda p: custom_message(p, x(400, "c")),
        lambda p: user(p, "short"),
    )


# --- f. the scan back from the cut stops at entries that show messages ------------------------------


@scenario("f", keep=150)
def f_scan_stops_at_custom_message() -> Entries:
    return chain(
        big_user(400),
        big_assistant(400),
        lambda p: custom_message(p, "a reminder"),
        lambda p: meta("model_change", p),
        lambda p: meta("label", p),
        big_user(400),
        big_assistant(400),
    )


@scenario("f", keep=150)
def f_scan_stops_at_branch_summary() -> Entries:
    return chain(
        big_user(400),
        big_assistant(400),
        lambda p: branch_summary(p, "tried another way"),
        lambda p: meta("thinking_level_change", p),
        big_user(400),
        big_assistant(400),
    )


# --- g. a turn is split only when the cut entry does not start one ----------------------------------


@scenario("g", keep=150)
def g_cut_on_bash_execution() -> Entries:
    return chain(big_user(400), big_assistant(400), lambda p: bash(p, "make", x(600, "o")), big_assistant(200))


@scenario("g", keep=100)
def g_cut_on_custom_message() -> Entries:
    return chain(big_user(400), big_assistant(400), lambda p: custom_message(p, x(400, "c")), big_assistant(200))


@scenario("g", keep=100)
def g_cut_on_assistant_splits() -> Entries:
    return chain(
        big_user(400),
        big_assistant(400),
        big_user(40),
        lambda p: assistant(p, x(400), calls=[("c1", "read", {"path": "f"})]),
        lambda p: tool_result(p, "c1", x(40)),
        big_assistant(400),
    )


# --- h. the plan works on the messages with context edits applied -----------------------------------


@scenario("h", keep=250)
def h_edit_shrinks_a_tool_result() -> Entries:
    e = chain(
        big_user(400),
        big_assistant(400),
        big_user(400),
        lambda p: assistant(p, "", calls=[("c1", "read", {"path": "big.log"})]),
        lambda p: tool_result(p, "c1", x(8000)),
        big_assistant(400),
    )
    ed = context_edit(e[-1]["id"], e[4]["id"], "[log elided]")
    return [*e, ed, user(ed["id"], "go on")]


@scenario("h", keep=150)
def h_hidden_entries_are_skipped() -> Entries:
    e = chain(big_user(400), big_assistant(400), big_user(400), big_assistant(800), big_user(400))
    ed1 = context_edit(e[-1]["id"], e[3]["id"], None)
    ed2 = context_edit(ed1["id"], e[2]["id"], None)
    return [*e, ed1, ed2, assistant(ed2["id"], x(200))]


# --- i. what pi estimates as 0 ---------------------------------------------------------------------


@scenario("i")
def i_string_assistant_and_unknown_roles() -> Entries:
    return chain(
        lambda p: user(p, "hi"),
        lambda p: message(p, "assistant", content="a string, not blocks", stopReason="stop"),
        lambda p: message(p, "hookMessage", customType="x", content="from a v2 hook", display=True),
        lambda p: message(p, "somethingNew", content="?"),
        lambda p: user(p, "ok"),
    )


# --- pi >= 0.87 entries --------------------------------------------------------------------------


SYSTEM_AT_COMPACTION = {
    "role": "system",
    "content": "You are terse.\n\nAlso polite.",
    "sections": {"tone": "polite"},
    "toolsAdded": [TOOL],
    "timestamp": 1772355600000,
}


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


# --- pi-style hand-written lines ---------------------------------------------------------------------


def _lines(*objs: dict[str, Any]) -> str:
    return "".join(json.dumps(o, separators=(",", ":"), ensure_ascii=False) + "\n" for o in objs)


PI_USAGE = {
    "input": 1200,
    "output": 85,
    "cacheRead": 3300,
    "cacheWrite": 0,
    "totalTokens": 4585,
    "cost": {"input": 0.0036, "output": 0.001275, "cacheRead": 0.00099, "cacheWrite": 0, "total": 0.005865},
}


def _pi_assistant(i: str, parent: str, content: list[Any], stop: str = "stop", usage: Any = PI_USAGE) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "usage": usage,
        "stopReason": stop,
        "timestamp": 1772355605000,
    }
    return {"type": "message", "id": i, "parentId": parent, "timestamp": "2026-03-01T09:00:05.000Z", "message": msg}


def _pi(kind: str, i: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "id": i, "parentId": parent, "timestamp": "2026-03-01T09:00:00.000Z", **fields}


def _pi_msg(i: str, parent: str | None, role: str, **fields: Any) -> dict[str, Any]:
    return _pi("message", i, parent, message={"role": role, **fields, "timestamp": 1772355600000})


PI_HEADER = {"type": "session", "version": 3, "id": "019c0000-0000-7000-8000-000000000001",
             "timestamp": "2026-03-01T09:00:00.000Z", "cwd": "/home/dev/proj"}  # fmt: skip


def _pi_session(*objs: dict[str, Any]) -> str:
    return _lines(PI_HEADER, *objs)


EDIT_ARGS = {"path": "src/chart.ts", "oldText": "a", "newText": "b"}


@raw("pi-style", keep=200)
def pi_tool_loop_with_images() -> str:
    return _pi_session(
        _pi("model_change", "a0000001", None, provider="anthropic", modelId="claude-sonnet-4-5"),
        _pi("thinking_level_change", "a0000002", "a0000001", thinkingLevel="medium"),
        _pi_msg("a0000003", "a0000002", "user", content=[text("fix the chart"), image("image/jpeg")]),
        _pi_assistant(
            "a0000004",
            "a0000003",
            [
                {"type": "thinking", "thinking": "Look at the file first.", "thinkingSignature": "EqQB"},
                {"type": "toolCall", "id": "toolu_01", "name": "read", "arguments": {"path": "src/chart.ts"}},
            ],
            stop="toolUse",
        ),
        _pi_msg(
            "a0000005",
            "a0000004",
            "toolResult",
            toolCallId="toolu_01",
            toolName="read",
            content=[text(x(1200, "r"))],
            isError=False,
        ),
        _pi_assistant(
            "a0000006",
            "a0000005",
            [{"type": "toolCall", "id": "toolu_02", "name": "edit", "arguments": EDIT_ARGS}],
            stop="toolUse",
        ),
        _pi_msg("a0000007", "a0000006", "toolResult", toolCallId="toolu_02", toolName="edit",
                content=[text("Successfully replaced text.")], details={"diff": "-a\n+b"}, isError=False),
        _pi_assistant("a0000008", "a0000007", [text("Fixed: the axis now starts at zero.")]),
        _pi("label", "a0000009", "a0000008", targetId="a0000003", label="chart"),
        _pi_msg("a000000a", "a0000009", "user", content=[text("thanks " + x(200))]),
    )  # fmt: skip


@raw("pi-style", keep=100)
def pi_compaction_with_system_and_edit() -> str:
    system_now = {**SYSTEM_AT_COMPACTION, "timestamp": 1772355700000}
    return _pi_session(
        _pi_msg("b0000001", None, "system", content="You are terse.", toolsAdded=[TOOL]),
        _pi_msg("b0000002", "b0000001", "user", content=x(400)),
        _pi_assistant("b0000003", "b0000002", [text(x(400, "y"))]),
        _pi_msg("b0000004", "b0000003", "system", content="Also polite.", sections={"tone": "polite"}),
        _pi_msg("b0000005", "b0000004", "user", content=x(400)),
        _pi_assistant("b0000006", "b0000005", [text(x(400, "y"))]),
        _pi("compaction", "b0000007", "b0000006", summary="## Goal\nfix it", firstKeptEntryId="b0000005",
            tokensBefore=4585, details={"readFiles": [], "modifiedFiles": []}, systemMessage=system_now),
        _pi_msg("b0000008", "b0000007", "user", content=x(400)),
        _pi_assistant("b0000009", "b0000008", [text(x(400, "y"))], usage={**PI_USAGE, "totalTokens": 900}),
        _pi("context_edit", "b000000a", "b0000009", targetId="b0000008", replacement={"content": "short"}),
        _pi_msg("b000000b", "b000000a", "user", content=x(40)),
    )  # fmt: skip


@raw("pi-style", keep=100)
def pi_bash_and_custom_messages() -> str:
    return _pi_session(
        _pi_msg("c0000001", None, "user", content="run the tests"),
        _pi_msg("c0000002", "c0000001", "bashExecution", command="npm test", output=x(800, "o"), exitCode=1,
                cancelled=False, truncated=False),
        _pi("custom_message", "c0000003", "c0000002", customType="reminder", content=x(400, "m"), display=False,
            details={"k": 1}),
        _pi_assistant("c0000004", "c0000003", [text(x(400, "y"))]),
        _pi("custom", "c0000005", "c0000004", customType="ext-state", data={"open": True}),
        _pi("branch_summary", "c0000006", "c0000005", fromId="c0000003", summary=x(400, "s"),
            details={"readFiles": ["a"], "modifiedFiles": []}),
        _pi_msg("c0000007", "c0000006", "user", content="and now?"),
    )  # fmt: skip


@raw("pi-style")
def pi_v2_with_hook_message() -> str:
    v2 = {**PI_HEADER, "version": 2}
    return _lines(
        v2,
        _pi_msg("d0000001", None, "user", content="hi"),
        _pi_msg("d0000002", "d0000001", "hookMessage", customType="hook", content="injected " * 10, display=True),
        _pi_assistant("d0000003", "d0000002", [text("hello")]),
    )


@raw("pi-style", keep=100)
def pi_v1_linear_with_compaction_index() -> str:
    v1 = {"type": "session", "id": "v1-session", "timestamp": "2025-11-20T10:00:00.000Z", "cwd": "/p"}
    usage = {"input": 10, "output": 10, "cacheRead": 0, "cacheWrite": 0}

    def line(n: int, role: str) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": role, "content": x(400), "timestamp": n}
        if role == "assistant":
            msg.update(content=[text(x(400))], usage=usage, stopReason="stop")
        return {"type": "message", "timestamp": f"2025-11-20T10:00:0{n}.000Z", "message": msg}

    # A v1 compaction names its first kept entry by line index (the header is 0).
    comp = {"type": "compaction", "timestamp": "2025-11-20T10:00:04.000Z", "summary": "old summary",
            "firstKeptEntryIndex": 3, "tokensBefore": 300}  # fmt: skip
    lines = [line(1, "user"), line(2, "assistant"), line(3, "user"), comp, line(5, "assistant"), line(6, "user")]
    return _lines(v1, *lines)


@raw("pi-style", keep=100)
def pi_blank_and_malformed_lines() -> str:
    text_ = _pi_session(
        _pi_msg("e0000001", None, "user", content=x(400)),
        _pi_assistant("e0000002", "e0000001", [text(x(400))]),
        _pi_msg("e0000003", "e0000002", "user", content=x(400)),
    )
    lines = text_.splitlines(keepends=True)
    return "".join([lines[0], "\n", lines[1], "{not json\n", *lines[2:]])


# --- mixed: pi-style lines, then ctxd's writer -------------------------------------------------------


@mixed("mixed", keep=150)
def mixed_pi_then_ctxd_appends(d: Path) -> str:
    path = d / "mixed_pi_then_ctxd_appends.jsonl"
    path.write_text(pi_bash_and_custom_messages(), encoding="utf-8")
    s = Session.open(str(path))
    s.append([{"type": "message", "message": {"role": "assistant", "content": [text(x(400))], "stopReason": "stop"}}])
    s.append([{"type": "custom_message", "customType": "ctxd", "content": [text("ctxd"), image()], "display": True}])
    s.append([{"type": "context_edit", "targetId": "c0000002", "replacement": None}])
    s.append([{"type": "message", "message": {"role": "user", "content": x(200), "timestamp": 10}}])
    return str(path)


@mixed("mixed", keep=100)
def mixed_ctxd_then_pi_lines(d: Path) -> str:
    path = d / "mixed_ctxd_then_pi_lines.jsonl"
    s = Session.open(write(path, chain(big_user(400), big_assistant(400, total=1200)), header()))
    last = s.leaf_id()
    s.append([{"type": "message", "message": {"role": "system", "content": "patch", "timestamp": 3}}])
    leaf = s.leaf_id()
    with open(path, "a", encoding="utf-8") as f:
        f.write(_lines(
            _pi_msg("f0000001", leaf, "user", content=[text(x(400)), image()]),
            _pi_assistant("f0000002", "f0000001", [text(x(400))], usage={**PI_USAGE, "totalTokens": 2000}),
            _pi("context_edit", "f0000003", "f0000002", targetId=last, replacement={"content": "tiny"}),
        ))  # fmt: skip
    return str(path)


@mixed("mixed", keep=200)
def mixed_ctxd_compaction_entry_on_pi_lines(d: Path) -> str:
    """A file whose compaction ctxd itself wrote (with the prompt state) over pi-style lines."""
    import asyncio

    from ctxd.compaction.engine import compact
    from ctxd.compaction.settings import CompactionSettings

    path = d / "mixed_ctxd_compaction_entry_on_pi_lines.jsonl"
    path.write_text(pi_compaction_with_system_and_edit(), encoding="utf-8")
    s = Session.open(str(path))
    s.append([{"type": "message", "message": {"role": "system", "content": "late patch", "timestamp": 11}}])
    s.append([{"type": "message", "message": {"role": "user", "content": x(800), "timestamp": 12}}])
    asyncio.run(compact(s, settings=CompactionSettings(keepRecentTokens=150)))
    s.append([{"type": "message", "message": {"role": "user", "content": "after ctxd's compaction", "timestamp": 13}}])
    return str(path)


def build_all(folder: Path) -> dict[str, tuple[str, int]]:
    """Write every scenario into ``folder``: name -> (path, keepRecentTokens)."""
    return {name: (sc.make(folder), sc.keep) for name, sc in SCENARIOS.items()}
