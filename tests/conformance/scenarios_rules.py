"""Scenarios for issue 10 §6 rules a-i: one or more small sessions per rule."""

from __future__ import annotations

from helpers.factories import (
    assistant,
    bash,
    branch_summary,
    chain,
    compaction,
    context_edit,
    custom_message,
    image,
    message,
    meta,
    system,
    text,
    tool_result,
    user,
)
from scenario_kit import TOOL, Entries, big_assistant, big_user, scenario, x

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
