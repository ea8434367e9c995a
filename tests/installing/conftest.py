"""ctxd installed as a user would: the wheel built once per session (``python -m build``), then the README's
install line (``pipx install <wheel>``) in a private HOME with PATH holding only the system tools (and pipx,
installed with pip into a temporary venv when missing). pip's downloads are cached in the repository's .cache.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
PIP_CACHE = REPO / ".cache" / "pip"
README_WHEEL = "ctxd-0.1.0-cp311-abi3-*.whl"
"""How the README names the wheel (the shell picks the one for this platform): ``cp311-abi3``, one per platform."""
NO_COMPILER = {"CC": "/bin/false", "CXX": "/bin/false"}
"""A machine without a C compiler, as setuptools sees it (it takes ``CC`` over the compiler Python was built with)."""


def readme_install_lines() -> list[str]:
    """The commands of the README's Install block (comments dropped)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Install\n", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README's Install section has no sh block"
    return [line.split("#", 1)[0].strip() for line in block.group(1).splitlines() if line.split("#", 1)[0].strip()]


@attrs.frozen
class Installed:
    home: Path
    wheel: Path
    ctxd: Path
    """``~/.local/bin/ctxd`` as pipx put it in the private HOME."""
    install_output: str

    def env(self, **extra: str) -> dict[str, str]:
        """A user's environment: the private HOME, PATH = pipx's bin folder and the system tools."""
        env = {
            "HOME": str(self.home),
            "PATH": f"{self.home / '.local' / 'bin'}:{SYSTEM_PATH}",
            "LANG": "C.UTF-8",
            "PIP_CACHE_DIR": str(PIP_CACHE),
        }
        env.update(extra)
        return env

    def run(
        self, *args: str, env: dict[str, str] | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.ctxd), *args],
            env=env or self.env(),
            capture_output=True,
            text=True,
            timeout=300,
            cwd=self.home,
        )
        if check:
            assert done.returncode == 0, f"ctxd {' '.join(args)}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    explicit = os.environ.get("CTXD_WHEEL")
    if explicit:
        return Path(explicit).resolve()
    return build("wheel", tmp_path_factory.mktemp("dist"))


def build(kind: str, out: Path) -> Path:
    """The checkout built with ``python -m build --wheel`` or ``--sdist`` into ``out``: the one file it made."""
    subprocess.run(
        [sys.executable, "-m", "build", f"--{kind}", "--outdir", str(out), str(REPO)],
        check=True,
        capture_output=True,
        timeout=600,
        env={**os.environ, "PIP_CACHE_DIR": str(PIP_CACHE)},
    )
    (found,) = out.glob("ctxd-*.whl" if kind == "wheel" else "ctxd-*.tar.gz")
    return found


def _runs(program: Path) -> bool:
    try:
        return subprocess.run([str(program), "--version"], capture_output=True, timeout=60).returncode == 0
    except OSError:
        return False


def _pipx() -> str:
    """pipx from the system tools, else one installed with pip into a venv kept in the repository's .cache (made
    once, under a lock: suites may run side by side)."""
    found = shutil.which("pipx", path=SYSTEM_PATH)
    if found:
        return found
    venv = REPO / ".cache" / "pipx-venv"
    pipx = venv / "bin" / "pipx"
    venv.parent.mkdir(exist_ok=True)
    with open(REPO / ".cache" / "pipx-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / ".ctxd-stamp").exists() or not _runs(pipx):  # a venv made from a folder since moved
            shutil.rmtree(venv, ignore_errors=True)
            python = getattr(sys, "_base_executable", sys.executable)
            subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=120)
            subprocess.run(
                [str(venv / "bin" / "pip"), "install", "--quiet", "pipx"],
                check=True,
                timeout=300,
                env={**os.environ, "PIP_CACHE_DIR": str(PIP_CACHE)},
            )
            (venv / ".ctxd-stamp").write_text("pipx\n")
    return str(pipx)


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Iterator[Installed]:
    """The README's install line run in a fresh HOME (pipx's own venvs and bin folder inside it)."""
    base = tmp_path_factory.mktemp("user")
    home = base / "home"
    home.mkdir()
    pipx = _pipx()
    (line,) = [line for line in readme_install_lines() if line.startswith("pipx install")]
    assert README_WHEEL in line, f"the README's install line names no {README_WHEEL}: {line}"
    shutil.copy2(wheel, base / wheel.name)  # run as written, where the wheel is: the shell matches it
    env = {
        "HOME": str(home),
        "PATH": f"{Path(pipx).parent}:{SYSTEM_PATH}",
        "LANG": "C.UTF-8",
        "PIP_CACHE_DIR": str(PIP_CACHE),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        **NO_COMPILER,
        "PIP_ONLY_BINARY": ":all:",  # pip may not build anything: ctxd and its dependencies come as wheels
    }
    done = subprocess.run(["sh", "-c", line], env=env, cwd=base, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
    ctxd = home / ".local" / "bin" / "ctxd"
    assert ctxd.exists(), f"pipx put no ctxd in {ctxd.parent}: {done.stdout}{done.stderr}"
    yield Installed(home, wheel, ctxd, done.stdout + done.stderr)


def tool_dir(base: Path, name: str, argv: list[str]) -> Path:
    """A folder holding one executable ``name`` that runs ``argv`` (how npm puts an agent's command on PATH)."""
    folder = base / f"{name}-bin"
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / name
    script.write_text("#!/bin/sh\nexec " + " ".join(f"'{a}'" for a in argv) + ' "$@"\n')
    script.chmod(0o755)
    return folder


def installed_plugins(listed: str) -> list[str]:
    """The plugins ``claude plugin list --json`` lists as installed by the user: Claude Code 2.1.332 also lists the
    ones it brings (``...@builtin``), which no setup installs or removes; 2.1.330 listed none of them."""
    return [p["id"] for p in json.loads(listed) if not str(p.get("id", "")).endswith("@builtin")]
