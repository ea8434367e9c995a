"""The native scanner under AddressSanitizer and UndefinedBehaviorSanitizer, fuzzed against the Python path for a
bounded time (issue 30, item 8): tests/native/native_fuzz.py builds it with clang,
tests/native/fuzz_native_target.py is the target. ``make test`` runs this for ``CTXD_FUZZ_SECONDS`` (30 by
default); ``make fuzz`` runs longer.

A second run fuzzes a copy of the scanner with a bug planted where only coverage guidance leads (a read of a
freed block, behind the ``\\/`` escape of a string): the run must stop on ASan's report, or the harness proves
nothing. Where clang or atheris cannot be had, both skip saying what is missing, in one line.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import native_fuzz
import pytest

SECONDS = int(os.environ.get("CTXD_FUZZ_SECONDS", "30"))
PLANT_AT = "            case '/':\n                u16 += 1;\n"
PLANTED = (
    "            case '/': {\n"
    "                unsigned char *q = malloc(8);\n"
    "                if (q) q[0] = 1;\n"
    "                free(q);\n"
    "                volatile unsigned char gone = q ? q[0] : 0; /* planted: a read of a freed block */\n"
    "                (void)gone;\n"
    "            }\n"
    "                u16 += 1;\n"
)


@pytest.fixture(scope="module")
def built() -> Path:
    try:
        native_fuzz.clang()
        native_fuzz.atheris_runtime()
    except native_fuzz.CannotBuild as exc:
        pytest.skip(f"the sanitizer build of ctxd/_native.c cannot be made here: {exc}")
    return native_fuzz.build()


def executed(stderr: str) -> int:
    found = re.findall(r"stat::number_of_executed_units:\s*(\d+)", stderr)
    return int(found[-1]) if found else 0


def test_the_scanner_fuzzed_under_sanitizers_agrees_with_the_python_path(built: Path, tmp_path: Path) -> None:
    done = native_fuzz.run(SECONDS, tmp_path / "corpus", tmp_path / "crashes", built)
    crashes = sorted((tmp_path / "crashes").glob("*"))
    report = done.stderr[-6000:]
    assert done.returncode == 0 and not crashes, f"the fuzzer found {crashes}:\n{report}"
    assert executed(done.stderr) > 1000, f"the fuzzer hardly ran:\n{report}"
    assert "cov: " in done.stderr, "no coverage counted: the module is not instrumented"


def test_a_planted_memory_error_is_found(built: Path, tmp_path: Path) -> None:
    source = native_fuzz.SOURCE.read_text(encoding="utf-8")
    assert source.count(PLANT_AT) == 1, "the planted bug's place in _native.c moved: update PLANT_AT"
    planted = tmp_path / "_native_planted.c"
    planted.write_text(source.replace(PLANT_AT, PLANTED), encoding="utf-8")
    module = native_fuzz.build(planted, tmp_path / "build" / "ctxd" / "_native.abi3.so")
    done = native_fuzz.run(max(SECONDS, 60), tmp_path / "corpus", tmp_path / "crashes", module)
    assert done.returncode != 0, f"the planted bug was not found in {max(SECONDS, 60)} s:\n{done.stderr[-3000:]}"
    assert "AddressSanitizer: heap-use-after-free" in done.stderr, done.stderr[-3000:]
    assert sorted((tmp_path / "crashes").glob("crash-*")), "no crashing input was kept"
