"""The native scanner built with AddressSanitizer and UndefinedBehaviorSanitizer, and fuzzed against the Python
path with atheris (coverage-guided: libFuzzer, inside atheris's wheel).

:func:`build` compiles ``ctxd/_native.c`` with clang (``-fsanitize=address,undefined,fuzzer-no-link``: every
edge of the scanner counts for libFuzzer's coverage, every out-of-bounds access or undefined operation stops the
run) into ``.cache/fuzz/build``, again whenever the C file changed. :func:`run` starts ``fuzz_native_target.py``
with atheris's ASan runtime preloaded (a Python that is not instrumented loads an instrumented extension so) for
a bounded time. ``make test`` runs it for tens of seconds (tests/native/test_native_fuzz.py), ``make fuzz`` for longer
with a corpus kept in ``.cache/fuzz/corpus``.

    python tests/native/native_fuzz.py [SECONDS]        # what `make fuzz` runs

clang comes from the machine (Debian's clang-14: ``scripts/clang.sh`` installs it; CI's ``.ci/run`` calls it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "ctxd" / "_native.c"
BUILD = REPO / ".cache" / "fuzz" / "build"
MODULE = BUILD / "ctxd" / "_native.abi3.so"
TARGET = Path(__file__).resolve().parent / "fuzz_native_target.py"
SEEDS = REPO / "tests" / "data"
SANITIZERS = "address,undefined,fuzzer-no-link"
FLAGS = [
    "-shared",
    "-fPIC",
    "-O1",
    "-g",
    "-fno-omit-frame-pointer",
    f"-fsanitize={SANITIZERS}",
    "-fno-sanitize-recover=undefined",
    "-pthread",
    "-DPy_LIMITED_API=0x030B0000",
]


class CannotBuild(Exception):
    """What is missing to build or run the sanitizer build (the test skips saying it, in one line)."""


def clang() -> str:
    for name in (os.environ.get("CTXD_CLANG", ""), "clang", "clang-14", "clang-15", "clang-16"):
        found = shutil.which(name) if name else None
        if found:
            return found
    raise CannotBuild("no clang on PATH (Debian: apt-get install clang-14; `bash scripts/clang.sh` does it as root)")


def atheris_runtime() -> Path:
    try:
        import atheris  # type: ignore[import-not-found]
    except ImportError as exc:
        raise CannotBuild(f"atheris is not installed ({exc}): pip install -e '.[test]' installs it") from None
    runtime = Path(atheris.path()) / "asan_with_fuzzer.so"
    if not runtime.exists():
        raise CannotBuild(f"atheris has no ASan runtime at {runtime}")
    return runtime


def build(source: Path = SOURCE, module: Path = MODULE) -> Path:
    """The instrumented module (built if missing or older than the C file)."""
    if module.exists() and module.stat().st_mtime >= source.stat().st_mtime:
        return module
    compiler = clang()
    module.parent.mkdir(parents=True, exist_ok=True)
    partial = module.with_suffix(".tmp")
    include = sysconfig.get_paths()["include"]
    argv = [compiler, *FLAGS, f"-I{include}", str(source), "-o", str(partial)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"the sanitizer build failed: {' '.join(argv)}\n{done.stderr[-3000:]}")
    partial.replace(module)
    return module


def run(seconds: int, corpus: Path, artifacts: Path, module: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The fuzz target for ``seconds`` (libFuzzer's ``-max_total_time``) on ``module`` (default: the sanitizer
    build of ctxd/_native.c), new inputs kept in ``corpus``, a crashing input written into ``artifacts``."""
    module, runtime = module or build(), atheris_runtime()
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(
        LD_PRELOAD=str(runtime),
        CTXD_FUZZ_MODULE=str(module),
        # Python's own allocations are not freed at exit: leak reports would be noise, not findings.
        ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:allocator_may_return_null=1",
        UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1",
        PYTHONMALLOC="malloc",  # every buffer from malloc, so that ASan sees a read past its end
    )
    argv = [
        sys.executable,
        str(TARGET),
        f"-max_total_time={seconds}",
        "-max_len=4096",
        "-rss_limit_mb=3072",
        "-timeout=20",
        "-print_final_stats=1",
        f"-artifact_prefix={artifacts}/",
        str(corpus),
        str(seeds()),
    ]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=seconds + 300, cwd=REPO)


def seeds() -> Path:
    """A folder of seed inputs: the lines of the session files the tests ship, a few to a file."""
    folder = BUILD.parent / "seeds"
    if folder.exists():
        return folder
    partial = BUILD.parent / "seeds.tmp"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    n = 0
    for path in sorted(SEEDS.rglob("*.jsonl")):
        lines = path.read_bytes().splitlines(keepends=True)
        for start in range(0, min(len(lines), 40), 4):
            chunk = b"".join(lines[start : start + 4])
            if 0 < len(chunk) <= 4096:
                (partial / f"seed-{n:05d}").write_bytes(chunk)
                n += 1
    partial.replace(folder)
    return folder


if __name__ == "__main__":
    seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    done = run(seconds, BUILD.parent / "corpus", BUILD.parent / "crashes")
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr[-20000:])
    sys.exit(done.returncode)
