"""Small session files on which ctxd must give pi 1.5.2's answers, one or more per rule.

Each scenario writes one file into a folder and names the ``keepRecentTokens`` its compaction plan
uses. Three kinds: built with the entry factories (tests/helpers/factories.py), hand-written lines as pi
writes them (its key order and fields), and mixed files where ctxd's own writer appends to pi-style
lines. ``test_pi_oracle`` runs pi's real code on every one; ``test_pi_rules`` pins pi's numbers.
"""

from __future__ import annotations

from pathlib import Path

import scenarios_more  # noqa: F401  (registers its scenarios)
import scenarios_pi_style  # noqa: F401
import scenarios_rules  # noqa: F401
from scenario_kit import SCENARIOS, Scenario

__all__ = ["SCENARIOS", "Scenario", "build_all"]


def build_all(folder: Path) -> dict[str, tuple[str, int]]:
    """Write every scenario into ``folder``: name -> (path, keepRecentTokens)."""
    return {name: (sc.make(folder), sc.keep) for name, sc in SCENARIOS.items()}
