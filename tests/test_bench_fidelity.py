"""``make bench-fidelity`` runs and meets its targets on generated sessions (one per agent flavour) and the
reference sessions in tests/data (the full run, with nine generated sessions, is ``make bench-fidelity``)."""

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
        [sys.executable, str(BENCH / "fidelity.py"), "--generated", "3", "--json"],
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
        assert tokens["out"] < tokens["in"] / 4, column  # summaries are much smaller than what they replace
