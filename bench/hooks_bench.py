"""What ctxd's Claude Code hooks cost a user, measured through the real Claude Code against issue 20's targets.

    python bench/hooks_bench.py [--turns N] [--rounds R]

The real Claude Code 2.1.330 (``.cache``, installed by scripts/claude-code.sh) runs offline against the fake
Anthropic server (tests/fakes), as tests/claude_code does. A 3 MB transcript is made first (Claude Code reading
large files, without the plugin), then each case resumes it in one Claude Code process taking N prompts
(stream-json), once without the plugin and once with a copy of it that declares only the hook measured, in R
alternating rounds. A turn's time runs from writing the prompt to Claude's result; the hook's cost is the
median turn with the plugin minus the median turn without it. The fake answers at once, so a turn is Claude
Code's own work plus the hook's.

Cases: a reference hook that only runs ``exit 0`` (what Claude Code itself spends on running any hook), then
PostToolUse and UserPromptSubmit with nothing to do (a small Bash call; no facts waiting) and with work
(a 67,500-character Read that ctxd cuts; facts waiting, written before each prompt), PreCompact and
SessionStart(compact) (``/compact`` on the 3 MB transcript). Each line prints the target, the figure and
"met" or "MISSED"; then bench/cuts_bench.py's tokens saved.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "claude_code"), str(HERE)]

from fakes.anthropic_server import FakeAnthropicServer, Turn, call, say  # noqa: E402
from measure import pct  # noqa: E402

PLUGIN = REPO / "integrations" / "claude-code"
VERSION = "2.1.330"
TRANSCRIPT_BYTES = 3_000_000
BIG_READ_LINES = 1_500
"""A file Read that ctxd cuts: 1,500 lines of 45 characters (Claude Code reads 2,000 lines at most)."""


def claude_binary() -> str | None:
    explicit = os.environ.get("CTXD_CLAUDE_CODE")
    cached = REPO / ".cache" / f"claude-code-{VERSION}" / "node_modules" / ".bin" / "claude"
    return explicit or (str(cached) if cached.exists() else None)


def plugin_with(hook: str, into: Path, *, command: str | None = None) -> Path:
    """A copy of the plugin declaring only ``hook`` (the wrapper and manifest as they are); ``command`` replaces
    the hook's command (a reference: what Claude Code itself spends on a hook that does nothing)."""
    shutil.copytree(PLUGIN, into, ignore=shutil.ignore_patterns("README.md"))
    spec = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())
    spec["hooks"] = {hook: spec["hooks"][hook]}
    if command is not None:
        spec["hooks"][hook][0]["hooks"][0]["command"] = command
    (into / "hooks" / "hooks.json").write_text(json.dumps(spec))
    return into


