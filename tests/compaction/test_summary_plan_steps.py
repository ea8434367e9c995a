"""The offline summary keeps what a resuming agent needs to go on: the open items of the plan the session follows
(rebuilt from its write/edit calls, or its todo tool), the agent's stated next steps, and decisions with their
reasons; a later summary carries the plan when its range did not touch it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ctxd.compaction.summary import OfflineSummarizer, SummaryRequest


def user(value: str) -> dict[str, Any]:
    return {"role": "user", "content": value, "timestamp": 1}


def asst(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks), "provider": "p", "model": "m", "stopReason": "stop"}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}


def result(call_id: str, name: str, output: str = "ok", error: bool = False) -> dict[str, Any]:
    content = [{"type": "text", "text": output}]
    return {"role": "toolResult", "toolCallId": call_id, "toolName": name, "content": content, "isError": error}


def build(messages: list[dict[str, Any]], **kw: Any) -> str:
    return OfflineSummarizer(scale=False).build(SummaryRequest(messages=messages, **kw))


def section(summary: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", summary, re.S | re.M)
    assert match, f"no section {title!r} in:\n{summary}"
    return match.group(1)


PLAN = """# Port the billing service

## Strategy
Keep the old module until the new one passes.

## Work packages

### WP1: Extract the parser
> Move parsing out of billing.py.
- [ ] Create `src/parser.py`
- [ ] Verify with `make test`

### WP2: Add the Rust crate
- [ ] Create `rust/billing/Cargo.toml`
- [ ] Verify with `cargo test`

### WP3: Port the rate tables
- [ ] Port `rates.py` to `rates.rs`
- [ ] Verify with `cargo test`

### WP4: Wire the CLI
- [ ] Call the crate from `cli.py`
- [ ] Update the README

