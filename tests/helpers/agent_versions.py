"""The agents' releases the real-agent suites run: read from scripts/versions.env, the one place they are pinned
(the install scripts source the same file). As in the scripts, the environment overrides each
(``CLAUDE_CODE_VERSION=2.1.330``)."""

from __future__ import annotations

import os
import re
from pathlib import Path

FILE = Path(__file__).resolve().parents[2] / "scripts" / "versions.env"
_LINE = re.compile(r'^([A-Z0-9_]+)="\$\{\1:-([^}"]+)\}"$')


def pinned() -> dict[str, str]:
    """Every ``NAME`` of scripts/versions.env and its version, overridden by the environment's ``NAME``."""
    found: dict[str, str] = {}
    for line in FILE.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            match = _LINE.match(line.strip())
            if match is None:
                raise ValueError(f'{FILE}: not NAME="${{NAME:-VERSION}}": {line!r}')
            found[match[1]] = os.environ.get(match[1]) or match[2]
    return found


VERSIONS = pinned()
PI = VERSIONS["PI_VERSION"]
CLAUDE_CODE = VERSIONS["CLAUDE_CODE_VERSION"]
CODEX = VERSIONS["CODEX_VERSION"]
OPENCODE = VERSIONS["OPENCODE_VERSION"]
