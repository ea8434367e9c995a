"""``make bench-soak``: a real ``ctxd serve`` that runs for a while, touching thousands of sessions.

A daemon with the default ``openSessions`` limits (and the watcher, the history indexer, the offline
summariser) serves a client that, for ``--seconds``, keeps touching distinct sessions (``session/open``,
``context/build``, ``session/tree``, ``session/stats``, ``context/composition``), searches the history,
appends turns and compacts, from four concurrent request loops. The sessions are generated pi sessions
(bench/gen.py: 21 templates of 50 to 1,500 entries, 0.1 to 3 MB, and for 4% of them three of 6,000
entries, 12 MB), each copied
under a fresh header the first time it is touched, so the daemon sees a new file every time (the
watcher announces it, the indexer indexes it). The daemon's RSS is sampled every second
(``/proc/PID/status``) and reported every ``--every`` seconds with the number of distinct sessions
touched.

The distinct sessions are made at a pace that reaches ``--sessions`` by 85% of the run; the rest of it
goes back to sessions already made. It passes when ``--sessions`` distinct sessions were touched, the
RSS stayed within ``--budget-mb`` (default 300) and did not grow over the second half of the run (the
least-squares line through its samples rises by at most ``--growth-mb``, default 20: the RSS moves
by 20 to 40 MB as big sessions open and close, and a leak of one session's worth per minute rises by
more): exit 0, else 1.
``--json FILE`` writes every sample.

    python bench/soak.py [--sessions 2000] [--seconds 900] [--budget-mb 300] [--work DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen import generate

from ctxd.client import ClientError, CtxdClient, ServerExitedError

TEMPLATES = 24
BIG = 3
"""Templates of 6,000 entries (about 12 MB): the byte budget, not the count, is what holds them."""
BIG_SHARE = 0.04
"""The share of new sessions made from them (the rest: 50 to 1,500 entries, 0.1 to 3 MB)."""
WORDS = ["loader", "parser", "cache", "token", "session", "writer", "budget", "snapshot", "index", "render"]


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """The daemon's resident set (``field``: VmRSS, or RssAnon, RssFile), in MB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def templates(folder: Path) -> list[Path]:
    """The generated templates (made once, kept in ``folder`` for the next run)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(30)
    out = []
    for k in range(TEMPLATES):
        entries = 6000 if k < BIG else int(math.exp(rng.uniform(math.log(50), math.log(1500))))
        path = folder / f"t{k:02d}-{entries}.jsonl"
        if not path.exists():
            generate(str(path) + ".tmp", entries, seed=1000 + k)
            os.replace(str(path) + ".tmp", path)
        out.append(path)
    return out


class Corpus:
    """Distinct sessions made on first touch: a template's entries under a fresh header."""

    def __init__(self, root: Path, sources: list[Path], rng: random.Random) -> None:
        self.root = root
        self.sources = [(p.read_bytes().split(b"\n", 1)) for p in sources]
        self.rng = rng
        self.made: list[str] = []

    def new(self) -> str:
        k = len(self.made)
        big = self.rng.random() < BIG_SHARE
        head, rest = self.sources[self.rng.randrange(BIG) if big else self.rng.randrange(BIG, len(self.sources))]
        header = json.loads(head)
        header["id"] = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        header["cwd"] = f"/home/dev/project{k % 40}"
        folder = self.root / f"--home-dev-project{k % 40}--"
        folder.mkdir(exist_ok=True)
        path = folder / f"2026-01-01T00-00-00-000Z_{header['id']}.jsonl"
        path.write_bytes(json.dumps(header, separators=(",", ":")).encode() + b"\n" + rest)
        self.made.append(str(path))
        return str(path)

    def pick(self, fresh: float) -> str:
        """A new session with probability ``fresh`` (or while few exist), else a recent one more often
        than an old one (an editor goes back to what it just showed)."""
        if not self.made or self.rng.random() < fresh:
            return self.new()
        n = len(self.made)
        back = min(n - 1, int(self.rng.expovariate(1 / 30)))
        return self.made[n - 1 - back]


class Pace:
    """How often a request makes a new session: steadily, so that the target is reached at 85% of the
    run (the rest goes back to sessions already made), as many as the next ten seconds need at the rate
    requests were answered over the last half minute (searches slow down as the history index grows)."""

    def __init__(self, target: int, seconds: float) -> None:
        self.target = target
        self.start = time.monotonic()
        self.due = self.start + 0.85 * seconds
        self.window = [(self.start, 0)]

    def fresh(self, made: int, answered: int) -> float:
        now = time.monotonic()
        if now - self.window[-1][0] >= 30:
            self.window = [*self.window[-1:], (now, answered)]
        rate = (answered - self.window[0][1] + 1) / max(1.0, now - self.window[0][0])
        wanted = self.target * min(1.0, (now + 10 - self.start) / (self.due - self.start))
        return min(0.95, max(0.05, (wanted - made) / max(1.0, rate * 10)))


