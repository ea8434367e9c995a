"""Tokens ctxd's cut rules save on the tool outputs of the real transcripts in tests/data (pi, Claude Code, Codex).

    python bench/cuts_bench.py [--limit CHARS]

Each tool output is taken as the model read it (pi's ``toolResult`` text, Claude Code's ``tool_result`` content,
Codex's ``function_call_output``) and put through :mod:`ctxd.context.cut_rules` as ctxd would cut it for that
agent (Codex 0.169 gives a hook no way to replace a tool output: its row says what the rules would save).
Tokens are estimated at 4 characters each, as ctxd estimates context. The old default (seed 004's 0.3 x window
x 4 characters, 240,000 for a 200,000-token window, every tool alike) is shown beside it: it never acted on these
outputs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ctxd.context.cut_rules import DEFAULT_LIMIT, previewed_from, rule  # noqa: E402
from ctxd.context.truncate import limit_chars, truncate_log, truncate_text  # noqa: E402

DATA = REPO / "tests" / "data"
OLD_LIMIT = limit_chars(200_000)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            yield entry


def outputs(path: Path, agent: str) -> Iterator[tuple[str, Any, str]]:
    """(tool name, tool input, the output text the model read) for each tool output of a transcript."""
    calls: dict[str, tuple[str, Any]] = {}
    for entry in _lines(path):
        if agent == "pi":
            message = entry.get("message") or {}
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "toolCall":
                    calls[str(block.get("id"))] = (str(block.get("name")), block.get("arguments"))
            if message.get("role") == "toolResult":
                name, arguments = calls.get(str(message.get("toolCallId")), (str(message.get("toolName")), {}))
                yield name, arguments, _text(message.get("content"))
        elif agent == "claude":
            content = (entry.get("message") or {}).get("content")
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use":
                    calls[str(block.get("id"))] = (str(block.get("name")), block.get("input"))
                elif block.get("type") == "tool_result":
                    name, arguments = calls.get(str(block.get("tool_use_id")), ("?", {}))
                    yield name, arguments, _text(block.get("content"))
        else:
            payload = entry.get("payload") or {}
            kind = payload.get("type")
            if kind in ("function_call", "custom_tool_call"):
                calls[str(payload.get("call_id"))] = (str(payload.get("name")), payload.get("arguments"))
            elif kind in ("function_call_output", "custom_tool_call_output"):
                name, arguments = calls.get(str(payload.get("call_id")), ("?", {}))
                output = payload.get("output")
                yield name, arguments, output if isinstance(output, str) else json.dumps(output)


def cut_size(tool: str, tool_input: Any, text: str, limit: int, agent: str) -> int:
    """The characters the model reads after ctxd's rules."""
    if isinstance(tool_input, str):  # Codex passes its arguments as a JSON string
        try:
            tool_input = json.loads(tool_input)
        except ValueError:
            tool_input = {}
    how = rule(tool, tool_input, limit, agent=agent)
    previewed = previewed_from(tool, agent)
    if how is None or len(text) <= how.limit or (previewed is not None and len(text) > previewed):
        return len(text)
    shorten = truncate_log if how.style == "log" else truncate_text
    return len(shorten(text, how.limit, hint=how.hint))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT)
    args = parser.parse_args()
    print(f"Tool-output cuts on tests/data (limit {args.limit:,} characters; tokens = characters / 4)")
    header = f"{'transcript':44s} {'outputs':>7s} {'cut':>4s} {'tokens':>9s} {'after':>9s} {'saved':>8s}"
    print(f"{header} {'old default':>12s}")
    totals: dict[str, list[int]] = {}
    for agent in ("pi", "claude", "codex"):
        for path in sorted((DATA / agent).glob("*.jsonl")):
            rows = [
                (tool, len(text), cut_size(tool, arguments, text, args.limit, agent))
                for tool, arguments, text in outputs(path, agent)
            ]
            if not rows:
                continue
            before = sum(r[1] for r in rows) // 4
            after = sum(r[2] for r in rows) // 4
            old = sum(r[1] - len(truncate_text("x" * r[1], OLD_LIMIT)) if r[1] > OLD_LIMIT else 0 for r in rows)
            cut = sum(1 for r in rows if r[2] < r[1])
            saved = before - after
            share = f"{saved / before:.0%}" if before else "-"
            name = f"{agent}/{path.name}"
            print(
                f"{name:44s} {len(rows):7d} {cut:4d} {before:9,d} {after:9,d} {saved:8,d} ({share:>3s})",
                f"{old // 4:5,d} saved",
            )
            total = totals.setdefault(agent, [0, 0, 0])
            total[0] += before
            total[1] += after
            total[2] += cut
    for agent, (before, after, cut) in totals.items():
        note = " (Codex 0.169 hooks cannot replace an output: what the rules would save)" if agent == "codex" else ""
        saved = before - after
        print(
            f"{agent}: {cut} outputs cut, {saved:,} of {before:,} tool-output tokens saved",
            f"({saved / max(1, before):.0%}){note}",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
