"""``ctxd doctor`` says which scanner reads session files: the native one when it is built, the Python path
when ``CTXD_NATIVE=0`` turns it off (same answers, slower)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxd.store import native


def _doctor(tmp_path: Path, **env: str) -> dict[str, object]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    environ = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), **env}
    environ.pop("XDG_DATA_HOME", None)
    done = subprocess.run(
        [sys.executable, "-m", "ctxd", "doctor", "--json"], env=environ, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.skipif(os.environ.get("CTXD_NATIVE", "1").strip() == "0", reason="CTXD_NATIVE=0 turns it off")
def test_doctor_names_the_native_scanner(tmp_path: Path) -> None:
    assert native.available(), "ctxd._native is not built: install ctxd with a C compiler (pip install -e .)"
    report = _doctor(tmp_path)
    assert report["nativeScanner"] is True
    assert str(report["scanner"]).startswith("native")


def test_doctor_says_when_the_python_path_reads(tmp_path: Path) -> None:
    report = _doctor(tmp_path, CTXD_NATIVE="0")
    assert report["nativeScanner"] is False
    assert str(report["scanner"]).startswith("Python")
