"""``make bench-fidelity``: how much of what matters ctxd's offline summaries keep, on real sessions.

Every session's main path (without the agent's own compactions) is compacted up to three times, as an agent
would (at a third, two thirds and the end of the path; each compaction folds the previous one in), at
keepRecentTokens 20,000 and 4,000, by ctxd's
engine exactly as ``ctxd compact`` writes a summary with no model configured (the offline summariser at its
default budget, 5,000 tokens; the must-keep patch included). Each summary is scored against the facts of the
range it summarised, found by the bench's own truth (``bench/fidelity_truth.py``, ``fidelity_text.py``,
``fidelity_shell.py``; scoring in ``fidelity_score.py``), which imports nothing from ctxd: ctxd only opens
the sessions and runs the compaction measured.

The sessions: the real pi, Claude Code and Codex sessions under ``tests/data/`` and, when present beside the
repository, ``../shared/reference/sessions/`` (the same layout; a file already read is skipped), the Claude
Code transcripts of ``../shared/judge/sessions/`` and local ones in ``../devsessions/`` (never committed), each
cut before its first ``compact_boundary`` line (what the agent's own compaction summarised); and generated
sessions with planted probes (``bench/fidelity_gen.py``).

Targets, on real sessions: key commands, constraints and errors >= 95%. Reported besides: requests, files,
the goal, the planted probes, and each summary's size in tokens (characters / 4) against the default budget
of 5,000 and against what it replaced (the range's messages and the previous summary). For a missed fact of a
target category the report says why (``fidelity_score.reason``), and which kept facts only the must-keep patch
supplied.

    python bench/fidelity.py [--json] [--sessions DIR ...] [--cut PATH ...] [--generated N] [--missed N]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("CTXD_INDEX_CACHE", "0")  # the bench's temporary copies leave no index behind
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import fidelity_gen  # noqa: E402
import fidelity_report  # noqa: E402
import fidelity_score as fs  # noqa: E402
import fidelity_text as tx  # noqa: E402
import fidelity_truth as ft  # noqa: E402

from ctxd.compaction.cut.plan import NothingToCompact, plan_compaction  # noqa: E402
from ctxd.compaction.engine import compact  # noqa: E402
from ctxd.compaction.settings import CompactionSettings  # noqa: E402
from ctxd.compaction.summary import OfflineSummarizer  # noqa: E402
from ctxd.context.tokens import estimate_tokens  # noqa: E402
from ctxd.tree.session import Session  # noqa: E402

KEEPS = (20_000, 4_000)
POINTS = (1 / 3, 2 / 3, 1.0)
FLAVOURS = ("pi", "claude", "codex")
BOUNDARY = "compact_boundary"
UNBOUNDED = 10**7
"""The summariser's budget for the run that tells a fact cut by the budget from one never written."""
PATCH_HEADING = "## Must keep\n"


@dataclass
class Source:
    name: str
    path: Path
    cut: bool = False
    """Cut before its first ``compact_boundary`` line."""


@dataclass
class Run:
    source: str
    """``real`` or ``generated``"""
    session: str
    keep: int
    point: int
    summary: str
    score: fs.Score
    tokens_in: int
    tokens_out: int
    facts: int = 0
    patched: int = 0
    """Facts of the must-keep sheet, and how many the summary lacked (the engine appended them)."""
    patch_only: dict[str, int] = field(default_factory=dict)
    """Target facts kept only by the must-keep patch, per kind."""
    reasons: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    """kind -> (probe, text, reason) of each missed fact of a target category (and of its ``(all so far)``)"""
    looked: int = 0
    tracker: int = 0


def sources(dirs: Sequence[Path], cuts: Sequence[Path]) -> list[Source]:
    """The sessions of ``dirs`` (``pi/``, ``claude/``, ``codex/`` under each) and the transcripts of ``cuts``
    (files, or folders of ``*.jsonl``), each file once."""
    found: list[Source] = []
    for d in dirs:
        for flavour in FLAVOURS:
            found += [Source(f"{flavour}/{f.stem}", f) for f in sorted((d / flavour).glob("*.jsonl"))]
    for c in cuts:
        for f in sorted(c.glob("*.jsonl")) if c.is_dir() else [c]:
            found.append(Source(f"{_flavour(f)}/{f.stem}", f, cut=True))
    return found


