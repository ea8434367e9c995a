"""Whole-process cold paths (issue 23): what a user waits for when a new ``ctxd`` process answers.

    python bench/cold_bench.py SESSION.jsonl [--rounds N]

- ``ctxd context FILE --json`` on a session file, as a whole process (interpreter start, imports, open, build,
  JSON out), with the persistent index off (the first touch) and kept, alternating with pi 1.5.2's whole
  process on the same file (its oracle, ``pi-oracle.mjs``: Node start, pi's bundle, open, build; the oracle
  also copies the file and prepares a compaction, so pi's figure is an upper bound of its own cold answer);
- ``ctxd hook PreCompact`` on a 3 MB Claude Code transcript made by the real Claude Code 2.1.330
  (bench/hooks_bench.py's ``make_transcript``), a fresh process per run as Claude Code starts it, the session's
  notes kept between runs (from the second run on the ledger is read back, as in a session's later
  compactions); beside a bare ``python -c pass``.

Modules are byte-compiled first (``compileall``), as an installed wheel is: with ``PYTHONDONTWRITEBYTECODE`` set
and no ``__pycache__``, every run would compile ctxd's sources again. Prints one JSON object (wall times in
ms, medians of the runs, and the load average at start and end).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ORACLE = Path(os.environ.get("PI_ORACLE_DIR", REPO.parent / "shared" / "pi-oracle"))
NODE = ORACLE / "node_modules" / "node" / "bin" / "node"


CPU: list[float] = []
"""The CPU time (user + system, ms) of each process :func:`wall` ran, in order: less sensitive to the load."""


def wall(cmd: list[str], env: dict[str, str], data: bytes = b"") -> float:
    """Milliseconds from start to exit of ``cmd`` (which must succeed); its CPU time goes to :data:`CPU`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(cmd, input=data, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, check=True)
    elapsed = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
    return elapsed


def claude_transcript(into: Path) -> Path | None:
    """A ~3 MB transcript written by the real Claude Code (None when it is not installed)."""
    sys.path.insert(0, str(HERE))
    import hooks_bench
    from fakes.anthropic_server import FakeAnthropicServer

    binary = hooks_bench.claude_binary()
    if binary is None:
        return None
    with FakeAnthropicServer() as server:
        claude = hooks_bench.Claude(into / "claude", server, binary)
        session = hooks_bench.make_transcript(claude)
        made = claude.transcript(session)
    target = into / "projects" / "-home-dev-project" / "bench-session.jsonl"
    target.parent.mkdir(parents=True)
    shutil.copy(made, target)
    return target


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("session", type=Path, help="a pi session file (bench/out/100k.jsonl)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-hook", action="store_true", help="skip ctxd hook PreCompact")
    args = parser.parse_args()
    load_start = os.getloadavg()
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(REPO / "ctxd")],
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""},
        check=True,
        stdout=subprocess.DEVNULL,
    )
    out: dict[str, Any] = {"load_start": load_start, "rounds": args.rounds, "bytes": args.session.stat().st_size}
    with tempfile.TemporaryDirectory(prefix="ctxd-cold-") as tmp:
        env = {**os.environ, "XDG_STATE_HOME": f"{tmp}/state", "XDG_DATA_HOME": f"{tmp}/data"}
        env.update({"XDG_CACHE_HOME": f"{tmp}/cache", "CTXD_CONFIG": f"{tmp}/none.json"})
        context = [sys.executable, "-m", "ctxd", "context", str(args.session), "--json"]
        pi_cmd = [str(NODE), str(ORACLE / "pi-oracle.mjs"), str(args.session)]
        has_pi = NODE.exists() and (ORACLE / "pi-oracle.mjs").exists()
        cold, warm, pi = [], [], []
        wall(context, env)  # the index the warm runs read
        for _ in range(args.rounds):
            cold.append(wall(context, {**env, "CTXD_INDEX_CACHE": "0"}))
            if has_pi:
                pi.append(wall(pi_cmd, {**env, "PI_ORACLE_NODE": str(NODE)}))
            warm.append(wall(context, env))
        out["context_cold_ms"] = statistics.median(cold)
        out["context_warm_ms"] = statistics.median(warm)
        out["pi_oracle_ms"] = statistics.median(pi) if pi else None
        transcript = None if args.no_hook else claude_transcript(Path(tmp))
        bare, hook, hook_cpu = [], [], []
        if transcript is not None:
            out["transcript_bytes"] = transcript.stat().st_size
            payload = {"session_id": "bench-session", "transcript_path": str(transcript), "cwd": "/home/dev/project"}
            data = json.dumps({"hook_event_name": "PreCompact", **payload, "trigger": "manual"}).encode()
            pristine = transcript.read_bytes()
            for _ in range(max(args.rounds, 5)):
                bare.append(wall([sys.executable, "-c", "pass"], env))
                transcript.write_bytes(pristine)
                hook.append(wall([sys.executable, "-m", "ctxd", "hook", "PreCompact"], env, data))
                hook_cpu.append(CPU[-1])
        out["python_pass_ms"] = statistics.median(bare) if bare else None
        out["hook_precompact_ms"] = statistics.median(hook) if hook else None
        out["hook_precompact_cpu_ms"] = statistics.median(hook_cpu) if hook_cpu else None
    out["load_end"] = os.getloadavg()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
