"""What Codex sent against what ctxd builds: a Responses request's input and a ctxd context as comparable items.

An item is ``(kind, key, text)``: ``("user"|"developer"|"assistant", "", text)`` for messages,
``("function_call", call_id, arguments)`` and ``("function_call_output", call_id, output)``. Codex sends its
base instructions as the first developer item (ctxd keeps them in the ``codex.session_meta`` entry, not in the
context) and the
compaction summary as a user item after what the compaction kept; ctxd's context opens with the summary.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxd.context.build import Context, build_context
from ctxd.tree.session import Session

Item = tuple[str, str, str]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and "text" in b)


def _args(value: Any) -> str:
    parsed = json.loads(value) if isinstance(value, str) else value
    return json.dumps(parsed, sort_keys=True)


def request_items(input_items: list[dict[str, Any]]) -> list[Item]:
    out: list[Item] = []
    for item in input_items:
        kind = item.get("type")
        if kind == "message":
            out.append((str(item.get("role")), "", _text(item.get("content"))))
        elif kind == "function_call":
            out.append(("function_call", str(item.get("call_id")), _args(item.get("arguments"))))
        elif kind == "function_call_output":
            out.append(("function_call_output", str(item.get("call_id")), _text(item.get("output"))))
        else:
            out.append((str(kind), "", json.dumps(item, sort_keys=True)))
    return out


def context_items(ctx: Context) -> list[Item]:
    out: list[Item] = []
    for cm in ctx.messages:
        m = cm.message
        if cm.role == "compactionSummary":
            out.append(("summary", "", str(m.get("summary", ""))))
        elif cm.role == "system":
            out.append((str(m.get("codexRole", "system")), "", _text(m.get("content"))))
        elif cm.role == "assistant":
            for block in m.get("content") or []:
                if block.get("type") == "text":
                    out.append(("assistant", "", block["text"]))
                elif block.get("type") == "toolCall":
                    out.append(("function_call", block["id"], json.dumps(block["arguments"], sort_keys=True)))
        elif cm.role == "toolResult":
            out.append(("function_call_output", str(m.get("toolCallId")), _text(m.get("content"))))
        else:
            out.append((cm.role, "", _text(m.get("content"))))
    return out


def context_at(path: Path, leaf: str) -> Context:
    session = Session.open(str(path))
    try:
        return build_context(session.file, session.tree, leaf, estimates=session.estimates)
    finally:
        session.file.close()


def leaves_after_compactions(path: Path) -> list[str]:
    """For each compaction of a rollout, the last entry before the model's next answer: where the next request
    was sent from."""
    session = Session.open(str(path))
    try:
        entries = [session.file.entry(i) for i in range(len(session.file))]
    finally:
        session.file.close()
    leaves: list[str] = []
    for n, entry in enumerate(entries):
        if entry.get("type") != "compaction":
            continue
        later = entries[n + 1 :]
        answer = next(
            (i for i, e in enumerate(later) if e.get("type") == "message" and e["message"].get("role") == "assistant"),
            len(later),
        )
        leaves.append(str(later[answer - 1]["id"]) if answer else str(entry["id"]))
    return leaves


def assert_context_matches_request(path: Path, leaf: str, input_items: list[dict[str, Any]], base: str) -> None:
    """ctxd's context at ``leaf`` is what Codex sent: the same items in the same order, the summary moved first."""
    sent = request_items(input_items)
    # Codex's first item is its base instructions, trimmed to the tools it offers (0.169 drops the planning
    # section when update_plan is not a tool), so only their opening is compared with session_meta's copy.
    assert sent[0][0] == "developer" and sent[0][2][:500] == base[:500], "Codex's first item is its base instructions"
    sent = sent[1:]
    ctx = context_at(path, leaf)
    mine = context_items(ctx)
    assert mine and mine[0][0] == "summary", mine[:1]
    summary = mine[0][2]
    where = [i for i, item in enumerate(sent) if item == ("user", "", summary)]
    assert len(where) == 1, f"the summary {summary[:80]!r} is not one user item of the request"
    assert mine[1:] == sent[: where[0]] + sent[where[0] + 1 :]
