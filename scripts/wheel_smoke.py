"""The check every built wheel passes, run by the Python the wheel is installed in: cibuildwheel's test-command on
GitHub's runners (pyproject.toml), and tests/installing/test_native_wheel.py on this machine's wheel.

It imports the compiled scanner from the installed wheel (not from a checkout), wants ctxd to say it scans with it
(``ctxd.store.native.available()``), then asks ctxd for one session's context twice, with the scanner and with
``CTXD_NATIVE=0`` (the pure-Python path), each from an empty index cache, and wants the same bytes.
Usage: python wheel_smoke.py SESSION.jsonl
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile


def main(argv: list[str]) -> int:
    (session,) = argv
    native = importlib.import_module("ctxd._native")
    where = native.__file__ or ""
    if "site-packages" not in where:
        print(f"ctxd._native comes from {where}, not from an installed wheel", file=sys.stderr)
        return 1
    try:
        wrapper = importlib.import_module("ctxd.store.native")
    except ModuleNotFoundError as e:  # a ctxd from before the wrapper (packaging work without the scanner)
        if e.name != "ctxd.store.native":
            raise
        print("ctxd.store.native is missing: whether ctxd uses the scanner is not checked")
    else:
        if not wrapper.available():
            print("ctxd.store.native.available() is False with ctxd._native installed", file=sys.stderr)
            return 1
    answers = []
    for flag in (None, "0"):
        env = {k: v for k, v in os.environ.items() if k != "CTXD_NATIVE"}
        if flag is not None:
            env["CTXD_NATIVE"] = flag
        # An empty index cache each time: both answers come from a scan, not one from the other's index.
        with tempfile.TemporaryDirectory(prefix="ctxd-wheel-smoke-") as cache:
            env["XDG_CACHE_HOME"] = cache
            done = subprocess.run(
                [sys.executable, "-m", "ctxd", "context", session, "--json"],
                env=env,
                capture_output=True,
                timeout=120,
            )
        if done.returncode != 0:
            print(
                f"ctxd context (CTXD_NATIVE={flag}) exited {done.returncode}:\n{done.stderr.decode()}", file=sys.stderr
            )
            return 1
        answers.append(done.stdout)
    if answers[0] != answers[1]:
        print("ctxd context answers differently with the compiled scanner and with CTXD_NATIVE=0", file=sys.stderr)
        return 1
    print(f"ctxd._native: {where}; the same {len(answers[0])} bytes of context with it and with CTXD_NATIVE=0")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
