"""The size without building (``context_size``: cached estimates, the memo of the previous size, the
walk back to the newest usage) always equals the built context's size, pi's projected estimate,
whatever the session grows with: system messages, usage pi does or does not trust, compactions
with and without the prompt state, context edits, branch summaries, leaf moves."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from factories import header
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


def _entry(op: str, n: int, path: list[str]) -> dict[str, Any] | None:
    text = "x" * n
    pick = path[n % len(path)] if path else None
    usage = {"input": 1000 + n, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1010 + n}
    assistant = {"role": "assistant", "content": [{"type": "text", "text": text}], "stopReason": "stop", "timestamp": 1}
    if op == "user":
        return {"type": "message", "message": {"role": "user", "content": text, "timestamp": 1}}
    if op == "user_image":
        image = {"type": "image", "data": "aGk=", "mimeType": "image/png"}
        return {"type": "message", "message": {"role": "user", "content": [image], "timestamp": 1}}
    if op == "assistant_usage":
        return {"type": "message", "message": {**assistant, "usage": usage}}
    if op == "assistant_zero_usage":
        zero = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}
        return {"type": "message", "message": {**assistant, "usage": zero}}
    if op == "assistant_aborted":
        return {"type": "message", "message": {**assistant, "usage": usage, "stopReason": "aborted"}}
    if op == "assistant_no_usage":
        return {"type": "message", "message": assistant}
    if op == "system":
        return {"type": "message", "message": {"role": "system", "content": text, "timestamp": 1}}
    if op == "system_tools":
        tool = {"name": f"t{n % 3}", "description": text}
        key = "toolsRemoved" if n % 2 else "toolsAdded"
        return {"type": "message", "message": {"role": "system", "content": "", key: [tool], "sections": {"s": text}}}
    if op in ("compaction", "compaction_system") and pick is not None:
        entry: dict[str, Any] = {"type": "compaction", "summary": text, "firstKeptEntryId": pick, "tokensBefore": n}
        if op == "compaction_system":
            entry["systemMessage"] = {"role": "system", "content": "kept " + text, "timestamp": 5}
        return entry
    if op in ("edit_replace", "edit_hide") and pick is not None:
        replacement = {"content": text[:40]} if op == "edit_replace" else None
        return {"type": "context_edit", "targetId": pick, "replacement": replacement}
    if op in ("branch_summary", "empty_branch_summary"):
        return {"type": "branch_summary", "fromId": "x", "summary": text if op == "branch_summary" else ""}
    if op == "custom_message":
        return {"type": "custom_message", "customType": "n", "content": text, "display": True}
    if op == "label" and pick is not None:
        return {"type": "label", "targetId": pick, "label": "l"}
    return None


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
                entry = _entry(op, n, ids)
                if entry is None:
                    continue
                s.append([entry])
            built = build_context(s.file, s.tree).contextTokens
            assert context_size(s.file, s.tree, estimates=s.estimates).tokens == built, (op, n)
            assert context_size(s.file, s.tree, estimates={}).tokens == built
