"""Opening a session: the first open (the whole file read and indexed, the index then kept in the
cache), reopening it unchanged, and reopening it after another writer appended 100 entries.

One mode per process (peak RSS is the process's). Prints one JSON object. The cache is the one
``XDG_CACHE_HOME`` names (bench/run.py gives a private one).

    python bench/open_bench.py FILE first      # no cached index: read whole (then kept)
    python bench/open_bench.py FILE reopen     # median of 5 reopens, unchanged (and the first build after each)
    python bench/open_bench.py FILE appended   # median of 5 reopens after 100 appended entries
"""

from __future__ import annotations

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

from ctxd.context.live import live_context
from ctxd.store import index_cache
from ctxd.tree.session import Session


def main(path: str, mode: str) -> dict[str, Any]:
    out: dict[str, Any] = {"file": path, "bytes": os.path.getsize(path), "mode": mode}
    if mode == "first":
        index_cache.forget(path)
        t = time.perf_counter()
        s = Session.open(path)
        out["open_ms"] = (time.perf_counter() - t) * 1000
        out["entries"] = len(s.file)
        out["rss_mb"] = rss_mb()
        out["kept"] = index_cache.cache_path(path) is not None and os.path.exists(index_cache.cache_path(path) or "")
        return out
    target = path
    work = None
    if mode == "appended":
        work = tempfile.mkdtemp(prefix="ctxd-obench-")
        target = os.path.join(work, os.path.basename(path))
        shutil.copyfile(path, target)
        Session.open(target)  # read whole once: the index is kept
        leaf = Session.open(target).leaf_id()
        with open(target, "a", encoding="utf-8") as f:
            for k in range(100):
                entry = {"type": "message", "id": f"zz{k:06d}", "parentId": leaf, "timestamp": "2026-01-01T00:00:00Z"}
                entry["message"] = {"role": "user", "content": "another writer " * 100}
                f.write(json.dumps(entry) + "\n")
                leaf = entry["id"]
    else:
        # Make sure the index is kept, as a session used once leaves it: built, then closed (the
        # index then holds the estimates of the context's entries).
        used = Session.open(target)
        live_context(used).context()
        used.close()
    times = []
    builds = []
    restored = None
    for _ in range(5):
        t = time.perf_counter()
        s = Session.open(target)
        times.append((time.perf_counter() - t) * 1000)
        restored = s.file.restored
        read = s.file.last_scan[1] - s.file.last_scan[0]
        t = time.perf_counter()
        live_context(s).context()
        builds.append((time.perf_counter() - t) * 1000)
    out.update(open_ms=statistics.median(times), runs_ms=times, restored=restored is not None, read_bytes=read)
    # The first context build after that open (the kept index's estimates: no body decoded).
    out["first_build_ms"] = statistics.median(builds)
    out["open_build_ms"] = statistics.median(a + b for a, b in zip(times, builds, strict=True))
    out["rss_mb"] = rss_mb()
    if work:
        shutil.rmtree(work, ignore_errors=True)
    return out


if __name__ == "__main__":
    json.dump(main(sys.argv[1], sys.argv[2]), sys.stdout)
    sys.stdout.write("\n")
