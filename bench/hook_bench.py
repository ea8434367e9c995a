"""Wall time of ``ctxd hook EVENT`` (a fresh process each time, as Claude Code runs it) on a real transcript.

    python bench/hook_bench.py [TRANSCRIPT] [--runs N]

Default transcript: the Claude Code 2.1.330 transcript recorded by tests/claude_code (tests/data/claude). The
transcript is copied into a temporary Claude projects folder; ctxd's archive and state go to a temporary folder.
Prints the median and the fastest run per event, next to a bare ``python -c pass`` for scale.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO / "tests" / "data" / "claude" / "claude-2.1.330-compact.jsonl"
CTXD = [sys.executable, "-m", "ctxd"]
EVENTS = {
    "PostToolUse": {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_response": {"stdout": "a\nb"}},
    "PostToolUse (cut)": {"tool_name": "Bash", "tool_response": {"stdout": "line\n" * 100_000, "stderr": ""}},
    "UserPromptSubmit": {"prompt": "next"},
    "PreCompact": {"trigger": "manual", "custom_instructions": None},
    "SessionStart": {"source": "compact"},
    "PostCompact": {"trigger": "manual", "compact_summary": "A summary."},
    "SessionEnd": {"reason": "other"},
}


def timed(cmd: list[str], data: bytes, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, input=data, capture_output=True, env=env, check=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("transcript", nargs="?", default=str(DEFAULT))
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        live = Path(tmp) / "projects" / "-home-dev-project" / "bench-session.jsonl"
        live.parent.mkdir(parents=True)
        shutil.copy(args.transcript, live)
        env = {**os.environ, "XDG_STATE_HOME": f"{tmp}/state", "XDG_DATA_HOME": f"{tmp}/data"}
        env["CTXD_CONFIG"] = f"{tmp}/none.json"
        print(f"transcript: {args.transcript} ({live.stat().st_size:,} bytes), {args.runs} runs each")
        bare = [timed([sys.executable, "-c", "pass"], b"", env) for _ in range(args.runs)]
        line = f"{'python -c pass':24s} median {statistics.median(bare) * 1000:6.0f} ms"
        print(f"{line}   min {min(bare) * 1000:6.0f} ms")
        for name, extra in EVENTS.items():
            event = name.split(" ")[0]
            payload = {"session_id": "bench-session", "transcript_path": str(live), "cwd": "/home/dev/project", **extra}
            data = json.dumps({"hook_event_name": event, **payload}).encode()
            runs = []
            for _ in range(args.runs):
                if event == "SessionStart":
                    shutil.rmtree(f"{tmp}/state", ignore_errors=True)  # no notes: facts come from the transcript
                runs.append(timed([*CTXD, "hook", event], data, env))
            median, fastest = statistics.median(runs) * 1000, min(runs) * 1000
            print(f"{'hook ' + name:24s} median {median:6.0f} ms   min {fastest:6.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
