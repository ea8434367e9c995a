"""The tables ``make bench-fidelity`` prints (and its ``--json``): recall per category and column, per real
session, each summary's size, and the missed facts of the target categories with the reason for each."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import fidelity_score as fs

if TYPE_CHECKING:
    from fidelity import Run

SUMMARY_TOKENS = 5_000
"""The offline summary's default budget (what the agents' own summaries take): reported against, not a target."""
TARGETS = {
    "key commands": 0.95,
    "constraints": 0.95,
    "errors": 0.95,
    "injected kept out": 1.0,
    "not larger than input": 1.0,
}
"""Targets on real sessions (``injected kept out``: on the generated ones, the only ones that plant it)."""
ORDER = (
    "key commands",
    "constraints",
    "errors",
    "key commands (all so far)",
    "constraints (all so far)",
    "errors (all so far)",
    "requests",
    "goal = first request",
    "files modified",
    "files read",
    "constraint",
    "decision",
    "next",
    "paste",
    "injected kept out",
    "precision constraints",
    "not larger than input",
)
LABELS = {
    "constraint": "constraints (planted)",
    "decision": "decisions (planted)",
    "next": "next step (planted)",
    "paste": "key line of a long paste",
}
COLUMNS = ("real @20k", "real @4k", "generated @20k", "generated @4k")


@dataclass
class Totals:
    found: Counter[str] = field(default_factory=Counter)
    total: Counter[str] = field(default_factory=Counter)
    runs: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    largest: int = 0
    over: int = 0
    looked: int = 0
    patch_only: Counter[str] = field(default_factory=Counter)
    tracker: int = 0

    def add(self, run: Run) -> None:
        self.total.update(run.score.total)
        self.found.update(run.score.found)
        self.runs += 1
        self.tokens_in += run.tokens_in
        self.tokens_out += run.tokens_out
        self.largest = max(self.largest, run.tokens_out)
        self.over += run.tokens_out > SUMMARY_TOKENS
        self.looked += run.looked
        self.patch_only.update(run.patch_only)
        self.tracker += run.tracker

    def cell(self, kind: str) -> str:
        total = self.total.get(kind, 0)
        if not total:
            return "-"
        return f"{100 * self.found[kind] / total:5.1f}% {self.found[kind]}/{total}"


def columns(runs: Sequence[Run]) -> dict[str, Totals]:
    out: dict[str, Totals] = {}
    for run in runs:
        out.setdefault(f"{run.source} @{run.keep // 1000}k", Totals()).add(run)
    return {name: out[name] for name in (*COLUMNS, *sorted(set(out) - set(COLUMNS))) if name in out}


def verdict(kind: str, cols: dict[str, Totals]) -> tuple[str, str]:
    """(target, met/MISSED) for ``kind`` over the columns it is set on."""
    bound = TARGETS.get(kind)
    if bound is None:
        return "", ""
    on = [t for n, t in cols.items() if (n.startswith("generated") if kind == "injected kept out" else "real" in n)]
    on = [t for t in on if t.total.get(kind)]
    if not on:
        return f">= {100 * bound:.0f}%", ""
    worst = min(t.found[kind] / t.total[kind] for t in on)
    return f">= {100 * bound:.0f}%", "met" if worst >= bound - 1e-9 else "MISSED"


def per_session(runs: Sequence[Run]) -> dict[str, Totals]:
    out: dict[str, Totals] = {}
    for run in runs:
        if run.source == "real":
            out.setdefault(run.session, Totals()).add(run)
    return out


def as_text(runs: Sequence[Run], missed: int = 5) -> str:
    cols = columns(runs)
    load = os.getloadavg()
    lines = [
        f"fidelity of ctxd's offline summaries: {len(per_session(runs))} real sessions, {len(runs)} summaries"
        f" (load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})",
        "",
        f"{'category':<26}" + "".join(f"{n:>20}" for n in cols) + f"{'target':>9}  verdict",
    ]
    for kind in ORDER:
        if not any(t.total.get(kind) for t in cols.values()):
            continue
        target, met = verdict(kind, cols)
        lines.append(
            f"{LABELS.get(kind, kind):<26}"
            + "".join(f"{t.cell(kind):>20}" for t in cols.values())
            + f"{target:>9}  {met}"
        )
    rows: dict[str, Callable[[Totals], str]] = {
        "summaries": lambda t: str(t.runs),
        "tokens in -> out": lambda t: f"{t.tokens_in} -> {t.tokens_out}",
        "summary / replaced": lambda t: f"{100 * t.tokens_out / max(1, t.tokens_in):.2f}%",
        "largest summary (tokens)": lambda t: str(t.largest),
        f"over {SUMMARY_TOKENS:,} tokens": lambda t: str(t.over),
        "kept only by the patch": lambda t: "/".join(str(t.patch_only[k]) for k in fs.TARGET_KINDS),
        "exploration (not a target)": lambda t: str(t.looked),
        "tracker writes (not a tgt)": lambda t: str(t.tracker),
    }
    for label, show in rows.items():
        lines.append(f"{label:<26}" + "".join(f"{show(t):>20}" for t in cols.values()))
    lines += ["", _sessions_table(runs), "", _cases_table(runs), "", _missed(runs, missed)]
    return "\n".join(lines)


def _sessions_table(runs: Sequence[Run]) -> str:
    kinds = (*fs.TARGET_KINDS, "requests", "files modified")
    lines = [
        "per real session (both keeps, every compaction)",
        f"{'session':<44}{'#':>3}" + "".join(f"{k:>20}" for k in kinds) + f"{'largest':>9}{'>5k':>5}",
    ]
    for name, t in per_session(runs).items():
        lines.append(
            f"{name[:43]:<44}{t.runs:>3}" + "".join(f"{t.cell(k):>20}" for k in kinds) + f"{t.largest:>9}{t.over:>5}"
        )
    return "\n".join(lines)


def _cases_table(runs: Sequence[Run]) -> str:
    lines = [
        "per summary: tokens (characters / 4) against the 5,000 default and what it replaced; must-keep facts the"
        " engine patched in; target facts kept only by that patch (commands/constraints/errors)",
        f"{'session':<44}{'keep':>5}{'#':>3}{'replaced':>10}{'summary':>9}{'of 5k':>7}{'of in':>8}"
        f"{'patched':>9}{'patch-only':>12}",
    ]
    for r in runs:
        if r.source != "real":
            continue
        only = "/".join(str(r.patch_only.get(k, 0)) for k in fs.TARGET_KINDS)
        lines.append(
            f"{r.session[:43]:<44}{r.keep // 1000:>4}k{r.point:>3}{r.tokens_in:>10}{r.tokens_out:>9}"
            f"{100 * r.tokens_out / SUMMARY_TOKENS:6.0f}%{100 * r.tokens_out / max(1, r.tokens_in):7.1f}%"
            f"{r.patched:>9}{only:>12}"
        )
    return "\n".join(lines)


def _missed(runs: Sequence[Run], sample: int) -> str:
    lines = [
        "missed facts of the target categories, real sessions (reason: see bench/fidelity_score.py); "
        "'(all so far)': facts of earlier ranges the latest summary lost"
    ]
    by_session: dict[str, dict[str, list[tuple[str, str, str, str]]]] = {}
    for r in runs:
        if r.source != "real":
            continue
        for kind, reasons in r.reasons.items():
            for probe, text, why in reasons:
                by_session.setdefault(r.session, {}).setdefault(kind, []).append(
                    (f"@{r.keep // 1000}k #{r.point}", probe, text, why)
                )
    for session, kinds in by_session.items():
        for kind, items in kinds.items():
            counts = Counter(why for *_, why in items)
            lines.append(
                f"{session} · {kind}: {len(items)} missed (" + ", ".join(f"{n} {w}" for w, n in counts.items()) + ")"
            )
            seen: set[str] = set()
            for where, probe, text, why in items:
                if probe in seen or len(seen) >= sample:
                    continue
                seen.add(probe)
                lines.append(f"    {where} [{why}] {text[:110]!r}")
    if len(lines) == 1:
        lines.append("    (none)")
    return "\n".join(lines)


def as_json(runs: Sequence[Run]) -> dict[str, Any]:
    cols = columns(runs)
    report: dict[str, Any] = {"categories": {}, "columns": {}, "sessions": {}, "cases": []}
    for kind in ORDER:
        cells = {n: {"found": t.found[kind], "total": t.total[kind]} for n, t in cols.items() if t.total.get(kind)}
        if cells:
            met = verdict(kind, cols)[1]
            report["categories"][kind] = {"columns": cells, "target": TARGETS.get(kind), "verdict": met or None}
    for n, t in cols.items():
        report["columns"][n] = {"summaries": t.runs, "in": t.tokens_in, "out": t.tokens_out, "largest": t.largest}
        report["columns"][n]["over budget"] = t.over
        report["columns"][n]["exploration"] = t.looked
        report["columns"][n]["tracker writes"] = t.tracker
    for name, t in per_session(runs).items():
        report["sessions"][name] = {
            "summaries": t.runs,
            **{k: {"found": t.found[k], "total": t.total[k]} for k in (*fs.TARGET_KINDS, "requests", "files modified")},
        }
    for r in runs:
        report["cases"].append(
            {
                "source": r.source,
                "session": r.session,
                "keep": r.keep,
                "compaction": r.point,
                "in": r.tokens_in,
                "out": r.tokens_out,
                "must-keep facts": r.facts,
                "patched": r.patched,
                "patch only": r.patch_only,
                "missed": {k: [{"text": t, "reason": w} for _, t, w in v] for k, v in r.reasons.items()},
            }
        )
    return report
