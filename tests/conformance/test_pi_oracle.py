"""ctxd against pi 1.5.2's real code, where pi's oracle is set up beside the repository.

pi_probe.mjs runs pi's published bundle (SessionManager, buildSessionProjection, estimateTokens,
estimateContextTokens, estimateProjectedContextTokens, findProjectedCutPoint, prepareCompaction) on
every scenario of pi_scenarios.py, on the reference pi sessions and on a few bench/gen.py sessions;
ctxd must give the same answers: the context's messages (roles, entries, per-message estimates),
the estimates, pi's context size, the cut point and what prepareCompaction would summarise.
Skipped, saying why, when ``../shared/pi-oracle`` (or ``PI_ORACLE_DIR``) is not set up.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, SHARED
from pi_answers import comparable, ctxd_answers, oracle_missing, pi_answers
from pi_scenarios import SCENARIOS, build_all

pytestmark = pytest.mark.skipif(oracle_missing() is not None, reason=oracle_missing() or "")

GENERATED = [(200, 1, 2_000), (600, 2, 5_000), (1_500, 3, 20_000), (3_000, 4, 20_000)]
"""bench/gen.py sessions: (entries, seed, keepRecentTokens)."""


def _generate(folder: Path) -> dict[str, tuple[str, int]]:
    spec = importlib.util.spec_from_file_location("ctxd_bench_gen_conformance", REPO / "bench" / "gen.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gen
    spec.loader.exec_module(gen)
    out = {}
    for entries, seed, keep in GENERATED:
        path = folder / f"gen-{entries}-{seed}.jsonl"
        gen.generate(path, entries, seed=seed)
        out[path.stem] = (str(path), keep)
    return out


def _version(path: str) -> int:
    """The file's format version: pi gives a v1 file's entries fresh random ids (compare positions)."""
    with open(path, encoding="utf-8") as f:
        head = json.loads(f.readline())
    return int(head.get("version") or 1)


def _reference() -> dict[str, tuple[str, int]]:
    folder = SHARED / "pi"
    if not folder.is_dir():
        folder = REPO / "tests" / "data" / "pi"
    out = {}
    for path in sorted(folder.glob("*.jsonl")):
        for keep in (20_000, 2_000):
            out[f"ref-{path.stem}-{keep}"] = (str(path), keep)
    return out


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, Any], dict[str, Any], bool]]:
    """name -> (ctxd's answers, pi's answers, whether entry ids are comparable)."""
    folder = tmp_path_factory.mktemp("pi-conformance")
    files = {**build_all(folder), **_reference(), **_generate(folder)}
    theirs = pi_answers(list(files.values()))
    out = {}
    for (name, (path, keep)), pi in zip(files.items(), theirs, strict=True):
        assert "error" not in pi, f"pi failed on {name}: {pi.get('error')}"
        out[name] = (ctxd_answers(path, keep), pi, _version(path) >= 2)
    return out


def test_the_corpus_covers_every_rule() -> None:
    rules = {sc.rule for sc in SCENARIOS.values()}
    assert {"a", "b", "c", "d", "e", "f", "g", "h", "i", "0.87", "pi-style", "mixed", "other"} <= rules
    assert len(SCENARIOS) >= 40


@pytest.mark.parametrize("name", [*SCENARIOS, "references", "generated"])
def test_ctxd_answers_as_pi_does(both: dict[str, tuple[dict[str, Any], dict[str, Any], bool]], name: str) -> None:
    if name == "references":
        names = [n for n in both if n.startswith("ref-")]
    elif name == "generated":
        names = [n for n in both if n.startswith("gen-")]
    else:
        names = [name]
    assert names
    for n in names:
        ours, pis, ids = both[n]
        a, b = comparable(ours, ids=ids), comparable(pis, ids=ids)
        for key in b:
            assert a[key] == b[key], f"{n}: {key} differs from pi 1.5.2's"