def default_inputs() -> tuple[list[Path], list[Path]]:
    repo = HERE.parent
    dirs = [repo / "tests" / "data", repo.parent / "shared" / "reference" / "sessions"]
    cuts = [repo.parent / "shared" / "judge" / "sessions", repo.parent / "devsessions"]
    return [d for d in dirs if d.is_dir()], [c for c in cuts if c.exists()]


def _flavour(path: Path) -> str:
    with path.open(encoding="utf-8", errors="replace") as f:
        first = f.readline()
    if '"session_meta"' in first:
        return "codex"
    return "pi" if first.lstrip().startswith('{"type":"session"') else "claude"


def _cut_text(path: Path) -> bytes:
    """The file's lines before its first ``compact_boundary`` line (all of it without one)."""
    out: list[bytes] = []
    with path.open("rb") as f:
        for line in f:
            if BOUNDARY.encode() in line:
                break
            out.append(line)
    return b"".join(out)


def path_entries(source: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A pi header and the entries on the session's main path (a transcript's, mapped), without the agent's own
    compactions: ctxd compacts the whole path, each compaction folding its previous one in."""
    session = Session.open(str(source))
    leaf = session.leaf()
    if leaf is None:
        return {}, []
    entries = [dict(e) for e in session.file.entries(session.tree.path_to_root(leaf))]
    entries = [e for e in entries if e.get("type") != "compaction"]
    for before, entry in itertools.pairwise(entries):
        entry["parentId"] = before.get("id")
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
    """Entry counts after which to compact: the last assistant message at or before a third and two thirds of
    the path, and the path's end."""
    points: list[int] = []
    for fraction in POINTS[:-1]:
        k = max(1, round(len(entries) * fraction))
        while k > 1 and not ((m := _message(entries[k - 1])) is not None and m.get("role") == "assistant"):
            k -= 1
        if (m := _message(entries[k - 1])) is not None and m.get("role") == "assistant":
            points.append(k)
    return sorted({*points, len(entries)}) if entries else []


async def _unbounded(
    header: dict[str, Any], written: list[dict[str, Any]], leaf: str | None, keep: int, path: Path
) -> str:
    """The summary the same engine writes for the same range with no size limit (see :data:`UNBOUNDED`)."""
    _write(path, header, written)
    session = Session.open(str(path))
    outcome = await compact(
        session,
        CompactionSettings(keep_recent_tokens=keep),
        leaf_id=leaf,
        summarizer=OfflineSummarizer(max_tokens=UNBOUNDED, scale=False),
    )
    return outcome.summary


async def compact_chain(
    source: str, name: str, header: dict[str, Any], entries: list[dict[str, Any]], keep: int, workdir: Path
) -> list[Run]:
    runs: list[Run] = []
    written: list[dict[str, Any]] = []
    done = 0
    parent_override: str | None = None
    stem = re.sub(r"[^\w.-]+", "_", name)
    path = workdir / f"{stem}-{keep}.jsonl"
    root = str(header.get("cwd") or "") or None
    ranges: list[Mapping[str, Any]] = []
    """Every range this chain summarised so far."""
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
        leaf = session.leaf_id()
        try:
            plan_compaction(session, keep_recent_tokens=keep, leaf_id=leaf)
        except NothingToCompact:
            continue
        # As `ctxd compact` with no model: the engine picks the offline summariser at the settings' budget.
        outcome = await compact(session, CompactionSettings(keep_recent_tokens=keep), leaf_id=leaf)
        plan = outcome.plan
        before = list(written)
        written.append(session.file.entry_by_id(outcome.entryId))
        parent_override = outcome.entryId
        summary = outcome.summary
        rng = [*plan.messagesToSummarize, *plan.turnPrefixMessages]
        truth = ft.range_truth(rng, root)
        cut_at = next((k for k, e in enumerate(written) if e.get("id") == plan.firstKeptEntryId), len(written))
        summarised = [m for e in written[:cut_at] if (m := _message(e)) is not None]
        tokens_in = sum(estimate_tokens(m) for m in rng) + (
            math.ceil(len(plan.previousSummary) / 4) if plan.previousSummary else 0
        )
        score = fs.score(
            summary,
            truth,
            root=root,
            first_request=ft.first_request(summarised),
            user_prose=ft.prose([m for e in written if (m := _message(e)) is not None], root),
            tokens_in=tokens_in,
        )
        ranges += rng
        whole = ft.range_truth(ranges, root)
        fs.carried(summary, whole, score, root)
        ledger = written[-1].get("details", {}).get("ctxd", {}).get("mustKeep", {})
        run = Run(
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
            looked=len(truth.looked),
            tracker=len(truth.tracker),
        )
        calls = {**whole.failed_calls, **truth.failed_calls}
        await _explain(run, truth, calls, root, header, before, leaf, workdir / f"{stem}-{keep}-unbounded.jsonl")
        runs.append(run)
    return runs


