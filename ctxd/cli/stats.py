"""``ctxd stats FILE``: what fills a session's context, drawn in the terminal (the window as a bar
by part with the threshold and the reserve, the heaviest entries, the timeline as a sparkline with
its compactions), or ``--json``: the composition as the daemon's ``context/composition`` gives it.

Unicode blocks (coloured when the terminal takes colours) on a terminal; plain ASCII when stdout is
not a terminal or with ``--ascii``. The rendering is a pure function of the composition's JSON.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ctxd.cli.render import dump, use_color
from ctxd.cli.session_arg import open_session
from ctxd.context.composition import PARTS, composition
from ctxd.service.config import load_cli_config

LETTERS = dict(zip(PARTS, "STMBPUAKCRIX$", strict=True))
"""Each part's letter in an ASCII bar (and its legend)."""
COLORS = dict(zip(PARTS, ["35", "95", "36", "96", "33", "32", "34", "94", "93", "31", "91", "37", "92"], strict=True))
SPARKS = "▁▂▃▄▅▆▇█"
MARKS = {"compaction": "C", "overflow": "!", "branch": "b"}
"""What the line under the sparkline shows where a column holds a marker (first match wins)."""
ASCII_SPARKS = "_.-:=+*#"
NAMES = {
    "system": "system prompt",
    "tools": "tools",
    "summary": "summary",
    "branchSummary": "branch summaries",
    "pinned": "pinned",
    "user": "user",
    "assistant": "assistant text",
    "thinking": "thinking",
    "toolCalls": "tool calls",
    "toolResults": "tool results",
    "images": "images",
    "custom": "custom messages",
    "bashExecution": "shell runs",
}


def run_stats(args: argparse.Namespace) -> int:
    session = open_session(args.file)
    config, _ = load_cli_config()
    settings = config.compaction
    if args.window:
        settings.context_window = args.window
    window = settings.resolved_window()
    found = composition(
        session, window=window, threshold=settings.threshold(window), reserve=settings.reserve_tokens, top=args.top
    )
    data = {"session": session.path, **found.to_json()}
    if args.json:
        dump(data)
        return 0
    unicode = not args.ascii and bool(getattr(sys.stdout, "isatty", lambda: False)())
    for line in render(data, unicode=unicode, color=unicode and use_color(), width=args.width):
        print(line)
    return 0


def render(data: dict[str, Any], *, unicode: bool, color: bool, width: int = 72) -> list[str]:
    """The composition as lines of text ``width`` columns wide (the bar and the sparkline)."""
    window, threshold, tokens = data["window"], data["threshold"], data["contextTokens"]
    out = [
        f"{data['session']}",
        f"leaf {data['leafId']}  context {tokens:,} of {window:,} tokens ({data['percent']}%)"
        f"  threshold {threshold:,}  reserve {data['reserve']:,}",
        "",
        _bar(data, unicode=unicode, color=color, width=width),
        _scale(window, threshold, unicode=unicode, width=width),
        "",
    ]
    total = data["estimatedTokens"] or 1
    for part in PARTS:
        value = data["parts"][part]
        if value:
            mark = _cell(part, unicode=unicode, color=color)
            out.append(f"  {mark} {NAMES[part]:<17}{value:>10,}  {100 * value / total:5.1f}%")
    if data["toolResultsByTool"]:
        shown = ", ".join(f"{name} {value:,}" for name, value in list(data["toolResultsByTool"].items())[:6])
        out.append(f"    tool results by tool: {shown}")
    out.append(f"  (parts add up to {data['estimatedTokens']:,}, the messages' estimates)")
    if data["top"]:
        out += ["", "heaviest entries:"]
        for n, e in enumerate(data["top"], 1):
            what = e["role"] + (f" {e['tool']}" if e["tool"] else "") + (" (pinned)" if e["pinned"] else "")
            out.append(f"  {n:>2}. {e['entryId']:<10} line {e['line']:<7} {what:<28}{e['tokens']:>10,}")
    out += _timeline(data, unicode=unicode, width=width)
    return out


def _cell(part: str, *, unicode: bool, color: bool) -> str:
    if unicode and color:
        return f"\x1b[{COLORS[part]}m█\x1b[0m"
    return LETTERS[part]


def _bar(data: dict[str, Any], *, unicode: bool, color: bool, width: int) -> str:
    """The window, ``width`` cells: each part's share, then the free space; the threshold's cell
    drawn as a line; free cells past it (the reserve) shaded."""
    window = max(1, data["window"])
    cells: list[str] = []
    running = 0.0
    for part in PARTS:
        running += data["parts"][part]
        end = min(width, round(running * width / window))
        cells += [_cell(part, unicode=unicode, color=color)] * (end - len(cells))
    at = min(width - 1, round(data["threshold"] * width / window))
    for i in range(len(cells), width):
        cells.append(("░" if unicode else "-") if i > at else ("·" if unicode else "."))
    cells[at] = "│" if unicode else "|"
    edge = ("▕", "▏") if unicode else ("[", "]")
    return f"  {edge[0]}{''.join(cells)}{edge[1]}"


def _scale(window: int, threshold: int, *, unicode: bool, width: int) -> str:
    at = min(width - 1, round(threshold * width / max(1, window)))
    label = f"threshold {threshold:,}"
    line = [" "] * (width + 2)
    line[at + 1] = "^"
    start = max(0, at + 1 - len(label) - 1)
    for i, ch in enumerate(label):
        line[start + i] = ch
    return "  " + "".join(line).rstrip() + (f"  (reserve {window - threshold:,})" if window > threshold else "")


def _timeline(data: dict[str, Any], *, unicode: bool, width: int) -> list[str]:
    points = data["timeline"]
    if not points:
        return []
    window = max(1, data["window"])
    sparks = SPARKS if unicode else ASCII_SPARKS
    # More points than columns: each column shows the largest of its points.
    columns = min(width, len(points))
    groups = [range(c * len(points) // columns, (c + 1) * len(points) // columns) for c in range(columns)]
    spark, marks = [], []
    kinds = {m["at"]: m["kind"] for m in data["markers"] if m["kind"] != "branch"}
    kinds.update({m["at"]: "branch" for m in data["markers"] if m["kind"] == "branch" and m["at"] not in kinds})
    for group in groups:
        top = max(points[i]["tokens"] for i in group)
        spark.append(sparks[min(len(sparks) - 1, int(top * len(sparks) / window))])
        found = {kinds[i] for i in group if i in kinds}
        marks.append(next((MARKS[k] for k in MARKS if k in found), " "))
    turns = max(p["turn"] for p in points)
    compactions = [m for m in data["markers"] if m["kind"] == "compaction"]
    out = ["", f"timeline: {turns} turns, {len(compactions)} compactions (height: share of the window)"]
    out.append("  " + "".join(spark))
    if any(m != " " for m in marks):
        out.append("  " + "".join(marks).rstrip() + "   C compaction, ! overflow, b branch")
    arrow = "→" if unicode else "->"
    for m in compactions[-5:]:
        how = ", ".join(x for x in (m["trigger"], m["summarizer"]) if x)
        turn = points[m["at"]]["turn"]
        out.append(f"  turn {turn}: {m['tokensBefore']:,} {arrow} {m['tokensAfter']:,}" + (f" ({how})" if how else ""))
    return out
