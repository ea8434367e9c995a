"""Two ctxd compactions of the real before-compaction.jsonl, the way a ctxd user would have them.

1. the first 359 lines (pi cut its first compaction there) compacted by ctxd's offline summariser;
2. pi's next 268 messages (lines 361-628) appended after ctxd's compaction;
3. compacted again (pi made its second compaction at line 629).
Prints the two summaries into OUT/summary1.md and OUT/summary2.md with the plans' figures.
Run with the ctxd tree to judge first on sys.path:
    python make_life.py OUT            # the installed ctxd
    PYTHONPATH=TREE:SITE python -S make_life.py OUT -S   # another checkout (bypasses an editable install)
"""
import asyncio, json, shutil, subprocess, sys
from pathlib import Path
import ctxd
from ctxd.tree.session import Session

src = Path(__file__).resolve().parents[3] / "tests" / "data" / "pi" / "before-compaction.jsonl"
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
lines = src.read_text().splitlines(keepends=True)
life = out / "life.jsonl"
life.write_text("".join(lines[:359]))
def compact(n):
    r = subprocess.run([sys.executable, *(["-S"] if "-S" in sys.argv else []), "-m", "ctxd", "compact", str(life), "--json"],
                       capture_output=True, text=True, check=True)
    d = json.loads(r.stdout)
    (out / f"summary{n}.md").write_text(d["summary"])
    print(n, {k: d[k] for k in ("firstKeptEntryId", "tokensBefore", "tokensAfter")}, "summary chars", len(d["summary"]))
compact(1)
s = Session.open(str(life))
entries = [json.loads(l) for l in lines[360:628]]
s.append([{"type": "message", "message": e["message"]} for e in entries])
s.close()
compact(2)
print("ctxd from", ctxd.__file__)
