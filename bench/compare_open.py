"""Compare what two checkouts of ctxd read from the same session files: the index, the heads, the
tree, every diagnostic and the context, byte for byte.

Used to check that a change to the reading path (scan, heads, tree building) changes no answer:

    git archive main | tar -x -C /tmp/main
    python bench/compare_open.py /tmp/main .            # every tests/data file and a damaged corpus

Each checkout runs in its own process (``PYTHONPATH`` at the checkout) and prints one digest line
per file; the lines must be equal. The damaged corpus is written once into a temporary folder:
small files and one file big enough for the paths big files take (released heads), each with bad
lines, bad UTF-8, duplicate ids, orphans, cycles, blank lines, two objects on one line, deep nesting.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from measure import checkout

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def digest(path: str) -> dict[str, Any]:
    """What one checkout reads from ``path`` (run inside that checkout's process)."""
    import msgspec

    from ctxd.context.build import build_context
    from ctxd.errors import CtxdError
    from ctxd.tree.session import Session

    try:
        s = Session.open(path)
    except CtxdError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # a crash is an answer too (it differs from a clear error)
        return {"crash": f"{type(exc).__name__}: {exc}"}
    f, t = s.file, s.tree
    out: dict[str, Any] = {
        "n": len(f),
        "header": f.header,
        "version": f.version,
        "ids": [h.id for h in f.heads],
        "heads": hashlib.sha256(msgspec.json.encode([msgspec.to_builtins(h) for h in f.heads])).hexdigest(),
        "offsets": list(f.offsets),
        "lengths": list(f.lengths),
        "lines": list(f.lines),
        "index": sorted(f.index.items()),
        "pins": list(f.pin_entries),
        "diagnostics": [d.to_json() for d in s.diagnostics()],
        "tree": {
            "parent": list(t.parent),
            "depth": list(t.depth),
            "last": [list(t.last_compaction), list(t.last_model), list(t.last_thinking)],
            "roots": list(t.roots),
            "orphans": t.orphans,
            "cycles": list(t.cycles),
            "labels": sorted(t.labels.items()),
            "name": t.name,
            "edits": t.has_context_edits,
            "children": sorted((k, v) for k, v in t.children.items()),
        },
    }
    try:
        ctx = build_context(f, t, estimates=s.estimates)
        out["context"] = hashlib.sha256(json.dumps(ctx.to_json(), sort_keys=True).encode()).hexdigest()
        out["context_len"] = len(ctx.messages)
    except CtxdError as exc:
        out["context"] = f"{type(exc).__name__}: {exc}"
    out["diagnostics_after"] = [d.to_json() for d in s.diagnostics()]
    s.close()
    return out


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def _header(version: int = 3) -> dict[str, Any]:
    return {"type": "session", "version": version, "id": "s1", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/w"}


def _msg(i: int, parent: str | None, role: str = "user", **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": f"message {i} " * 5}]}
    if role == "assistant":
        message.update(provider="p", model="m", usage={"input": i, "output": 3, "totalTokens": i + 3})
        message["stopReason"] = "stop"
    message.update(extra)
    return {
        "type": "message",
        "id": f"e{i}",
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:01Z",
        "message": message,
    }


def _insert_before(out: list[bytes], entry: dict[str, Any], inserted: dict[str, Any]) -> None:
    """Write ``inserted`` (a child of ``entry``'s parent), then ``entry`` as its child."""
    out.append(_line(inserted))
    entry["parentId"] = inserted["id"]
    out.append(_line(entry))


def _damaged(n: int, seed: int, head_utf8: bool = False, dups: bool = True, orphans: bool = True) -> bytes:
    """A v3 file of ``n`` entries with damage of every kind sprinkled in (``head_utf8``: also bad
    UTF-8 inside a field the index reads, which main failed to open; without ``orphans`` no entry
    waits for a parent that never comes, so the rest of the file is still read as chains)."""
    rng = random.Random(seed)
    out = [_line(_header())]
    parent: str | None = None
    for i in range(n):
        role = "assistant" if i % 2 else "user"
        entry = _msg(i, parent, role)
        before, parent = parent, entry["id"]
        above = parent if orphans else before  # with orphans: inserted entries name a later parent
        r = rng.random()
        if not orphans and 0.030 <= r < 0.032:
            r = 1.0  # no parent that comes later either: entries waiting for it are read one by one
        if not orphans and (r < 0.002 or 0.012 <= r < 0.018):
            out.append(b"{not json\n" if r < 0.002 else b"\n")
            parent = before
        elif r < 0.002:
            out.append(b'{"type":"message","id":"broken' + str(i).encode() + b'","message":{"role":"user"\n')
        elif r < 0.004:
            out.append(_line(entry).replace(b"message " + str(i).encode(), b"caf\xff\xfe"))
        elif r < 0.006 and head_utf8:
            entry["message"]["model"] = "@@"
            out.append(_line(entry).replace(b'"@@"', b'"m\xffx"'))
        elif r < 0.008:
            nxt = _msg(i + n, entry["id"])
            out.append(_line(entry)[:-1] + _line(nxt))
            parent = nxt["id"]
        elif r < 0.010:
            out.append(b"\n")
            out.append(_line(entry))
        elif r < 0.012:
            out.append(b"[1, 2, 3]\n")
            out.append(_line(entry))
        elif r < 0.014 and dups:
            out.append(_line(entry))
            dup = _msg(i, parent, "user")
            out.append(_line(dup))
        elif r < 0.016:
            entry["parentId"] = "nowhere"
            out.append(_line(entry))
        elif r < 0.018:
            out.append(_line({k: v for k, v in entry.items() if k != "id"}))
        elif r < 0.020:
            out.append(_line(_header()))
            out.append(_line(entry))
        elif r < 0.022:
            deep = b"[" * 1200 + b"]" * 1200
            out.append(_line({**entry, "details": "@@"}).replace(b'"@@"', deep))
        elif r < 0.024:
            entry["message"]["usage"] = {"input": "lots"}
            out.append(_line(entry))
        elif r < 0.026:
            out.append(
                _line({"type": "label", "id": f"l{i}", "parentId": above, "targetId": f"e{i // 2}", "label": "L"})
            )
            out.append(_line(entry))
        elif r < 0.028:
            compaction = {"type": "compaction", "summary": "s", "firstKeptEntryId": f"e{max(0, i - 4)}"}
            _insert_before(out, entry, {**compaction, "id": f"c{i}", "parentId": above, "tokensBefore": 100})
        elif r < 0.030:
            pin = {"type": "custom", "customType": "ctxd.pin", "data": {"targetId": f"e{i - 1}", "pinned": True}}
            _insert_before(out, entry, {**pin, "id": f"p{i}", "parentId": above})
        elif r < 0.032:
            later = f"e{i + 3}"
            entry["parentId"] = later  # a parent that appears later: adopted when it arrives
            out.append(_line(entry))
        elif r < 0.033:
            entry["parentId"] = entry["id"]
            out.append(_line(entry))
        elif r < 0.035:
            _insert_before(
                out, entry, {"type": "thinking_level_change", "id": f"t{i}", "parentId": above, "thinkingLevel": "high"}
            )
        elif r < 0.037:
            change = {"type": "model_change", "provider": "p", "modelId": f"m{i}"}
            _insert_before(out, entry, {**change, "id": f"m{i}", "parentId": above})
        else:
            out.append(_line(entry))
    out.append(b'{"type":"message","id":"torn"')  # no newline: left unread
    return b"".join(out)


def corpus(folder: Path) -> list[str]:
    """Every tests/data file, plus damaged and old-version files written into ``folder``."""
    files = sorted(str(p) for p in (ROOT / "tests" / "data").rglob("*.jsonl"))
    for name, n, seed in (
        ("damaged-small.jsonl", 600, 1),
        ("damaged-mid.jsonl", 5000, 2),
        ("damaged-big.jsonl", 26000, 3),
    ):
        (folder / name).write_bytes(_damaged(n, seed))
        files.append(str(folder / name))
    (folder / "damaged-big-nodup.jsonl").write_bytes(_damaged(26000, 5, dups=False))
    files.append(str(folder / "damaged-big-nodup.jsonl"))
    (folder / "damaged-big-chained.jsonl").write_bytes(_damaged(26000, 6, dups=False, orphans=False))
    files.append(str(folder / "damaged-big-chained.jsonl"))
    (folder / "damaged-head-utf8.jsonl").write_bytes(_damaged(3000, 4, head_utf8=True))
    files.append(str(folder / "damaged-head-utf8.jsonl"))
    v1 = [_line({"type": "session", "id": "old", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/w"})]
    for i in range(50):
        m = _msg(i, None, "assistant" if i % 2 else "user")
        del m["id"], m["parentId"]
        v1.append(_line(m))
    (folder / "v1.jsonl").write_bytes(b"".join(v1))
    files.append(str(folder / "v1.jsonl"))
    (folder / "empty.jsonl").write_bytes(b"")
    files.append(str(folder / "empty.jsonl"))
    (folder / "badheader.jsonl").write_bytes(b"not json\n" + _line(_msg(0, None)))
    files.append(str(folder / "badheader.jsonl"))
    for extra in sys.argv[3:]:
        files.append(os.path.abspath(extra))
    return files


def run(checkout: str, files: list[str], cache: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(checkout), "XDG_CACHE_HOME": cache, "CTXD_INDEX_CACHE": "0"}
    done = subprocess.run(
        [sys.executable, __file__, "--digest", *files], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.splitlines()


def main() -> int:
    if sys.argv[1] == "--digest":
        for path in sys.argv[2:]:
            print(json.dumps({"file": os.path.basename(path), **digest(path)}, sort_keys=True, default=str))
        return 0
    with tempfile.TemporaryDirectory(prefix="ctxd-compare-") as tmp:
        files = corpus(Path(tmp))
        a = run(checkout(sys.argv[1]), files, tmp)
        b = run(checkout(sys.argv[2]), files, tmp)
    bad = 0
    for path, x, y in zip(files, a, b, strict=True):
        same = x == y
        bad += not same
        print(f"{'same' if same else 'DIFFERENT'}  {path}")
        if not same:
            dx, dy = json.loads(x), json.loads(y)
            print("   keys that differ:", [k for k in dx if dx.get(k) != dy.get(k)])
    print(f"{len(files) - bad} of {len(files)} files read the same")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
