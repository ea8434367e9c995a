"""Later chapters of the demo: compaction (dry run, then for real, with progress) and a branch
summary, both made by the offline summariser."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ctxd.cli.render import render_tree
from ctxd.compaction.branching import branch
from ctxd.compaction.engine import compact, dry_run
from ctxd.compaction.settings import CompactionSettings
from ctxd.context.live import live_context
from ctxd.tree.session import Session

Say = Callable[[str], None]


def run(session: Session, root: str, say: Say, heading: Callable[[str], None]) -> None:
    settings = CompactionSettings(keep_recent_tokens=600)

    heading("4. preview a compaction (dry run: writes nothing, calls no model)")
    plan = dry_run(session, settings)
    split = f", splitting the turn that starts on line {plan.turnStartLine}" if plan.isSplitTurn else ""
    say(f"would keep from line {plan.firstKeptLine} ({plan.firstKeptEntryId}){split}")
    say(
        f"would summarise {len(plan.messagesToSummarize)} messages;"
        f" tokens {plan.tokensBefore:,} -> about {plan.estimatedTokensAfter:,}"
    )

    heading("5. compact with the offline summariser")

    def progress(stage: str, fraction: float | None) -> None:
        bar = "#" * int((fraction or 0) * 20)
        say(f"  [{bar:<20}] {stage}")

    outcome = asyncio.run(compact(session, settings, progress=progress))
    say(
        f"wrote compaction {outcome.entryId}: {outcome.tokensBefore:,} -> {outcome.tokensAfter:,} tokens"
        f" via {outcome.path} in {outcome.durationMs} ms"
    )
    say("the summary (first lines):")
    for line in outcome.summary.splitlines()[:24]:
        say(f"  | {line}")
    ctx = live_context(session).context()
    say(f"the next request now starts with: {ctx.messages[0].role}, then {len(ctx.messages) - 1} kept messages")

    heading("6. go back to the second request, leaving a summary of the abandoned branch")
    heads = session.file.heads
    users = [
        i for i in session.tree.path_to_root(session.leaf() or 0) if getattr(heads[i].message, "role", None) == "user"
    ]
    target = session.tree.id_of(users[1])
    result = asyncio.run(branch(session, target, summarize=True))
    say(f"leaf moved to {target}; branch_summary {result.summaryEntryId} covers {result.summarizedEntries} messages")
    for line in (result.summary or "").splitlines()[:12]:
        say(f"  | {line}")
    heading("7. the tree now")
    for line in render_tree(session, 6):
        say(line)
    ctx = live_context(session).context()
    say(f"context at the new leaf: {[m.role for m in ctx.messages]}")