class Claude:
    """One private Claude Code setup (config, project, XDG folders) on the fake server."""

    def __init__(self, base: Path, server: FakeAnthropicServer, binary: str) -> None:
        self.base, self.server, self.binary = base, server, binary
        self.project = base / "project"
        for folder in ("home", "claude", "project", "data", "state"):
            (base / folder).mkdir(parents=True, exist_ok=True)
        ctxd = Path(sys.executable).parent
        self.env = {
            "HOME": str(base / "home"),
            "PATH": os.pathsep.join([str(ctxd), "/usr/local/bin", "/usr/bin", "/bin"]),
            "LANG": "C.UTF-8",
            "TMPDIR": str(base),
            "CLAUDE_CONFIG_DIR": str(base / "claude"),
            "ANTHROPIC_BASE_URL": server.url,
            "ANTHROPIC_API_KEY": "fake-key",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "XDG_DATA_HOME": str(base / "data"),
            "XDG_STATE_HOME": str(base / "state"),
            "CTXD_CONFIG": str(base / "config.json"),
        }

    def turns(
        self,
        prompts: list[str],
        *,
        resume: str | None,
        plugin: Path | None,
        before_each: Callable[[], None] | None = None,
    ) -> tuple[list[float], str]:
        """Each prompt's turn time (seconds) in one Claude Code process, and the session id."""
        args = ["-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
        args += ["--allowedTools", "Bash Read"]
        if resume:
            args += ["--resume", resume]
        if plugin is not None:
            args += ["--plugin-dir", str(plugin)]
        process = subprocess.Popen(
            [self.binary, *args],
            cwd=self.project,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert process.stdin is not None and process.stdout is not None
        times: list[float] = []
        session = resume or ""
        try:
            for prompt in prompts:
                if before_each is not None:
                    before_each()
                message = {"type": "user", "message": {"role": "user", "content": prompt}}
                started = time.perf_counter()
                process.stdin.write(json.dumps(message) + "\n")
                process.stdin.flush()
                for line in process.stdout:
                    event = json.loads(line)
                    if event.get("type") == "result":
                        times.append(time.perf_counter() - started)
                        session = str(event.get("session_id") or session)
                        break
                else:
                    raise RuntimeError("Claude Code ended before its result")
            process.stdin.close()
            process.wait(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        return times, session

    def transcript(self, session: str) -> Path:
        (found,) = (self.base / "claude" / "projects").glob(f"*/{session}.jsonl")
        return found


def make_transcript(claude: Claude) -> str:
    """A session whose transcript holds about 3 MB: Claude Code reading large files, turn after turn."""
    body = "".join(f"{i:05d} a line of a large generated table, {i * 7919 % 10007:05d}\n" for i in range(1_500))
    big = claude.project / "large.txt"
    big.write_text(body)
    turns = max(1, TRANSCRIPT_BYTES // (2 * len(body)) + 1)
    script: list[Turn] = []
    for _ in range(turns):
        script += [call("Read", file_path=str(big)), say("Read.")]
    claude.server.script(*script)
    _, session = claude.turns([f"Read large.txt ({k})." for k in range(turns)], resume=None, plugin=None)
    return session


def measure(
    claude: Claude,
    session: str,
    plugin: Path,
    turn: Callable[[], list[Turn]],
    prompt: str,
    *,
    turns: int,
    rounds: int,
    before_each: Callable[[], None] | None = None,
) -> tuple[float, float, float]:
    """(p50 turn without, p50 turn with, cost = the difference), in milliseconds. A ``/compact`` follows a turn
    of conversation each time (a compaction with nothing new to compact is refused at once)."""
    without: list[float] = []
    with_plugin: list[float] = []
    compact = prompt == "/compact"
    for _ in range(rounds):
        for variant, into in ((None, without), (plugin, with_plugin)):
            script: list[Turn] = []
            for _ in range(turns + 1):
                script += [say("ok")] if compact else turn()
            claude.server.script(*script)
            prompts = ["Next.", "/compact"] * (turns + 1) if compact else [prompt] * (turns + 1)
            times, _ = claude.turns(prompts, resume=session, plugin=variant, before_each=before_each)
            into += times[3::2] if compact else times[1:]  # the first turn (pair) warms Claude Code up
    a, b = pct(without, 0.5) * 1000, pct(with_plugin, 0.5) * 1000
    return a, b, b - a


def alone(claude: Claude, session: str, transcript: Path, facts_waiting: Callable[[], None]) -> None:
    """The same hooks run as Claude Code runs them (``/bin/sh -c``) but without Claude Code: p50 of 9 runs."""
    wrapper = PLUGIN / "bin" / "ctxd-hook"
    table = str(claude.project / "table.txt")
    base = {"session_id": session, "transcript_path": str(transcript), "cwd": str(claude.project)}
    small = {"tool_name": "Bash", "tool_input": {"command": "echo hi"}, "tool_response": {"stdout": "hi", "stderr": ""}}
    content = Path(table).read_text()
    big = {"type": "text", "file": {"filePath": table, "content": content, "numLines": BIG_READ_LINES}}
    runs: list[tuple[str, str, dict[str, Any], Callable[[], None] | None]] = [
        ("sh -c 'exit 0'", "", {}, None),
        ("PostToolUse, nothing to do", "PostToolUse", small, None),
        ("UserPromptSubmit, nothing to do", "UserPromptSubmit", {"prompt": "Next."}, None),
        ("PostToolUse, a cut", "PostToolUse", {"tool_name": "Read", "tool_response": big}, None),
        ("UserPromptSubmit, facts waiting", "UserPromptSubmit", {"prompt": "Next."}, facts_waiting),
        ("PreCompact", "PreCompact", {"trigger": "manual"}, None),
        ("SessionStart(compact)", "SessionStart", {"source": "compact"}, None),
    ]
    size = transcript.stat().st_size
    print(f"the hook command alone, without Claude Code (/bin/sh -c, p50 of 9; transcript {size:,} bytes):")
    for name, event, extra, before in runs:
        command = "exit 0" if not event else f'"{wrapper}" {event}'
        data = json.dumps({**base, "hook_event_name": event, **extra}, separators=(",", ":")).encode()
        times = []
        for _ in range(9):
            if before is not None:
                before()
            started = time.perf_counter()
            subprocess.run(["/bin/sh", "-c", command], input=data, capture_output=True, env=claude.env, check=True)
            times.append((time.perf_counter() - started) * 1000)
        print(f"  {name:42s} {pct(times, 0.5):6.0f} ms")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    binary = claude_binary()
    print(f"Claude Code hooks through the real Claude Code {VERSION} (turn with the plugin minus without, p50)")
    if binary is None:
        print("Claude Code is not installed (bash scripts/claude-code.sh): hook latency NOT MEASURED")
        return 0
    load = os.getloadavg()
    with FakeAnthropicServer() as server, tempfile.TemporaryDirectory(prefix="ctxd-hooks-bench-") as tmp:
        base = Path(tmp)
        claude = Claude(base / "c", server, binary)
        session = make_transcript(claude)
        transcript = claude.transcript(session)
        print(f"transcript: {transcript.stat().st_size:,} bytes; {args.rounds} rounds x {args.turns} turns per case")
        table = "".join(f"{i:05d} a line of the generated table, forty wide\n" for i in range(1, BIG_READ_LINES + 1))
        (claude.project / "table.txt").write_text(table)
        notes = base / "c" / "state" / "ctxd" / "claude"

        def facts_waiting() -> None:
            notes.mkdir(parents=True, exist_ok=True)
            facts = [{"kind": "constraint", "text": "Never modify config.yaml.", "probes": ["config.yaml"]}]
            (notes / f"{session}.json").write_text(json.dumps({"pending": {"facts": facts}}))
            (notes / f"{session}.pending").touch()

        bash = [call("Bash", command="echo hi"), say("ok")]
        read = [call("Read", file_path=str(claude.project / "table.txt")), say("ok")]
        cases: list[tuple[str, str, list[Turn], str, Callable[[], None] | None, float | None]] = [
            ("reference: UserPromptSubmit hook `exit 0`", "UserPromptSubmit", [say("ok")], "Next.", None, None),
            ("reference: PostToolUse hook `exit 0`", "PostToolUse", bash, "Run it.", None, None),
            ("PostToolUse, nothing to do", "PostToolUse", bash, "Run it.", None, 15),
            ("UserPromptSubmit, nothing to do", "UserPromptSubmit", [say("ok")], "Next.", None, 15),
            ("PostToolUse, a cut (67,500-char Read)", "PostToolUse", read, "Read table.txt.", None, 120),
            ("UserPromptSubmit, facts waiting", "UserPromptSubmit", [say("ok")], "Next.", facts_waiting, 120),
            ("PreCompact (/compact)", "PreCompact", [], "/compact", None, 300),
            ("SessionStart(compact) (/compact)", "SessionStart", [], "/compact", None, 300),
        ]
        reference: dict[str, float] = {}
        for k, (name, hook, turn, prompt, before_each, target) in enumerate(cases):
            plugin = plugin_with(hook, base / f"plugin-{k}", command=None if target else "exit 0")
            without, with_plugin, cost = measure(
                claude,
                session,
                plugin,
                lambda turn=turn: list(turn),
                prompt,
                turns=args.turns,
                rounds=args.rounds,
                before_each=before_each,
            )
            verdict = "" if target is None else "met" if cost <= target else "MISSED"
            if target is None:
                reference[hook] = cost
            goal = "(no target)" if target is None else f"target <= {target:4.0f} ms"
            beside = f"; {cost - reference[hook]:+.0f} ms beside `exit 0`" if target and hook in reference else ""
            print(
                f"{name:44s} {goal:17s} {cost:6.0f} ms   {verdict:6s}"
                f" (turn {without:5.0f} ms without, {with_plugin:5.0f} ms with{beside})"
            )
        alone(claude, session, transcript, facts_waiting)
    end = os.getloadavg()
    print(f"load average (1 min) {load[0]:.2f} at the start, {end[0]:.2f} at the end; 2 cores shared")
    print()
    subprocess.run([sys.executable, str(HERE / "cuts_bench.py")], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
