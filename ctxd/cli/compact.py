"""``ctxd compact``: plan (``--dry-run``) or run a compaction, showing progress on stderr."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

from ctxd.cli.session_arg import open_session
from ctxd.compaction.cut.plan import NothingToCompact
from ctxd.compaction.engine import compact, dry_run_json
from ctxd.compaction.settings import CompactionSettings
from ctxd.errors import CompactionError
from ctxd.redact import redact_json
from ctxd.tree.session import Session

DRY_RUN_KEYS = (
    "firstKeptEntryId",
    "firstKeptLine",
    "isSplitTurn",
    "turnStartLine",
    "messagesToSummarize",
    "turnPrefixMessages",
    "tokensBefore",
    "estimatedTokensAfter",
)


def _progress(stage: str, fraction: float | None) -> None:
    pct = f"{fraction * 100:5.1f}%" if fraction is not None else "   …  "
    print(f"  [{pct}] {stage}", file=sys.stderr, flush=True)


def run_compact(args: argparse.Namespace) -> int:
    settings = CompactionSettings(model=args.model, api_base=args.api_base)
    if args.keep_recent_tokens is not None:
        settings.keep_recent_tokens = args.keep_recent_tokens
    session = open_session(args.file)
    if args.dry_run:
        try:
            data = dry_run_json(session, settings)
        except NothingToCompact as exc:  # as a real compaction reports it
            raise CompactionError(f"nothing to compact: {exc}", path=session.path) from exc
        ordered = {k: data[k] for k in DRY_RUN_KEYS} | {k: v for k, v in data.items() if k not in DRY_RUN_KEYS}
        if args.json:
            json.dump(ordered, sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            split = f", split turn from line {data['turnStartLine']}" if data["isSplitTurn"] else ""
            print(f"would keep from line {data['firstKeptLine']} ({data['firstKeptEntryId']}){split}")
            print(
                f"summarise {data['messagesToSummarize']} messages"
                f" (+{data['turnPrefixMessages']} in the turn prefix);"
                f" tokens {data['tokensBefore']:,} -> about {data['estimatedTokensAfter']:,}"
            )
            if data["mustKeepText"]:
                print()
                print(data["mustKeepText"])
        return 0
    forked_from = None
    if session.file.read_only:
        # Another agent's transcript is never written: compact a pi fork of it instead.
        from ctxd.service.registry import Registry
        from ctxd.store.listing import cwd_dirname, default_roots

        leaf = session.leaf_id()
        if leaf is None:
            raise CompactionError("the transcript is empty: nothing to compact", path=session.path)
        forked_from = session.path
        root = args.fork_root or default_roots()[0]
        # The fork goes into pi's folder for the cwd under the root: that folder must stay inside it.
        Registry([root]).check_destination(os.path.join(root, cwd_dirname(session.file.cwd)))
        session = Session.open(session.fork(leaf, root=root))
        print(f"{forked_from} is read-only; compacting a pi fork: {session.path}", file=sys.stderr)
    outcome = asyncio.run(
        compact(session, settings, instructions=args.instructions, progress=None if args.json else _progress)
    )
    if args.json:
        result = outcome.to_json()
        if forked_from:
            result.update(session=session.path, forkedFrom=forked_from)
        json.dump(redact_json(result), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for failure in outcome.failures:  # why a fallback made the summary (litellm missing, a model error, ...)
            print(f"ctxd: {failure}", file=sys.stderr)
        print(
            f"compacted: entry {outcome.entryId}, tokens {outcome.tokensBefore:,} -> {outcome.tokensAfter:,}"
            f" via {outcome.path} ({outcome.summarizer}{'/' + outcome.model if outcome.model else ''})"
            f" in {outcome.durationMs} ms"
        )
    return 0
