"""``make bench-fidelity``: how much of what matters ctxd's offline summaries keep.

For every session (generated ones with planted probes from ``bench/fidelity_gen.py``, and the real pi, Claude
Code and Codex sessions under ``tests/data/``), at keepRecentTokens 20,000 and 4,000, the session's main path
is compacted up to three times, as an agent would (at a third, two thirds and the end of the path; each
compaction folds in the previous one), by ctxd's engine with the offline summariser, exactly as ``ctxd
compact`` writes it (must-keep patch included). Each summary is scored against the facts of the range it
summarised (``bench/fidelity_truth.py``): recall per category, the precision of Constraints / Key Decisions /
Next Steps (each bullet must trace to a user message, resp. the agent's own words), the Goal (the session's
first genuine request), and its size against what it replaces: the summary as ctxd writes it (must-keep patch
and ``<read-files>``/``<modified-files>`` blocks included) over what it summarised (the range's messages and
the previous summary), per case and per column, with a target of at most 3%. A Next Steps item naming the
first open item of the plan the agent keeps ("Next open plan item: ...") traces to what its write/edit and
todo-tool calls wrote; "Continue with the latest request (see Goal)" points to a request scored as such.

"commands" counts the commands that matter, not every command run (``fidelity_truth.matters``): builds,
tests, runs, installs, git commands that change something, and any command whose last run in the range
failed. Read-only exploration (``ls``, ``grep``/``rg``, ``find``, ``cat``/``sed -n``/``head``, ``git
status``/``log``/``diff``/``show``, ...) is not a target: a summary need not list it, search and expand
recover it from the session.

    python bench/fidelity.py [--json] [--sessions DIR ...] [--generated N] [--verbose]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import fidelity_gen  # noqa: E402
import fidelity_truth as ft  # noqa: E402

from ctxd.compaction.engine import compact  # noqa: E402
from ctxd.compaction.fileops import classify_call  # noqa: E402
from ctxd.compaction.plan import NothingToCompact, plan_compaction  # noqa: E402
from ctxd.compaction.settings import CompactionSettings  # noqa: E402
from ctxd.compaction.summarizers import OfflineSummarizer  # noqa: E402
from ctxd.context.rules import message_calls  # noqa: E402
from ctxd.context.tokens import estimate_tokens  # noqa: E402
from ctxd.tree.session import Session  # noqa: E402

KEEPS = (20_000, 4_000)
MAX_RATIO = 0.03
"""Target: the summaries of a column are at most this share of the tokens they summarise."""
POINTS = (1 / 3, 2 / 3, 1.0)
TARGETS: dict[str, tuple[str, float]] = {
    "files modified": (">=", 1.0),
    "files read": (">=", 1.0),
    "commands": (">=", 0.9),
    "requests": (">=", 1.0),
    "constraints": (">=", 0.95),
    "precision constraints": (">=", 0.95),
    "errors": (">=", 0.95),
    "goal = first request": (">=", 1.0),
    "not larger than input": (">=", 1.0),
    "injected kept out": (">=", 1.0),
    "constraint": (">=", 0.95),
}
LABELS = {
    "constraint": "constraints (planted)",
    "decision": "decisions (planted)",
    "next": "next step (planted)",
    "paste": "key line of a long paste",
}
ORDER = (
    "goal = first request",
    "requests",
    "constraints",
    "constraint",
    "files modified",
    "files read",
    "commands",
    "errors",
    "decision",
    "next",
    "paste",
    "injected kept out",
    "precision constraints",
    "precision decisions",
    "precision next steps",
    "not larger than input",
)


@dataclass
class Run:
    source: str
    session: str
    keep: int
    point: int
    summary: str
    score: ft.Score
    tokens_in: int
    tokens_out: int
    facts: int = 0
    patched: int = 0
    """Facts of the must-keep sheet, and how many the summary lacked (the engine appended them)."""
    looked: int = 0
    """Distinct read-only exploration commands of the range (not a target; see the module docstring)."""

    @property
    def ratio(self) -> float:
        return self.tokens_out / self.tokens_in if self.tokens_in else 0.0


@dataclass
class Totals:
    found: dict[str, int] = field(default_factory=dict)
    total: dict[str, int] = field(default_factory=dict)
    tokens_in: int = 0
    tokens_out: int = 0
    runs: int = 0
    facts: int = 0
    patched: int = 0
    patched_runs: int = 0
    looked: int = 0

    def add(self, run: Run) -> None:
        for kind, n in run.score.total.items():
            self.total[kind] = self.total.get(kind, 0) + n
            self.found[kind] = self.found.get(kind, 0) + run.score.found.get(kind, 0)
        self.tokens_in += run.tokens_in
        self.tokens_out += run.tokens_out
        self.runs += 1
        self.facts += run.facts
        self.patched += run.patched
        self.patched_runs += run.patched > 0
        self.looked += run.looked


def path_entries(source: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A pi header and the entries on the session's main path (a transcript's, mapped)."""
    session = Session.open(str(source))
    leaf = session.leaf()
    if leaf is None:
        return {}, []
    path = session.tree.path_to_root(leaf)
    entries = [dict(e) for e in session.file.entries(path)]
    header = {
        "type": "session",
        "version": 3,
        "id": session.file.session_id or "bench",
        "timestamp": str(session.file.header.get("timestamp") or "2026-01-01T00:00:00.000Z"),
        "cwd": session.file.cwd or "/work",
    }
    return header, entries


