"""The daemon's answers on the wire, for ``bench/compare_answers.py``: a real ``ctxd serve`` from a given tree,
asked every method that reads (and the agents' methods, which write nothing) on a copy of each session file.

Both trees' daemons read the same copies (under the same paths) with the watcher off, so every answer, error
included, must be the same byte for byte, but for the first part of a context's ``revision``, which names the
daemon's process (:meth:`ctxd.context.live.LiveContext.revision`); the history index and the state go to a
folder of each tree's own.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

from ctxd.client import ClientError, CtxdClient  # noqa: E402

MESSAGES = [
    {"role": "user", "content": "Read the config.", "timestamp": 1},
    {"role": "toolResult", "toolCallId": "c1", "toolName": "bash", "content": [{"type": "text", "text": "x" * 9000}],
     "isError": False, "timestamp": 2},
    {"role": "assistant", "content": [{"type": "text", "text": "It sets port 8080."}], "stopReason": "stop",
     "timestamp": 3},
]  # fmt: skip


def copies(files: list[str], root: Path) -> list[str]:
    """Each file copied under ``root`` (one folder per file, as a cwd's folder), in order."""
    out = []
    for i, path in enumerate(files):
        folder = root / f"--s{i:03d}--"
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / Path(path).name
        shutil.copyfile(path, target)
        out.append(str(target))
    return out


async def _ask(client: CtxdClient, method: str, params: Any) -> str:
    try:
        result: Any = {"result": await client.request(method, params)}
    except ClientError as exc:
        result = {"error": [exc.code, exc.message, exc.data]}
    return json.dumps({"method": method, "params": params, **result}, sort_keys=True, ensure_ascii=False)


async def answers(tree: Path, root: Path, paths: list[str], state: Path) -> list[str]:
    env = {
        "PYTHONPATH": str(tree),
        "XDG_DATA_HOME": str(state / "data"),
        "XDG_STATE_HOME": str(state / "state"),
        "XDG_CACHE_HOME": str(state / "cache"),
        "XDG_CONFIG_HOME": str(state / "config"),
        "CTXD_INDEX_CACHE": "0",
    }
    options = {"roots": [str(root)], "transcriptRoots": [], "watch": False, "autoCompact": False}
    client = CtxdClient(
        [sys.executable, "-P", "-m", "ctxd", "serve"],
        initialization_options=options,
        env=env,
        cwd=str(tree),
        stderr=asyncio.subprocess.DEVNULL,
    )
    await client.start()
    out = [await _ask(client, "session/list", {})]
    try:
        for path in paths:
            opened = await _ask(client, "session/open", {"session": path})
            out.append(opened)
            leaf = json.loads(opened).get("result", {}).get("leafId")
            one = {"session": path}
            for method, params in (
                ("session/tree", one),
                ("session/tree", {**one, "collapse": False, "limit": 50}),
                ("session/stats", one),
                ("session/ledger", one),
                ("session/check", one),
                ("session/facts", one),
                ("context/build", one),
                ("context/build", {**one, "format": "openai", "truncateToolResults": True}),
                ("context/composition", {**one, "leafId": leaf}),
                ("compact", {**one, "dryRun": True}),
                ("compact/facts", one),
            ):
                out.append(await _ask(client, method, params))
            if leaf is not None:
                out.append(await _ask(client, "session/entry", {**one, "entryId": leaf}))
        search = await _ask(client, "history/search", {"query": "the", "limit": 30, "waitMs": 10_000})
        out.append(search)
        for hit in json.loads(search).get("result", {}).get("hits", [])[:10]:
            params = {"session": hit["session"]["path"], "entryId": hit["entryId"], "maxChars": 4000}
            out.append(await _ask(client, "history/expand", params))
        out.append(await _ask(client, "compact/prompt", {}))
        out.append(await _ask(client, "context/truncate", {"messages": MESSAGES, "limitChars": 2000}))
        out.append(await _ask(client, "session/open", {"session": str(root / "missing.jsonl")}))
        out.append(await _ask(client, "session/append", {"session": paths[0] if paths else "", "messages": []}))
    finally:
        await client.close()
    return out


def _apart(a: Any, b: Any, where: str) -> list[tuple[str, Any, Any]]:
    """Where two answers differ: (path, ref's value, this tree's value)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _apart(a.get(k), b.get(k), f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _apart(x, y, f"{where}[{i}]")]
    if where.endswith(".revision") and isinstance(a, str) and isinstance(b, str):
        a, b = a.partition(".")[2], b.partition(".")[2]  # its first part names the process (ctxd.context.live)
    return [] if a == b else [(where, a, b)]


def main(ref: Path, this: Path, files: list[str], work: Path) -> int:
    """The number of answers that differ (each printed)."""
    root = work / "daemon-sessions"
    paths = copies(files, root)
    got = {
        name: asyncio.run(answers(tree, root, paths, work / f"daemon-{name}"))
        for name, tree in (("ref", ref), ("this", this))
    }
    differences = 0
    for a, b in zip(got["ref"], got["this"], strict=True):
        if _apart(json.loads(a), json.loads(b), ""):
            differences += 1
            print(f"DIFFERENT (daemon): {json.loads(a)['method']} {json.dumps(json.loads(a)['params'])[:200]}")
            for where, x, y in _apart(json.loads(a), json.loads(b), "")[:5]:
                print(f"  {where}: ref {json.dumps(x)[:200]} / this {json.dumps(y)[:200]}")
    print(f"daemon: {len(got['ref'])} answers, {differences} differences")
    return differences


if __name__ == "__main__":
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="ctxd-daemon-compare-"))
    try:
        raise SystemExit(1 if main(Path(sys.argv[1]).resolve(), HERE.parent, sys.argv[2:], tmp) else 0)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
