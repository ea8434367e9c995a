"""The files ``ctxd setup`` installs are every file the integrations keep in the repository (a file added to an
integration and left out of :data:`ctxd.setup.bundle.BUNDLE` would be missing from the wheel's copy)."""

from __future__ import annotations

import os
import subprocess

import pytest

from ctxd.setup.bundle import BUNDLE, files

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("name", ["claude-code", "pi", "client-ts", "neovim", "codex", "opencode"])
def test_the_bundle_ships_every_tracked_file_it_is_meant_to(name: str) -> None:
    folder, _ = BUNDLE[name]
    tracked = subprocess.run(
        ["git", "ls-files", "--", folder], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    shipped = set(files(name))
    wanted = {os.path.relpath(path, folder) for path in tracked}
    # Tests, build configs and scripts stay in the repository; what an agent or editor loads is shipped.
    wanted = {rel for rel in wanted if not rel.startswith(("tests/", "scripts/", "tsconfig", ".gitignore"))}
    assert wanted <= shipped, sorted(wanted - shipped)
