"""``make bench-fidelity`` runs and meets its targets on its generated sessions (nine, three per agent
flavour) and the reference sessions in tests/data: recall per category, and summaries of at most 3% of the
tokens they summarise (the summary as ctxd writes it, must-keep patch and file blocks included)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import fidelity  # noqa: E402


def test_fidelity_bench_meets_every_target() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "fidelity.py"), "--json"],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads(done.stdout)
    assert set(report["tokens"]) == {"generated @20k", "generated @4k", "real @20k", "real @4k"}
    for kind, (op, bound) in fidelity.TARGETS.items():
        assert op == ">="
        for column, cell in report[kind].items():
            assert cell["found"] >= bound * cell["total"], (kind, column, cell)
    for column, tokens in report["tokens"].items():
        assert tokens["out"] <= fidelity.MAX_RATIO * tokens["in"], (column, report["ratio"][column])
    assert fidelity.MAX_RATIO == 0.03
    assert len(report["cases"]) == sum(t["summaries"] for t in report["tokens"].values())
    assert all(case["ratio"] == round(case["out"] / case["in"], 4) for case in report["cases"])
    assert all(report["exploration"].values())  # read-only exploration is counted, not a target
