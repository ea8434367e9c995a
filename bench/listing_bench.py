"""Listing: ``session/list`` through a real daemon, and ``list_sessions`` in-process.

- 1,000 files of about 1 MB (copies of one generated session, each with its own id): the first
  listing (reads them), then warm listings (p50 of 10) and after one file grew by a line;
- a root holding one 200 MB session (bench/out/100k.jsonl): the first listing, then warm, then after
  a line was appended to it.

Prints one JSON object. Usage: python bench/listing_bench.py SOURCE_1MB.jsonl BIG.jsonl
"""

from __future__ import annotations

import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ctxd.client import CtxdClient
from ctxd.store.listing import list_sessions
from ctxd.store.listing_cache import LISTINGS


def make_root(root: Path, source: Path, files: int) -> list[Path]:
    data = source.read_bytes()
    first = data.index(b"\n")
    header = json.loads(data[:first])
    paths = []
    for k in range(files):
        folder = root / f"--proj-{k % 20}--"
        folder.mkdir(parents=True, exist_ok=True)
        header["id"] = str(uuid.UUID(int=k + 1))
        path = folder / f"s{k:04d}.jsonl"
        path.write_bytes(json.dumps(header, separators=(",", ":")).encode() + data[first:])
        paths.append(path)
    return paths


def append_line(path: Path) -> None:
    with open(path, "ab") as f:
        entry = {"type": "session_info", "id": uuid.uuid4().hex[:8], "parentId": None, "timestamp": "t", "name": "n"}
        f.write(json.dumps(entry).encode() + b"\n")


async def through_daemon(root: Path, grow: Path) -> dict[str, Any]:
    options = {"roots": [str(root)], "watch": False, "autoCompact": False}
    async with CtxdClient(initialization_options=options, stderr=-3) as client:
        t = time.perf_counter()
        first = await client.request("session/list", {})
        cold = time.perf_counter() - t
        warm = []
        for _ in range(10):
            t = time.perf_counter()
            await client.request("session/list", {})
            warm.append(time.perf_counter() - t)
        append_line(grow)
        t = time.perf_counter()
        await client.request("session/list", {})
        grown = time.perf_counter() - t
    return {
        "files": len(first["sessions"]),
        "cold_ms": cold * 1000,
        "warm_p50_ms": statistics.median(warm) * 1000,
        "grown_ms": grown * 1000,
    }


def in_process(root: Path, grow: Path) -> dict[str, Any]:
    LISTINGS.forget()
    t = time.perf_counter()
    list_sessions([str(root)])
    cold = time.perf_counter() - t
    warm = []
    for _ in range(10):
        t = time.perf_counter()
        list_sessions([str(root)])
        warm.append(time.perf_counter() - t)
    append_line(grow)
    t = time.perf_counter()
    list_sessions([str(root)])
    grown = time.perf_counter() - t
    return {"cold_ms": cold * 1000, "warm_p50_ms": statistics.median(warm) * 1000, "grown_ms": grown * 1000}


def main(source: str, big: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ctxd-lbench-") as work:
        root = Path(work) / "many"
        paths = make_root(root, Path(source), 1000)
        out["many_file_mb"] = paths[0].stat().st_size / 1e6
        out["many_daemon"] = asyncio.run(through_daemon(root, paths[0]))
        out["many_in_process"] = in_process(root, paths[1])
        one = Path(work) / "one" / "--big--"
        one.mkdir(parents=True)
        target = one / Path(big).name
        shutil.copyfile(big, target)
        out["big_mb"] = target.stat().st_size / 1e6
        out["big_daemon"] = asyncio.run(through_daemon(one.parent, target))
        out["big_in_process"] = in_process(one.parent, target)
    return out


if __name__ == "__main__":
    json.dump(main(sys.argv[1], sys.argv[2]), sys.stdout)
    sys.stdout.write("\n")
