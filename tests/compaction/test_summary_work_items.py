"""What the offline summary tells of the work's items and of what the code written holds: an epic's sub-items
with their state now (through a second compaction too), the parts of a long description that bind the work,
and the names a change adds (dependencies with versions, settings, the event names and headers the code
exchanges)."""

from __future__ import annotations

from typing import Any

from test_summarizers_offline import asst, call, result, section, task, text, user

from ctxd.compaction.reading.actions import actions_of, brief
from ctxd.compaction.reading.artifacts import added_names
from ctxd.compaction.summary import OfflineSummarizer, SummaryRequest

ITEMS = "Sub-items of the work (tracker's list; state now)"

EPIC = """○ acme-7k · Search that survives restarts   [● P1 · OPEN]
Owner: Dana · Type: epic

DESCRIPTION
Goal: keep the search index across restarts.

CHILDREN
  ↳ ✓ acme-7k.1: Write the index to disk ● P1
  ↳ ○ acme-7k.2: Load the index at start ● P1
  ↳ ○ acme-7k.3: Rebuild a corrupt index ● P2
"""


def build(messages: list[dict[str, Any]], previous: str | None = None) -> str:
    return OfflineSummarizer(scale=False).build(SummaryRequest(messages=messages, previous_summary=previous))


def bash(cid: str, command: str, output: str, error: bool = False) -> list[dict[str, Any]]:
    return [asst(call(cid, "bash", command=command)), result(cid, "bash", output, error=error)]


def test_an_epics_children_are_read_from_its_show() -> None:
    (shown,) = actions_of("bd show acme-7k", EPIC, True)
    assert shown.children == (
        ("acme-7k.1", "closed", "Write the index to disk"),
        ("acme-7k.2", "open", "Load the index at start"),
        ("acme-7k.3", "open", "Rebuild a corrupt index"),
    )
    (listed,) = actions_of(
        "bd list --status=open",
        "○ acme-7k.4 [● P2] [task] - Index metrics (blocked by: acme-7k, acme-7k.2)\n",
        True,
    )
    assert listed.kind == "list" and listed.children == (("acme-7k.4", "open", "Index metrics"),)


def test_the_sub_items_carry_their_state_through_two_compactions() -> None:
    first = [
        user("Work on epic acme-7k, one item after another."),
        *bash("s", "bd show acme-7k", EPIC),
        *bash("c", "bd update acme-7k.2 --status in_progress", "Updated acme-7k.2"),
        asst(call("e", "edit", path="src/index.py", oldText="a", newText="def load_index(path):\n    pass")),
        result("e", "edit", "ok"),
        *bash("d", 'bd close acme-7k.2 --reason "loads at start"', "✓ Closed acme-7k.2: loads at start"),
        *bash("l", "bd list --status=open", "○ acme-7k.4 [● P2] [task] - Index metrics (blocked by: acme-7k)\n"),
        *bash("c3", "bd update acme-7k.3 --status in_progress", "Updated acme-7k.3"),
    ]
    out = build(first)
    items = section(out, ITEMS)
    assert "- acme-7k.1 [closed] Write the index to disk (of acme-7k)" in items
    assert "- acme-7k.2 [closed, T1] Load the index at start (of acme-7k)" in items
    assert "- acme-7k.3 [under way, T2] Rebuild a corrupt index (of acme-7k)" in items
    assert "- acme-7k.4 [open] Index metrics (of acme-7k)" in items  # made after the epic was shown
    # The next range closes the item under way without showing the epic again: the list says so.
    second = [
        asst(call("e2", "edit", path="src/index.py", oldText="pass", newText="return rebuild(path)")),
        result("e2", "edit", "ok"),
        *bash("d3", 'bd close acme-7k.3 --reason "rebuilds"', "✓ Closed acme-7k.3: rebuilds"),
    ]
    again = build(second, previous=out)
    items = section(again, ITEMS)
    assert "- acme-7k.3 [closed, T2] Rebuild a corrupt index (of acme-7k)" in items
    assert "- acme-7k.4 [open] Index metrics (of acme-7k)" in items
    assert "acme-7k.4" in section(again, "State now")  # what comes next, the first item not closed


