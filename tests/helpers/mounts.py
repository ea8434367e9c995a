"""Real file-system faults for tests: a size-capped tmpfs (mounted as root, unmounted afterwards,
skipped with the reason otherwise) and filling it up to a given free space."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a file system (or running the daemon as another user) needs root; CI runs as root")


@contextlib.contextmanager
def tmpfs(where: Path, size: str = "2m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` (created), unmounted when the block ends."""
    needs_root()
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(where: Path, leave: int = 0) -> list[Path]:
    """Fill the file system at ``where`` until ``leave`` bytes are free (0: not one byte)."""
    st = os.statvfs(where)
    free = st.f_bavail * st.f_frsize
    fillers = [where / "filler", where / "filler2"]
    with open(fillers[0], "wb", buffering=0) as f:
        f.write(b"\0" * (free - leave))
    if leave == 0:  # a file's last page may still take a few bytes
        with open(fillers[1], "wb", buffering=0) as f, contextlib.suppress(OSError):
            for _ in range(1 << 16):
                f.write(b"\0")
    return fillers
