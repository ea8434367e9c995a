"""ctxd's side of the large-context comparison with pi 1.5.2 (bench/pi_bench.mjs is pi's), in-process.

One session file per process; prints one JSON object. What is timed mirrors pi_bench.mjs:

- ``open_ms``: ``Session.open`` (index the file), median of ``--opens``; ``rss_open_mb`` after them;
- ``build_cold_ms``: the first context build after opening (every message of the context decoded and
  estimated); ``build_warm_ms``: asked again, nothing changed (median of 20);
- ``full_rebuild_ms``: ``build_context`` from scratch with warm estimates (what every request cost
  before the context was kept), median of 5;
- ``after_append_p50_ms``/``p99``: one message appended (written to the file), then the context asked
  for: the kept context extends by it (alternating an assistant tool call with usage and its 1,800-
  character result, as pi_bench.mjs does);
- ``plan_cold_ms``: the first compaction plan of a freshly opened session (keepRecentTokens 20000);
- ``build_kept_index_ms``/``plan_kept_index_ms``: the same two after reopening with the index a
  session built and closed once kept (estimates known: the context is built without reading a body);
  ``plan_warm_ms``: again (median of 20); ``plan_after_append_ms``: after each append (median).
"""

from __future__ import annotations

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

from measure import ms, pct, rss_mb, tool_loop_message

from ctxd.compaction.cut.plan import plan_compaction
from ctxd.context.build import build_context
from ctxd.context.live import live_context
from ctxd.tree.session import Session


def main(path: str, opens: int, appends: int) -> dict[str, Any]:
    out: dict[str, Any] = {"file": path, "bytes": os.path.getsize(path)}
    times = []
    session = None
    for _ in range(opens):
        session = None
        gc.collect()
        t = time.perf_counter()
        session = Session.open(path)
        times.append(ms(t))
    assert session is not None
    out.update(open_ms=statistics.median(times), open_runs_ms=times, entries=len(session.file), rss_open_mb=rss_mb())

    live = live_context(session)
    t = time.perf_counter()
    ctx = live.context()
    out["build_cold_ms"] = ms(t)
    out["context_messages"] = len(ctx.messages)
    out["context_tokens"] = ctx.contextTokens
    warm = []
    for _ in range(20):
        t = time.perf_counter()
        live.context()
        warm.append(ms(t))
    out["build_warm_ms"] = statistics.median(warm)
    full = []
    for _ in range(5):
        t = time.perf_counter()
        build_context(session.file, session.tree, estimates=session.estimates)
        full.append(ms(t))
    out["full_rebuild_ms"] = statistics.median(full)

    fresh = Session.open(path)  # a plan as the first thing asked of a session
    t = time.perf_counter()
    plan = plan_compaction(fresh, keep_recent_tokens=20_000)
    out["plan_cold_ms"] = ms(t)
    out["plan_summarize"] = len(plan.messagesToSummarize)
    del fresh, plan
    plans = []
    for _ in range(20):
        t = time.perf_counter()
        plan_compaction(session, keep_recent_tokens=20_000)
        plans.append(ms(t))
    out["plan_warm_ms"] = statistics.median(plans)

    out.update(_with_kept_index(path))

    work = tempfile.mkdtemp(prefix="ctxd-cbench-")
    try:
        copy = os.path.join(work, os.path.basename(path))
        shutil.copyfile(path, copy)
        writer = Session.open(copy)
        live = live_context(writer)
        live.context()
        plan_compaction(writer, keep_recent_tokens=20_000)
        appended, after, planned = [], [], []
        for k in range(appends):
            entry = {"type": "message", "message": tool_loop_message(k)}
            t = time.perf_counter()
            writer.append([entry])
            appended.append(ms(t))
            t = time.perf_counter()
            live.context()
            after.append(ms(t))
            if k % 10 == 9:
                t = time.perf_counter()
                plan_compaction(writer, keep_recent_tokens=20_000)
                planned.append(ms(t))
        out["append_ms"] = statistics.median(appended)
        out["after_append_p50_ms"] = pct(after, 0.5)
        out["after_append_p99_ms"] = pct(after, 0.99)
        out["plan_after_append_ms"] = statistics.median(planned) if planned else None
        out["rebuilds"] = live.rebuilds
        writer.file.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out["rss_mb"] = rss_mb()
    return out


def _with_kept_index(path: str) -> dict[str, Any]:
    """The first build and the first plan after reopening with the index a session built and closed
    once kept (its estimates and clean lines: no body read), in a private cache whatever the caller's."""
    saved = {k: os.environ.get(k) for k in ("CTXD_INDEX_CACHE", "XDG_CACHE_HOME")}
    cache = tempfile.mkdtemp(prefix="ctxd-cbench-cache-")
    os.environ.update(CTXD_INDEX_CACHE="1", XDG_CACHE_HOME=cache)
    try:
        used = Session.open(path)
        live_context(used).context()
        used.close()
        builds, plans = [], []
        for _ in range(3):
            gc.collect()
            s = Session.open(path)
            t = time.perf_counter()
            live_context(s).context()
            builds.append(ms(t))
            s = Session.open(path)
            t = time.perf_counter()
            plan_compaction(s, keep_recent_tokens=20_000)
            plans.append(ms(t))
        return {"build_kept_index_ms": statistics.median(builds), "plan_kept_index_ms": statistics.median(plans)}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    opens = int(args[args.index("--opens") + 1]) if "--opens" in args else 3
    appends = int(args[args.index("--appends") + 1]) if "--appends" in args else 200
    json.dump(main(args[0], opens, appends), sys.stdout)
    sys.stdout.write("\n")