def without_patch(summary: str) -> str:
    """``summary`` without the must-keep patch the engine appended last (before the file blocks)."""
    at = summary.rfind(PATCH_HEADING)
    if at < 0:
        return summary
    rest = summary[at:]
    ends = [i for i in (rest.find("\n<read-files>"), rest.find("\n<modified-files>")) if i >= 0]
    return summary[:at] + rest[min(ends, default=len(rest)) :]


async def _explain(
    run: Run,
    truth: ft.Truth,
    failed_calls: Mapping[str, str],
    root: str | None,
    header: dict[str, Any],
    before: list[dict[str, Any]],
    leaf: str | None,
    path: Path,
) -> None:
    """Fill ``run.patch_only`` and ``run.reasons`` (see :class:`Run`)."""
    own = tx.norm(without_patch(run.summary) if run.patched else run.summary, root)
    facts = {"key commands": truth.commands, "constraints": truth.constraints, "errors": truth.errors}
    for kind, probes in facts.items():
        missed = {p for p, _ in run.score.missed.get(kind, [])}
        run.patch_only[kind] = sum(1 for p in probes if p not in missed and p not in own)
    kinds = [*fs.TARGET_KINDS, *(f"{kind} {fs.SO_FAR}" for kind in fs.TARGET_KINDS)]
    if not any(run.score.missed.get(kind) for kind in kinds):
        return
    unbounded = await _unbounded(header, before, leaf, run.keep, path)
    for kind in kinds:
        for probe, text in run.score.missed.get(kind, []):
            why = fs.reason(probe, run.summary, unbounded, root, failed_calls.get(probe, ""))
            run.reasons.setdefault(kind, []).append((probe, text, why))


async def run_all(found: Sequence[Source], generated: int, keeps: Sequence[int], workdir: Path) -> list[Run]:
    runs: list[Run] = []
    for index, (flavour, header, entries) in enumerate(fidelity_gen.sessions(generated)):
        for keep in keeps:
            runs += await compact_chain("generated", f"gen{index}-{flavour}", header, entries, keep, workdir)
    seen: set[str] = set()
    for source in found:
        data = _cut_text(source.path) if source.cut else source.path.read_bytes()
        digest = hashlib.sha1(data).hexdigest()
        if digest in seen:
            continue
        seen.add(digest)
        path = source.path
        if source.cut:
            path = workdir / f"cut-{digest[:12]}.jsonl"
            path.write_bytes(data)
        header, entries = path_entries(path)
        if not entries:
            continue
        for keep in keeps:
            runs += await compact_chain("real", source.name, header, entries, keep, workdir)
    return runs


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=Path, action="append", help="a folder with pi/, claude/, codex/ sessions")
    parser.add_argument(
        "--cut", type=Path, action="append", help="a transcript (or folder) cut before compact_boundary"
    )
    parser.add_argument("--generated", type=int, default=9, help="generated sessions (3 per agent flavour)")
    parser.add_argument("--keep", type=int, action="append", help="keepRecentTokens (default: 20000 and 4000)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--missed", type=int, default=5, help="missed facts listed per session and category")
    parser.add_argument("--dump", type=Path, help="write every summary to this folder")
    args = parser.parse_args()
    dirs, cuts = (args.sessions or [], args.cut or []) if args.sessions or args.cut else default_inputs()
    with tempfile.TemporaryDirectory(prefix="ctxd-fidelity-") as tmp:
        runs = asyncio.run(run_all(sources(dirs, cuts), args.generated, args.keep or KEEPS, Path(tmp)))
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
        for r in runs:
            (args.dump / f"{r.session.replace('/', '-')}-{r.keep}-{r.point}.md").write_text(r.summary, encoding="utf-8")
    if args.json:
        json.dump(fidelity_report.as_json(runs), sys.stdout, indent=2)
        return 0
    print(fidelity_report.as_text(runs, missed=args.missed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
