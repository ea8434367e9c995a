"""One process, one session file: open/index, context build, refresh, append, plan, summary.

Prints one JSON object. Run through ``bench/run.py`` (each size in a fresh process, so the peak
RSS belongs to that size alone).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from measure import rss_mb

from ctxd.compaction.cut.plan import plan_compaction
from ctxd.compaction.engine import compact
from ctxd.compaction.settings import CompactionSettings
from ctxd.compaction.summary import OfflineSummarizer, SummaryRequest, SummaryResult
from ctxd.context.build import build_context, entry_message
from ctxd.store.session_file import SessionFile
from ctxd.tree.session import Session


def timed(fn: Any, repeat: int = 1) -> tuple[float, Any]:
    best = float("inf")
    result = None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


class InstantSummarizer:
    """A model that answers at once: what remains is ctxd's own compaction path."""

    name = "instant"

    async def summarize(self, request: SummaryRequest, progress: Any = None) -> SummaryResult:
        return SummaryResult("## Goal\n- benchmark", "instant", None, "model")


def main(path: str, mode: str) -> dict[str, Any]:
    out: dict[str, Any] = {"file": path, "bytes": os.path.getsize(path)}
    if mode == "open":
        # Peak RSS of opening and indexing alone, as pi's 548 MB was measured; the time is the
        # median of several opens (this machine's timings are noisy).
        times = []
        entries = 0
        for _ in range(5):
            t = time.perf_counter()
            session = Session.open(path)
            times.append(time.perf_counter() - t)
            entries = len(session.file)
            del session
        out.update(open_s=statistics.median(times), open_best_s=min(times), entries=entries, rss_mb=rss_mb())
        return out
    session = Session.open(path)
    out["entries"] = len(session.file)
    f, tree = session.file, session.tree
    t_cold, ctx = timed(lambda: build_context(f, tree, estimates=session.estimates))
    t_warm, ctx = timed(lambda: build_context(f, tree, estimates=session.estimates), repeat=20)
    out.update(context_cold_ms=t_cold * 1000, context_warm_ms=t_warm * 1000, context_messages=len(ctx.messages))

    t_plan_cold, _ = timed(lambda: plan_compaction(session, keep_recent_tokens=20_000))
    t_plan, _ = timed(lambda: plan_compaction(session, keep_recent_tokens=20_000), repeat=20)
    out.update(plan_cold_ms=t_plan_cold * 1000, plan_warm_ms=t_plan * 1000)

    # Offline summary of the whole session: every message on the path from the root.
    path_idx = tree.path_to_root(f.leaf_index() or 0)
    wanted = [i for i in path_idx if f.heads[i].type in ("message", "custom_message", "branch_summary")]
    messages = [m for m in (entry_message(b) for b in f.entries(wanted)) if m is not None]
    gc.collect()
    t = time.perf_counter()
    summary = asyncio.run(OfflineSummarizer().summarize(SummaryRequest(messages=messages)))
    out.update(offline_summary_s=time.perf_counter() - t, offline_summary_messages=len(messages))
    out["offline_summary_chars"] = len(summary.text)

    work = tempfile.mkdtemp(prefix="ctxd-bench-")
    try:
        copy = os.path.join(work, "s.jsonl")
        shutil.copyfile(path, copy)
        writer = Session.open(copy)
        # Compaction path with an instant model: everything but the model call.
        times = []
        loop = asyncio.new_event_loop()  # one loop: asyncio.run's own setup is not ctxd's cost
        for _ in range(5):
            t = time.perf_counter()
            loop.run_until_complete(compact(writer, CompactionSettings(), summarizer=InstantSummarizer()))
            times.append(time.perf_counter() - t)
            writer.move_leaf(writer.tree.id_of(writer.tree.parent[writer.leaf() or 0]))
        loop.close()
        out["compaction_path_ms"] = statistics.median(times) * 1000

        # Refresh after one entry appended by another writer.
        reader = SessionFile.open(copy)
        other = SessionFile.open(copy)
        refresh = []
        for k in range(50):
            other.append([{"type": "message", "message": {"role": "user", "content": f"ping {k} " * 200}}])
            t = time.perf_counter()
            reader.refresh()
            refresh.append(time.perf_counter() - t)
        out["refresh_one_ms"] = statistics.median(refresh) * 1000

        # Append throughput with flush (each append acknowledged after write()).
        n = 5000
        body = {"type": "message", "message": {"role": "user", "content": "x" * 1800}}
        t = time.perf_counter()
        for _ in range(n):
            other.append([body])
        out["append_per_s"] = n / (time.perf_counter() - t)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out["rss_mb_all"] = rss_mb()
    return out


if __name__ == "__main__":
    json.dump(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "all"), sys.stdout)