def _message(entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if entry.get("type") == "message" and isinstance(entry.get("message"), Mapping):
        return entry["message"]  # type: ignore[no-any-return]
    return None


def _write(path: Path, header: Mapping[str, Any], entries: Sequence[Mapping[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as f:
        f.write(json.dumps(header) + "\n")
        for entry in entries:
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")


def _cut_points(entries: Sequence[Mapping[str, Any]]) -> list[int]:
    """Entry counts after which to compact: the last assistant message at or before each point of the path."""
    points: list[int] = []
    for fraction in POINTS:
        k = max(1, round(len(entries) * fraction))
        while k > 1 and not ((m := _message(entries[k - 1])) is not None and m.get("role") == "assistant"):
            k -= 1
        if (m := _message(entries[k - 1])) is not None and m.get("role") == "assistant" and k not in points:
            points.append(k)
    if entries and len(entries) not in points and entries[-1].get("type") != "compaction":
        points.append(len(entries))
    return sorted(set(points))


def _prose(messages: Sequence[Mapping[str, Any]], role: str) -> str:
    parts: list[str] = []
    for m in messages:
        if m.get("role") != role:
            continue
        if role == "user":
            parts.extend(ft.prose_lines(ft.own_words(m)))
        else:
            for block in m.get("content") or ():
                if isinstance(block, Mapping) and block.get("type") == "text":
                    parts.extend(ft.prose_lines(str(block.get("text") or "")))
    return ft.norm("\n".join(parts))


def _calls(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """What each tool call of ``messages`` ran or touched (a Next Steps item may ask to check one)."""
    labels: list[str] = []
    for m in messages:
        if m.get("role") != "assistant":
            continue
        for block in m.get("content") or ():
            if isinstance(block, Mapping) and block.get("type") == "toolCall":
                command, ops = classify_call(str(block.get("name") or ""), block.get("arguments"))
                labels.append(command or (ops[0][1] if ops else str(block.get("name"))))
    return labels


def _written(messages: Sequence[Mapping[str, Any]]) -> str:
    """What the agent's write and edit calls wrote (a plan item in Next Steps traces to it)."""
    parts: list[str] = []
    for m in messages:
        if m.get("role") != "assistant":
            continue
        for _, arguments in message_calls(m):
            if not isinstance(arguments, Mapping):
                continue
            parts.extend(
                arguments[k] for k in ("content", "newText", "new_string") if isinstance(arguments.get(k), str)
            )
            for key in ("todos", "plan"):  # a todo tool's items
                items = arguments.get(key)
                for item in items if isinstance(items, list) else ():
                    if isinstance(item, Mapping):
                        parts.extend(str(item.get(k)) for k in ("content", "step") if item.get(k))
    return ft.norm("\n".join(parts))


async def compact_chain(
    source: str, name: str, header: dict[str, Any], entries: list[dict[str, Any]], keep: int, workdir: Path
) -> list[Run]:
    runs: list[Run] = []
    written: list[dict[str, Any]] = []
    done = 0
    parent_override: str | None = None
    path = workdir / f"{name}-{keep}.jsonl"
    for point_no, cut in enumerate(_cut_points(entries)):
        chunk = [dict(e) for e in entries[done:cut]]
        if not chunk:
            continue
        if parent_override is not None:
            chunk[0]["parentId"] = parent_override
        written.extend(chunk)
        done = cut
        _write(path, header, written)
        session = Session.open(str(path))
        settings = CompactionSettings(keepRecentTokens=keep)
        leaf = session.leaf_id()
        try:
            plan_compaction(session, keep_recent_tokens=keep, leaf_id=leaf)
        except NothingToCompact:
            continue
        outcome = await compact(session, settings, leaf_id=leaf, summarizer=OfflineSummarizer())
        plan = outcome.plan
        compaction = session.file.entry_by_id(outcome.entryId)
        written.append(compaction)
        parent_override = outcome.entryId
        summary = outcome.summary
        rng = [*plan.messagesToSummarize, *plan.turnPrefixMessages]
        truth = ft.range_truth(rng)
        so_far = [m for e in written if (m := _message(e)) is not None]
        cut_at = next((k for k, e in enumerate(written) if e.get("id") == plan.firstKeptEntryId), len(written))
        summarised = [m for e in written[:cut_at] if (m := _message(e)) is not None]
        first = next(
            (
                own
                for m in summarised
                if m.get("role") == "user" and (own := ft.own_words(m)).strip() and ft.genuine_request(own)
            ),
            None,
        )
        tokens_in = sum(estimate_tokens(m) for m in rng) + (
            math.ceil(len(plan.previousSummary) / 4) if plan.previousSummary else 0
        )
        score = ft.score(
            summary,
            truth,
            first_request=first,
            user_prose=_prose(so_far, "user"),
            agent_prose=_prose(so_far, "assistant"),
            calls=_calls(rng),
            tokens_in=tokens_in,
            written=_written(so_far),
        )
        ledger = compaction.get("details", {}).get("ctxd", {}).get("mustKeep", {})
        runs.append(
            Run(
                source,
                name,
                keep,
                point_no,
                summary,
                score,
                tokens_in,
                math.ceil(len(summary) / 4),
                int(ledger.get("facts", 0)),
                int(ledger.get("missing", 0)),
                len(truth.looked),
            )
        )
    return runs


def sessions_in(dirs: Sequence[Path]) -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    for d in dirs:
        for sub in ("pi", "claude", "codex"):
            for f in sorted((d / sub).glob("*.jsonl")):
                found.append((f"real-{sub}", f))
    return found


async def run_all(dirs: Sequence[Path], generated: int, workdir: Path) -> list[Run]:
    runs: list[Run] = []
    for index, (flavour, header, entries) in enumerate(fidelity_gen.sessions(generated)):
        for keep in KEEPS:
            runs += await compact_chain(f"gen-{flavour}", f"gen{index}-{flavour}", header, entries, keep, workdir)
    for source, path in sessions_in(dirs):
        header, entries = path_entries(path)
        if not entries:
            continue
        for keep in KEEPS:
            runs += await compact_chain(source, f"{source}-{path.stem}", header, entries, keep, workdir)
    return runs


def table(runs: Sequence[Run]) -> tuple[str, dict[str, Any]]:
    columns: dict[str, Totals] = {}
    for run in runs:
        group = "generated" if run.source.startswith("gen") else "real"
        columns.setdefault(f"{group} @{run.keep // 1000}k", Totals()).add(run)
    names = [n for n in ("generated @20k", "generated @4k", "real @20k", "real @4k") if n in columns]
    lines = [f"{'fidelity (offline summariser)':<28}" + "".join(f"{n:>18}" for n in names) + f"{'target':>10}  verdict"]
    report: dict[str, Any] = {}
    for kind in ORDER:
        cells = []
        worst: float | None = None
        for n in names:
            t = columns[n]
            total = t.total.get(kind, 0)
            if not total:
                cells.append(f"{'-':>18}")
                continue
            value = t.found.get(kind, 0) / total
            worst = value if worst is None else min(worst, value)
            cells.append(f"{100 * value:9.1f}% {t.found.get(kind, 0):>4}/{total:<4}")
            report.setdefault(kind, {})[n] = {"found": t.found.get(kind, 0), "total": total}
        if worst is None:
            continue
        op, bound = TARGETS.get(kind, ("", 0.0))
        verdict = ("met" if worst >= bound else "MISSED") if op else ""
        target = f"{op} {100 * bound:.0f}%" if op else ""
        label = LABELS.get(kind, kind)
        lines.append(f"{label:<28}" + "".join(cells) + f"{target:>10}  {verdict}")
    cells = []
    for n in names:
        t = columns[n]
        cells.append(f"{t.tokens_in:>9} -> {t.tokens_out:<5}")
        report.setdefault("tokens", {})[n] = {"in": t.tokens_in, "out": t.tokens_out, "summaries": t.runs}
    lines.append(f"{'tokens in -> out':<28}" + "".join(f"{c:>18}" for c in cells))
    ratios = {n: columns[n].tokens_out / max(1, columns[n].tokens_in) for n in names}
    worst_ratio = max(ratios.values(), default=0.0)
    report["ratio"] = ratios
    verdict = "met" if worst_ratio <= MAX_RATIO else "MISSED"
    lines.append(
        f"{'summary / summarised':<28}"
        + "".join(f"{100 * ratios[n]:17.2f}%" for n in names)
        + f"{'<= ' + format(100 * MAX_RATIO, '.0f') + '%':>10}  {verdict}"
    )
    lines.append(f"{'exploration (not a target)':<28}" + "".join(f"{columns[n].looked:>18}" for n in names))
    report["exploration"] = {n: columns[n].looked for n in names}
    lines.append(f"{'summaries':<28}" + "".join(f"{columns[n].runs:>18}" for n in names))
    cells = []
    for n in names:
        t = columns[n]
        cells.append(f"{t.patched}/{t.facts} in {t.patched_runs}")
        report.setdefault("must keep", {})[n] = {"facts": t.facts, "patched": t.patched, "summaries": t.patched_runs}
    lines.append(f"{'must-keep facts patched':<28}" + "".join(f"{c:>18}" for c in cells))
    report["cases"] = [
        {
            "session": r.session,
            "keep": r.keep,
            "compaction": r.point,
            "in": r.tokens_in,
            "out": r.tokens_out,
            "ratio": round(r.ratio, 4),
            "patched": r.patched,
        }
        for r in runs
    ]
    return "\n".join(lines), report


def cases(runs: Sequence[Run]) -> str:
    """One line per summary: its size against what it summarised."""
    lines = [f"{'case':<46}{'keep':>6}{'#':>3}{'tokens in':>11}{'out':>8}{'ratio':>8}{'patched':>9}"]
    for r in runs:
        lines.append(
            f"{r.session[:45]:<46}{r.keep // 1000:>5}k{r.point:>3}{r.tokens_in:>11}{r.tokens_out:>8}"
            f"{100 * r.ratio:7.2f}%{r.patched:>9}"
        )
    tokens_in = sum(r.tokens_in for r in runs)
    tokens_out = sum(r.tokens_out for r in runs)
    lines.append(f"{'all':<46}{'':>9}{tokens_in:>11}{tokens_out:>8}{100 * tokens_out / max(1, tokens_in):7.2f}%")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=Path, action="append", help="folder with pi/, claude/, codex/ sessions")
    parser.add_argument("--generated", type=int, default=9, help="generated sessions (3 per agent flavour)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="list what each summary missed")
    parser.add_argument("--dump", type=Path, help="write every summary to this folder")
    args = parser.parse_args()
    dirs = args.sessions or [HERE.parent / "tests" / "data"]
    with tempfile.TemporaryDirectory(prefix="ctxd-fidelity-") as tmp:
        runs = asyncio.run(run_all(dirs, args.generated, Path(tmp)))
    text, report = table(runs)
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
        for r in runs:
            (args.dump / f"{r.session}-{r.keep}-{r.point}.md").write_text(r.summary, encoding="utf-8")
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        return 0
    print(text)
    print()
    print(cases(runs))
    if args.verbose:
        for r in runs:
            for kind, missed in r.score.missed.items():
                for what in missed[:10]:
                    print(f"  {r.session} @{r.keep} #{r.point} {kind}: {what!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