def test_a_long_description_keeps_the_parts_that_bind_the_work() -> None:
    about = "\n".join(
        [
            "Problem: " + "the index is lost at every restart, so searches are slow for minutes. " * 30,
            "Success Criteria: a restart keeps every document searchable; startup stays under two seconds.",
            "No-gos: no new database; no change to the public query API.",
            "Sources: " + "docs/search.md " * 20,
        ]
    )
    told = brief(about, 900)
    assert len(told) <= 900
    assert told.startswith("Problem: the index is lost")
    assert "Success Criteria: a restart keeps every document searchable; startup stays under two seconds." in told
    assert "No-gos: no new database; no change to the public query API." in told
    assert brief("Short: all of it.", 900) == "Short: all of it."


def test_a_change_names_what_it_adds() -> None:
    mix = added_names(
        "mix.exs",
        {"old_string": '{:jason, "~> 1.2"}', "new_string": '{:jason, "~> 1.2"},\n  {:plug_cowboy, "~> 2.7"}'},
    )
    assert mix == ["plug_cowboy ~> 2.7"]  # the dependency that was there before is not new
    package = added_names("package.json", {"content": '{\n  "dependencies": {\n    "highlight.js": "^11.9.0"\n  }\n}'})
    assert "highlight.js ^11.9.0" in package
    settings = added_names("config/test.exs", {"content": "import Config\nconfig :logger, level: :warning\n"})
    assert settings == ["`config :logger, level: :warning`"]
    code = added_names(
        "lib/live.ex",
        {
            "content": 'def handle_event("row_clicked", params, socket) do\n'
            '  conn |> put_req_header("x-request-trace", id)\n'
            '  <div class="text-sm">ok</div>\n'
            '  {:reply, "ok"}\n'
        },
    )
    assert code[:1] == ["handle_event"]
    assert '"row_clicked"' in code and '"x-request-trace"' in code
    assert '"text-sm"' not in code and '"ok"' not in code  # a style class and a plain word name nothing


def test_the_task_block_names_the_dependency_added() -> None:
    messages = [
        user("Serve the app with Cowboy."),
        asst(call("m", "edit", path="mix.exs", oldText="deps", newText='deps\n  {:plug_cowboy, "~> 2.7"}')),
        result("m", "edit", "ok"),
        asst(text("Added the dependency.")),
    ]
    assert "mix.exs (plug_cowboy ~> 2.7)" in task(build(messages), 1)


def test_each_task_names_where_its_details_live() -> None:
    messages = [
        user("Rename the loader."),
        asst(call("e", "edit", path="a.py", oldText="load", newText="read")),
        result("e", "edit", "ok"),
        asst(text("Renamed.")),
        user("Now document it."),
        asst(call("w", "write", path="README.md", content="# Reading")),
        result("w", "write", "ok"),
        asst(text("Documented.")),
    ]
    ids = [f"{n:08x}deadbeef" for n in range(1, 9)]
    out = OfflineSummarizer(scale=False).build(SummaryRequest(messages=messages, entry_ids=ids))
    assert "- Details: entries 00000001..00000004" in task(out, 1)
    assert "- Details: entries 00000005..00000008" in task(out, 2)
    # A pi v1 file has no entry ids: the anchors are the lines expand takes.
    lines = list(range(3, 11))
    out = OfflineSummarizer(scale=False).build(SummaryRequest(messages=messages, entry_ids=[""] * 8, entry_lines=lines))
    assert "- Details: entries L3..L6" in task(out, 1)
    assert "- Details: entries L7..L10" in task(out, 2)


def test_a_setting_taken_out_later_is_not_told_as_the_files() -> None:
    messages = [
        user("Configure the logger."),
        asst(
            call("w", "write", path="config/dev.exs", content="config :logger, backends: [console: [format: :json]]\n")
        ),
        result("w", "write", "ok"),
        asst(
            call(
                "e",
                "edit",
                path="config/dev.exs",
                oldText="config :logger, backends: [console: [format: :json]]",
                newText="config :logger, level: :info",
            )
        ),
        result("e", "edit", "ok"),
        asst(text("The level is set at the top level now.")),
    ]
    block = task(build(messages), 1)
    assert "`config :logger, level: :info`" in block
    assert "backends" not in block.split("Files:", 1)[1].split("\n", 1)[0]


def test_what_a_tool_reported_and_what_the_agent_did_about_it_is_a_finding() -> None:
    messages = [
        user("Tidy the renderer."),
        asst(call("w", "edit", path="lib/renderer.ex", oldText="a", newText="b")),
        result("w", "edit", "ok"),
        asst(text("Pylint reports too many branches in `parse_rows`. Let me split the loop into a helper.")),
    ]
    assert "- Found: Pylint reports too many branches in `parse_rows`. -> Let me split the loop into a helper." in task(
        build(messages), 1
    )
