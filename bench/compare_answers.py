"""Answers of two ctxd trees on the same files, compared byte for byte (a change must not alter any).

    python bench/compare_answers.py REF_TREE [FILE ...]

``REF_TREE`` is another checkout of ctxd (``git archive main | tar -x -C /tmp/main``); this script's
own tree is the other. The files: every session file in tests/data, every conformance scenario
(tests/conformance, with its keepRecentTokens), a few damaged files (invalid UTF-8 in a body, a line
nested too deep, two objects on one line, a v1 file) and any FILE given. For each file, in a fresh
process per tree, with the persistent index off and then on (a reopen that restores the estimates):

- the kept context (``live_context(session).context()``) with its messages, at the leaf and at up
  to 12 other entries, and the context size there;
- ``build_context`` from scratch, with messages;
- the compaction plan of a freshly opened session (with its messages, file lists, previous summary
  and prompt state) at the leaf and at those entries;
- ``ctxd context FILE --json`` as a whole process;
- a real daemon's answers on the wire to every method that reads, and the agents' methods (``bench/daemon_answers.py``).

Prints each difference and exits 1 if there is any.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TREE = HERE.parent


def _answers(path: str, keep: int) -> dict[str, Any]:
    """Every answer on one file, from the ctxd on ``sys.path`` (run in a child process)."""
    try:
        from ctxd.compaction.cut.plan import NothingToCompact, plan_compaction
    except ImportError:  # a tree from before the compaction folder was laid out (cut/, reading/, ledger/, summary/)
        from ctxd.compaction.plan import NothingToCompact, plan_compaction  # type: ignore[no-redef]
    from ctxd.context.build import build_context
    from ctxd.context.live import live_context, size_of
    from ctxd.tree.session import Session

    def attempt(make: Any) -> Any:
        try:
            return make()
        except NothingToCompact as exc:
            return f"NothingToCompact: {exc}"
        except Exception as exc:  # an error is an answer too: it must be the same
            return f"{type(exc).__name__}: {exc}"

    def plan(leaf: str | None) -> Any:
        fresh = Session.open(path)
        found = plan_compaction(fresh, keep_recent_tokens=keep, leaf_id=leaf)
        out = found.to_json(with_messages=True)
        out.update(previousSummary=found.previousSummary, systemMessage=found.systemMessage)
        fresh.close()
        return out

    out: dict[str, Any] = {}
    session = Session.open(path)
    live = live_context(session)
    out["context"] = attempt(lambda: live.context().to_json())
    out["size"] = attempt(lambda: _size(size_of(session)))
    out["build"] = attempt(lambda: build_context(session.file, session.tree).to_json())
    out["plan"] = attempt(lambda: plan(None))
    n = len(session.file)
    ids = [session.file.heads[i].id for i in range(0, n, max(1, n // 12))]
    for entry_id in ids:
        if entry_id is None:
            continue
        out[f"context@{entry_id}"] = attempt(lambda e=entry_id: live.context(e).to_json())
        out[f"size@{entry_id}"] = attempt(lambda e=entry_id: _size(size_of(session, e)))
        out[f"plan@{entry_id}"] = attempt(lambda e=entry_id: plan(e))
    out["diagnostics"] = [d.to_json() for d in session.diagnostics()]
    session.close()
    return out


def _size(size: Any) -> dict[str, Any]:
    return {"leafId": size.leafId, "tokens": size.tokens, "last": size.last}


def _dump(listing: str) -> None:
    """Child: the answers for each ``path<TAB>keep`` line of ``listing``, one JSON line each."""
    for line in Path(listing).read_text().splitlines():
        path, keep = line.split("\t")
        sys.stdout.write(json.dumps(_answers(path, int(keep)), sort_keys=True) + "\n")


def _damaged(folder: Path) -> list[Path]:
    """Files whose bodies a full read must repair or report (the paths that are never lazy)."""
    head = {"type": "session", "version": 3, "id": "damaged", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"}

    def msg(i: int, parent: str | None, message: dict[str, Any]) -> bytes:
        entry = {"type": "message", "id": f"e{i}", "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z"}
        entry["message"] = message
        return json.dumps(entry).encode()

    user = {"role": "user", "content": [{"type": "text", "text": "hello"}], "timestamp": 1}
    said = {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "stopReason": "stop", "timestamp": 2}
    deep = {"role": "user", "content": [{"type": "text", "text": "deep"}], "x": json.loads("[" * 150 + "]" * 150)}
    lines = [
        json.dumps(head).encode(),
        msg(1, None, user),
        msg(2, "e1", said).replace(b'"ok"', b'"o\xffk"'),  # invalid UTF-8 inside a string
        msg(3, "e2", deep),
        msg(4, "e3", user) + msg(5, "e4", said),  # two objects on one line
        msg(6, "e5", {**said, "content": "caf\u00e9 \U0001f600", "role": "user"}),
    ]
    damaged = folder / "damaged.jsonl"
    damaged.write_bytes(b"\n".join(lines) + b"\n")
    old = folder / "v1.jsonl"
    v1 = [{"type": "session", "id": "v1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"}]
    v1 += [{"type": "message", "timestamp": "2026-01-01T00:00:01.000Z", "message": m} for m in (user, said, user)]
    old.write_text("".join(json.dumps(e) + "\n" for e in v1))
    return [damaged, old]


def _files(folder: Path, extra: list[str]) -> list[tuple[str, int]]:
    sys.path[:0] = [str(TREE / "tests"), str(TREE / "tests" / "conformance")]
    from pi_scenarios import build_all

    files = [(str(p), 20_000) for p in sorted((TREE / "tests" / "data").rglob("*.jsonl"))]
    scenarios = folder / "scenarios"
    scenarios.mkdir()
    files += sorted(build_all(scenarios).values())
    files += [(str(p), 2_000) for p in _damaged(folder)]
    files += [(p, 20_000) for p in extra]
    return files


def _run(tree: Path, listing: Path, cache: str, cache_dir: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "CTXD_INDEX_CACHE": cache, "XDG_CACHE_HOME": cache_dir}
    run = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--dump", str(listing)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=tree,
    )
    return run.stdout.splitlines()


def _cli(tree: Path, path: str, cache_dir: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree), "CTXD_INDEX_CACHE": "0", "XDG_CACHE_HOME": cache_dir}
    run = subprocess.run(
        [sys.executable, "-m", "ctxd", "context", path, "--json"], env=env, capture_output=True, text=True, cwd=tree
    )
    return f"{run.returncode}\n{run.stdout}"


def main(ref: Path, extra: list[str]) -> int:
    work = Path(tempfile.mkdtemp(prefix="ctxd-compare-"))
    try:
        files = _files(work, extra)
        listing = work / "files.tsv"
        listing.write_text("".join(f"{p}\t{k}\n" for p, k in files))
        differences = 0
        for cache in ("0", "1"):
            answers = {}
            for name, tree in (("ref", ref), ("this", TREE)):
                cache_dir = str(work / f"cache-{name}")
                if cache == "1":
                    _run(tree, listing, cache, cache_dir)  # keeps each index with its estimates
                answers[name] = _run(tree, listing, cache, cache_dir)
            for (path, _), a, b in zip(files, answers["ref"], answers["this"], strict=True):
                if a != b:
                    differences += 1
                    _explain(path, f"index cache {cache}", json.loads(a), json.loads(b))
        for path, _ in files:
            a, b = (_cli(tree, path, str(work / "cli")) for tree in (ref, TREE))
            if a != b:
                differences += 1
                print(f"DIFFERENT: ctxd context --json {path}")
        from daemon_answers import main as daemon_main

        differences += daemon_main(ref, TREE, [path for path, _ in files], work)
        print(f"{len(files)} files, {differences} differences")
        return 1 if differences else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _explain(path: str, how: str, a: dict[str, Any], b: dict[str, Any]) -> None:
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            print(f"DIFFERENT ({how}): {path} {key}")
            print(f"  ref:  {json.dumps(a.get(key))[:400]}")
            print(f"  this: {json.dumps(b.get(key))[:400]}")


if __name__ == "__main__":
    if sys.argv[1] == "--dump":
        _dump(sys.argv[2])
    else:
        raise SystemExit(main(Path(sys.argv[1]).resolve(), sys.argv[2:]))
