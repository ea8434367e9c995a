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
from helpers.agent_versions import CLAUDE_CODE  # noqa: E402
from measure import pct  # noqa: E402

PLUGIN = REPO / "integrations" / "claude-code"
VERSION = CLAUDE_CODE
"""The Claude Code release measured: the one the tests pin (scripts/versions.env)."""
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


class Process:
    """One running Claude Code process (stream-json in and out)."""

    def __init__(self, popen: subprocess.Popen[str]) -> None:
        self.popen = popen
        self.session = ""

    def turn(self, prompt: str) -> float:
        """Send a prompt; the seconds until Claude's result."""
        assert self.popen.stdin is not None and self.popen.stdout is not None
        message = {"type": "user", "message": {"role": "user", "content": prompt}}
        started = time.perf_counter()
        self.popen.stdin.write(json.dumps(message) + "\n")
        self.popen.stdin.flush()
        for line in self.popen.stdout:
            event = json.loads(line)
            if event.get("type") == "result":
                self.session = str(event.get("session_id") or self.session)
                return time.perf_counter() - started
        raise RuntimeError("Claude Code ended before its result")

    def close(self) -> None:
        try:
            if self.popen.stdin is not None:
                self.popen.stdin.close()
            self.popen.wait(timeout=120)
        finally:
            if self.popen.poll() is None:
                self.popen.kill()
                self.popen.wait()


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

    def start(self, *, resume: str | None, plugin: Path | None) -> Process:
        """A Claude Code process taking prompts (stream-json); with ``resume``, a fork of that session (its own
        new transcript, holding the whole conversation)."""
        args = ["-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
        args += ["--allowedTools", "Bash Read"]
        if resume:
            args += ["--resume", resume, "--fork-session"]
        if plugin is not None:
            args += ["--plugin-dir", str(plugin)]
        popen = subprocess.Popen(
            [self.binary, *args],
            cwd=self.project,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        return Process(popen)

    def turns(self, prompts: list[str], *, resume: str | None, plugin: Path | None) -> tuple[list[float], str]:
        """Each prompt's turn time (seconds) in one Claude Code process, and its session id."""
        process = self.start(resume=resume, plugin=plugin)
        try:
            times = [process.turn(prompt) for prompt in prompts]
        finally:
            process.close()
        return times, process.session

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
    turn: list[Turn],
    prompt: str,
    *,
    turns: int,
    rounds: int,
    before_each: Callable[[str], None] | None = None,
) -> tuple[float, float, float]:
    """(p50 turn without, p50 turn with, cost = the difference), in milliseconds.

    Each round runs two forks of the session side by side, one without the plugin and one with it, and gives
    them their prompts in turn (which goes first alternates), so both see the same moments of the machine's
    load. A ``/compact`` follows a turn of conversation each time (a compaction with nothing new to compact is
    refused at once)."""
    without: list[float] = []
    with_plugin: list[float] = []
    compact = prompt == "/compact"
    for _ in range(rounds):
        claude.server.script(*((turn * 2) if not compact else [say("ok"), say("ok")]) * (turns + 1))
        pair = [
            (claude.start(resume=session, plugin=None), without),
            (claude.start(resume=session, plugin=plugin), with_plugin),
        ]
        try:
            for k in range(turns + 1):
                for process, into in pair if k % 2 == 0 else pair[::-1]:
                    if compact:
                        process.turn("Next.")
                    elif before_each is not None and process.session:
                        before_each(process.session)
                    seconds = process.turn(prompt)
                    if k:  # the first turn warms Claude Code up (and names the fork)
                        into.append(seconds)
        finally:
            for process, _ in pair:
                process.close()
    a, b = pct(without, 0.5) * 1000, pct(with_plugin, 0.5) * 1000
    return a, b, b - a


def alone(
    claude: Claude, session: str, transcript: Path, facts_waiting: Callable[[str], None], restore: Callable[[], None]
) -> None:
    """The same hooks run as Claude Code runs them (``/bin/sh -c``) but without Claude Code: p50 of 9 runs."""
    wrapper = PLUGIN / "bin" / "ctxd-hook"
    table = str(claude.project / "table.txt")
    base = {"session_id": session, "transcript_path": str(transcript), "cwd": str(claude.project)}
    small = {"tool_name": "Bash", "tool_input": {"command": "echo hi"}, "tool_response": {"stdout": "hi", "stderr": ""}}
    content = Path(table).read_text()
    big = {"type": "text", "file": {"filePath": table, "content": content, "numLines": BIG_READ_LINES}}
    runs: list[tuple[str, str, dict[str, Any], Callable[[], None] | None]] = [
        ("sh -c 'exit 0'", "", {}, None),
        (f"{Path(sys.executable).name} -c pass (for scale)", "python", {}, None),
        ("PostToolUse, nothing to do", "PostToolUse", small, None),
        ("UserPromptSubmit, nothing to do", "UserPromptSubmit", {"prompt": "Next."}, None),
        ("PostToolUse, a cut", "PostToolUse", {"tool_name": "Read", "tool_response": big}, None),
        ("UserPromptSubmit, facts waiting", "UserPromptSubmit", {"prompt": "Next."}, lambda: facts_waiting(session)),
        ("PreCompact", "PreCompact", {"trigger": "manual"}, restore),
        ("SessionStart(compact)", "SessionStart", {"source": "compact"}, restore),
    ]
    restore()
    size = transcript.stat().st_size
    print(f"the hook command alone, without Claude Code (/bin/sh -c, p50 of 9; transcript {size:,} bytes):")
    for name, event, extra, before in runs:
        command = (
            "exit 0" if not event else f'"{sys.executable}" -c pass' if event == "python" else f'"{wrapper}" {event}'
        )
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
        pristine = transcript.read_bytes()

        def restore() -> None:
            """Each Claude Code process starts from the 3 MB transcript (every compaction adds to it)."""
            transcript.write_bytes(pristine)

        def facts_waiting(session: str) -> None:
            notes.mkdir(parents=True, exist_ok=True)
            facts = [{"kind": "constraint", "text": "Never modify config.yaml.", "probes": ["config.yaml"]}]
            (notes / f"{session}.json").write_text(json.dumps({"pending": {"facts": facts}}))
            (notes / f"{session}.pending").touch()

        bash = [call("Bash", command="echo hi"), say("ok")]
        read = [call("Read", file_path=str(claude.project / "table.txt")), say("ok")]
        cases: list[tuple[str, str, list[Turn], str, Callable[[str], None] | None, float | None]] = [
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
                turn,
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
        alone(claude, session, transcript, facts_waiting, restore)
    end = os.getloadavg()
    print(f"load average (1 min) {load[0]:.2f} at the start, {end[0]:.2f} at the end; 2 cores shared")
    print()
    subprocess.run([sys.executable, str(HERE / "cuts_bench.py")], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