```markdown
### WP9: an example inside a code block, not a work package
- [ ] never listed
```
"""
PATH = "/repo/docs/port-plan.md"


def tick(old: str) -> str:
    return old.replace("- [ ]", "- [x]")


def plan_session() -> list[dict[str, Any]]:
    """The agent writes the plan, ticks WP1 and WP2 off with edits (one edit fails and changes nothing), starts
    on WP3 (one box ticked), and says what comes next."""
    wp1 = "- [ ] Create `src/parser.py`\n- [ ] Verify with `make test`"
    wp2 = "- [ ] Create `rust/billing/Cargo.toml`\n- [ ] Verify with `cargo test`"
    return [
        user("Write a plan for porting billing to Rust in docs/port-plan.md, with checkboxes, then work through it."),
        asst(call("w", "write", path=PATH, content=PLAN)),
        result("w", "write", "Wrote docs/port-plan.md"),
        asst(call("e1", "edit", path=PATH, oldText=wp1, newText=tick(wp1))),
        result("e1", "edit", "Successfully replaced text"),
        asst(call("e2", "edit", path=PATH, oldText=wp2, newText=tick(wp2))),
        result("e2", "edit", "Successfully replaced text"),
        asst(call("e3", "edit", path=PATH, oldText="- [ ] Update the README", newText="- [x] Update the README")),
        result("e3", "edit", "Could not find the exact text", error=True),
        asst(call("e4", "edit", path=PATH, oldText="- [ ] Port `rates.py`", newText="- [x] Port `rates.py`")),
        result("e4", "edit", "Successfully replaced text"),
        asst(
            text(
                "WP1 and WP2 are done and committed.\n\nRemaining:\n- WP3: verify the rate tables\n- WP4: wire the CLI"
            )
        ),
    ]


def test_a_plan_written_then_ticked_off_lists_only_its_open_items_in_order() -> None:
    out = build(plan_session())
    assert out == build([dict(m) for m in plan_session()])  # deterministic
    plan = section(out, "Plan (open items)")
    lines = plan.strip().splitlines()
    assert lines[0] == f"- {PATH}: done 2 of 4 (WP1–WP2); open, in order:"  # the finished ones condensed
    assert lines[1:] == ["- WP3: Port the rate tables (1/2)", "- WP4: Wire the CLI"]  # the failed edit ticked nothing
    assert "WP9" not in out and "never listed" not in out  # a code block's checkboxes are not the plan's
    steps = section(out, "State now")
    assert "- Next open plan item: WP3: Port the rate tables — to do: Verify with `cargo test`" in steps


def test_the_agents_stated_next_steps_are_kept_from_its_last_answer() -> None:
    steps = section(build(plan_session()), "State now")
    assert "WP3: verify the rate tables" in steps and "WP4: wire the CLI" in steps
    numbered = [
        user("Refactor the session module."),
        asst(
            text("I split the module in two.\n\n## Next steps\n1. Move the cache into `cache.py`\n2. Delete `old.py`")
        ),
    ]
    steps = section(build(numbered), "State now")
    assert "Move the cache into `cache.py`" in steps and "Delete `old.py`" in steps


def test_decisions_keep_their_reason_and_the_answer_to_a_correction() -> None:
    messages = [
        user("Make the cache persistent."),
        asst(text("I'll switch the cache to SQLite. The reason is that it survives restarts and needs no server.")),
        user("why does unsubscribe clear the event listeners? they should stay, no?"),
        asst(
            text(
                "You're absolutely right. That's a bug in my design. `unsubscribeAll()` should only disconnect "
                "from the agent, not clear the user's listeners. Let me fix that:"
            )
        ),
    ]
    out = build(messages)
    decisions = "\n".join(line for line in out.splitlines() if line.startswith("- Decision: "))
    assert "I'll switch the cache to SQLite. The reason is that it survives restarts and needs no server." in decisions
    assert "`unsubscribeAll()` should only disconnect from the agent, not clear the user's listeners." in decisions
    assert "You're absolutely right." not in decisions
    assert "User's correction" in out or "unsubscribe clear the event listeners" in out  # the user's words stay


def test_a_later_summary_carries_the_plan_and_a_rewrite_updates_it() -> None:
    first = build(plan_session())
    untouched = build([user("Now run the linter."), asst(text("The linter passes."))], previous_summary=first)
    assert section(untouched, "Plan (open items)") == section(first, "Plan (open items)")
    rewritten = PLAN.replace("- [ ]", "- [x]", 7)  # WP1-WP3 done, WP4 half
    later = [user("continue"), asst(call("w2", "write", path=PATH, content=rewritten)), result("w2", "write")]
    plan = section(build(later, previous_summary=first), "Plan (open items)")
    assert "done 3 of 4 (WP1–WP3)" in plan and "- WP4: Wire the CLI (1/2)" in plan and "WP3: Port" not in plan
    gone = [user("drop the plan"), asst(call("d", "bash", command=f"rm {PATH}")), result("d", "bash", "")]
    assert "## Plan (open items)" not in build(gone, previous_summary=first)  # the plan document was deleted


def test_a_todo_tool_and_a_flat_checklist_are_plans_too() -> None:
    from ctxd.compaction.reading.agent_plans import latest_plan, parse_plan, render

    todos = [
        {"content": "Read the config loader", "status": "completed"},
        {"content": "Fix ERR_ZETA_4711", "status": "in_progress"},
        {"content": "Add a regression test", "status": "pending"},
    ]
    messages = [user("fix the loader"), asst(call("t", "TodoWrite", todos=todos)), result("t", "TodoWrite")]
    found = latest_plan(messages)
    assert found is not None and [i.label for i in found.open] == ["Fix ERR_ZETA_4711", "Add a regression test"]
    flat = parse_plan("# TODO\n- [x] parse args\n- [ ] wire the CLI\n- [ ] write docs\n")
    assert [(i.label, i.done) for i in flat] == [("parse args", True), ("wire the CLI", False), ("write docs", False)]
    numbered = parse_plan("1. Add the parser ✅\n2. Wire the CLI\n3. Write docs\n")
    assert [(i.label, i.done) for i in numbered] == [
        ("Add the parser", True),
        ("Wire the CLI", False),
        ("Write docs", False),
    ]
    lines = render(found, 600)
    assert lines[0] == "TodoWrite: done 1 of 3; open, in order:"  # finished items without ids are counted


def test_many_open_items_stay_within_the_budget_and_say_how_many_are_left() -> None:
    from ctxd.compaction.reading.agent_plans import latest_plan, render

    doc = "".join(f"### Step {n}: do thing {n}\n- [ ] part a\n- [ ] part b\n" for n in range(1, 61))
    found = latest_plan([asst(call("w", "write", path="/r/PLAN.md", content=doc)), result("w", "write")])
    assert found is not None
    lines = render(found, 300)
    assert sum(len(line) for line in lines) < 500
    assert (
        lines[1] == "Step 1: do thing 1" and lines[-1].startswith("(+") and "through Step 60: do thing 60" in lines[-1]
    )


def test_the_plans_next_open_item_is_a_ledger_fact_until_a_newer_next_step_supersedes_it() -> None:
    from ctxd.compaction.ledger.update import advance

    first = advance(None, plan_session())
    nexts = [f for f in first.ledger.facts if f.kind == "next"]
    item = next(f for f in nexts if f.text.startswith("Next open plan item: WP3: Port the rate tables"))
    assert item.status == "open" and item.text.endswith(f"(plan: {PATH})")
    assert not first.sheet.missing(build(plan_session())).facts  # the offline summary names it
    quiet = advance(first.ledger, [user("Run the linter."), asst(text("The linter passes."))])
    carried = next(f for f in quiet.ledger.facts if f.text == item.text)
    assert carried.status == "open"  # nothing newer: a model summary lacking it gets it patched back
    assert any(f.text == item.text for f in quiet.sheet.facts)
    moved = advance(quiet.ledger, [user("go on"), asst(text("Next I will port the tax tables to Rust."))])
    assert next(f for f in moved.ledger.facts if f.text == item.text).status == "superseded"
    deleted = advance(
        quiet.ledger, [user("drop it"), asst(call("d", "bash", command=f"rm {PATH}")), result("d", "bash")]
    )
    closed = next(f for f in deleted.ledger.facts if f.text == item.text)
    assert closed.status == "resolved" and closed.why == "the plan document was deleted"


async def test_a_later_compaction_applies_its_ticks_to_the_plan_an_earlier_range_wrote(tmp_path: Path) -> None:
    """ctxd's own compactions carry the plan document in ``details.ctxd.plans``: the second range only ticks
    boxes (no write, no whole read), and its summary shows the plan as those ticks left it."""
    from helpers.factories import assistant as entry_assistant
    from helpers.factories import tool_result, write
    from helpers.factories import user as entry_user

    from ctxd.compaction.engine import compact
    from ctxd.compaction.settings import CompactionSettings
    from ctxd.tree.session import Session

    settings = CompactionSettings(keep_recent_tokens=300)
    u = entry_user(None, "Write the port plan in docs/port-plan.md and work through it. " + "x" * 3_000)
    w = entry_assistant(u["id"], "", calls=[("w", "write", {"path": PATH, "content": PLAN})])
    r = tool_result(w["id"], "w", "Wrote it", name="write")
    done = entry_assistant(r["id"], "The plan is written. " + "y" * 3_000)
    tail = entry_user(done["id"], "go on")
    reply = entry_assistant(tail["id"], "On it.")
    session = Session.open(write(tmp_path / "s.jsonl", [u, w, r, done, tail, reply]))
    first = await compact(session, settings, summarizer=OfflineSummarizer())
    assert "- WP1: Extract the parser" in section(first.summary, "Plan (open items)")
    stored = session.file.entry_by_id(first.entryId)["details"]["ctxd"]["plans"]
    assert stored == {PATH: PLAN}

    wp1 = "- [ ] Create `src/parser.py`\n- [ ] Verify with `make test`"
    more: list[dict[str, Any]] = []
    parent = first.entryId
    for n, (old, new) in enumerate([(wp1, tick(wp1)), ("- [ ] Create `rust/", "- [x] Create `rust/")]):
        ask = entry_user(parent, f"tick {n} " + "z" * 2_000)
        edit = entry_assistant(ask["id"], "", calls=[(f"e{n}", "edit", {"path": PATH, "oldText": old, "newText": new})])
        ok = tool_result(edit["id"], f"e{n}", "Successfully replaced text", name="edit")
        said = entry_assistant(ok["id"], "Ticked. " + "q" * 2_000)
        more += [ask, edit, ok, said]
        parent = said["id"]
    session.append([{k: v for k, v in e.items() if k not in ("id", "parentId")} for e in more])
    session.append([{"type": "message", "message": {"role": "user", "content": "next", "timestamp": 2}}])
    # session/facts before the second compaction takes the ticks in on the stored plan as well.
    from ctxd.service.facts import session_facts

    now = session_facts(str(tmp_path / "s.jsonl"))
    assert [f.text[:28] for f in now.open_facts() if f.kind == "next"] == ["Next open plan item: WP2: Ad"]
    second = await compact(session, settings, summarizer=OfflineSummarizer())
    assert second.plan.previousCompactionId == first.entryId
    plan = section(second.summary, "Plan (open items)")
    assert f"{PATH}: done 1 of 4 (WP1); open, in order:" in plan
    assert "- WP2: Add the Rust crate (1/2)" in plan and "- WP1:" not in plan


def test_a_failure_the_split_turns_prefix_fixed_is_not_blocked() -> None:
    """The range ends with a failed check; the split turn's prefix (after it) runs the same check again and it
    passes: the failure is resolved, not Blocked."""
    messages = [
        user("Add the field."),
        asst(call("c1", "bash", command="npm run check")),
        result("c1", "bash", "error TS2339: Property 'tokensAfter' does not exist\n\nCommand exited with code 2", True),
    ]
    prefix = [
        user("why does unsubscribe clear the listeners?"),
        asst(call("c2", "bash", command="npm run check")),
        result("c2", "bash", "ok"),
    ]
    out = build(messages, turn_prefix=prefix)
    assert "Still failing" not in out
    assert "error TS2339: Property 'tokensAfter' does not exist\" -> fixed" in out
