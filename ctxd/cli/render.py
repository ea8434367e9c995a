"""Plain-text rendering of tree rows and contexts for the terminal."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from ctxd.context.answers import Context
from ctxd.context.view import CollapsedRun, Row, TreeNode, one_line, project
from ctxd.tree.session import Session

ROLE_MARK = {
    "user": "U",
    "assistant": "A",
    "toolResult": "T",
    "bashExecution": "$",
    "custom": "C",
    "system": "S",
    "compaction": "▣",
    "branchSummary": "⎇",
}


def dump(obj: Any) -> None:
    """``obj`` as indented JSON on stdout (the CLI's ``--json`` outputs): ``json.dumps(obj, ensure_ascii=False,
    indent=2)``, made by the C encoder and indented by msgspec (the pure-Python encoder, which an indent
    needs, took 150 ms for a 6 MB context); what msgspec cannot read (a lone surrogate, NaN) goes the slow way."""
    import msgspec  # here: not every command prints JSON

    text = json.dumps(obj, ensure_ascii=False)
    try:
        text = msgspec.json.format(text, indent=2)
    except (UnicodeEncodeError, msgspec.DecodeError):
        text = json.dumps(obj, ensure_ascii=False, indent=2)
    sys.stdout.write(text)
    sys.stdout.write("\n")


def use_color(stream: Any = None) -> bool:
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)()) and "NO_COLOR" not in os.environ


def _paint(text: str, code: str, color: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if color else text


def render_rows(rows: list[Row], *, color: bool = False) -> list[str]:
    out: list[str] = []
    for row in rows:
        indent = "│ " * row.depth
        if isinstance(row, CollapsedRun):
            tokens = f", {row.tokens:,} tok" if row.tokens is not None else ""
            mark = "*" if row.onActivePath else " "
            noun = "entry" if row.count == 1 else "entries"
            out.append(_paint(f"{mark} {indent}⋮ {row.count} more {noun}{tokens}", "2", color))
            continue
        assert isinstance(row, TreeNode)
        mark = "*" if row.onActivePath else " "
        role = ROLE_MARK.get(row.role, "·")
        labels = "".join(f" [{label}]" for label in row.labels) + (" [pinned]" if row.pinned else "")
        fork = f" ({row.childCount} branches)" if row.childCount > 1 else ""
        leaf = "  ◀ leaf" if row.isLeaf else ""
        tokens = f" {row.tokens:,}t" if row.tokens else ""
        line = f"{mark} {indent}{role} {row.id} {row.role}: {row.preview}{tokens}{labels}{fork}{leaf}"
        if row.role in ("compaction", "branchSummary"):
            line = _paint(line, "35", color)
        elif row.isLeaf:
            line = _paint(line, "1;32", color)
        elif row.onActivePath:
            line = _paint(line, "32", color)
        out.append(line)
    return out


def render_tree(session: Session, collapse: int) -> list[str]:
    """The session's tree as ``ctxd tree`` prints it (runs longer than ``collapse`` folded; 0: none)."""
    rows, _ = project(session, collapse=collapse)
    return render_rows(rows, color=use_color())


def render_context(ctx: Context) -> list[str]:
    lines = [
        f"leaf {ctx.leafId}  model {ctx.model or '-'}  thinking {ctx.thinkingLevel}",
        f"{len(ctx.messages)} messages, estimated {ctx.estimatedTokens:,} tokens, "
        f"context size {ctx.contextTokens:,} tokens (pi's estimate: trusted usage + estimates)",
    ]
    for m, body in zip(ctx.messages, ctx.agent_messages(), strict=True):
        text = body.get("summary") or body.get("content") or body.get("command") or ""
        if isinstance(text, list):
            text = " ".join(
                str(b.get("text") or b.get("thinking") or (f"→ {b.get('name')}" if b.get("type") == "toolCall" else ""))
                for b in text
                if isinstance(b, dict)
            )
        lines.append(f"  L{m.line:<6} {m.role:<17} {m.tokens:>7,}t  {one_line(str(text), 80)}")
    for d in ctx.diagnostics:
        lines.append(f"  ! line {d.get('line')}: {d.get('message')}")
    return lines
