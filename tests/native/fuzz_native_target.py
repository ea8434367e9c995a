"""atheris's target: the sanitizer build of the native scanner against the Python path (tests/native/native_fuzz.py
starts it; run it through that, not alone: it needs the ASan runtime preloaded).

Each input is a chunk of lines. The contract is tests/native/test_native_scan.py's: a chunk is taken whole or declined
whole (taken exactly when the scanner takes each of its lines alone), and for every line of a chunk it takes,
msgspec decodes the line, it is clean, the head decoded from its reduced line equals ``decode_head`` of the line,
and each estimate equals ``estimate_line``. The bytes after the chunk's end (part of a next line) must change
nothing. ASan and UBSan stop the run at any out-of-bounds access or undefined operation in the C code.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import atheris  # type: ignore[import-not-found]

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent), str(HERE)]

import ctxd  # noqa: E402

# The instrumented module stands in for ctxd._native before anything imports the scanner.
_spec = importlib.util.spec_from_file_location("ctxd._native", os.environ["CTXD_FUZZ_MODULE"])
assert _spec is not None and _spec.loader is not None
_native = importlib.util.module_from_spec(_spec)
sys.modules["ctxd._native"] = _native
_spec.loader.exec_module(_native)
ctxd._native = _native  # type: ignore[attr-defined]

from test_native_scan import check_taken, run_scan  # noqa: E402

from ctxd.store import native  # noqa: E402

assert native._scan is _native.scan_chunk, "the scanner in use is not the sanitizer build"
SCAN = _native.scan_chunk
TAIL = b'{"type":"message","id":"ffffffff","parentId":null,"message":{"role":"user","content":"partial'


def one_input(data: bytes) -> None:
    if not data.endswith(b"\n"):
        data += b"\n"
    lines = data[:-1].split(b"\n")
    found = run_scan(SCAN, data, 7, TAIL)
    each = [run_scan(SCAN, line + b"\n") for line in lines]
    if found is None:
        assert None in each, "a chunk was declined though the scanner takes each of its lines"
        return
    assert None not in each, "a chunk was taken though the scanner declines one of its lines"
    check_taken(lines, found, 7)
    again = run_scan(SCAN, data, 7)  # what follows the chunk's end changes nothing
    assert again is not None and tuple(again) == tuple(found)


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
