"""What each changed file now defines, read from the edits: a rename told with the old name, dependencies with
their versions whatever the ecosystem writes them in, and, when an earlier task's block is condensed, the
names with a value (constants, versions, renames) kept before bare names and literals."""

from __future__ import annotations

from typing import Any

from test_summarizers_offline import asst, call, result, task, text, user

from ctxd.compaction.reading.artifacts import changed_names
from ctxd.compaction.summary import OfflineSummarizer, SummaryRequest
from ctxd.compaction.summary.document import Task
from ctxd.compaction.summary.offline import _condensed


def build(messages: list[dict[str, Any]], **kwargs: Any) -> str:
    return OfflineSummarizer(scale=False, **kwargs).build(SummaryRequest(messages=messages))


def test_an_edit_that_renames_a_function_tells_the_old_name_with_the_new() -> None:
    messages = [
        user("Rename the row fetcher of the ledger store to say what it does."),
        asst(
            call(
                "e",
                "edit",
                path="/srv/ledger/store.py",
                oldText="def fetch_rows(table):\n    return table.scan()",
                newText="def read_rows(table):\n    return table.scan()",
            )
        ),
        result("e", "edit", "Successfully replaced text"),
        asst(text("Renamed.")),
    ]
    assert "store.py (read_rows [was fetch_rows])" in task(build(messages), 1)
    # a function replaced by another is no rename
    other = {"oldText": "def fetch_rows(t):\n    return t.scan()", "newText": "def count(t):\n    return len(t)"}
    assert changed_names("x.py", other).added == ["count"]
    # two names out and two in is no rename
    both = {
        "oldText": "def a_one():\n    pass\ndef a_two():\n    pass",
        "newText": "def b_one():\n    pass\ndef b_two():\n",
    }
    assert changed_names("x.py", both).added == ["b_one", "b_two"]


def test_dependencies_with_versions_from_go_modules_and_gemfiles() -> None:
    go = changed_names("go.mod", {"oldText": "require (\n", "newText": "require (\n\tgithub.com/acme/widget v1.4.2\n"})
    assert go.added == ["github.com/acme/widget v1.4.2"]
    line = changed_names("go.mod", {"oldText": "go 1.22\n", "newText": "go 1.22\n\nrequire golang.org/x/sync v0.7.0\n"})
    assert line.added == ["golang.org/x/sync v0.7.0"]
    gem = changed_names("Gemfile", {"oldText": "source\n", "newText": 'source\ngem "sidekiq", "~> 7.2"\n'})
    assert gem.added == ["sidekiq ~> 7.2"]


def test_a_condensed_earlier_task_keeps_the_names_with_a_value_first() -> None:
    picks = ", ".join(f"pick_from_row_number_{n}" for n in range(9))
    line = f'Files: created lib/picker.ex (Orchard.Picker, {picks}, @batch_size 250, @retry_ms 1_500, "orchard:events")'
    for level in (1, 2):
        files = _condensed(Task("T1 · Write the picker [done]", [line]), level).lines[0]
        assert "pick_from_row_number_8" not in files  # condensed: the block lost detail
        assert "(@batch_size 250, @retry_ms 1_500, Orchard.Picker" in files or level == 2  # the values first
        assert files.startswith("Files: created lib/picker.ex (@batch_size 250")
