"""The size without building (``context_size``: cached estimates, the memo of the previous size, the
walk back to the newest usage) always equals the built context's size, pi's projected estimate,
whatever the session grows with: system messages, usage pi does or does not trust, compactions
with and without the prompt state, context edits, branch summaries, leaf moves."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from helpers.factories import header
from helpers.histories import history_entry
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxd.context.build import build_context, context_size
from ctxd.tree.session import Session

OPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "user",
                "user_image",
                "assistant_usage",
                "assistant_zero_usage",
                "assistant_aborted",
                "assistant_no_usage",
                "system",
                "system_tools",
                "compaction",
                "compaction_system",
                "edit_replace",
                "edit_hide",
                "branch_summary",
                "empty_branch_summary",
                "custom_message",
                "label",
                "move_leaf",
            ]
        ),
        st.integers(0, 400),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_size_without_building_equals_the_built_size(ops: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.jsonl"
        path.write_text(json.dumps(header()) + "\n", encoding="utf-8")
        s = Session.open(str(path))
        for op, n in ops:
            ids = s.path_ids()
            if op == "move_leaf":
                if ids:
                    s.move_leaf(ids[n % len(ids)])
            else:
                entry = history_entry(op, n, ids)
                if entry is None:
                    continue
                s.append([entry])
            built = build_context(s.file, s.tree).contextTokens
            assert context_size(s.file, s.tree, estimates=s.estimates).tokens == built, (op, n)
            assert context_size(s.file, s.tree, estimates={}).tokens == built
