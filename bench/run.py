"""``make bench``: ctxd against its targets and against pi 1.5.2's own code, in the same run.

Sessions are generated once under bench/out/ (bench/gen.py, fixed seeds): three whose active context
is large (3k, 10k and 30k messages: long tool loops, rare compactions, 1M-token windows) and the
store sizes (1k, 10k, 100k entries and, for the open and memory targets, 1M). Each measurement runs in
a fresh process; ctxd's and pi's runs alternate, and the table shows medians across runs.

pi's figures come from its published code run in-process (bench/pi_bench.mjs) where pi's oracle is
set up: ``PI_ORACLE_DIR``, default ``../shared/pi-oracle`` beside the repository (see its README).
Without it pi's columns say "oracle not set up" and every ratio target says so too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
ORACLE = Path(os.environ.get("PI_ORACLE_DIR", REPO.parent / "shared" / "pi-oracle"))
PI_DIR = ORACLE / "node_modules" / "@earendil-works" / "pi-coding-agent"
NODE = ORACLE / "node_modules" / "node" / "bin" / "node"

# name -> (max entries, seed, gen.py options)
SESSIONS: dict[str, tuple[int, int, list[str]]] = {
    "ctx3k": (400_000, 1, ["--compact-at", "900000", "--steps", "20", "--context-messages", "3000"]),
    "ctx10k": (
        400_000,
        1,
        ["--compact-at", "900000", "--steps", "20", "--scale", "0.1", "--context-messages", "10000"],
    ),
    "ctx30k": (400_000, 1, ["--compact-at", "0", "--steps", "20", "--scale", "0.1", "--context-messages", "30000"]),
    "1k": (1_000, 0, []),
    "10k": (10_000, 0, []),
    "10k1m": (10_000, 1, ["--compact-at", "900000"]),
    "100k": (100_000, 0, []),
    "1m": (1_000_000, 0, []),
    "1mb": (500, 3, []),
}
SHAPES = {
    "ctx3k": "1M-token window, one compaction",
    "ctx10k": "1M-token window, small outputs",
    "ctx30k": "never compacted, small outputs",
    "10k": "200k window, frequent compactions",
    "10k1m": "1M-token window, one compaction",
    "100k": "200k window, frequent compactions",
}


def oracle_missing() -> str | None:
    if not (PI_DIR / "package.json").exists() or not NODE.exists():
        return f"oracle not set up ({ORACLE})"
    return None


def ensure(name: str) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.jsonl"
    if not path.exists():
        entries, seed, options = SESSIONS[name]
        tmp = path.with_suffix(".partial")
        cmd = [sys.executable, str(HERE / "gen.py"), str(tmp), "--entries", str(entries), "--seed", str(seed)]
        subprocess.run([*cmd, *options], check=True, stdout=subprocess.DEVNULL)
        tmp.rename(path)
    return path


CACHE = Path(tempfile.mkdtemp(prefix="ctxd-bench-cache-"))
"""The bench's own cache directory (the persistent index, listings): never the user's."""


def run_json(
    cmd: list[str], env: dict[str, str] | None = None, timeout: float = 1800, *, cold: bool = False
) -> dict[str, Any]:
    """Run one measuring process; ``cold``: without the persistent index (every open reads the file)."""
    env = {**(env or os.environ), "XDG_CACHE_HOME": str(CACHE)}
    if cold:
        env["CTXD_INDEX_CACHE"] = "0"
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, timeout=timeout)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def ctxd_context(path: Path, appends: int) -> dict[str, Any]:
    cmd = [sys.executable, str(HERE / "context_bench.py"), str(path), "--appends", str(appends)]
    return run_json(cmd, cold=True)


def pi_context(path: Path, appends: int) -> dict[str, Any] | None:
    if oracle_missing():
        return None
    env = {**os.environ, "PI_ORACLE_PI_DIR": str(PI_DIR)}
    return run_json([str(NODE), str(HERE / "pi_bench.mjs"), str(path), "--appends", str(appends)], env=env)


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per key, the median across runs (numbers), else the first run's value."""
    if not runs:
        return {}
    out: dict[str, Any] = {}
    for key, value in runs[0].items():
        values = [r.get(key) for r in runs]
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        out[key] = statistics.median(numbers) if len(numbers) == len(values) else value
    return out


