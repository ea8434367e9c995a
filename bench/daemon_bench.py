"""The daemon's targets (issue 4), measured through a real ``ctxd serve`` subprocess.

- spawn -> initialize reply;
- ``session/append`` round trip (sequential p50) and throughput (pipelined, one connection);
- ``context/build`` on a compacted 100k-entry session (round trip p50);
- an external append -> ``session/didChange`` (p50, p99);
- idle CPU while watching 1,000 session files.
"""

from __future__ import annotations

import asyncio
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

from measure import pct, tool_loop_message

from ctxd.client import CtxdClient


async def spawn_to_initialize(root: str, n: int = 8) -> tuple[list[float], list[float]]:
    """(spawn -> initialize reply, spawn -> first request answered), in seconds.

    ctxd answers initialize while the rest of the daemon loads; the second figure shows when
    requests are actually served."""
    times, first = [], []
    for _ in range(n):
        client = CtxdClient(initialization_options={"roots": [root], "watch": False}, stderr=-3)
        t = time.perf_counter()
        await client.start()
        times.append(time.perf_counter() - t)
        await client.request("session/list", {})
        first.append(time.perf_counter() - t)
        await client.close()
    return times, first


async def appends(client: CtxdClient, root: str) -> dict[str, float]:
    created = await client.request("session/create", {"cwd": "/bench"})
    path = created["path"]
    body = {"role": "user", "content": "x" * 1800}
    for _ in range(50):  # warm up
        await client.request("session/append", {"session": path, "messages": [body]})
    rtt = []
    for _ in range(1000):
        t = time.perf_counter()
        await client.request("session/append", {"session": path, "messages": [body]})
        rtt.append(time.perf_counter() - t)
    n = 3000
    t = time.perf_counter()
    await asyncio.gather(*(client.request("session/append", {"session": path, "messages": [body]}) for _ in range(n)))
    pipelined = n / (time.perf_counter() - t)
    return {
        "append_p50_ms": pct(rtt, 0.5) * 1000,
        "append_p99_ms": pct(rtt, 0.99) * 1000,
        "append_sequential_per_s": len(rtt) / sum(rtt),
        "append_pipelined_per_s": pipelined,
    }


async def context_build(client: CtxdClient, path: str) -> dict[str, float]:
    t = time.perf_counter()
    opened = await client.request("session/open", {"session": path})
    first_open = time.perf_counter() - t
    rtt = []
    for _ in range(60):
        t = time.perf_counter()
        ctx = await client.request("context/build", {"session": path})
        rtt.append(time.perf_counter() - t)
    return {
        "open_100k_s": first_open,
        "entries": opened["entries"],
        "context_messages": len(ctx["messages"]),
        "compacted": bool(ctx.get("compactionId")),
        "context_build_p50_ms": pct(rtt, 0.5) * 1000,
    }


async def large_context(client: CtxdClient, path: str, rounds: int = 200, whole_rounds: int = 10) -> dict[str, Any]:
    """An agent's loop: session/append of one message, then context/build since the previous answer
    (round trips, p50/p99); then, fewer times, the whole context with and without bodies."""
    await client.request("session/open", {"session": path})
    held = await client.request("context/build", {"session": path, "includeMessages": False})
    since: list[float] = []
    for k in range(rounds):
        await client.request("session/append", {"session": path, "messages": [tool_loop_message(k)]})
        t = time.perf_counter()
        delta = await client.request(
            "context/build", {"session": path, "sinceLeafId": held["leafId"], "sinceRevision": held["revision"]}
        )
        since.append(time.perf_counter() - t)
        assert delta["base"] > 0, "the context held was not a prefix"
        held = delta
    whole: list[float] = []
    bare: list[float] = []
    full: dict[str, Any] = {}
    for k in range(rounds, rounds + whole_rounds):
        await client.request("session/append", {"session": path, "messages": [tool_loop_message(k)]})
        t = time.perf_counter()
        full = await client.request("context/build", {"session": path})
        whole.append(time.perf_counter() - t)
        t = time.perf_counter()
        await client.request("context/build", {"session": path, "includeMessages": False})
        bare.append(time.perf_counter() - t)
    return {
        "context_messages": len(full["messages"]),
        "since_p50_ms": pct(since, 0.5) * 1000,
        "since_p99_ms": pct(since, 0.99) * 1000,
        "whole_p50_ms": pct(whole, 0.5) * 1000,
        "bare_p50_ms": pct(bare, 0.5) * 1000,
        "whole_kb": len(json.dumps(full)) / 1000,
        "since_kb": len(json.dumps(delta)) / 1000,
    }


async def external(client: CtxdClient, root: str) -> dict[str, float]:
    created = await client.request("session/create", {"cwd": "/ext"})
    path = created["path"]
    await client.request("session/open", {"session": path})
    leaf = created["leafId"]
    lat = []
    for k in range(150):
        eid = f"e{k:07x}"
        line = {
            "type": "message",
            "id": eid,
            "parentId": leaf,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": f"external {k}"},
        }
        since = client.mark()
        t = time.perf_counter()
        with open(path, "a") as f:  # another writer: this process, not the daemon
            f.write(json.dumps(line) + "\n")
        await client.wait_for("session/didChange", lambda p, e=eid: e in p.get("ids", []), since=since, timeout=10)
        lat.append(time.perf_counter() - t)
        leaf = eid
        await asyncio.sleep(0.02)
    return {"external_p50_ms": pct(lat, 0.5) * 1000, "external_p99_ms": pct(lat, 0.99) * 1000}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def idle_cpu(root: str, files: int = 1000, seconds: float = 10.0) -> dict[str, float]:
    header = json.dumps({"type": "session", "version": 3, "id": "x", "timestamp": "t", "cwd": "/"})
    for k in range(files):
        d = Path(root) / f"--p{k % 50}--"
        d.mkdir(exist_ok=True)
        (d / f"s{k}.jsonl").write_text(header + "\n")
    async with CtxdClient(initialization_options={"roots": [root], "watch": True}, stderr=-3) as client:
        await client.request("session/list", {})
        await asyncio.sleep(1.0)
        assert client.process is not None
        pid = client.process.pid
        before = cpu_seconds(pid)
        await asyncio.sleep(seconds)
        used = cpu_seconds(pid) - before
    return {"idle_cpu_percent": 100 * used / seconds, "watched_files": files}


async def main(big: str | None, contexts: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ctxd-dbench-") as root:
        times, first = await spawn_to_initialize(root)
        out.update(
            spawn_p50_ms=statistics.median(times) * 1000,
            spawn_min_ms=min(times) * 1000,
            spawn_first_request_p50_ms=statistics.median(first) * 1000,
        )
        async with CtxdClient(initialization_options={"roots": [root], "autoCompact": False}, stderr=-3) as client:
            out.update(await appends(client, root))
            out.update(await external(client, root))
            if big:
                target = Path(root) / "--big--" / Path(big).name
                target.parent.mkdir()
                shutil.copyfile(big, target)
                out.update(await context_build(client, str(target)))
            out["contexts"] = {}
            for source in contexts:
                target = Path(root) / "--ctx--" / Path(source).name
                target.parent.mkdir(exist_ok=True)
                shutil.copyfile(source, target)
                out["contexts"][Path(source).stem] = await large_context(client, str(target))
    with tempfile.TemporaryDirectory(prefix="ctxd-idle-") as root:
        out.update(await idle_cpu(root))
    return out


if __name__ == "__main__":
    json.dump(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None, sys.argv[2:])), sys.stdout)
    print()
