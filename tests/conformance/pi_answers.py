"""ctxd's answers for a session file in the shape pi_probe.mjs prints pi's, and the runner for pi's.

``ctxd_answers`` uses ctxd's public pieces only: ``build_context``, ``context_size`` (checked equal
to the built context's size, from a cold and a warm estimate cache), the projection, the cut point
and ``plan_compaction``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from ctxd.compaction.cut.plan import NothingToCompact, boundary, find_cut_point, plan_compaction
from ctxd.context.build import build_context, context_size
from ctxd.context.live import live_context
from ctxd.context.project import entry_tokens
from ctxd.context.tokens import estimate_context
from ctxd.tree.session import Session

REPO = Path(__file__).resolve().parents[2]
ORACLE = Path(os.environ.get("PI_ORACLE_DIR", REPO.parent / "shared" / "pi-oracle"))
"""pi-oracle's folder (``../shared/pi-oracle`` beside the repository; ``PI_ORACLE_DIR`` overrides)."""
PI_DIR = ORACLE / "node_modules" / "@earendil-works" / "pi-coding-agent"
NODE = ORACLE / "node_modules" / "node" / "bin" / "node"
PROBE = Path(__file__).with_name("pi_probe.mjs")


def oracle_missing() -> str | None:
    """Why pi's own code cannot run here, or None."""
    if not (PI_DIR / "package.json").exists() or not NODE.exists():
        return (
            f"pi 1.5.2's oracle is not set up at {ORACLE} (run its setup.sh, or set PI_ORACLE_DIR): "
            "the conformance literals in test_pi_rules.py still run"
        )
    return None


def pi_answers(files: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """pi 1.5.2's answers for each ``(path, keepRecentTokens)``, from one Node process."""
    manifest = json.dumps([{"file": f, "keep": k} for f, k in files])
    out = subprocess.run(
        [str(NODE), str(PROBE)],
        input=manifest,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
        env={**os.environ, "PI_ORACLE_PI_DIR": str(PI_DIR)},
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


def _ref(s: Session, entry_id: str | None) -> dict[str, Any] | None:
    if entry_id is None:
        return None
    return {"id": entry_id, "fileIndex": s.file.index.get(entry_id)}


def ctxd_answers(path: str, keep: int) -> dict[str, Any]:
    s = Session.open(path)
    leaf = s.file.leaf_index()
    ctx = build_context(s.file, s.tree, estimates=s.estimates)
    cold = context_size(s.file, s.tree, estimates={})
    warm = context_size(s.file, s.tree, estimates=s.estimates)
    assert cold.tokens == warm.tokens == ctx.contextTokens, (cold, warm, ctx.contextTokens)
    messages = [
        {"role": m.role, "entryId": m.entryId, "fileIndex": s.file.index.get(m.entryId), "tokens": m.tokens}
        for m in ctx.messages
    ]
    out: dict[str, Any] = {
        "entries": len(s.file),
        "leaf": _ref(s, s.file.heads[leaf].id) if leaf is not None else None,
        "pathLength": len(s.tree.path_to_root(leaf)) if leaf is not None else 0,
        "messages": messages,
        "estimatedTokens": ctx.estimatedTokens,
        "estimateContextTokens": estimate_context(ctx.agent_messages(), [m.tokens for m in ctx.messages]).tokens,
        "projectedTokens": ctx.contextTokens,
        "cut": None,
        "prepare": None,
    }
    if leaf is None:
        return out
    heads = s.file.heads
    projection = live_context(s).at_index(leaf).projection()
    _, start = boundary(projection, heads)
    sizes = [sum(entry_tokens(e, s.estimates)) for e in projection.entries]
    cut = find_cut_point(projection, heads, sizes, start, keep)
    at = lambda k: _ref(s, heads[projection.entries[k].index].id) if k is not None else None  # noqa: E731
    if cut is None:  # pi: no valid cut point keeps everything from the boundary
        first = at(start) if start < len(projection.entries) else None
        out["cut"] = {"firstKept": first, "turnStart": None, "isSplitTurn": False}
    else:
        out["cut"] = {"firstKept": at(cut.firstKept), "turnStart": at(cut.turnStart), "isSplitTurn": cut.isSplitTurn}
    try:
        plan = plan_compaction(s, keep_recent_tokens=keep)
    except NothingToCompact:
        return out
    out["prepare"] = {
        "firstKept": _ref(s, plan.firstKeptEntryId),
        "isSplitTurn": plan.isSplitTurn,
        "summarize": [m.get("role") for m in plan.messagesToSummarize],
        "turnPrefix": [m.get("role") for m in plan.turnPrefixMessages],
        "tokensBefore": plan.tokensBefore,
        "previousSummary": plan.previousSummary,
        "files": {"readFiles": plan.readFiles, "modifiedFiles": plan.modifiedFiles},
    }
    return out


def comparable(answers: dict[str, Any], *, ids: bool) -> dict[str, Any]:
    """The fields both sides give; entry ids only when ``ids`` (pi gives migrated v1 entries random ids)."""
    keep = ("entries", "leaf", "pathLength", "messages", "estimatedTokens", "estimateContextTokens", "projectedTokens")
    out = {k: answers[k] for k in keep}
    out["cut"], out["prepare"] = answers["cut"], answers["prepare"]

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if ids or k not in ("id", "entryId")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(out)  # type: ignore[no-any-return]