async def loop(
    client: CtxdClient, corpus: Corpus, rng: random.Random, stop: float, pace: Pace, counts: dict[str, int]
) -> None:
    while time.monotonic() < stop:
        fresh = pace.fresh(len(corpus.made), counts["ok"] + counts["errors"])
        path = corpus.pick(fresh)
        roll = rng.random()
        try:
            if roll < 0.30:
                await client.request("context/build", {"session": path})
            elif roll < 0.45:
                await client.request("session/tree", {"session": path})
            elif roll < 0.55:
                await client.request("session/open", {"session": path})
            elif roll < 0.62:
                await client.request("session/stats", {"session": path})
            elif roll < 0.67:
                await client.request("context/composition", {"session": path})
            elif roll < 0.80:
                query = " ".join(rng.sample(WORDS, rng.choice([1, 1, 2])))
                await client.request("history/search", {"query": query, "limit": 20})
            elif roll < 0.97:
                messages = [
                    {"role": "user", "content": f"step {counts['append']}: " + "u" * rng.randint(50, 3000)},
                    {"role": "assistant", "content": [{"type": "text", "text": "a" * rng.randint(50, 3000)}]},
                ]
                await client.request("session/append", {"session": path, "messages": messages})
                counts["append"] += 1
            else:
                await client.request("compact", {"session": path})
                counts["compact"] += 1
            counts["ok"] += 1
        except ServerExitedError:
            raise
        except ClientError as exc:  # nothing to compact, mostly: an answer, not a failure of the daemon
            counts["errors"] += 1
            counts.setdefault(f"error {exc.code}", 0)
            counts[f"error {exc.code}"] += 1


async def run(args: argparse.Namespace) -> int:
    work = Path(args.work or tempfile.mkdtemp(prefix="ctxd-soak-"))
    cache = Path(args.templates)
    sources = templates(cache)
    root = work / "sessions"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXD_")}
    env.update(
        XDG_DATA_HOME=str(work / "data"),
        XDG_CACHE_HOME=str(work / "cache"),
        CTXD_CONFIG=str(work / "no-config.json"),
        PI_CODING_AGENT_DIR=str(work / "pi"),
        CLAUDE_CONFIG_DIR=str(work / "claude"),
        CODEX_HOME=str(work / "codex"),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    for folder in ("data", "cache"):
        shutil.rmtree(work / folder, ignore_errors=True)
    options: dict[str, Any] = {"roots": [str(root)], "transcriptRoots": [], "archiveRoots": [], "opencodeDatabases": []}
    log = open(args.log, "wb") if args.log else None  # noqa: SIM115 (open for the daemon's whole run)
    if args.log:
        env["CTXD_LOG_LEVEL"] = "DEBUG"
    options.update(json.loads(args.options))
    client = CtxdClient(initialization_options=options, env=env, stderr=log or asyncio.subprocess.DEVNULL)
    await client.start()
    assert client.process is not None
    pid = client.process.pid
    rng = random.Random(args.seed)
    corpus = Corpus(root, sources, rng)
    counts = {"ok": 0, "errors": 0, "append": 0, "compact": 0}
    pace = Pace(args.sessions, args.seconds)
    samples: list[dict[str, float]] = []
    started = time.monotonic()
    stop = started + args.seconds

    async def sample() -> None:
        shown = 0.0
        while time.monotonic() < stop:
            t = time.monotonic() - started
            anon = round(rss_mb(pid, "RssAnon"), 1)
            samples.append({"t": round(t, 1), "rss": round(rss_mb(pid), 1), "anon": anon, "sessions": len(corpus.made)})
            if t - shown >= args.every:
                shown = t
                print(
                    f"{t:7.0f} s  {len(corpus.made):5d} sessions  RSS {samples[-1]['rss']:6.1f} MB "
                    f"(anonymous {anon:6.1f})  {counts}",
                    flush=True,
                )
            await asyncio.sleep(1.0)

    try:
        await asyncio.gather(
            sample(),
            *(loop(client, corpus, random.Random(args.seed + k), stop, pace, counts) for k in range(4)),
        )
        samples.append(
            {"t": round(time.monotonic() - started, 1), "rss": round(rss_mb(pid), 1), "sessions": len(corpus.made)}
        )
    finally:
        await client.close()
    rss = [s["rss"] for s in samples]
    half = samples[len(samples) // 2 :]
    # The growth over the second half: the least-squares line through its samples (the RSS moves by
    # tens of MB as big sessions open and close; a line through ~450 samples is what it tends to).
    fit = statistics.linear_regression([s["t"] for s in half], [s["rss"] for s in half])
    middle = fit.intercept + fit.slope * half[0]["t"]
    end = fit.intercept + fit.slope * half[-1]["t"]
    touched = len(corpus.made)
    peak = max(rss)
    growth = end - middle
    ok = touched >= args.sessions and peak <= args.budget_mb and growth <= args.growth_mb
    print(
        f"\n{touched} distinct sessions touched in {args.seconds:.0f} s ({counts['ok']} answers, "
        f"{counts['append']} appends, {counts['compact']} compactions, {counts['errors']} error answers)\n"
        f"RSS: peak {peak:.1f} MB (budget {args.budget_mb} MB); second half, fitted: {middle:.1f} MB after the "
        f"middle, {end:.1f} MB at the end ({growth:+.1f} MB; at most +{args.growth_mb} MB)\n"
        f"{'PASS' if ok else 'FAIL'}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"samples": samples, "counts": counts, "touched": touched}, indent=1))
    if not args.keep and not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=2000, help="distinct sessions to touch (default 2000)")
    parser.add_argument("--seconds", type=float, default=900.0, help="how long to run (default 900)")
    parser.add_argument("--budget-mb", type=float, default=300.0, help="the RSS it must stay within (default 300)")
    parser.add_argument("--growth-mb", type=float, default=20.0, help="the growth allowed over the second half")
    parser.add_argument("--every", type=float, default=30.0, help="report every this many seconds")
    parser.add_argument("--work", help="the folder to work in (default: a temporary one, removed after)")
    parser.add_argument("--templates", default=str(Path(__file__).resolve().parent.parent / ".cache" / "soak"))
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--json", help="write every sample to this file")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument("--log", help="the daemon's log (DEBUG) goes to this file")
    parser.add_argument(
        "--options", default="{}", help='more initializationOptions, e.g. \'{"openSessions": {"maxCount": 8}}\''
    )
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