def alternate(path: Path, rounds: int, appends: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(ctxd_context(path, appends))
        found = pi_context(path, appends)
        if found is not None:
            theirs.append(found)
    return medians(ours), (medians(theirs) if theirs else None)


# --- printing -----------------------------------------------------------------------------------------


class Table:
    """Rows of: what, ctxd, pi, ctxd/pi, limit, verdict."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.rows: list[tuple[str, str, str, str, str, str]] = []

    def row(
        self,
        label: str,
        ours: float | None,
        theirs: float | None = None,
        *,
        limit: float | None = None,
        ratio_limit: float | None = None,
        at_least: bool = False,
        pi_expected: bool = True,
        fmt: str = ".2f",
    ) -> None:
        missing = oracle_missing()
        pi = format(theirs, fmt) if theirs is not None else (missing or "") if pi_expected else "—"
        ratio = ours / theirs if ours is not None and theirs else None
        limits, verdicts = [], []
        if limit is not None:
            limits.append(f"{'>=' if at_least else '<='} {limit:g}")
            if ours is not None:
                ok = ours >= limit if at_least else ours <= limit
                verdicts.append("met" if ok else "MISSED")
        if ratio_limit is not None:
            limits.append(f"<= {ratio_limit:g}x pi")
            if ratio is not None:
                verdicts.append("met" if ratio <= ratio_limit else "MISSED")
            else:
                verdicts.append("no pi")
        if "MISSED" in verdicts:
            verdict = "MISSED"
        elif "no pi" in verdicts:
            verdict = "met, no pi" if "met" in verdicts else "no pi"
        else:
            verdict = "met" if verdicts else ""
        self.rows.append(
            (
                label,
                format(ours, fmt) if ours is not None else "—",
                pi,
                f"{ratio:.2f}" if ratio is not None else "",
                ", ".join(limits),
                verdict,
            )
        )

    def note(self, text: str) -> None:
        self.rows.append((text, "", "", "", "", ""))

    def print(self) -> None:
        print()
        print(self.title)
        head = ("", "ctxd", "pi 1.5.2", "ctxd/pi", "limit", "")
        widths = [max(len(r[k]) for r in [head, *self.rows] if r[1] or r[2]) for k in range(6)]
        print(f"{head[0]:<{widths[0]}}  {head[1]:>10}  {head[2]:>10}  {head[3]:>7}  {head[4]:<16} {head[5]}")
        for r in self.rows:
            if not r[1] and not r[2]:
                print(r[0])
                continue
            pi = r[2] if len(r[2]) <= 10 else r[2][:10]
            print(f"{r[0]:<{widths[0]}}  {r[1]:>10}  {pi:>10}  {r[3]:>7}  {r[4]:<16} {r[5]}")


# --- sections -------------------------------------------------------------------------------------------


def section_contexts(names: list[str], rounds: int, appends: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    table = Table(
        f"Large contexts: ctxd and pi 1.5.2 in-process, alternating, {rounds} runs each (medians; times in ms)"
    )
    for name in names:
        path = ensure(name)
        ours, theirs = alternate(path, rounds, appends)
        results[name] = {"ctxd": ours, "pi": theirs}
        p = theirs or {}
        table.note(
            f"{name}: {ours['entries']:,} entries, {ours['bytes'] / 1e6:.0f} MB, {ours['context_messages']:,} "
            f"context messages, {ours['context_tokens']:,} tokens ({SHAPES.get(name, '')})"
        )
        table.row("  open + index", ours["open_ms"], p.get("open_ms"), ratio_limit=0.25)
        table.row(
            "  context build, cold (first after open)", ours["build_cold_ms"], p.get("build_cold_ms"), ratio_limit=0.5
        )
        table.row(
            "  open + first build",
            ours["open_ms"] + ours["build_cold_ms"],
            p["open_ms"] + p["build_cold_ms"] if p else None,
        )
        table.row("  context build again, nothing new", ours["build_warm_ms"], p.get("build_warm_ms"), fmt=".3f")
        table.row("  full rebuild (before: every request)", ours["full_rebuild_ms"], p.get("request_ms"))
        table.row(
            "  build after 1 append, p50", ours["after_append_p50_ms"], p.get("after_append_p50_ms"), limit=1, fmt=".3f"
        )
        table.row("  build after 1 append, p99", ours["after_append_p99_ms"], p.get("after_append_p99_ms"), fmt=".3f")
        table.row("  compaction plan, cold", ours["plan_cold_ms"], p.get("plan_cold_ms"), ratio_limit=0.5)
        if "build_kept_index_ms" in ours:
            table.row(
                "  context build, reopened with the kept index", ours["build_kept_index_ms"], p.get("build_cold_ms")
            )
            table.row(
                "  compaction plan, reopened with the kept index", ours["plan_kept_index_ms"], p.get("plan_cold_ms")
            )
        table.row("  compaction plan, warm", ours["plan_warm_ms"], p.get("plan_warm_ms"), limit=5, ratio_limit=0.5)
        table.row("  compaction plan after appends", ours["plan_after_append_ms"], None, limit=5, pi_expected=False)
        table.row("  peak RSS (MB), after open", ours["rss_open_mb"], p.get("rss_open_mb"), fmt=".0f")
        table.row("  peak RSS (MB), everything", ours["rss_mb"], p.get("rss_mb"), fmt=".0f")
    table.note("  (pi's 'full rebuild' column: its per-request projection + size, as AgentSession.prepareRequest does)")
    table.print()
    return results


DAEMON = [
    ("spawn_p50_ms", "spawn -> initialize reply (ms, p50)", "<=", 300),
    ("spawn_first_request_p50_ms", "spawn -> first request answered (ms, p50)", "<=", 250),
    ("append_p50_ms", "session/append round trip (ms, p50)", "<=", 1),
    ("append_pipelined_per_s", "session/append, one connection (/s)", ">=", 3000),
    ("context_build_p50_ms", "context/build, compacted 100k (ms, p50)", "<=", 15),
    ("external_p50_ms", "external append -> didChange (ms, p50)", "<=", 50),
    ("external_p99_ms", "external append -> didChange (ms, p99)", "<=", 150),
    ("idle_cpu_percent", "idle CPU, 1,000 watched files (%)", "<=", 1),
]


def section_daemon(big: Path, contexts: list[Path]) -> dict[str, Any]:
    cmd = [sys.executable, str(HERE / "daemon_bench.py"), str(big), *[str(c) for c in contexts]]
    r = run_json(cmd)
    table = Table("Daemon: a real `ctxd serve` over JSON-RPC (round trips measured by the client)")
    for key, label, op, bound in DAEMON:
        if r.get(key) is not None:
            table.row(label, r[key], limit=bound, at_least=op == ">=", pi_expected=False)
    for name, found in r.get("contexts", {}).items():
        table.note(f"{name}: {found['context_messages']:,} messages, after each session/append of one message:")
        table.row("  context/build whole (ms, p50)", found["whole_p50_ms"], pi_expected=False)
        table.row("  context/build whole, no bodies (ms, p50)", found["bare_p50_ms"], pi_expected=False)
        table.row("  context/build since the last (ms, p50)", found["since_p50_ms"], limit=1, pi_expected=False)
        table.row("  context/build since the last (ms, p99)", found["since_p99_ms"], pi_expected=False)
        table.note(f"  answers: whole {found['whole_kb']:,.0f} KB, since the last {found['since_kb']:,.1f} KB")
    table.print()
    return r


STORE = [
    ("open_s", "open + index (s, median of 5)", {"100k": ("<=", 0.4), "10k": ("<=", 0.060)}),
    ("rss_mb", "peak RSS of open (MB)", {}),
    ("context_cold_ms", "build_context, cold (ms)", {}),
    ("context_warm_ms", "build_context, warm (ms)", {}),
    ("refresh_one_ms", "refresh 1 appended entry (ms)", {"*": ("<=", 1)}),
    ("append_per_s", "appends/s (flush)", {"*": (">=", 20_000)}),
    ("plan_warm_ms", "dry-run plan, warm (ms)", {"100k": ("<=", 20)}),
    ("offline_summary_s", "offline summary, whole path (s)", {"100k": ("<=", 1.0)}),
    ("compaction_path_ms", "compaction path w/o model (ms)", {"*": ("<=", 20)}),
]


def section_store(sizes: list[str]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    table = Table("Store: generated sessions (the default shape: 200k window, frequent compactions)")
    for size in sizes:
        path = ensure(size)
        opened = run_json([sys.executable, str(HERE / "store_bench.py"), str(path), "open"], cold=True)
        rest = run_json([sys.executable, str(HERE / "store_bench.py"), str(path), "all"], cold=True)
        r = {**rest, **opened}
        results[size] = r
        table.note(f"{size}: {r['bytes'] / 1e6:.0f} MB")
        for key, label, targets in STORE:
            if r.get(key) is None:
                continue
            op, bound = targets.get(size) or targets.get("*") or ("", None)
            table.row(f"  {label}", r[key], limit=bound, at_least=op == ">=", pi_expected=False, fmt=".3f")
    table.print()
    return results


def section_open(names: list[str], rounds: int) -> dict[str, Any]:
    """Open + index against pi, reopening from the persistent index, and a million entries."""
    results: dict[str, Any] = {}
    table = Table(f"Open: the first read (then kept), reopening unchanged and appended; pi alternating, {rounds} runs")
    for name in names:
        path = ensure(name)
        ours: list[dict[str, Any]] = []
        theirs: list[dict[str, Any]] = []
        for _ in range(rounds):
            ours.append(run_json([sys.executable, str(HERE / "open_bench.py"), str(path), "first"]))
            if name != "1m":  # pi would read 2 GB into memory
                found = pi_context(path, 10)
                if found is not None:
                    theirs.append(found)
        first = medians(ours)
        reopen = run_json([sys.executable, str(HERE / "open_bench.py"), str(path), "reopen"])
        appended = run_json([sys.executable, str(HERE / "open_bench.py"), str(path), "appended"])
        pi = medians(theirs) if theirs else {}
        results[name] = {"first": first, "reopen": reopen, "appended": appended, "pi": pi}
        table.note(f"{name}: {first['entries']:,} entries, {first['bytes'] / 1e6:,.0f} MB")
        if name == "1m":
            table.row("  open + index, first (s)", first["open_ms"] / 1000, limit=2, pi_expected=False)
            limit = 0.5 * first["bytes"] / 1e6
            table.row("  peak RSS of the open (MB)", first["rss_mb"], limit=limit, pi_expected=False, fmt=".0f")
        else:
            table.row("  open + index, first (ms)", first["open_ms"], pi.get("open_ms"), ratio_limit=0.25)
            table.row("  peak RSS of the open (MB)", first["rss_mb"], pi.get("rss_open_mb"), fmt=".0f")
        for label, r in (("unchanged", reopen), ("100 entries appended", appended)):
            how = f"read {r['read_bytes'] / 1e3:,.0f} KB" + ("" if r["restored"] else ", NOT from the index")
            table.row(
                f"  reopen, {label} (ms; {how})", r["open_ms"], limit=30 if name == "100k" else None, pi_expected=False
            )
        if "open_build_ms" in reopen:
            table.row(
                "  reopen unchanged + first build (ms)",
                reopen["open_build_ms"],
                limit=20 if name == "10k" else None,
                pi_expected=False,
            )
    table.print()
    return results


def section_listing() -> dict[str, Any]:
    source = ensure("1mb")
    r = run_json([sys.executable, str(HERE / "listing_bench.py"), str(source), str(ensure("100k"))])
    table = Table("Listing: session/list through a daemon (and list_sessions in-process)")
    many, big = r["many_daemon"], r["big_daemon"]
    table.note(f"1,000 files of {r['many_file_mb']:.1f} MB:")
    table.row("  first listing (ms)", many["cold_ms"], pi_expected=False)
    table.row("  warm listing (ms, p50 of 10)", many["warm_p50_ms"], limit=100, pi_expected=False)
    table.row("  after one file grew (ms)", many["grown_ms"], limit=100, pi_expected=False)
    table.row("  warm, in-process list_sessions (ms)", r["many_in_process"]["warm_p50_ms"], pi_expected=False)
    table.note(f"one {r['big_mb']:.0f} MB session in a root:")
    table.row("  first listing (ms)", big["cold_ms"], pi_expected=False)
    table.row("  warm listing (ms, p50 of 10)", big["warm_p50_ms"], pi_expected=False)
    table.row("  after a line was appended (ms)", big["grown_ms"], pi_expected=False)
    table.print()
    return r


def section_cold_processes(sizes: list[str], rounds: int) -> dict[str, Any]:
    """Whole processes as users start them (bench/cold_bench.py): ``ctxd context --json`` against pi's oracle
    on each of ``sizes``, and (with the first) ``ctxd hook PreCompact`` on a 3 MB transcript written by the real
    Claude Code."""
    results: dict[str, Any] = {}
    table = Table(f"Cold processes: a new process per run, wall ms, medians of {rounds} alternating runs")
    for size in sizes:
        path = ensure(size)
        cmd = [sys.executable, str(HERE / "cold_bench.py"), str(path), "--rounds", str(rounds)]
        if size != sizes[0]:
            cmd.append("--no-hook")
        r = results[size] = run_json(cmd, {**os.environ, "PI_ORACLE_DIR": str(ORACLE)})
        table.note(f"load {r['load_start'][0]:.1f} at the start, {r['load_end'][0]:.1f} at the end (2 cores, shared)")
        table.note(f"{size}: {r['bytes'] / 1e6:,.0f} MB; pi: its oracle's whole process (Node, open, build, and more)")
        label = f"  ctxd context --json, whole process, {size} entries"
        table.row(label, r["context_cold_ms"], r["pi_oracle_ms"], ratio_limit=0.5, fmt=".0f")
        table.row("  the same, persistent index kept", r["context_warm_ms"], r["pi_oracle_ms"], fmt=".0f")
    r = results[sizes[0]]
    if r["hook_precompact_ms"] is None:
        table.note("  ctxd hook PreCompact: Claude Code is not installed (scripts/claude-code.sh): NOT MEASURED")
    else:
        table.note(f"Claude Code transcript of {r['transcript_bytes'] / 1e6:.1f} MB (made by Claude Code 2.1.330):")
        table.row(
            "  ctxd hook PreCompact, 3 MB Claude transcript (ms)",
            r["hook_precompact_ms"],
            limit=150,
            pi_expected=False,
            fmt=".0f",
        )
        table.row("  the same, CPU time (user + system, ms)", r["hook_precompact_cpu_ms"], pi_expected=False, fmt=".0f")
        table.row("  python -c pass, for scale (ms)", r["python_pass_ms"], pi_expected=False, fmt=".0f")
    table.print()
    return results


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--contexts", default="ctx3k,ctx10k,ctx30k,10k,10k1m,100k", help="sessions for the context section ('' to skip)"
    )
    parser.add_argument("--sizes", default="1k,10k,100k", help="store sizes ('' to skip)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating ctxd/pi runs per session")
    parser.add_argument("--appends", type=int, default=200, help="appends timed per run")
    parser.add_argument(
        "--opens", default="ctx3k,ctx10k,ctx30k,10k,10k1m,100k,1m", help="sessions for the open section ('' to skip)"
    )
    parser.add_argument("--no-daemon", action="store_true", help="skip the daemon's benchmark")
    parser.add_argument("--no-listing", action="store_true", help="skip the listing benchmark")
    parser.add_argument("--no-cold", action="store_true", help="skip the whole-process cold paths")
    parser.add_argument("--colds", default="100k,10k1m", help="sessions for the whole-process cold paths")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    args = parser.parse_args()
    started = time.time()
    load = os.getloadavg()
    from ctxd.store import native

    print(
        f"ctxd bench: {os.cpu_count()} cores, load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at start; "
        f"pi 1.5.2: {oracle_missing() or ORACLE}; scanner: {native.describe()}"
    )
    report: dict[str, Any] = {"load_start": load, "scanner": native.describe()}
    names = [n for n in args.contexts.split(",") if n]
    sizes = [s for s in args.sizes.split(",") if s]
    steps: list[tuple[str, Callable[[], Any]]] = []
    opens = [n for n in args.opens.split(",") if n]
    if names:
        steps.append(("contexts", lambda: section_contexts(names, args.rounds, args.appends)))
    if opens:
        steps.append(("open", lambda: section_open(opens, args.rounds)))
    if not args.no_listing:
        steps.append(("listing", section_listing))
    if not args.no_daemon:
        big = ensure("100k" if "100k" in sizes else (sizes[-1] if sizes else "10k"))
        steps.append(("daemon", lambda: section_daemon(big, [ensure(n) for n in names])))
    if sizes:
        steps.append(("store", lambda: section_store(sizes)))
    if not args.no_cold:
        colds = [n for n in args.colds.split(",") if n]
        steps.append(("cold", lambda: section_cold_processes(colds, max(args.rounds, 5))))
    for key, step in steps:
        report[key] = step()
    report["load_end"] = os.getloadavg()
    print(
        f"\n{time.time() - started:.0f} s; load {report['load_end'][0]:.1f} at the end "
        "(2 cores shared with other work: figures are noisy, medians of alternating runs)"
    )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    shutil.rmtree(CACHE, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
